//! Router behaviour on hand-built frames: forwarding, ARP/NDP, ICMP, filters, accounting.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use super::*;
use crate::wire::*;

pub(crate) const R0: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x10]);
pub(crate) const R1: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x11]);
pub(crate) const S: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
pub(crate) const D: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}
fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// s (198.18.1.1, 2001:2:0:1::1) -- [r0 .2 / ::2] router [r1 198.18.2.1 / 2001:2:0:2::1] -- d (.2)
pub(crate) fn router() -> IpRouter {
    let mut r = IpRouter::new(RouterConfig::default());
    r.add_interface(InterfaceConfig {
        name: "r0".into(),
        mac: R0,
        mtu: 1500,
        ipv4: vec!["198.18.1.2/24".parse().unwrap()],
        ipv6: vec!["2001:2:0:1::2/64".parse().unwrap()],
    })
    .unwrap();
    r.add_interface(InterfaceConfig {
        name: "r1".into(),
        mac: R1,
        mtu: 1500,
        ipv4: vec!["198.18.2.1/24".parse().unwrap()],
        ipv6: vec!["2001:2:0:2::1/64".parse().unwrap()],
    })
    .unwrap();
    r
}

pub(crate) fn eth(dst: MacAddr, src: MacAddr, t: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    EthernetRepr {
        src,
        dst,
        ethertype: t,
    }
    .emit(&mut f)
    .unwrap();
    f.extend_from_slice(payload);
    f
}

pub(crate) fn ip4(src: &str, dst: &str, proto: u8, ttl: u8, df: bool, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 20 + payload.len()];
    Ipv4Repr {
        src: v4(src),
        dst: v4(dst),
        protocol: proto,
        ttl,
        tos: 0,
        ident: 7,
        dont_frag: df,
        payload_len: payload.len(),
    }
    .emit(&mut b)
    .unwrap();
    b[20..].copy_from_slice(payload);
    b
}

pub(crate) fn ip6(src: &str, dst: &str, nh: u8, hl: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 40 + payload.len()];
    Ipv6Repr {
        src: v6(src),
        dst: v6(dst),
        next_header: nh,
        hop_limit: hl,
        traffic_class: 0,
        flow_label: 0,
        payload_len: payload.len(),
    }
    .emit(&mut b)
    .unwrap();
    b[40..].copy_from_slice(payload);
    b
}

fn udp4(src: &str, dst: &str, dport: u16, ttl: u8, n: usize) -> Vec<u8> {
    let mut u = vec![0u8; 8 + n];
    UdpRepr {
        src_port: 5000,
        dst_port: dport,
    }
    .emit(&mut u, v4(src).into(), v4(dst).into(), &vec![0xab; n])
    .unwrap();
    ip4(src, dst, 17, ttl, true, &u)
}

fn echo4(src: &str, dst: &str, ttl: u8) -> Vec<u8> {
    let e = Icmpv4Repr::EchoRequest {
        ident: 9,
        seq: 1,
        data: b"hello",
    };
    let mut b = vec![0u8; e.buffer_len()];
    e.emit(&mut b).unwrap();
    ip4(src, dst, 1, ttl, false, &b)
}

fn icmp6(src: &str, dst: &str, hl: u8, r: &Icmpv6Repr) -> Vec<u8> {
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b, v6(src), v6(dst)).unwrap();
    ip6(src, dst, 58, hl, &b)
}

/// Teaches the router the MACs of s and d by ARP requests from them.
pub(crate) fn learn(r: &mut IpRouter, now: Instant) {
    for (iface, mac, spa, tpa) in [
        (0, S, "198.18.1.1", "198.18.1.2"),
        (1, D, "198.18.2.2", "198.18.2.1"),
    ] {
        let mut a = [0u8; 28];
        ArpRepr {
            op: ArpOperation::Request,
            sha: mac,
            spa: v4(spa),
            tha: MacAddr::ZERO,
            tpa: v4(tpa),
        }
        .emit(&mut a)
        .unwrap();
        let mut f = eth(MacAddr::BROADCAST, mac, EtherType::ARP, &a);
        assert_eq!(
            r.handle_frame(now, IfaceId(iface), &mut f),
            Verdict::Consumed
        );
    }
    for (iface, mac, src, tgt) in [
        (0, S, "2001:2:0:1::1", "2001:2:0:1::2"),
        (1, D, "2001:2:0:2::2", "2001:2:0:2::1"),
    ] {
        let ns = Icmpv6Repr::NeighborSolicit {
            target: v6(tgt),
            lladdr: Some(mac),
        };
        let g = ipv6::solicited_node(v6(tgt));
        let mut f = eth(
            MacAddr::ipv6_multicast(g),
            mac,
            EtherType::IPV6,
            &icmp6(src, &g.to_string(), 255, &ns),
        );
        assert_eq!(
            r.handle_frame(now, IfaceId(iface), &mut f),
            Verdict::Consumed
        );
    }
    while let Some(t) = r.poll_transmit() {
        r.recycle(t.frame);
    }
}

