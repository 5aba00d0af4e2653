//! A node replaced in the middle of its traffic by a fresh one built from its handover (what
//! `anode upgrade` does between two processes), in virtual time: the capsules it held while
//! their code was on its way arrive, soft state carries on, routes work at once, and the
//! outcome ledger of the new node balances.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anode_capsule::{CodeHash, Runtime, RuntimeConfig, protocols};
use anode_core::handover::NodeHandover;
use anode_core::{LinkConfig, Node, NodeConfig};
use anode_node::ees::{EeOptions, capsule_ee, register_with};
use anode_testkit::{Net, NetOptions, addr};

const PORT: u16 = 9;
const COUNTER_FLOW: u64 = 7;

fn runtime() -> Arc<Runtime> {
    static RT: OnceLock<Arc<Runtime>> = OnceLock::new();
    RT.get_or_init(|| {
        Runtime::new(RuntimeConfig {
            max_instances: 64,
            ..RuntimeConfig::default()
        })
        .expect("runtime")
    })
    .clone()
}

fn ee_options() -> EeOptions {
    EeOptions {
        runtime: Some(runtime()),
        ..EeOptions::default()
    }
}

/// A counter capsule (payload: count u64, hops u32, port u16, pad).
fn counter(hash: CodeHash) -> Vec<u8> {
    let mut p = [0u8; 16];
    p[12..14].copy_from_slice(&PORT.to_be_bytes());
    anode_capsule::capsule_packet(hash, addr(0), addr(2), 16, COUNTER_FLOW, &p).expect("capsule")
}

/// A forward capsule to `PORT` carrying `n`.
fn forward(hash: CodeHash, n: u8) -> Vec<u8> {
    let mut p = PORT.to_be_bytes().to_vec();
    p.push(n);
    anode_capsule::capsule_packet(hash, addr(0), addr(2), 16, 1, &p).expect("capsule")
}

/// Node 1 of a line as `Net::line` builds it, fresh: its links to 0 and 2 in that order, the
/// EEs, nothing learned.
fn fresh_node_1(net: &Net) -> Node {
    let mut n = Node::new(NodeConfig::new(addr(1)), net.now).expect("node");
    n.add_link(LinkConfig::new(addr(0)), net.now);
    n.add_link(LinkConfig::new(addr(2)), net.now);
    register_with(&mut n, &ee_options()).expect("EEs");
    n
}

/// A line of three nodes with the EEs, settled.
fn line() -> Net {
    let opts = NetOptions {
        delay: Duration::from_millis(1),
        settle: Duration::from_secs(3),
        ..NetOptions::default()
    };
    Net::line(3, opts, |_, node| {
        register_with(node, &ee_options()).expect("EEs");
    })
}

/// Replaces node 1 by a fresh node built from handover `h` (as JSON, the way it travels
/// between processes), with the code node 1's memory cache held.
fn replace_node_1(net: &mut Net, h: &NodeHandover) -> anode_core::handover::TakeoverReport {
    let now = net.now;
    let code: Vec<Arc<[u8]>> = capsule_ee(&mut net.nodes[1])
        .expect("capsule EE")
        .memory_code()
        .into_iter()
        .map(|(_, w)| w)
        .collect();
    let text = serde_json::to_string(h).expect("serializes");
    let back: NodeHandover = serde_json::from_str(&text).expect("parses");
    let mut fresh = fresh_node_1(net);
    for w in &code {
        capsule_ee(&mut fresh)
            .expect("capsule EE")
            .install(w)
            .expect("code builds");
    }
    let rep = fresh.take_over(now, &back).expect("takes over");
    net.nodes[1] = fresh;
    rep
}

fn counter_at(net: &mut Net, node: usize, code: &CodeHash) -> Option<u64> {
    let now = net.now;
    let ee = capsule_ee(&mut net.nodes[node])?;
    let key = COUNTER_FLOW.to_le_bytes();
    let e = ee.soft_state().entries(code, now);
    let v = e.iter().find(|e| e.key == key)?;
    Some(u64::from_le_bytes(v.value.get(..8)?.try_into().ok()?))
}

#[test]
fn a_node_replaced_by_its_handover_loses_nothing_and_forgets_nothing() {
    let mut net = line();
    let ee0 = capsule_ee(&mut net.nodes[0]).expect("capsule EE");
    let count_code = ee0.install(protocols::COUNTER).expect("installs");
    let fwd_code = ee0.install(protocols::FORWARD).expect("installs");
    capsule_ee(&mut net.nodes[2])
        .expect("capsule EE")
        .register_port(PORT);

    // Five counted capsules: node 1 and 2 fetch the counter code and count the flow.
    for _ in 0..5 {
        net.inject(0, counter(count_code)).expect("sent");
    }
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.deliveries(2).len(), 5);
    assert_eq!(counter_at(&mut net, 1, &count_code), Some(5));

    // Five forward capsules: node 1 does not have their code and holds them while it asks.
    for i in 0..5 {
        net.inject(0, forward(fwd_code, i)).expect("sent");
    }
    let held = |net: &Net| net.nodes[1].counters().outcomes.held;
    let until = net.now + Duration::from_millis(50);
    assert!(
        net.run_until(until, |n| held(n) == 5),
        "node 1 holds the 5 capsules"
    );

    // Node 1 is replaced by a fresh process's node built from its handover (as JSON, the
    // way it travels between processes), with the code its memory cache held.
    let h = net.nodes[1].hand_over(net.now);
    assert_eq!(held(&net), 5, "handing over leaves the old node as it was");
    let rep = replace_node_1(&mut net, &h);
    assert_eq!(rep.routing.neighbors, 2);
    assert_eq!(rep.held, 5, "{rep:?}");
    assert!(rep.refused.is_empty(), "{rep:?}");
    assert_eq!(net.nodes[1].lookup(&addr(2)).map(|h| h.addr), Some(addr(2)));

    // A datagram right away: the routes are there before any hello or update.
    net.nodes[0]
        .send_datagram(net.now, addr(2), PORT, 0, None, b"at once")
        .expect("sent");
    // Five more counted capsules: node 1's count goes on from 5.
    for _ in 0..5 {
        net.inject(0, counter(count_code)).expect("sent");
    }
    net.run_for(Duration::from_secs(2));

    let got = net.deliveries(2);
    let payloads: Vec<&[u8]> = got.iter().map(|d| d.payload()).collect();
    let forwarded: Vec<u8> = payloads
        .iter()
        .filter(|p| p.len() == 3)
        .map(|p| p[2])
        .collect();
    assert_eq!(
        forwarded,
        vec![0, 1, 2, 3, 4],
        "the held capsules, once each, in order"
    );
    assert!(payloads.contains(&b"at once".as_slice()));
    assert_eq!(got.len(), 11, "5 forward + 5 counter + 1 datagram");
    assert_eq!(
        counter_at(&mut net, 1, &count_code),
        Some(10),
        "soft state carried on"
    );
    let c = net.nodes[1].counters();
    assert_eq!(c.outcomes.held, 0);
    assert_eq!(c.rx_packets + c.local_packets, c.outcomes.total());
}

