//! A node as `anode node` assembles it — the capsule EE (with the ping protocol's code
//! cached) and the PLAN EE, both under the NodeOS — fed arbitrary packets on its links.
//! Never panics, and every packet is accounted for (forwarded, delivered, handed to an EE,
//! or counted as a drop). The node is built once and lives across inputs, so EE state
//! (soft state, parked capsules, domains, code requests) accumulates as on a live node.
//!
//! Input: records `[kind, len_hi, len_lo, link, bytes...]*`. `kind % 4`: 0 the bytes as they
//! are; 1 a capsule of the cached ping code with the bytes as payload; 2 a capsule naming
//! unknown code; 3 a PLAN packet with the bytes as its body. Time advances 7 ms per record.
#![no_main]
use std::cell::RefCell;
use std::time::{Duration, Instant};

use anode_core::wire::addr::v4;
use anode_core::wire::anep::TYPE_PLAN;
use anode_core::wire::transit::{FLAG_EVAL_EVERY_HOP, TransitRepr};
use anode_core::wire::capsule::capsule_packet;
use anode_core::wire::{NodeAddr, routed_packet};
use anode_core::{LinkConfig, LinkId, Node, NodeConfig};
use anode_node::builder::NodeBuilder;
use anode_node::ees::EeOptions;
use libfuzzer_sys::fuzz_target;

fn me() -> NodeAddr {
    v4(198, 18, 0, 2, 3322)
}
fn a() -> NodeAddr {
    v4(198, 18, 0, 1, 3322)
}
fn b() -> NodeAddr {
    v4(198, 18, 0, 3, 3322)
}

struct Live {
    node: Node,
    now: Instant,
    ping: [u8; 32],
}

fn build() -> Live {
    let now = Instant::now();
    let node = NodeBuilder::new(NodeConfig::new(me()))
        .link(LinkConfig {
            static_neighbor: true,
            ..LinkConfig::new(a())
        })
        .link(LinkConfig {
            static_neighbor: true,
            ..LinkConfig::new(b())
        })
        .ees(EeOptions::default())
        .capsule_code(anode_capsule::protocols::PING.to_vec())
        .build(now)
        .expect("the default assembly builds");
    Live {
        node,
        now,
        ping: anode_capsule::code_hash(anode_capsule::protocols::PING),
    }
}

thread_local! {
    static LIVE: RefCell<Live> = RefCell::new(build());
}

/// The packet a record stands for.
fn packet(kind: u8, link: u8, bytes: &[u8], ping: [u8; 32]) -> Vec<u8> {
    let (src, dst) = if link % 2 == 0 { (a(), b()) } else { (b(), a()) };
    let flow = u64::from(link);
    match kind % 4 {
        1 => capsule_packet(ping, src, dst, 8, flow, bytes).unwrap_or_default(),
        2 => capsule_packet([0x5a; 32], src, me(), 8, flow, bytes).unwrap_or_default(),
        3 => {
            let t = TransitRepr {
                flags: FLAG_EVAL_EVERY_HOP,
                rb: 8,
                flow,
                src,
                dst: me(),
                prev_hop: src,
            };
            routed_packet(TYPE_PLAN, &t, &[], bytes).unwrap_or_default()
        }
        _ => bytes.to_vec(),
    }
}

fuzz_target!(|data: &[u8]| {
    LIVE.with_borrow_mut(|live| {
        let c0 = live.node.counters().clone();
        let mut rest = data;
        let mut fed = 0u64;
        while rest.len() >= 4 {
            let len = usize::from(u16::from_be_bytes([rest[1], rest[2]])).min(rest.len() - 4);
            let (kind, link) = (rest[0], rest[3]);
            let pkt = packet(kind, link, &rest[4..4 + len], live.ping);
            live.now += Duration::from_millis(7);
            live.node.handle_packet(live.now, LinkId(u32::from(link % 3)), pkt);
            fed += 1;
            rest = &rest[4 + len..];
        }
        live.now += Duration::from_millis(50);
        live.node.handle_timeout(live.now);
        while live.node.poll_transmit().is_some() {}
        while live.node.poll_event().is_some() {}
        let c = live.node.counters();
        assert_eq!(c.rx_packets - c0.rx_packets, fed);
        let outcome = |c: &anode_core::Counters| {
            c.delivered + c.fast_path + c.unknown_type_forwarded + c.control_rx + c.to_ee + c.total_drops()
        };
        assert!(outcome(c) - outcome(&c0) >= fed);
    });
});