fn drain(r: &mut IpRouter) -> Vec<Transmit> {
    std::iter::from_fn(|| r.poll_transmit()).collect()
}

fn accounted(r: &IpRouter) {
    let c = r.counters();
    assert_eq!(
        c.rx_frames,
        c.outcomes(),
        "every frame has one outcome: {c:?}"
    );
}

#[test]
fn arp_request_answered_and_learned() {
    let mut r = router();
    let now = Instant::now();
    let mut a = [0u8; 28];
    ArpRepr {
        op: ArpOperation::Request,
        sha: S,
        spa: v4("198.18.1.1"),
        tha: MacAddr::ZERO,
        tpa: v4("198.18.1.2"),
    }
    .emit(&mut a)
    .unwrap();
    let mut f = eth(MacAddr::BROADCAST, S, EtherType::ARP, &a);
    assert_eq!(r.handle_frame(now, IfaceId(0), &mut f), Verdict::Consumed);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 1);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    assert_eq!((e.dst(), e.src(), e.ethertype()), (S, R0, EtherType::ARP));
    let rep = ArpRepr::parse(&ArpPacket::new_checked(e.payload()).unwrap()).unwrap();
    assert_eq!(rep.op, ArpOperation::Reply);
    assert_eq!(
        (rep.sha, rep.spa, rep.tha, rep.tpa),
        (R0, v4("198.18.1.2"), S, v4("198.18.1.1"))
    );
    assert_eq!(
        r.neighbors(),
        vec![((IfaceId(0), IpAddr::V4(v4("198.18.1.1"))), Some(S))]
    );
    // A request for another host on the segment is not answered.
    let mut a2 = a;
    a2[24..28].copy_from_slice(&[198, 18, 1, 77]);
    let mut f = eth(MacAddr::BROADCAST, S, EtherType::ARP, &a2);
    r.handle_frame(now, IfaceId(0), &mut f);
    assert!(drain(&mut r).is_empty());
    assert_eq!(r.counters().drops(DropReason::ArpNotForUs), 1);
    accounted(&r);
}

#[test]
fn forwards_ipv4_in_place() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let pkt = udp4("198.18.1.1", "198.18.2.2", 9, 64, 18);
    let mut f = eth(R0, S, EtherType::IPV4, &pkt);
    f.extend_from_slice(&[0; 6]); // link padding
    let v = r.handle_frame(now, IfaceId(0), &mut f);
    assert_eq!(
        v,
        Verdict::Forward {
            iface: IfaceId(1),
            start: 0,
            len: 14 + pkt.len()
        }
    );
    let e = EthernetFrame::new_checked(&f[..14 + pkt.len()]).unwrap();
    assert_eq!((e.dst(), e.src()), (D, R1));
    let ip = Ipv4Packet::new_checked(e.payload()).unwrap();
    assert_eq!(ip.ttl(), 63);
    assert!(ip.verify_checksum());
    assert_eq!(ip.payload(), &pkt[20..]);
    assert_eq!(r.counters().forwarded, 1);
    accounted(&r);
}

#[test]
fn forwards_ipv6_in_place() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let pkt = ip6(
        "2001:2:0:1::1",
        "2001:2:0:2::2",
        17,
        5,
        &[1, 2, 3, 4, 0, 12, 0, 0, 9, 9, 9, 9],
    );
    let mut f = eth(R0, S, EtherType::IPV6, &pkt);
    let v = r.handle_frame(now, IfaceId(0), &mut f);
    assert!(matches!(
        v,
        Verdict::Forward {
            iface: IfaceId(1),
            start: 0,
            ..
        }
    ));
    let e = EthernetFrame::new_checked(&f[..]).unwrap();
    assert_eq!((e.dst(), e.src()), (D, R1));
    assert_eq!(Ipv6Packet::new_checked(e.payload()).unwrap().hop_limit(), 4);
    assert_eq!(r.counters().forwarded_v6, 1);
    accounted(&r);
}