#[test]
fn a_handover_of_another_node_or_format_is_refused() {
    let mut net = Net::line(3, NetOptions::default(), |_, node| {
        register_with(node, &ee_options()).expect("EEs");
    });
    let now = net.now;
    let mut h = net.nodes[0].hand_over(now);
    let mut other = fresh_node_1(&net);
    let e = other.take_over(now, &h).expect_err("another node's state");
    assert!(e.to_string().contains("is of node"), "{e}");
    h.address = addr(1);
    h.format += 1;
    let e = other.take_over(now, &h).expect_err("another format");
    assert!(e.to_string().contains("format"), "{e}");
}

/// What PLAN programs left at a node (resident data, the key and flow counters) is in its
/// handover, and a node that took it over hands the same over again.
#[test]
fn plan_resident_data_survives_a_handover() {
    use anode_plan::ee::{PacketSpec, PlanEe, build_packet};
    let opts = NetOptions {
        delay: Duration::from_millis(1),
        settle: Duration::from_secs(3),
        ..NetOptions::default()
    };
    let mut net = Net::line(2, opts, |_, node| {
        register_with(node, &ee_options()).expect("EEs");
    });
    let text = "fun leave(k : key) = put(\"count\", k, 41, 60)\n\
         fun start(h : host) = let val k = generateKey() in\n\
           OnRemote(|leave|(k), h, 4, defaultRoute) end";
    let ee = PlanEe::with_defaults();
    let entry = format!("start({})", addr(1));
    let pkt = build_packet(
        ee.interp(),
        text,
        &entry,
        &PacketSpec::new(addr(0), addr(0), 20),
    )
    .expect("a PLAN packet");
    net.inject(0, pkt).expect("sent");
    net.run_for(Duration::from_secs(1));

    let plan_state = |h: &NodeHandover| {
        h.ees
            .iter()
            .find(|e| e.name.starts_with("plan"))
            .map(|e| e.handover.state["inner"].clone())
            .expect("the PLAN EE's part")
    };
    let now = net.now;
    let h = net.nodes[1].hand_over(now);
    let before = plan_state(&h);
    assert_eq!(
        before["resident"].as_array().map(Vec::len),
        Some(1),
        "{before}"
    );
    let mut fresh = Node::new(NodeConfig::new(addr(1)), now).expect("node");
    fresh.add_link(LinkConfig::new(addr(0)), now);
    register_with(&mut fresh, &ee_options()).expect("EEs");
    let back: NodeHandover = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
    let rep = fresh.take_over(now, &back).expect("takes over");
    assert!(rep.refused.is_empty(), "{rep:?}");
    let after = plan_state(&fresh.hand_over(now));
    assert_eq!(after["resident"], before["resident"]);
    assert_eq!(after["key_seed"], before["key_seed"]);
    assert_eq!(after["next_key"], before["next_key"]);
}

/// Packets still queued to leave at the hand-over leave once, from the new node: the
/// handover carries them and the new node sends exactly those.
#[test]
fn packets_queued_at_the_handover_leave_once() {
    let mut net = line();
    let ee0 = capsule_ee(&mut net.nodes[0]).expect("capsule EE");
    let count_code = ee0.install(protocols::COUNTER).expect("installs");
    capsule_ee(&mut net.nodes[2])
        .expect("capsule EE")
        .register_port(PORT);
    // Node 1 learns the code.
    net.inject(0, counter(count_code)).expect("sent");
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.deliveries(2).len(), 1);
    // Four capsules reach node 1, which forwards them; nothing is polled yet.
    let now = net.now;
    for _ in 0..4 {
        net.nodes[1].handle_packet(now, anode_core::LinkId(0), counter(count_code));
    }
    let pending = net.nodes[1].pending_transmits();
    assert!(pending >= 4, "{pending}");
    let h = net.nodes[1].hand_over(now);
    assert_eq!(h.queued.len(), pending);
    let rep = replace_node_1(&mut net, &h);
    assert_eq!(rep.queued, pending, "{rep:?}");
    net.run_for(Duration::from_secs(2));
    assert_eq!(
        counter_at(&mut net, 2, &count_code),
        Some(5),
        "node 2 counted each capsule once"
    );
}
