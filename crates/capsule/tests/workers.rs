//! Capsules run by worker threads (`CapsuleConfig::workers`, `ee/batch.rs`): the same
//! network and traffic with one thread and with three at every node give the same
//! deliveries byte for byte, in the same order, the same node counters (so exactly one
//! outcome per capsule) and the same soft state, while the batches did run as parallel
//! groups. The traffic mixes five code objects, a stateful one (per-flow counting in soft
//! state) and one that traps on every third capsule it runs.

mod common;

use std::time::Duration;

use anode_capsule::{CapsuleConfig, CodeHash, capsule_packet, protocols};
use anode_core::Counters;
use common::*;

const PORT: u16 = 9;
const ROUNDS: usize = 4;
const PER_ROUND: usize = 96;

/// `wasm` with a custom section carrying `tag`: the same code under another name.
fn variant(wasm: &[u8], tag: u8) -> Vec<u8> {
    let name = b"anode.test.variant";
    let mut v = wasm.to_vec();
    v.push(0);
    v.push(u8::try_from(1 + name.len() + 1).unwrap());
    v.push(u8::try_from(name.len()).unwrap());
    v.extend_from_slice(name);
    v.push(tag);
    v
}

/// Forwards after some work (enough that batches go to the helper threads), except that
/// every third capsule one instance runs traps.
fn trapper() -> Vec<u8> {
    wat::parse_str(anode_testkit::fixtures::busy_capsule_wat(
        "(global $n (mut i32) (i32.const 0))",
        "(global.set $n (i32.add (global.get $n) (i32.const 1)))
         (if (i32.eqz (i32.rem_u (global.get $n) (i32.const 3))) (then unreachable))
         (i32.const 1)",
    ))
    .unwrap()
}

/// Works (5,000 loop iterations: heavy enough to be held for the workers), then forwards,
/// or at the destination delivers to `PORT`.
fn heavy() -> Vec<u8> {
    wat::parse_str(anode_testkit::fixtures::busy_capsule_wat(
        r#"(import "anode" "deliver" (func $deliver (param i32) (result i32)))"#,
        &format!(
            "(if (result i32) (i32.eqz (local.get $why))
                (then (drop (call $deliver (i32.const {PORT}))) (i32.const 0))
                (else (i32.const 1)))"
        ),
    ))
    .unwrap()
}

#[derive(Debug, PartialEq)]
struct Seen {
    /// Node 2's deliveries: port, flow, payload, in order.
    deliveries: Vec<(u16, u64, Vec<u8>)>,
    counters: Vec<Counters>,
    /// The counting protocol's soft-state entries at each node.
    soft: Vec<usize>,
}

fn run(workers: usize) -> (Seen, u64, u64) {
    let rt = runtime();
    let mut net = Net::new(3, &[(0, 1), (1, 2)], &rt, |_| CapsuleConfig {
        workers,
        ..CapsuleConfig::default()
    });
    let forward: Vec<Vec<u8>> = (1..=3).map(|t| variant(protocols::FORWARD, t)).collect();
    let trap = trapper();
    let mut codes: Vec<CodeHash> = Vec::new();
    for i in 0..3 {
        let ee = net.ee(i);
        codes = [
            protocols::COUNTER,
            &forward[0],
            &forward[1],
            &forward[2],
            &trap,
        ]
        .iter()
        .map(|w| ee.install(w).unwrap())
        .collect();
        ee.register_port(PORT);
    }
    for round in 0..ROUNDS {
        for k in 0..PER_ROUND {
            let code = codes[k % codes.len()];
            let flow = (k % 4) as u64;
            let mut payload = vec![0u8; 16];
            if code == codes[0] {
                payload[12..14].copy_from_slice(&PORT.to_be_bytes());
            } else {
                payload[..2].copy_from_slice(&PORT.to_be_bytes());
                payload[2] = u8::try_from(round).unwrap();
                payload[3] = u8::try_from(k).unwrap();
            }
            let pkt = capsule_packet(code, addr(0), addr(2), 16, flow, &payload).unwrap();
            // A trap at the source is the inject's error with one thread, later with workers.
            let _ = net.inject(0, pkt);
        }
        net.run_for(Duration::from_millis(50));
    }
    let deliveries = net
        .deliveries(2)
        .into_iter()
        .map(|d| (d.port, d.flow, d.buf[d.offset..].to_vec()))
        .collect();
    let counters = (0..3).map(|i| net.nodes[i].counters().clone()).collect();
    let soft = (0..3)
        .map(|i| net.ee(i).soft_state().len(&codes[0]))
        .collect();
    let (mut batches, mut groups) = (0, 0);
    for i in 0..3 {
        batches += net.ee(i).stats().batches;
        groups += net.ee(i).stats().worker_groups;
    }
    (
        Seen {
            deliveries,
            counters,
            soft,
        },
        batches,
        groups,
    )
}