#[test]
fn vlan_tag_is_stripped_on_forward() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let pkt = udp4("198.18.1.1", "198.18.2.2", 9, 64, 4);
    let mut f = vec![0u8; 12];
    f[..6].copy_from_slice(&R0.0);
    f[6..12].copy_from_slice(&S.0);
    f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05, 0x08, 0x00]);
    f.extend_from_slice(&pkt);
    match r.handle_frame(now, IfaceId(0), &mut f) {
        Verdict::Forward { start, len, .. } => {
            assert_eq!(start, 4);
            let e = EthernetFrame::new_checked(&f[start..start + len]).unwrap();
            assert_eq!((e.dst(), e.src(), e.ethertype()), (D, R1, EtherType::IPV4));
            assert_eq!(e.vlan_id(), None);
        }
        v => panic!("{v:?}"),
    }
}

#[test]
fn unresolved_next_hop_queues_then_releases() {
    let mut r = router();
    let t0 = Instant::now();
    let pkt = udp4("198.18.1.1", "198.18.2.2", 9, 64, 10);
    for _ in 0..3 {
        let mut f = eth(R0, S, EtherType::IPV4, &pkt);
        assert_eq!(r.handle_frame(t0, IfaceId(0), &mut f), Verdict::Consumed);
    }
    assert_eq!(r.counters().queued, 3);
    // One ARP request out r1, broadcast.
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 1);
    assert_eq!(tx[0].iface, IfaceId(1));
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    assert!(e.dst().is_broadcast());
    // The reply releases the three packets, rewritten.
    let mut a = [0u8; 28];
    ArpRepr {
        op: ArpOperation::Reply,
        sha: D,
        spa: v4("198.18.2.2"),
        tha: R1,
        tpa: v4("198.18.2.1"),
    }
    .emit(&mut a)
    .unwrap();
    let mut f = eth(R1, D, EtherType::ARP, &a);
    r.handle_frame(t0, IfaceId(1), &mut f);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 3);
    for t in tx {
        let e = EthernetFrame::new_checked(&t.frame[..]).unwrap();
        assert_eq!((t.iface, e.dst(), e.src()), (IfaceId(1), D, R1));
        let ip = Ipv4Packet::new_checked(e.payload()).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
    }
    assert_eq!(r.counters().queued_released, 3);
    accounted(&r);
}

#[test]
fn unanswered_arp_gives_host_unreachable() {
    let mut r = router();
    let t0 = Instant::now();
    learn(&mut r, t0);
    let pkt = udp4("198.18.1.1", "198.18.2.99", 9, 64, 10);
    let mut f = eth(R0, S, EtherType::IPV4, &pkt);
    r.handle_frame(t0, IfaceId(0), &mut f);
    let mut requests = drain(&mut r).len();
    let mut t = t0;
    for _ in 0..10 {
        let Some(d) = r.poll_timeout() else { break };
        assert!(d >= t);
        t = d;
        r.handle_timeout(t);
        for tx in drain(&mut r) {
            let e = EthernetFrame::new_checked(&tx.frame[..]).unwrap();
            if e.ethertype() == EtherType::ARP {
                requests += 1;
            } else {
                // The ICMP host unreachable back to s.
                assert_eq!((tx.iface, e.dst()), (IfaceId(0), S));
                let ip = Ipv4Packet::new_checked(e.payload()).unwrap();
                assert_eq!(ip.dst(), v4("198.18.1.1"));
                let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
                assert_eq!((icmp.msg_type(), icmp.code()), (3, 1));
            }
        }
    }
    assert_eq!(requests, 3);
    assert_eq!(r.counters().neigh_failed, 1);
    assert_eq!(r.counters().queued_dropped, 1);
    assert_eq!(r.counters().icmp_errors, 1);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn ttl_expiry_sends_time_exceeded_from_incoming_side() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let pkt = udp4("198.18.1.1", "198.18.2.2", 33434, 1, 12);
    let mut f = eth(R0, S, EtherType::IPV4, &pkt);
    assert_eq!(r.handle_frame(now, IfaceId(0), &mut f), Verdict::Consumed);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 1);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    assert_eq!((tx[0].iface, e.dst(), e.src()), (IfaceId(0), S, R0));
    let ip = Ipv4Packet::new_checked(e.payload()).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!((ip.src(), ip.dst()), (v4("198.18.1.2"), v4("198.18.1.1")));
    let p = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    match Icmpv4Repr::parse(&p).unwrap() {
        Icmpv4Repr::TimeExceeded { code: 0, data } => assert_eq!(data, &pkt[..]),
        x => panic!("{x:?}"),
    }
    assert_eq!(r.counters().drops(DropReason::TtlExceeded), 1);
    // IPv6 hop limit 1.
    let pkt = ip6("2001:2:0:1::1", "2001:2:0:2::2", 59, 1, &[]);
    let mut f = eth(R0, S, EtherType::IPV6, &pkt);
    r.handle_frame(now, IfaceId(0), &mut f);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 1);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    let ip = Ipv6Packet::new_checked(e.payload()).unwrap();
    assert_eq!(ip.src(), v6("2001:2:0:1::2"));
    let p = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(matches!(
        Icmpv6Repr::parse(&p, ip.src(), ip.dst()).unwrap(),
        Icmpv6Repr::TimeExceeded { code: 0, .. }
    ));
    accounted(&r);
}

