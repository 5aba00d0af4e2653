//! Exactly one outcome per packet, across the EEs and channels of a full node (NodeOS guard,
//! capsule EE with demand loading, PLAN EE, cut-through table): for every node and at every
//! step, `rx_packets + local_packets == outcomes.total()` (forwarded + delivered + consumed +
//! dropped + held), by equality. Random mixes of datagrams, capsules (code installed at node
//! 0 and demand-loaded elsewhere, so capsules wait as held packets), capsules naming code no
//! one has, cut-through floods, PLAN programs, garbage on links, an EE stopped and started,
//! and time passing, with capsules run on the node thread or in batches by two worker threads
//! (`[capsule] workers`, held until the batch runs). Once the network is quiet nothing is held any more and every held
//! packet got exactly one outcome.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anode_capsule::{CodeHash, Runtime, RuntimeConfig, protocols};
use anode_core::wire::anep::{TYPE_CAPSULE, TYPE_PLAN};
use anode_core::{LinkId, Node};
use anode_node::ees::{EeOptions, capsule_ee, register_with};
use anode_plan::ee::{PacketSpec, PlanEe, build_packet};
use anode_testkit::{Net, NetOptions, addr};
use proptest::prelude::*;

const NODES: usize = 4;

fn runtime() -> Arc<Runtime> {
    static RT: OnceLock<Arc<Runtime>> = OnceLock::new();
    RT.get_or_init(|| {
        // As the emulator runs it: code built on the node thread, so virtual time alone says
        // when it is ready (deterministic).
        Runtime::new(RuntimeConfig {
            max_instances: 256,
            ..RuntimeConfig::default()
        })
        .expect("runtime")
    })
    .clone()
}

/// One thing that happens to the network.
#[derive(Debug, Clone)]
enum Op {
    /// A datagram from node `from` to node `to`.
    Datagram { from: usize, to: usize, len: usize },
    /// A capsule of shipped protocol `code` (or, 4, of [`heavy`] code) from node 0 to `to`
    /// (its code is at node 0 only).
    Capsule { code: usize, to: usize, flow: u64 },
    /// A capsule naming code no node has, sent by node 0 (dropped there: no code source)
    /// or, with `arrive`, arriving at node 1 from node 0 (held there while node 1 asks node
    /// 0 for the code, then dropped when node 0 says it has none).
    NoCode { to: usize, seed: u8, arrive: bool },
    /// `n` flood capsules from node 0 to `to`, asking for cut-through channels or not.
    Flood { to: usize, n: usize, cut: bool },
    /// A PLAN program evaluated at `to`.
    Plan { to: usize, fail: bool },
    /// Bytes that are not a packet arrive at `node` on its first link.
    Garbage { node: usize, bytes: Vec<u8> },
    /// A datagram whose bytes were flipped in flight arrives at `node`.
    Garbled { node: usize, at: usize, xor: u8 },
    /// The capsule EE at `node` is stopped (`false`) or started.
    CapsuleEe { node: usize, running: bool },
    /// Time passes.
    Wait { ms: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let node = 0..NODES;
    prop_oneof![
        (0..NODES, 0..NODES, 0usize..200).prop_map(|(from, to, len)| Op::Datagram {
            from,
            to,
            len
        }),
        (0usize..5, 1..NODES, 0u64..4).prop_map(|(code, to, flow)| Op::Capsule { code, to, flow }),
        (1..NODES, any::<u8>(), any::<bool>()).prop_map(|(to, seed, arrive)| Op::NoCode {
            to,
            seed,
            arrive
        }),
        (1..NODES, 1usize..20, any::<bool>()).prop_map(|(to, n, cut)| Op::Flood { to, n, cut }),
        (0..NODES, any::<bool>()).prop_map(|(to, fail)| Op::Plan { to, fail }),
        (node.clone(), proptest::collection::vec(any::<u8>(), 0..80))
            .prop_map(|(node, bytes)| Op::Garbage { node, bytes }),
        (node.clone(), 0usize..60, 1u8..=255).prop_map(|(node, at, xor)| Op::Garbled {
            node,
            at,
            xor
        }),
        (1..NODES, any::<bool>()).prop_map(|(node, running)| Op::CapsuleEe { node, running }),
        (0u64..400).prop_map(|ms| Op::Wait { ms }),
    ]
}

/// Code that works a while per capsule (so that with workers its capsules are held for a
/// batch), then forwards; at its destination it ends the capsule.
fn heavy() -> Vec<u8> {
    wat::parse_str(anode_testkit::fixtures::busy_forward_wat()).expect("heavy code")
}

struct World {
    net: Net,
    codes: Vec<CodeHash>,
}

impl World {
    /// Every node's capsule EE runs capsules on `workers` threads (`[capsule] workers`).
    fn new(workers: usize) -> World {
        let rt = runtime();
        let opts = NetOptions {
            delay: Duration::from_millis(1),
            settle: Duration::from_secs(3),
            ..NetOptions::default()
        };
        let mut net = Net::line(NODES, opts, |_, node| {
            let o = EeOptions {
                runtime: Some(rt.clone()),
                workers,
                ..EeOptions::default()
            };
            register_with(node, &o).expect("EEs");
        });
        let mut codes = Vec::new();
        let ee = capsule_ee(&mut net.nodes[0]).expect("capsule EE");
        for w in [
            protocols::PING,
            protocols::FLOOD,
            protocols::COUNTER,
            protocols::FORWARD,
        ] {
            codes.push(ee.install(w).expect("shipped code installs"));
        }
        codes.push(ee.install(&heavy()).expect("heavy code installs"));
        World { net, codes }
    }

