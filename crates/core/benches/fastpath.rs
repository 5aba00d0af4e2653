//! Node-core fast-path cost per packet, no I/O: `handle_packet` + `poll_transmit` of a
//! datagram that transits the node, at 64 and 1400 bytes of payload. Baseline in the same run:
//! the per-packet "active floor" of ../shared/baselines/fwd.c (header read, flow-table lookup,
//! TTL decrement) written in Rust.

use std::collections::HashMap;
use std::hint::black_box;

use anode_core::LinkId;
use anode_core::wire::addr::v4;
use anode_core::wire::datagram::Datagram;
use anode_core::wire::transit::{Transit, TransitRepr};
use anode_testkit::fixtures::transit_node;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn bench_fastpath(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("fastpath");
    for size in [64usize, 1400] {
        // 9000-byte links so the 1400-byte payload plus headers (1484 bytes) fits; 1000 other
        // destinations behind the next hop, so the lookup is not in a one-entry table.
        let (mut node, now) = transit_node(Some(9000), 1000);
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