#[test]
fn icmp_errors_are_rate_limited() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let burst = RouterConfig::default().icmp_burst as u64;
    for _ in 0..burst + 20 {
        let mut f = eth(
            R0,
            S,
            EtherType::IPV4,
            &udp4("198.18.1.1", "198.18.2.2", 9, 1, 4),
        );
        r.handle_frame(now, IfaceId(0), &mut f);
    }
    assert_eq!(r.counters().icmp_errors, burst);
    assert_eq!(r.counters().icmp_rate_limited, 20);
    // A second later the bucket has refilled some.
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &udp4("198.18.1.1", "198.18.2.2", 9, 1, 4),
    );
    r.handle_frame(now + Duration::from_secs(1), IfaceId(0), &mut f);
    assert_eq!(r.counters().icmp_errors, burst + 1);
}

#[test]
fn no_route_and_no_error_about_errors() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &udp4("198.18.1.1", "203.0.113.1", 9, 64, 4),
    );
    r.handle_frame(now, IfaceId(0), &mut f);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 1);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    let ip = Ipv4Packet::new_checked(e.payload()).unwrap();
    let p = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert_eq!((p.msg_type(), p.code()), (3, 0));
    // An ICMP error that itself has no route: dropped, no error about it.
    let err = Icmpv4Repr::DstUnreachable {
        code: 1,
        mtu: 0,
        data: &[0; 28],
    };
    let mut b = vec![0u8; err.buffer_len()];
    err.emit(&mut b).unwrap();
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &ip4("198.18.1.1", "203.0.113.1", 1, 64, false, &b),
    );
    r.handle_frame(now, IfaceId(0), &mut f);
    assert!(drain(&mut r).is_empty());
    assert_eq!(r.counters().drops(DropReason::NoRoute), 2);
    accounted(&r);
}

#[test]
fn ping_to_router_v4_and_v6() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &echo4("198.18.1.1", "198.18.2.1", 64),
    );
    assert_eq!(r.handle_frame(now, IfaceId(0), &mut f), Verdict::Consumed);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 1);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    assert_eq!((tx[0].iface, e.dst()), (IfaceId(0), S));
    let ip = Ipv4Packet::new_checked(e.payload()).unwrap();
    assert_eq!((ip.src(), ip.dst()), (v4("198.18.2.1"), v4("198.18.1.1")));
    let p = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(
        Icmpv4Repr::parse(&p).unwrap(),
        Icmpv4Repr::EchoReply {
            ident: 9,
            seq: 1,
            data: b"hello"
        }
    );
    let req = Icmpv6Repr::EchoRequest {
        ident: 3,
        seq: 4,
        data: b"abc",
    };
    let mut f = eth(
        R0,
        S,
        EtherType::IPV6,
        &icmp6("2001:2:0:1::1", "2001:2:0:1::2", 64, &req),
    );
    r.handle_frame(now, IfaceId(0), &mut f);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 1);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    let ip = Ipv6Packet::new_checked(e.payload()).unwrap();
    let p = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, ip.src(), ip.dst()).unwrap(),
        Icmpv6Repr::EchoReply {
            ident: 3,
            seq: 4,
            data: b"abc"
        }
    );
    assert_eq!(r.counters().echo_replies, 2);
    accounted(&r);
}