#[test]
fn three_workers_give_what_one_thread_gives_and_run_groups_in_parallel() {
    let (one, b1, g1) = run(1);
    let (three, batches, groups) = run(3);
    assert_eq!((b1, g1), (0, 0), "one thread runs no batches");
    // The mix reaches the destination: the trapping code's survivors and the rest.
    let delivered = one.deliveries.len();
    assert!(
        delivered > ROUNDS * PER_ROUND / 2,
        "{delivered} of {} delivered",
        ROUNDS * PER_ROUND
    );
    assert!(
        one.counters.iter().any(|c| c.total_drops() > 0),
        "the trapper trapped"
    );
    assert_eq!(one, three);
    assert!(batches >= (ROUNDS * 3) as u64, "{batches} batches");
    assert!(groups >= batches, "{groups} groups in {batches} batches");
}

#[test]
fn light_code_runs_at_once_and_a_full_batch_of_heavy_code_runs_in_order() {
    let rt = runtime();
    let mut net = Net::new(2, &[(0, 1)], &rt, |_| CapsuleConfig {
        workers: 2,
        ..CapsuleConfig::default()
    });
    // Light code is never held: it runs as with one thread.
    let light = net.ee(0).install(protocols::FORWARD).unwrap();
    net.ee(1).install(protocols::FORWARD).unwrap();
    for _ in 0..10 {
        let pkt = capsule_packet(light, addr(0), addr(1), 16, 1, &PORT.to_be_bytes()).unwrap();
        net.inject(0, pkt).unwrap();
        assert_eq!(net.ee(0).held(), 0);
    }
    let wasm = heavy();
    let code = net.ee(0).install(&wasm).unwrap();
    net.ee(1).install(&wasm).unwrap();
    net.ee(1).register_port(PORT);
    let n = anode_capsule::MAX_BATCH + 10;
    for k in 0..n {
        let payload = u32::try_from(k).unwrap().to_be_bytes();
        let pkt = capsule_packet(code, addr(0), addr(1), 16, 1, &payload).unwrap();
        net.inject(0, pkt).unwrap();
    }
    // The first capsule ran at once (its code's weight not known yet); the rest were held,
    // and the batch filled once while they were handed in.
    assert_eq!(net.ee(0).stats().batches, 1);
    assert_eq!(net.ee(0).held(), 9);
    net.run_for(Duration::from_millis(50));
    let got: Vec<u32> = net
        .deliveries(1)
        .iter()
        .filter(|d| d.buf.len() == d.offset + 4)
        .map(|d| u32::from_be_bytes(d.buf[d.offset..d.offset + 4].try_into().unwrap()))
        .collect();
    assert_eq!(
        got,
        (0..u32::try_from(n).unwrap()).collect::<Vec<_>>(),
        "all, in order"
    );
    // One code object per batch: run on the node thread, no parallel groups.
    assert_eq!(net.ee(0).stats().worker_groups, 0);
    assert_eq!(net.ee(0).held(), 0);
}
