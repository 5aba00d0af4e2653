//! Demand loading across a network in virtual time: first ping vs cached pings, hash
//! mismatch, unreachable code source, and the bounds on parked capsules.

mod common;

use std::time::Duration;

use anode_capsule::{CapsuleConfig, capsule_packet, code_hash, protocols};
use anode_core::wire::anep::AnepPacket;
use anode_core::wire::anep::TYPE_CONTROL;
use anode_core::wire::control::Control;
use common::*;

const PORT: u16 = 7;

fn ping(net: &mut Net, from: usize, to: usize, flow: u64) -> Option<(Duration, Duration)> {
    let h = code_hash(protocols::PING);
    let pkt = capsule_packet(h, addr(from), addr(to), 16, flow, &ping_payload(PORT)).unwrap();
    let now = net.now;
    net.nodes[from].inject(now, pkt).unwrap();
    let (d, took) = net.wait_delivery(from, Duration::from_secs(10))?;
    assert_eq!(d.port, PORT);
    assert_eq!(d.src, addr(to), "the reply comes from the pinged node");
    assert_eq!(d.payload()[0], 1, "a reply");
    Some((took, ping_rtt(&d)))
}

#[test]
fn first_ping_loads_code_hop_by_hop_then_pings_use_the_cache() {
    let rt = runtime();
    let mut net = Net::line(4, &rt);
    let h = net.ee(0).install(protocols::PING).unwrap();
    assert_eq!(h, code_hash(protocols::PING));
    net.ee(0).register_port(PORT);
    for i in 1..4 {
        assert!(!net.ee(i).has_code(&h), "node {i} starts without the code");
    }

    let (first, first_rtt) = ping(&mut net, 0, 3, 1).expect("first ping answered");
    for i in 1..4 {
        let s = net.ee(i).stats().clone();
        assert_eq!(s.loads_completed, 1, "node {i} loaded the code once");
        assert_eq!(s.compiled, 1, "node {i} compiled once");
        assert!(s.requests_sent >= 1);
        assert!(net.ee(i).has_code(&h));
    }
    // Each node loaded from its previous hop: node 0 served node 1, node 1 served node 2...
    for i in 0..3 {
        assert!(net.ee(i).stats().chunks_served >= 1, "node {i} served code");
    }

    let mut cached = Vec::new();
    for flow in 2..6 {
        let (took, rtt) = ping(&mut net, 0, 3, flow).expect("cached ping answered");
        cached.push((took, rtt));
    }
    // 3 hops there and back at 1 ms per hop: 6 ms, no code loading.
    for (took, rtt) in &cached {
        assert_eq!(*rtt, Duration::from_millis(6));
        assert_eq!(*took, Duration::from_millis(6));
    }
    for i in 1..4 {
        assert_eq!(
            net.ee(i).stats().loads_completed,
            1,
            "no reload at node {i}"
        );
        assert_eq!(net.ee(i).stats().compiled, 1);
    }
    assert!(first > cached[0].0);
    assert_eq!(first, first_rtt);
    println!(
        "virtual time, 3 fresh nodes at 1 ms per link: first ping {first:?} (code loaded at every hop), cached ping {:?}",
        cached[0].0
    );
    for i in 0..4 {
        assert_eq!(
            net.nodes[i].counters().ee_drop_map().len(),
            0,
            "node {i} dropped nothing"
        );
    }
}

#[test]
fn code_whose_bytes_do_not_hash_to_its_name_is_rejected_at_every_node() {
    let rt = runtime();
    // A star: node 0 in the middle holds the code; every chunk it sends is corrupted in flight.
    let mut net = Net::new(4, &[(0, 1), (0, 2), (0, 3)], &rt, |_| {
        CapsuleConfig::default()
    });
    let h = net.ee(0).install(protocols::PING).unwrap();
    net.tap = Some(Box::new(|_from, _to, buf| {
        let is_chunk = AnepPacket::new_checked(&buf[..])
            .ok()
            .filter(|p| p.type_id() == TYPE_CONTROL)
            .and_then(|p| Control::parse(p.payload()).ok())
            .is_some_and(|c| matches!(c, Control::CodeChunk { .. }));
        if is_chunk {
            let last = buf.len() - 1;
            buf[last] ^= 0x55;
        }
        true
    }));
    for to in 1..4 {
        let pkt = capsule_packet(h, addr(0), addr(to), 16, 9, &ping_payload(PORT)).unwrap();
        let now = net.now;
        net.nodes[0].inject(now, pkt).unwrap();
    }
    net.run_for(Duration::from_secs(10));
    for i in 1..4 {
        assert_eq!(net.drops(i, "code_hash_mismatch"), 1, "node {i}");
        assert!(!net.ee(i).has_code(&h), "node {i} holds no bad code");
        assert_eq!(net.ee(i).stats().compiled, 0);
        assert_eq!(net.ee(i).parked(), 0);
    }
}