#[test]
fn neighbor_solicitation_answered() {
    let mut r = router();
    let now = Instant::now();
    let ns = Icmpv6Repr::NeighborSolicit {
        target: v6("2001:2:0:1::2"),
        lladdr: Some(S),
    };
    let g = ipv6::solicited_node(v6("2001:2:0:1::2"));
    let mut f = eth(
        MacAddr::ipv6_multicast(g),
        S,
        EtherType::IPV6,
        &icmp6("2001:2:0:1::1", &g.to_string(), 255, &ns),
    );
    r.handle_frame(now, IfaceId(0), &mut f);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 1);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    assert_eq!(e.dst(), S);
    let ip = Ipv6Packet::new_checked(e.payload()).unwrap();
    assert_eq!(ip.hop_limit(), 255);
    let p = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    match Icmpv6Repr::parse(&p, ip.src(), ip.dst()).unwrap() {
        Icmpv6Repr::NeighborAdvert {
            flags,
            target,
            lladdr,
        } => {
            assert!(flags.router && flags.solicited && flags.override_);
            assert_eq!((target, lladdr), (v6("2001:2:0:1::2"), Some(R0)));
        }
        x => panic!("{x:?}"),
    }
    // Hop limit other than 255: rejected (RFC 4861 §7.1.1).
    let mut f = eth(
        MacAddr::ipv6_multicast(g),
        S,
        EtherType::IPV6,
        &icmp6("2001:2:0:1::1", &g.to_string(), 64, &ns),
    );
    r.handle_frame(now, IfaceId(0), &mut f);
    assert_eq!(r.counters().drops(DropReason::MalformedNdp), 1);
    accounted(&r);
}

#[test]
fn ipv6_resolution_by_ns_na() {
    let mut r = router();
    let now = Instant::now();
    let pkt = ip6("2001:2:0:1::1", "2001:2:0:2::2", 59, 64, &[]);
    let mut f = eth(R0, S, EtherType::IPV6, &pkt);
    r.handle_frame(now, IfaceId(0), &mut f);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 1);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    assert_eq!(e.dst(), MacAddr([0x33, 0x33, 0xff, 0, 0, 2]));
    let ip = Ipv6Packet::new_checked(e.payload()).unwrap();
    assert_eq!(ip.dst(), v6("ff02::1:ff00:2"));
    let na = Icmpv6Repr::NeighborAdvert {
        flags: NdpFlags {
            router: false,
            solicited: true,
            override_: true,
        },
        target: v6("2001:2:0:2::2"),
        lladdr: Some(D),
    };
    let mut f = eth(
        R1,
        D,
        EtherType::IPV6,
        &icmp6("2001:2:0:2::2", "2001:2:0:2::1", 255, &na),
    );
    r.handle_frame(now, IfaceId(1), &mut f);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 1);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    assert_eq!((e.dst(), e.src()), (D, R1));
    accounted(&r);
}

#[test]
fn too_big_df_and_ipv6_and_fragmentation() {
    let mut r = IpRouter::new(RouterConfig::default());
    r.add_interface(InterfaceConfig {
        name: "r0".into(),
        mac: R0,
        mtu: 1500,
        ipv4: vec!["198.18.1.2/24".parse().unwrap()],
        ipv6: vec!["2001:2:0:1::2/64".parse().unwrap()],
    })
    .unwrap();
    r.add_interface(InterfaceConfig {
        name: "r1".into(),
        mac: R1,
        mtu: 1280,
        ipv4: vec!["198.18.2.1/24".parse().unwrap()],
        ipv6: vec!["2001:2:0:2::1/64".parse().unwrap()],
    })
    .unwrap();
    let now = Instant::now();
    learn(&mut r, now);
    // DF set: frag-needed with MTU 1280.
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &udp4("198.18.1.1", "198.18.2.2", 9, 64, 1400),
    );
    r.handle_frame(now, IfaceId(0), &mut f);
    let tx = drain(&mut r);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    let ip = Ipv4Packet::new_checked(e.payload()).unwrap();
    assert_eq!(ip.total_len(), 576, "quotes up to 576 bytes");
    let p = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    match Icmpv4Repr::parse(&p).unwrap() {
        Icmpv4Repr::DstUnreachable { code: 4, mtu, .. } => assert_eq!(mtu, 1280),
        x => panic!("{x:?}"),
    }
    // IPv6: packet too big.
    let mut f = eth(
        R0,
        S,
        EtherType::IPV6,
        &ip6("2001:2:0:1::1", "2001:2:0:2::2", 59, 64, &[0; 1300]),
    );
    r.handle_frame(now, IfaceId(0), &mut f);
    let tx = drain(&mut r);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    let ip = Ipv6Packet::new_checked(e.payload()).unwrap();
    assert!(ip.packet().len() <= 1280);
    let p = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(matches!(
        Icmpv6Repr::parse(&p, ip.src(), ip.dst()).unwrap(),
        Icmpv6Repr::PacketTooBig { mtu: 1280, .. }
    ));
    // DF clear: fragmented, and the fragments reassemble to the original payload.
    let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let orig = ip4("198.18.1.1", "198.18.2.2", 253, 64, false, &payload);
    let mut f = eth(R0, S, EtherType::IPV4, &orig);
    assert_eq!(r.handle_frame(now, IfaceId(0), &mut f), Verdict::Consumed);
    let tx = drain(&mut r);
    assert_eq!(tx.len(), 3);
    let mut re = vec![0u8; payload.len()];
    let mut seen = 0;
    for (i, t) in tx.iter().enumerate() {
        assert!(t.frame.len() - 14 <= 1280);
        let e = EthernetFrame::new_checked(&t.frame[..]).unwrap();
        assert_eq!(e.dst(), D);
        let ip = Ipv4Packet::new_checked(e.payload()).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.ttl(), 63);
        assert_eq!(ip.more_frags(), i < 2);
        let off = ip.frag_offset();
        re[off..off + ip.payload().len()].copy_from_slice(ip.payload());
        seen += ip.payload().len();
    }
    assert_eq!(seen, payload.len());
    assert_eq!(re, payload);
    assert_eq!(r.counters().fragmented, 1);
    accounted(&r);
}

