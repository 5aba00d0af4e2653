//! Capsule execution rate with worker threads (`CapsuleConfig::workers`, `ee/batch.rs`), no
//! I/O: a transit node takes a batch of 64 capsules (`handle_packet` each, then the
//! `handle_timeout` that runs the batch, then `poll_transmit` of all 64), spread over four
//! code objects (four flows of four protocols), run at this node on every capsule, with 1 and
//! with 2 threads, in the same run. Throughput is capsules per second.
//!
//! - `compute/*`: code doing 2,000 loop iterations of integer work per capsule (a few
//!   microseconds: payload inspection, a sketch update, a checksum); `compute_8k/*` 8,000;
//! - `forward/*`: `guest/protocols/forward`, which only says "forward" (the EE's cost floor:
//!   the node thread's share — header parse, forward, checksum — dominates, so a second
//!   thread gains little).

use std::hint::black_box;
use std::time::Instant;

use anode_capsule::{
    CapsuleConfig, CapsuleEe, CodeHash, Runtime, RuntimeConfig, capsule_packet, protocols,
};
use anode_core::wire::addr::v4;
use anode_core::wire::transit::Transit;
use anode_core::{LinkId, Node};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const BATCH: usize = 64;
const CODES: u8 = 4;

/// `wasm` with a custom section carrying `tag`: the same code under another name.
fn variant(wasm: &[u8], tag: u8) -> Vec<u8> {
    let name = b"anode.bench.variant";
    let mut v = wasm.to_vec();
    v.extend_from_slice(&[0, (name.len() + 2) as u8, name.len() as u8]);
    v.extend_from_slice(name);
    v.push(tag);
    v
}

/// Forwards after `iters` iterations of xorshift kept in a global (so none is optimized out).
fn compute(iters: u32) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") 1)
            (global $x (mut i64) (i64.const 88172645463325252))
            (func (export "anode_abi_v1"))
            (func (export "accept") (param $len i32) (param $why i32) (result i32)
                (local $i i32) (local $x i64)
                (local.set $x (global.get $x))
                (loop $l
                    (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 13))))
                    (local.set $x (i64.xor (local.get $x) (i64.shr_u (local.get $x) (i64.const 7))))
                    (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 17))))
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_if $l (i32.lt_u (local.get $i) (i32.const {iters}))))
                (global.set $x (local.get $x))
                (i32.const 1)))"#
    ))
    .unwrap()
}

/// A transit node whose capsule EE runs with `workers` threads and holds `wasm`'s variants;
/// returns it with a batch of capsules over the variants.
fn setup(
    rt: &std::sync::Arc<Runtime>,
    wasm: &[u8],
    workers: usize,
) -> (Node, Instant, Vec<Vec<u8>>) {
    let mut ee = CapsuleEe::with_runtime(
        rt.clone(),
        CapsuleConfig {
            workers,
            ..CapsuleConfig::default()
        },
    )
    .unwrap();
    let codes: Vec<CodeHash> = (0..CODES)
        .map(|t| ee.install(&variant(wasm, t)).unwrap())
        .collect();
    let (mut node, now) = anode_testkit::fixtures::transit_node(Some(9000), 1000);
    node.register_ee(Box::new(ee));
    let (src, dst) = (v4(198, 18, 0, 1, 3322), v4(198, 19, 1, 200, 3322));
    let batch = (0..BATCH)
        .map(|i| {
            let code = codes[i % codes.len()];
            capsule_packet(
                code,
                src,
                dst,
                u16::MAX,
                (i % codes.len()) as u64,
                &[0xa5; 64],
            )
            .unwrap()
        })
        .collect();
    (node, now, batch)
}

/// One batch through the node: handed in, run, forwarded; the buffers come back for the next.
fn one_batch(node: &mut Node, now: Instant, batch: &mut Vec<Vec<u8>>) {
    for buf in batch.drain(..) {
        node.handle_packet(now, LinkId(0), buf);
    }
    node.handle_timeout(now);
    while let Some(t) = node.poll_transmit() {
        let mut buf = t.buf;
        Transit::new_checked(&mut buf[8..])
            .unwrap()
            .set_rb(u16::MAX);
        batch.push(buf);
    }
}

fn bench_workers(cr: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let mut g = cr.benchmark_group("workers");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, wasm) in [
        ("compute", compute(2_000)),
        ("compute_8k", compute(8_000)),
        ("forward", protocols::FORWARD.to_vec()),
    ] {
        for workers in [1usize, 2] {
            let (mut node, now, mut batch) = setup(&rt, &wasm, workers);
            // The setup works (also when a filter skips this case): all of a batch leaves.
            one_batch(&mut node, now, &mut batch);
            assert_eq!(
                batch.len(),
                BATCH,
                "{name}/{workers}: the whole batch forwarded"
            );
            g.bench_with_input(BenchmarkId::new(name, workers), &workers, |b, _| {
                b.iter(|| one_batch(&mut node, now, black_box(&mut batch)));
            });
            assert_eq!(
                node.counters().total_drops(),
                0,
                "{name}/{workers}: nothing dropped"
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench_workers);
criterion_main!(benches);
