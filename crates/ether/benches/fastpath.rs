//! Per-packet cost of the kernel fast path's eBPF program (TC hook), as the kernel itself
//! times it: `BPF_PROG_TEST_RUN` with a repeat count reports the mean run time, which
//! criterion collects through `iter_custom`. Cases: IPv4 and IPv6 UDP at 64-byte payloads and
//! at the largest that fit a 1500-byte MTU (1472 / 1452 B), forwarded through a table of 256 + 256 extra routes (LPM tries) besides the
//! connected ones; baseline in the same run: an ARP frame, which the program passes on at
//! its first check (its fixed cost). The user-space router's figure for the same frames is
//! `cargo bench -p anode-ip` (forward.rs).
//!
//! Needs root (CAP_BPF); without it the bench prints why and measures nothing. No traffic:
//! the program runs on a copy of the frame inside the kernel, ingress "lo".
//!
//! `sudo cargo bench -p anode-ether --bench fastpath -- --warm-up-time 1 --measurement-time 4`
//! (env `ROUTES=N`, 0..=256: extra routes per family; the cost hardly depends on it: 153 ns
//! with none against 160 ns with 256 per family for IPv4, one run).

use std::net::IpAddr;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use anode_ether::fastpath::{FastPath, Hook, verdict};
use anode_ip::wire::{EtherType, EthernetRepr, Ipv4Repr, Ipv6Repr};
use anode_ip::{FastIface, FastRoute, FastTable, IfaceId, IpCidr, MacAddr};

const R0: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x10]);
const R1: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x11]);
const S: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
/// Ingress: the loopback device (ifindex 1 exists in every namespace); egress: an ifindex
/// nothing needs to exist for (a test run's redirect is only a verdict).
const IFINDEX: [u32; 2] = [1, 1_000_000];
/// Runs per `BPF_PROG_TEST_RUN`: the runs of one call share the frame and each forward takes
/// one TTL off it; it starts at 255, so every run of a batch is a forward.
const BATCH: u64 = 250;

fn table() -> FastTable {
    let c = |s: &str| s.parse::<IpCidr>().unwrap();
    let mut routes = vec![
        FastRoute {
            prefix: c("198.18.1.0/24"),
            iface: IfaceId(0),
            gateway: None,
        },
        FastRoute {
            prefix: c("198.18.2.0/24"),
            iface: IfaceId(1),
            gateway: None,
        },
        FastRoute {
            prefix: c("2001:2:0:1::/64"),
            iface: IfaceId(0),
            gateway: None,
        },
        FastRoute {
            prefix: c("2001:2:0:2::/64"),
            iface: IfaceId(1),
            gateway: None,
        },
    ];
    let extra: usize = std::env::var("ROUTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
        .min(256);
    for i in 0..extra {
        routes.push(FastRoute {
            prefix: c(&format!("198.19.{i}.0/24")),
            iface: IfaceId(1),
            gateway: Some("198.18.2.2".parse().unwrap()),
        });
        routes.push(FastRoute {
            prefix: c(&format!("2001:2:1:{i:x}::/64")),
            iface: IfaceId(1),
            gateway: Some("2001:2:0:2::2".parse().unwrap()),
        });
    }
    // The next hop's MAC is the ingress interface's own, so that a forwarded frame is again
    // addressed to the router and the next run of the batch forwards it too (same work).
    let n = |a: &str| ((IfaceId(1), a.parse::<IpAddr>().unwrap()), R0);
    FastTable {
        ifaces: vec![
            FastIface {
                id: IfaceId(0),
                mac: R0,
                mtu: 1500,
            },
            FastIface {
                id: IfaceId(1),
                mac: R1,
                mtu: 1500,
            },
        ],
        routes,
        neighbors: vec![n("198.18.2.2"), n("2001:2:0:2::2")],
        punt_v4: ["198.18.1.2", "198.18.2.1", "198.18.1.255", "198.18.2.255"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect(),
        punt_v6: ["2001:2:0:1::2", "2001:2:0:2::1"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect(),
        ..FastTable::default()
    }
}

fn frame(t: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    EthernetRepr {
        src: S,
        dst: R0,
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
        ttl: 255,
        tos: 0,
        ident: 1,
        dont_frag: true,
        payload_len: 8 + n,
    }
    .emit(&mut ip)
    .unwrap();
    frame(EtherType::IPV4, &ip)
}

fn udp_v6(n: usize) -> Vec<u8> {
    let mut ip = vec![0u8; 48 + n];
    Ipv6Repr {
        src: "2001:2:0:1::1".parse().unwrap(),
        dst: "2001:2:0:2::2".parse().unwrap(),
        next_header: 17,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
        payload_len: 8 + n,
    }
    .emit(&mut ip)
    .unwrap();
    frame(EtherType::IPV6, &ip)
}

fn bench(c: &mut Criterion) {
    let fp = match FastPath::load_unattached(Hook::Tc, &IFINDEX) {
        Ok(mut fp) => {
            fp.sync(&table()).unwrap();
            fp
        }
        Err(e) => {
            eprintln!("fastpath bench: cannot load the program ({e}); run as root");
            return;
        }
    };
    let mut g = c.benchmark_group("kernel_fast_path");
    g.throughput(Throughput::Elements(1));
    let mut cases: Vec<(String, Vec<u8>, u32)> = vec![(
        "pass_arp".into(),
        frame(EtherType::ARP, &[0u8; 28]),
        verdict::TC_ACT_OK,
    )];
    // The largest UDP payloads of a 1500-byte packet: 1472 B (IPv4), 1452 B (IPv6).
    for (v4, v6) in [(64usize, 64usize), (1472, 1452)] {
        cases.push((
            format!("ipv4_udp_{v4}"),
            udp_v4(v4),
            verdict::TC_ACT_REDIRECT,
        ));
        cases.push((
            format!("ipv6_udp_{v6}"),
            udp_v6(v6),
            verdict::TC_ACT_REDIRECT,
        ));
    }
    for (name, f, want) in cases {
        // Every run of a batch takes the path the case is named for.
        let (v, _, _) = fp.time_run(&f, IFINDEX[0], BATCH as u32).unwrap();
        assert_eq!(
            v,
            want,
            "{name}: verdict after {BATCH} runs: {:?}",
            fp.stats().unwrap().report()
        );
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let n = left.min(BATCH);
                    let (_, _, mean) = fp.time_run(&f, IFINDEX[0], n as u32).unwrap();
                    total += mean * n as u32;
                    left -= n;
                }
                total
            })
        });
    }
    g.finish();
    let s = fp.stats().unwrap();
    assert!(s.forwarded_v4 > 0 && s.forwarded_v6 > 0, "{s:?}");
}

criterion_group!(benches, bench);
criterion_main!(benches);
