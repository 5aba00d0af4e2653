//! Demux classifier lookup cost at 10, 1,000 and 10,000 channels, compiled vs a naive
//! linear scan, in the same run.
//!
//! Each channel is keyed the way anode flows are: the ANEP Type ID (2 bytes at offset 2) and
//! the transit flow id (8 bytes at offset 16); a tenth of the channels also match a source
//! address prefix (a second shape), so the classifier has more than one group to probe.
//! Lookups alternate over hits (random existing flows) and misses.

use std::hint::black_box;

use anode_nodeos::{Classifier, DemuxKey};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn packet(flow: u64, src_byte: u8) -> Vec<u8> {
    let mut p = vec![0u8; 128];
    p[2..4].copy_from_slice(&0x0a03u16.to_be_bytes());
    p[16..24].copy_from_slice(&flow.to_be_bytes());
    p[26] = src_byte;
    p
}

fn build(n: usize) -> Classifier<usize> {
    let mut c = Classifier::new();
    for i in 0..n {
        let mut keys = vec![
            DemuxKey::exact(2, &0x0a03u16.to_be_bytes()),
            DemuxKey::exact(16, &(i as u64 * 7919).to_be_bytes()),
        ];
        if i % 10 == 0 {
            keys.push(DemuxKey {
                offset: 26,
                value: vec![0x40],
                mask: vec![0xf0],
            });
        }
        c.insert(keys, 0, i).unwrap_or_default();
    }
    c
}

fn bench(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("demux");
    for n in [10usize, 1_000, 10_000] {
        let c = build(n);
        // 64 packets: hits spread over the channels, every fourth a miss.
        let pkts: Vec<Vec<u8>> = (0..64u64)
            .map(|k| {
                let i = (k * 2_654_435_761) % n as u64;
                if k % 4 == 3 {
                    packet(u64::MAX - k, 0x41)
                } else {
                    packet(i * 7919, 0x41)
                }
            })
            .collect();
        for p in &pkts {
            assert_eq!(c.lookup(p), c.lookup_linear(p));
        }
        g.bench_with_input(BenchmarkId::new("compiled", n), &pkts, |b, pkts| {
            b.iter(|| {
                for p in pkts {
                    black_box(c.lookup(black_box(p)));
                }
            })
        });
        g.bench_with_input(BenchmarkId::new("linear", n), &pkts, |b, pkts| {
            b.iter(|| {
                for p in pkts {
                    black_box(c.lookup_linear(black_box(p)));
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
