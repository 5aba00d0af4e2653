//! Three drivers in a line on loopback (IPv4, IPv6, and IPv4 peers of a dual-stack `[::]`
//! socket): routes converge over real UDP, a datagram from the first is delivered at the
//! third, and the nodes returned by `shutdown` show the traffic.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use anode_wire::NodeAddr;
use common::*;

/// Runs the line test. `bind_b` overrides where the middle node's socket is bound.
fn line(ip: IpAddr, bind_b: Option<IpAddr>) {
    let [a, b, c] = [free_addr(ip), free_addr(ip), free_addr(ip)];
    let ha = run(udp_node(a, &[b], false), a);
    let hb = run(
        udp_node(b, &[a, c], false),
        bind_b.map_or(b, |i| SocketAddr::new(i, b.port())),
    );
    let hc = run(udp_node(c, &[b], false), c);
    let events = hc.take_events().expect("events once");
    assert!(hc.take_events().is_none(), "events may be taken only once");

    assert!(
        wait_route(&ha, c, Duration::from_secs(10)),
        "A never learned a route to C"
    );
    let dst = NodeAddr::from(c);
    let sent = ha
        .call(move |n, now| n.send_datagram(now, dst, 4242, 9, None, b"across the line"))
        .expect("driver alive");
    assert_eq!(sent, Ok(()));
    let d = next_delivery(&events, Duration::from_secs(5)).expect("delivered at C");
    assert_eq!(d.payload(), b"across the line");
    assert_eq!(d.port, 4242);
    assert_eq!(d.flow, 9);
    assert_eq!(d.src, NodeAddr::from(a));

    let (sa, sb, sc) = (ha.stats(), hb.stats(), hc.stats());
    assert!(sa.tx_datagrams > 0 && sa.rx_datagrams > 0, "{sa:?}");
    assert!(sb.rx_datagrams > 0 && sb.tx_datagrams > 0, "{sb:?}");
    assert!(sc.rx_datagrams > 0, "{sc:?}");
    assert_eq!(sb.unknown_peer_drops, 0, "{sb:?}");
    assert!(sa.syscalls >= sa.rx_batches + sa.tx_batches);

    let (na, nb, nc) = (ha.shutdown(), hb.shutdown(), hc.shutdown());
    assert!(na.counters().local_packets >= 1);
    assert!(na.counters().tx_packets > 0);
    assert!(nb.counters().fast_path >= 1, "B forwarded on the fast path");
    assert!(nb.counters().control_rx > 0);
    assert_eq!(nc.counters().delivered, 1);
}

#[test]
fn three_nodes_ipv4() {
    line(IpAddr::V4(Ipv4Addr::LOCALHOST), None);
}

#[test]
fn three_nodes_ipv6() {
    // The middle node's socket is bound to [::], with IPv6 peers.
    line(
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
    );
}

#[test]
fn ipv4_peers_on_dual_stack_socket() {
    // The middle node listens on [::]: its IPv4 peers arrive v4-mapped and must still be
    // recognised as their links; it sends to them v4-mapped.
    line(
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
    );
}

/// A burst of same-size datagrams from A to C: A sends it as segmented sends, B takes them
/// as coalesced receives and forwards them segmented again, and C gets every datagram once,
/// in order. With `udp_offload` off at every node nothing is segmented or coalesced and the
/// burst arrives the same.
fn burst(ip: IpAddr, offload: bool) {
    const N: u32 = 150;
    let [a, b, c] = [free_addr(ip), free_addr(ip), free_addr(ip)];
    let start = |me: SocketAddr, peers: &[SocketAddr]| {
        let mut cfg = anode_io::DriverConfig::new(me);
        cfg.udp_offload = offload;
        anode_io::spawn(udp_node(me, peers, false), cfg).expect("driver starts")
    };
    let (ha, hb, hc) = (start(a, &[b]), start(b, &[a, c]), start(c, &[b]));
    let events = hc.take_events().expect("events once");
    assert!(
        wait_route(&ha, c, Duration::from_secs(10)),
        "no route A -> C"
    );
    let dst = NodeAddr::from(c);
    let sent = ha
        .call(move |n, now| {
            (0..N)
                .map(|i| n.send_datagram(now, dst, 7, 1, None, &[i.to_be_bytes(); 100].concat()))
                .filter(Result::is_ok)
                .count()
        })
        .expect("driver alive");
    assert_eq!(sent, N as usize);
    let mut got = Vec::new();
    while got.len() < N as usize {
        let Some(d) = next_delivery(&events, Duration::from_secs(5)) else {
            break;
        };
        let seq = d
            .payload()
            .get(..4)
            .map(|b| u32::from_be_bytes(b.try_into().unwrap()));
        got.push(seq.unwrap());
    }
    assert_eq!(
        got,
        (0..N).collect::<Vec<_>>(),
        "every datagram once, in order"
    );
    let (sa, sb) = (ha.stats(), hb.stats());
    if offload {
        assert!(sa.tx_segmented_sends > 0, "A segments: {sa:?}");
        assert!(
            sb.rx_coalesced_receives > 0,
            "B takes coalesced receives: {sb:?}"
        );
        assert!(
            sb.tx_segmented_datagrams > 0,
            "B forwards segmented: {sb:?}"
        );
    } else {
        assert_eq!(
            sa.tx_segmented_sends + sb.tx_segmented_sends,
            0,
            "{sa:?} {sb:?}"
        );
        assert_eq!(sb.rx_coalesced_receives, 0, "{sb:?}");
    }
    assert_eq!(sb.send_errors + sb.unknown_peer_drops, 0, "{sb:?}");
}

#[test]
fn a_burst_crosses_segmented_and_in_order_ipv4() {
    burst(IpAddr::V4(Ipv4Addr::LOCALHOST), true);
}

#[test]
fn a_burst_crosses_segmented_and_in_order_ipv6() {
    burst(IpAddr::V6(Ipv6Addr::LOCALHOST), true);
}

#[test]
fn a_burst_crosses_without_offload() {
    burst(IpAddr::V4(Ipv4Addr::LOCALHOST), false);
}