#[test]
fn malformed_counted_by_reason() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let good = udp4("198.18.1.1", "198.18.2.2", 9, 64, 8);
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        (vec![0u8; 10], DropReason::MalformedEthernet),
        (eth(D, S, EtherType::IPV4, &good), DropReason::NotForUs),
        (eth(R0, S, 0x1234, &good), DropReason::UnknownEtherType),
        (
            eth(R0, S, EtherType::IPV4, &good[..30]),
            DropReason::MalformedIpv4,
        ),
        (
            {
                let mut g = good.clone();
                g[10] ^= 0xff;
                eth(R0, S, EtherType::IPV4, &g)
            },
            DropReason::BadIpv4Checksum,
        ),
        (
            eth(R0, S, EtherType::IPV6, &good),
            DropReason::MalformedIpv6,
        ),
        (
            eth(R0, S, EtherType::ARP, &[0; 20]),
            DropReason::MalformedArp,
        ),
        (
            eth(
                R0,
                S,
                EtherType::IPV4,
                &udp4("224.0.0.1", "198.18.2.2", 9, 64, 1),
            ),
            DropReason::MartianSource,
        ),
        (
            eth(
                R0,
                S,
                EtherType::IPV4,
                &udp4("198.18.1.1", "198.18.2.255", 9, 64, 1),
            ),
            DropReason::NotForwarded,
        ),
        (
            eth(
                R0,
                S,
                EtherType::IPV6,
                &ip6("fe80::1", "2001:2:0:2::2", 59, 64, &[]),
            ),
            DropReason::BeyondScope,
        ),
    ];
    for (mut f, why) in cases {
        let before = r.counters().drops(why);
        assert_eq!(
            r.handle_frame(now, IfaceId(0), &mut f),
            Verdict::Consumed,
            "{why:?}"
        );
        assert_eq!(r.counters().drops(why), before + 1, "{why:?}");
    }
    accounted(&r);
}

#[test]
fn ipv4_options() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let mk = |opts: &[u8]| {
        let mut p = udp4("198.18.1.1", "198.18.2.2", 9, 64, 4);
        let mut h = p[..20].to_vec();
        h.extend_from_slice(opts);
        h[0] = 0x40 | (h.len() / 4) as u8;
        let total = (h.len() + p.len() - 20) as u16;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h.extend_from_slice(&p.split_off(20));
        let mut ip = Ipv4Packet::new_unchecked(&mut h[..]);
        ip.fill_checksum();
        eth(R0, S, EtherType::IPV4, &h)
    };
    // Record route: forwarded with the options unchanged.
    let mut f = mk(&[7, 7, 4, 0, 0, 0, 0, 0]);
    assert!(matches!(
        r.handle_frame(now, IfaceId(0), &mut f),
        Verdict::Forward { .. }
    ));
    let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(ip.options(), &[7, 7, 4, 0, 0, 0, 0, 0]);
    assert!(ip.verify_checksum());
    // Source route: dropped.
    let mut f = mk(&[131, 7, 4, 1, 2, 3, 4, 0]);
    r.handle_frame(now, IfaceId(0), &mut f);
    assert_eq!(r.counters().drops(DropReason::SourceRoute), 1);
    // Malformed: parameter problem pointing at the bad length.
    let mut f = mk(&[7, 12, 4, 0]);
    r.handle_frame(now, IfaceId(0), &mut f);
    assert_eq!(r.counters().drops(DropReason::BadIpv4Options), 1);
    let tx = drain(&mut r);
    let e = EthernetFrame::new_checked(&tx[0].frame[..]).unwrap();
    let ip = Ipv4Packet::new_checked(e.payload()).unwrap();
    let p = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(matches!(
        Icmpv4Repr::parse(&p).unwrap(),
        Icmpv4Repr::ParamProblem { pointer: 21, .. }
    ));
    accounted(&r);
}