    fn inject(&mut self, at: usize, pkt: Vec<u8>) {
        // Whatever the node does with it is an outcome; an error is one too (a drop).
        let _ = self.net.inject(at, pkt);
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Datagram { from, to, len } => {
                let now = self.net.now;
                let payload = vec![7u8; *len];
                let _ = self.net.nodes[*from].send_datagram(now, addr(*to), 7, 0, None, &payload);
            }
            Op::Capsule { code, to, flow } => {
                let hash = self.codes[code % self.codes.len()];
                let pkt =
                    anode_capsule::capsule_packet(hash, addr(0), addr(*to), 16, *flow, &[0; 24])
                        .expect("capsule");
                self.inject(0, pkt);
            }
            Op::NoCode { to, seed, arrive } => {
                let pkt =
                    anode_capsule::capsule_packet([*seed; 32], addr(0), addr(*to), 16, 1, b"x")
                        .expect("capsule");
                if *arrive {
                    let now = self.net.now;
                    self.net.nodes[1].handle_packet(now, LinkId(0), pkt);
                } else {
                    self.inject(0, pkt);
                }
            }
            Op::Flood { to, n, cut } => {
                let hash = self.codes[1];
                for i in 0..*n {
                    let mut p = vec![0u8; 32];
                    p[0] = u8::from(i > 0);
                    p[1] = u8::from(*cut);
                    p[2..4].copy_from_slice(&9u16.to_be_bytes());
                    p[4..8].copy_from_slice(&1000u32.to_be_bytes());
                    let pkt = anode_capsule::capsule_packet(hash, addr(0), addr(*to), 16, 77, &p)
                        .expect("capsule");
                    self.inject(0, pkt);
                }
            }
            Op::Plan { to, fail } => {
                let prog = if *fail {
                    "fun f(n : int) = raise Foo"
                } else {
                    "fun f(n : int) = deliver(getImplicitPort(), n)"
                };
                let spec = PacketSpec::new(addr(0), addr(*to), 8);
                let ee = PlanEe::with_defaults();
                if let Ok(pkt) = build_packet(ee.interp(), prog, "f(1)", &spec) {
                    self.inject(0, pkt);
                }
            }
            Op::Garbage { node, bytes } => {
                let now = self.net.now;
                self.net.nodes[*node].handle_packet(now, LinkId(0), bytes.clone());
            }
            Op::Garbled { node, at, xor } => {
                let now = self.net.now;
                let d = anode_core::wire::datagram::Datagram {
                    transit: anode_core::wire::transit::TransitRepr {
                        rb: 8,
                        src: addr(0),
                        dst: addr(NODES - 1),
                        prev_hop: addr(0),
                        ..Default::default()
                    },
                    port: 7,
                    payload: b"garbled in flight".to_vec(),
                };
                let mut b = d.to_packet().expect("datagram");
                let i = at % b.len();
                b[i] ^= xor;
                self.net.nodes[*node].handle_packet(now, LinkId(0), b);
            }
            Op::CapsuleEe { node, running } => {
                self.net.nodes[*node].set_ee_running(TYPE_CAPSULE, *running);
            }
            Op::Wait { ms } => self.net.run_for(Duration::from_millis(*ms)),
        }
    }
}

