//! Node-core fast-path cost per packet, no I/O: `handle_packet` + `poll_transmit` of a
//! datagram that transits the node, at 64 and 1400 bytes of payload. Baseline in the same run:
//! the per-packet "active floor" of ../shared/baselines/fwd.c (header read, flow-table lookup,
//! TTL decrement) written in Rust.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

use anode_core::wire::addr::v4;
use anode_core::wire::control::{Control, Hello, Routes};
use anode_core::wire::datagram::Datagram;
use anode_core::wire::transit::{Transit, TransitRepr};
use anode_core::{LinkConfig, LinkId, Node, NodeConfig};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn transit_node() -> (Node, Instant) {
    let now = Instant::now();
    let me = v4(198, 18, 0, 2, 3322);
    let (a, c) = (v4(198, 18, 0, 1, 3322), v4(198, 18, 0, 3, 3322));
    let mut n = Node::new(NodeConfig::new(me), now).unwrap();
    // 9000-byte links so the 1400-byte payload plus headers (1484 bytes) fits.
    let jumbo = |peer| LinkConfig {
        mtu: 9000,
        ..LinkConfig::new(peer)
    };
    n.add_link(jumbo(a), now);
    n.add_link(jumbo(c), now);
    for (i, peer) in [a, c].into_iter().enumerate() {
        let h = Control::Hello(Hello {
            sender: peer,
            hello_ms: 1000,
            dead_ms: 1_000_000,
            seq: 1,
            seen: vec![me],
        });
        n.handle_packet(now, LinkId(i as u32), h.to_packet().unwrap());
    }
    // 1000 other destinations behind c, so the lookup is not in a one-entry table.
    let entries: Vec<_> = (0..1000u16)
        .map(|i| (v4(198, 19, (i >> 8) as u8, i as u8, 3322), 1))
        .collect();
    for ch in entries.chunks(64) {
        let r = Control::Routes(Routes {
            sender: c,
            entries: ch.to_vec(),
        });
        n.handle_packet(now, LinkId(1), r.to_packet().unwrap());
    }
    while n.poll_transmit().is_some() {}
    while n.poll_event().is_some() {}
    (n, now)
}

fn bench_fastpath(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("fastpath");
    for size in [64usize, 1400] {
        let (mut node, now) = transit_node();
        let pkt = Datagram {
            transit: TransitRepr {
                rb: u16::MAX,
                src: v4(198, 18, 0, 1, 3322),
                dst: v4(198, 19, 1, 200, 3322),
                ..Default::default()
            },
            port: 9,
            payload: vec![0xa5; size],
        }
        .to_packet()
        .unwrap();
        g.throughput(Throughput::Elements(1));
        g.bench_with_input(BenchmarkId::new("anode_node", size), &size, |b, _| {
            let mut buf = pkt.clone();
            b.iter(|| {
                node.handle_packet(now, LinkId(0), std::mem::take(&mut buf));
                let t = node.poll_transmit().unwrap();
                buf = t.buf;
                // Restore the bound so the packet never dies (one store, not a copy).
                Transit::new_checked(&mut buf[8..])
                    .unwrap()
                    .set_rb(u16::MAX);
            });
        });
        let mut table: HashMap<u64, (u64, u64)> = HashMap::with_capacity(65536);
        g.bench_with_input(
            BenchmarkId::new("baseline_fwd_active_floor", size),
            &size,
            |b, _| {
                let mut buf = pkt.clone();
                b.iter(|| {
                    let flow = u64::from_be_bytes(buf[16..24].try_into().unwrap());
                    let e = table.entry(black_box(flow)).or_insert((0, 0));
                    e.0 += 1;
                    e.1 += buf.len() as u64;
                    let ttl = u16::from_be_bytes([buf[12], buf[13]]);
                    buf[12..14].copy_from_slice(&ttl.wrapping_sub(1).to_be_bytes());
                    black_box(&mut buf);
                });
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench_fastpath);
criterion_main!(benches);