#[test]
fn fragments_forwarded_but_not_consumed_locally() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let mut p = echo4("198.18.1.1", "198.18.2.2", 64);
    {
        let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
        ip.set_frag(false, true, 0);
        ip.fill_checksum();
    }
    let mut f = eth(R0, S, EtherType::IPV4, &p);
    assert!(matches!(
        r.handle_frame(now, IfaceId(0), &mut f),
        Verdict::Forward { .. }
    ));
    let mut p = echo4("198.18.1.1", "198.18.1.2", 64);
    {
        let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
        ip.set_frag(false, true, 0);
        ip.fill_checksum();
    }
    let mut f = eth(R0, S, EtherType::IPV4, &p);
    r.handle_frame(now, IfaceId(0), &mut f);
    assert_eq!(r.counters().drops(DropReason::LocalFragment), 1);
    accounted(&r);
}

#[test]
fn filters_divert() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let anep = r.add_filter(Filter::LocalUdp {
        port: crate::ANEP_UDP_PORT,
    });
    let ether = r.add_filter(Filter::EtherType(crate::ETHERTYPE_ANEP));
    // ANEP over UDP to the router: diverted.
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &udp4("198.18.1.1", "198.18.1.2", 3322, 64, 20),
    );
    assert_eq!(
        r.handle_frame(now, IfaceId(0), &mut f),
        Verdict::Divert {
            filter: anep,
            l3_offset: 14
        }
    );
    // Another port: port unreachable.
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &udp4("198.18.1.1", "198.18.1.2", 3323, 64, 20),
    );
    r.handle_frame(now, IfaceId(0), &mut f);
    assert_eq!(r.counters().drops(DropReason::PortUnreachable), 1);
    // ANEP over UDP *through* the router: fast path, not diverted.
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &udp4("198.18.1.1", "198.18.2.2", 3322, 64, 20),
    );
    assert!(matches!(
        r.handle_frame(now, IfaceId(0), &mut f),
        Verdict::Forward { .. }
    ));
    // ANEP over Ethernet.
    let mut f = eth(R0, S, crate::ETHERTYPE_ANEP, &[1, 2, 3]);
    assert_eq!(
        r.handle_frame(now, IfaceId(0), &mut f),
        Verdict::Divert {
            filter: ether,
            l3_offset: 14
        }
    );
    // A demux key: UDP (protocol 17 at offset 9) with destination port 7777 (offset 22).
    let dm = r.add_filter(Filter::Demux {
        ethertype: Some(EtherType::IPV4),
        keys: vec![
            DemuxKey::exact(9, &[17]),
            DemuxKey::exact(22, &7777u16.to_be_bytes()),
        ],
    });
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &udp4("198.18.1.1", "198.18.2.2", 7777, 64, 20),
    );
    let before = f.clone();
    assert_eq!(
        r.handle_frame(now, IfaceId(0), &mut f),
        Verdict::Divert {
            filter: dm,
            l3_offset: 14
        }
    );
    assert_eq!(f, before, "a diverted frame is untouched");
    assert!(r.remove_filter(dm));
    assert!(matches!(
        r.handle_frame(now, IfaceId(0), &mut f),
        Verdict::Forward { .. }
    ));
    assert_eq!(r.counters().diverted, 3);
    accounted(&r);
}

#[test]
fn reinjected_frames_skip_the_demux_filter_and_are_forwarded() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    let dm = r.add_filter(Filter::Demux {
        ethertype: Some(EtherType::IPV4),
        keys: vec![DemuxKey::exact(9, &[17])],
    });
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &udp4("198.18.1.1", "198.18.2.2", 7777, 64, 20),
    );
    assert_eq!(
        r.handle_frame(now, IfaceId(0), &mut f),
        Verdict::Divert {
            filter: dm,
            l3_offset: 14
        }
    );
    // The hook changed the TOS byte and fixed the header checksum, then let it go on.
    f[14 + 1] = 0x20;
    f[14 + 10..14 + 12].copy_from_slice(&[0, 0]);
    let c = checksum::finish(checksum::sum(&f[14..34]));
    f[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
    let v = r.reinject(now, IfaceId(0), f);
    assert!(
        matches!(
            v,
            Verdict::Forward {
                iface: IfaceId(1),
                ..
            }
        ),
        "{v:?}"
    );
    let tx = r.poll_transmit().expect("the forwarded frame is queued");
    assert_eq!(tx.iface, IfaceId(1));
    assert_eq!(&tx.frame[..6], &D.0, "rewritten for the next hop");
    let p = Ipv4Packet::new_checked(&tx.frame[14..]).unwrap();
    assert_eq!((p.ttl(), p.tos()), (63, 0x20));
    assert!(p.verify_checksum());
    // A hook that broke the checksum: dropped and counted, not forwarded.
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &udp4("198.18.1.1", "198.18.2.2", 7777, 64, 20),
    );
    f[14 + 1] = 0x20;
    assert_eq!(r.reinject(now, IfaceId(0), f), Verdict::Consumed);
    assert_eq!(r.counters().drops(DropReason::BadIpv4Checksum), 1);
    assert_eq!(r.counters().reinjected, 2);
    assert_eq!(r.counters().diverted, 1);
    accounted(&r);
}