/// Every packet handed to the node has exactly one outcome (or is held).
fn check(n: &Node, i: usize, when: &str) -> Result<(), TestCaseError> {
    let c = n.counters();
    let o = c.outcomes;
    prop_assert_eq!(
        c.rx_packets + c.local_packets,
        o.total(),
        "node {} {}: {} received + {} local != {:?}; drops {:?}",
        i,
        when,
        c.rx_packets,
        c.local_packets,
        o,
        c.drop_map()
    );
    // An outcome is only ever given with its own counter.
    prop_assert!(
        o.dropped <= c.total_drops(),
        "node {i}: {o:?} vs {:?}",
        c.drop_map()
    );
    prop_assert!(o.delivered <= c.delivered, "node {i}: {o:?}");
    prop_assert!(o.forwarded <= c.tx_packets, "node {i}: {o:?}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_packet_has_exactly_one_outcome(
        ops in proptest::collection::vec(op(), 1..40),
        workers in 1usize..=2,
    ) {
        let mut w = World::new(workers);
        for (k, op) in ops.iter().enumerate() {
            w.apply(op);
            // Packets in flight arrive; the check holds after every delivery round too.
            w.net.pump();
            for (i, n) in w.net.nodes.iter().enumerate() {
                check(n, i, &format!("after op {k} {op:?}"))?;
            }
        }
        for i in 1..NODES {
            w.net.nodes[i].set_ee_running(TYPE_CAPSULE, true);
        }
        // Quiet: fetches complete or time out, queues drain.
        w.net.run_for(Duration::from_secs(15));
        for (i, n) in w.net.nodes.iter_mut().enumerate() {
            check(n, i, "at the end")?;
            prop_assert_eq!(n.counters().outcomes.held, 0, "node {} still holds packets", i);
            let parked = capsule_ee(n).map_or(0, |e| e.parked());
            prop_assert_eq!(parked, 0, "node {} capsule EE still parks", i);
            prop_assert!(n.ee_mut(TYPE_PLAN).is_some());
        }
    }
}

/// The cases the random mixes must reach are reached: a capsule held for code and released,
/// one dropped while held, and the sums by kind.
#[test]
fn held_capsules_settle_once_when_their_code_arrives_or_fails() {
    let mut w = World::new(1);
    // Node 1 has no code: three capsules wait there while it fetches from node 0.
    for flow in 0..3 {
        w.apply(&Op::Capsule {
            code: 0,
            to: 3,
            flow,
        });
    }
    let held = w.net.nodes[1].counters().outcomes.held;
    // Nothing moved yet: the capsules are still on the wire to node 1.
    assert_eq!(held, 0);
    w.net.run_for(Duration::from_micros(1500));
    let o = w.net.nodes[1].counters().outcomes;
    assert_eq!(o.held, 3, "three capsules wait for code at node 1: {o:?}");
    check(&w.net.nodes[1], 1, "while held").unwrap();
    w.net.run_for(Duration::from_secs(2));
    let o = w.net.nodes[1].counters().outcomes;
    assert_eq!(o.held, 0, "{o:?}");
    check(&w.net.nodes[1], 1, "after the code came").unwrap();
    // A capsule naming code no one has, arriving at node 1 from node 0: held at node 1
    // while it asks node 0, then dropped with a reason, once.
    let before = w.net.nodes[1].counters().outcomes;
    w.apply(&Op::NoCode {
        to: 3,
        seed: 9,
        arrive: true,
    });
    assert_eq!(w.net.nodes[1].counters().outcomes.held, 1);
    w.net.run_for(Duration::from_secs(10));
    let after = w.net.nodes[1].counters().outcomes;
    assert_eq!(after.held, 0);
    assert_eq!(
        after.dropped,
        before.dropped + 1,
        "{before:?} -> {after:?}: {:?}",
        w.net.nodes[1].counters().drop_map()
    );
    check(&w.net.nodes[1], 1, "after the fetch failed").unwrap();
}