#[test]
fn an_unreachable_code_source_ends_in_counted_drops_not_a_hang() {
    let rt = runtime();
    let mut net = Net::line(2, &rt);
    let h = net.ee(0).install(protocols::PING).unwrap();
    // Code transfer messages between the nodes are lost; capsules still pass.
    net.tap = Some(Box::new(|_, _, buf| {
        AnepPacket::new_checked(&buf[..])
            .ok()
            .filter(|p| p.type_id() == TYPE_CONTROL)
            .and_then(|p| Control::parse(p.payload()).ok())
            .is_none_or(|c| !matches!(c, Control::CodeRequest { .. } | Control::CodeChunk { .. }))
    }));
    for flow in 0..5 {
        let pkt = capsule_packet(h, addr(0), addr(1), 16, flow, &ping_payload(PORT)).unwrap();
        let now = net.now;
        net.nodes[0].inject(now, pkt).unwrap();
    }
    net.run_for(Duration::from_millis(50));
    assert_eq!(net.ee(1).parked(), 5);
    // 200 + 400 + 800 + 1600 ms of retries, then the parked capsules are dropped.
    net.run_for(Duration::from_secs(10));
    assert_eq!(net.ee(1).parked(), 0);
    assert_eq!(net.drops(1, "load_timeout"), 5);
    assert_eq!(
        net.ee(1).stats().requests_sent,
        4,
        "one request and three retries"
    );
    assert!(net.ee(1).fetching().is_empty());
}

#[test]
fn a_source_without_the_code_answers_unavailable_and_the_capsule_is_dropped_at_once() {
    let rt = runtime();
    let mut net = Net::line(2, &rt);
    // Node 1 gets a capsule "from node 0" whose code node 0 does not hold.
    let bogus = code_hash(b"no such code");
    let pkt = capsule_packet(bogus, addr(0), addr(1), 16, 1, b"x").unwrap();
    let link = net.nodes[1].link_by_peer(&addr(0)).unwrap();
    let now = net.now;
    net.nodes[1].handle_packet(now, link, pkt);
    net.run_for(Duration::from_millis(10));
    assert_eq!(net.drops(1, "code_unavailable"), 1);
    assert_eq!(net.ee(0).stats().unavailable_sent, 1);
    assert_eq!(net.ee(1).parked(), 0);
    // A capsule injected locally with no code and no code source cannot be loaded.
    let pkt = capsule_packet(bogus, addr(1), addr(0), 16, 1, b"x").unwrap();
    let now = net.now;
    assert!(net.nodes[1].inject(now, pkt).is_err());
    assert_eq!(net.drops(1, "no_code_source"), 1);
}

#[test]
fn parked_capsules_are_bounded_per_code() {
    let rt = runtime();
    let mut net = Net::new(2, &[(0, 1)], &rt, |_| {
        let mut c = CapsuleConfig::default();
        c.loader.max_parked_per_code = 3;
        c
    });
    let h = net.ee(0).install(protocols::PING).unwrap();
    net.tap = Some(Box::new(|_, _, buf| {
        AnepPacket::new_checked(&buf[..])
            .ok()
            .filter(|p| p.type_id() == TYPE_CONTROL)
            .and_then(|p| Control::parse(p.payload()).ok())
            .is_none_or(|c| !matches!(c, Control::CodeChunk { .. }))
    }));
    for flow in 0..5 {
        let pkt = capsule_packet(h, addr(0), addr(1), 16, flow, &ping_payload(PORT)).unwrap();
        let now = net.now;
        net.nodes[0].inject(now, pkt).unwrap();
    }
    net.run_for(Duration::from_millis(50));
    assert_eq!(net.ee(1).parked(), 3);
    assert_eq!(net.drops(1, "park_full"), 2);
    net.tap = None;
    net.run_for(Duration::from_secs(2));
    assert_eq!(net.ee(1).parked(), 0);
    assert_eq!(
        net.ee(1).stats().loads_completed,
        1,
        "a retry fetched it after all"
    );
    assert_eq!(net.ee(1).stats().runs, 3, "the parked capsules ran");
}