#[test]
fn learned_routes() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    r.add_route(
        "198.19.0.0/16".parse().unwrap(),
        IpAddr::V4(v4("198.18.2.2")),
        3,
        RouteOrigin::Learned,
    )
    .unwrap();
    assert!(
        r.add_route(
            "198.19.0.0/16".parse().unwrap(),
            IpAddr::V4(v4("10.0.0.1")),
            1,
            RouteOrigin::Static
        )
        .is_err()
    );
    let mut f = eth(
        R0,
        S,
        EtherType::IPV4,
        &udp4("198.18.1.1", "198.19.5.5", 9, 64, 4),
    );
    let v = r.handle_frame(now, IfaceId(0), &mut f);
    assert!(matches!(
        v,
        Verdict::Forward {
            iface: IfaceId(1),
            ..
        }
    ));
    assert_eq!(&f[..6], &D.0);
    assert_eq!(
        r.remove_route("198.19.0.0/16".parse().unwrap(), RouteOrigin::Learned),
        1
    );
}

/// Thousands of garbled and truncated frames, deterministic: no panic, all accounted.
#[test]
fn garbled_frames_never_panic() {
    let mut r = router();
    let now = Instant::now();
    learn(&mut r, now);
    r.add_filter(Filter::LocalUdp { port: 3322 });
    let seeds: Vec<Vec<u8>> = vec![
        eth(
            R0,
            S,
            EtherType::IPV4,
            &udp4("198.18.1.1", "198.18.2.2", 9, 64, 30),
        ),
        eth(
            R0,
            S,
            EtherType::IPV4,
            &echo4("198.18.1.1", "198.18.1.2", 64),
        ),
        eth(
            R0,
            S,
            EtherType::IPV6,
            &ip6(
                "2001:2:0:1::1",
                "2001:2:0:2::2",
                0,
                64,
                &[17, 0, 1, 4, 0, 0, 0, 0],
            ),
        ),
        eth(
            R0,
            S,
            EtherType::IPV6,
            &icmp6(
                "2001:2:0:1::1",
                "2001:2:0:1::2",
                255,
                &Icmpv6Repr::NeighborSolicit {
                    target: v6("2001:2:0:1::2"),
                    lladdr: Some(S),
                },
            ),
        ),
        eth(
            R0,
            S,
            EtherType::ARP,
            &[
                0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 198, 18, 1, 1, 0, 0, 0, 0, 0, 0, 198, 18,
                1, 2,
            ],
        ),
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = now;
    for i in 0..20_000 {
        let mut f = seeds[i % seeds.len()].clone();
        match rnd() % 4 {
            0 => f.truncate((rnd() as usize) % (f.len() + 1)),
            1 => {
                for _ in 0..1 + rnd() % 4 {
                    let j = (rnd() as usize) % f.len();
                    f[j] = rnd() as u8;
                }
            }
            2 => {
                let j = 14 + (rnd() as usize) % (f.len() - 14);
                f[j] ^= 1 << (rnd() % 8);
            }
            _ => f.extend((0..rnd() % 64).map(|_| rnd() as u8)),
        }
        let iface = IfaceId((rnd() % 3) as u32);
        if let Verdict::Forward { start, len, .. } = r.handle_frame(t, iface, &mut f) {
            assert!(start + len <= f.len());
        }
        if i % 100 == 0 {
            t += Duration::from_millis(250);
            r.handle_timeout(t);
        }
        while let Some(tx) = r.poll_transmit() {
            r.recycle(tx.frame);
        }
    }
    accounted(&r);
    assert!(r.counters().rx_frames == 20_000 + 4);
}
