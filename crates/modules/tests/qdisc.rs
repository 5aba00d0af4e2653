//! Queue-discipline modules on a node's link: the order they send in, swapping them at run
//! time without losing packets, and the node's behaviour with no discipline.

mod common;

use std::time::{Duration, Instant};

use anode_core::{DropReason, LinkId, Node};
use anode_modules::{attach_qdisc, host};
use common::*;

/// Node 10 with inputs on links 0 and 1 (peers 1, 2) and output link 2 (peer 3).
fn setup(module: &str, now: Instant) -> Node {
    let mut n = relay(&[1, 2, 3], now);
    host(&mut n)
        .unwrap()
        .install(signed(module, None), &toml::Table::new())
        .unwrap();
    attach_qdisc(&mut n, module, LinkId(2), 8_000_000, now).unwrap();
    n
}

/// Offers `per_input` packets on each of links 0 (flow 1) and 1 (flow 2) at once, then drains
/// the node over time; returns the flows in sending order.
fn drain_order(n: &mut Node, per_input: u64, now: Instant) -> Vec<u64> {
    for s in 0..per_input {
        n.handle_packet(now, LinkId(0), datagram(1, 3, 1, s, 200));
    }
    for s in 0..per_input {
        n.handle_packet(now, LinkId(1), datagram(2, 3, 2, s, 200));
    }
    let mut order = Vec::new();
    let mut t = now;
    for _ in 0..10_000 {
        while let Some(x) = n.poll_transmit() {
            if is_data(&x.buf) {
                assert_eq!(x.link, LinkId(2));
                order.push(u64::from(x.buf[23]));
            }
        }
        match n.poll_timeout() {
            Some(d) if d > t => t = d,
            _ => t += Duration::from_micros(100),
        }
        n.handle_timeout(t);
        if n.link_qdisc(LinkId(2)).is_some_and(|(_, len)| len == 0) && n.pending_transmits() == 0 {
            break;
        }
    }
    order
}

#[test]
fn fcfs_sends_in_arrival_order_and_rr_alternates_inputs() {
    let now = Instant::now();
    let mut n = setup("fcfs", now);
    let o = drain_order(&mut n, 10, now);
    assert_eq!(o, [vec![1; 10], vec![2; 10]].concat());

    let mut n = setup("rr", now);
    let o = drain_order(&mut n, 10, now);
    assert_eq!(o.len(), 20);
    // After the first packet (sent at once, before input 2 queued), inputs alternate.
    let alternations = o.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(alternations >= 17, "{o:?}");

    let mut n = setup("drr", now);
    let o = drain_order(&mut n, 10, now);
    assert_eq!(o.len(), 20);
    // Quantum 1500 bytes and ~300-byte packets: five packets per input per round.
    assert_eq!(o, [[1; 5], [2; 5], [1; 5], [2; 5]].concat(), "{o:?}");
}

#[test]
fn strict_priority_serves_the_lower_flow_bits_first() {
    let now = Instant::now();
    let mut n = setup("prio", now);
    // flow 1 (priority 1) and flow 2 (priority 2): every flow-1 packet goes before flow 2's
    // (bar the first one, which finds the link idle).
    let o = drain_order(&mut n, 10, now);
    assert_eq!(o.len(), 20);
    let first_two = o.iter().position(|f| *f == 2).unwrap();
    assert!(first_two >= 10, "{o:?}");
}

#[test]
fn the_rate_paces_the_link_and_a_swap_loses_nothing() {
    let now = Instant::now();
    let mut n = setup("fcfs", now);
    host(&mut n)
        .unwrap()
        .install(signed("rr", None), &toml::Table::new())
        .unwrap();
    for s in 0..30 {
        n.handle_packet(now, LinkId(0), datagram(1, 3, 1, s, 200));
    }
    // 8 Mbit/s and ~300-byte packets: a few hundred microseconds each, so most wait.
    let mut sent = 0;
    while let Some(x) = n.poll_transmit() {
        sent += usize::from(is_data(&x.buf));
    }
    assert!(sent <= 2, "paced: {sent}");
    let waiting = n.link_qdisc(LinkId(2)).unwrap().1;
    assert_eq!(sent + waiting, 30);
    // Swap to round robin: the waiting packets move over, in order.
    let old = attach_qdisc(&mut n, "rr", LinkId(2), 8_000_000, now).unwrap();
    assert_eq!(old.as_deref(), Some("fcfs"));
    assert_eq!(n.link_qdisc(LinkId(2)).unwrap(), ("rr", waiting));
    let mut seqs = Vec::new();
    let mut t = now;
    while seqs.len() < waiting {
        t += Duration::from_millis(1);
        n.handle_timeout(t);
        while let Some(x) = n.poll_transmit() {
            if is_data(&x.buf) {
                seqs.push(seq_of(&x.buf));
            }
        }
        assert!(t < now + Duration::from_secs(1));
    }
    let expect: Vec<u64> = (sent as u64..30).collect();
    assert_eq!(seqs, expect);
    assert_eq!(n.counters().drops(DropReason::QdiscDropped), 0);
    // Removing the discipline hands the link back to the driver: no pacing.
    n.set_link_qdisc(LinkId(2), None, t);
    for s in 0..30 {
        n.handle_packet(t, LinkId(0), datagram(1, 3, 1, s, 200));
    }
    let mut data = 0;
    while let Some(x) = n.poll_transmit() {
        data += usize::from(is_data(&x.buf));
    }
    assert_eq!(data, 30);
}
