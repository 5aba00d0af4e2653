//! Per-packet cost of the IPv4 and IPv6 fast path (validate, LPM, neighbor probe, in-place
//! rewrite of MACs, TTL and checksum) at 64-byte UDP payloads and at the largest that fit a
//! 1500-byte MTU (1472 B over IPv4, 1452 B over IPv6; a 1472-byte payload over IPv6 would be
//! a 1520-byte packet, refused as too big). The same buffer is forwarded over and over; its destination MAC, TTL
//! and checksum are reset each time (a few ns of the figure).

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use anode_ip::wire::*;
use anode_ip::*;

const R0: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x10]);
const R1: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x11]);
const S: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const D: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

fn router(now: Instant) -> IpRouter {
    let mut r = IpRouter::new(RouterConfig::default());
    for (name, mac, a4, a6) in [
        ("r0", R0, "198.18.1.2/24", "2001:2:0:1::2/64"),
        ("r1", R1, "198.18.2.1/24", "2001:2:0:2::1/64"),
    ] {
        r.add_interface(InterfaceConfig {
            name: name.into(),
            mac,
            mtu: 1500,
            ipv4: vec![a4.parse().unwrap()],
            ipv6: vec![a6.parse().unwrap()],
        })
        .unwrap();
    }
    // Learn d's MACs through ARP and NA.
    let mut a = [0u8; 28];
    ArpRepr {
        op: ArpOperation::Request,
        sha: D,
        spa: "198.18.2.2".parse().unwrap(),
        tha: MacAddr::ZERO,
        tpa: "198.18.2.1".parse().unwrap(),
    }
    .emit(&mut a)
    .unwrap();
    let mut f = frame(R1, D, EtherType::ARP, &a);
    r.handle_frame(now, IfaceId(1), &mut f);
    let (s6, t6) = (
        "2001:2:0:2::2".parse().unwrap(),
        "2001:2:0:2::1".parse().unwrap(),
    );
    let ns = Icmpv6Repr::NeighborSolicit {
        target: t6,
        lladdr: Some(D),
    };
    let mut icmp = vec![0u8; ns.buffer_len()];
    ns.emit(&mut icmp, s6, t6).unwrap();
    let mut ip = vec![0u8; 40];
    Ipv6Repr {
        src: s6,
        dst: t6,
        next_header: 58,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
        payload_len: icmp.len(),
    }
    .emit(&mut ip)
    .unwrap();
    ip.extend_from_slice(&icmp);
    let mut f = frame(R1, D, EtherType::IPV6, &ip);
    r.handle_frame(now, IfaceId(1), &mut f);
    while let Some(t) = r.poll_transmit() {
        r.recycle(t.frame);
    }
    r
}

fn frame(dst: MacAddr, src: MacAddr, t: u16, payload: &[u8]) -> Vec<u8> {
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

fn udp_v4(n: usize) -> Vec<u8> {
    let mut ip = vec![0u8; 28 + n];
    Ipv4Repr {
        src: "198.18.1.1".parse().unwrap(),
        dst: "198.18.2.2".parse().unwrap(),
        protocol: 17,
        ttl: 64,
        tos: 0,
        ident: 1,
        dont_frag: true,
        payload_len: 8 + n,
    }
    .emit(&mut ip)
    .unwrap();
    frame(R0, S, EtherType::IPV4, &ip)
}

fn udp_v6(n: usize) -> Vec<u8> {
    let mut ip = vec![0u8; 48 + n];
    Ipv6Repr {
        src: "2001:2:0:1::1".parse().unwrap(),
        dst: "2001:2:0:2::2".parse().unwrap(),
        next_header: 17,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
        payload_len: 8 + n,
    }
    .emit(&mut ip)
    .unwrap();
    frame(R0, S, EtherType::IPV6, &ip)
}

fn bench(c: &mut Criterion) {
    let now = Instant::now();
    let mut g = c.benchmark_group("fast_path");
    g.throughput(Throughput::Elements(1));
    for (size, size6) in [(64usize, 64usize), (1472, 1452)] {
        let mut r = router(now);
        let mut f = udp_v4(size);
        g.bench_function(format!("ipv4_udp_{size}"), |b| {
            b.iter(|| {
                // Undo the last forward: destination MAC, TTL and checksum.
                f[..6].copy_from_slice(&R0.0);
                let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
                ip.set_ttl(64);
                ip.fill_checksum();
                black_box(r.handle_frame(now, IfaceId(0), black_box(&mut f)))
            })
        });
        let mut f = udp_v6(size6);
        g.bench_function(format!("ipv6_udp_{size6}"), |b| {
            b.iter(|| {
                f[..6].copy_from_slice(&R0.0);
                f[14 + 7] = 64;
                black_box(r.handle_frame(now, IfaceId(0), black_box(&mut f)))
            })
        });
        // Everything the benchmark fed was forwarded (when its functions ran at all).
        assert_eq!(
            r.counters().total_drops(),
            0,
            "{:?}",
            r.counters().entries()
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
