//! Isolation with the real capsule EE (wasmtime) under the NodeOS (feature `capsule`):
//! hostile WebAssembly protocols (infinite loop, memory bomb, capsule storm, soft-state flood)
//! each beside a benign forwarding protocol, in virtual time, through one guarded router.
//!
//! Topology: 0 (source) - 1 (router: `DomainGuard<MeteredCapsule>`) - 2 (sink). Each
//! protocol is its own domain (`capsule/<code hash>`). Benign: 1,000 capsules/s; hostile:
//! 2,500/s; the router's EE gets 200 ms of CPU per second. Run with `--nocapture`.

mod common;

use std::time::Duration;

use anode_capsule::capsule_packet;
use anode_core::wire::anep::TYPE_CAPSULE;
use anode_nodeos::capsule::MeteredCapsule;
use anode_nodeos::guard::DomainGuard;
use common::wasm::*;
use common::*;

struct Outcome {
    benign: u64,
    reason: Option<String>,
    peak: u64,
    drops: std::collections::BTreeMap<String, u64>,
}

/// The benign flow alone or beside `hostile`, the router's EE running capsules on `workers`
/// threads.
fn run(hostile: Option<(u8, Vec<u8>)>, workers: usize) -> Outcome {
    let good = benign();
    let mut code = vec![good.clone()];
    if let Some((_, h)) = &hostile {
        code.push(h.clone());
    }
    let mut line = Line::new(3);
    line.nodes[0].register_ee(Box::new(Sink::default()));
    line.nodes[1].register_ee(Box::new(guard_workers(&code, 200_000_000, FUEL, workers)));
    line.nodes[2].register_ee(Box::new(Sink::default()));
    line.advance(Duration::from_secs(5));
    let gh = anode_capsule::code_hash(&good);
    let hh = hostile.as_ref().map(|(_, h)| anode_capsule::code_hash(h));
    let mut seq = 0u64;
    for k in 0..10_000u64 {
        let now = line.now;
        if k % 10 == 0 {
            seq += 1;
            let p = capsule_packet(gh, addr(0), addr(2), 16, seq, &[0; 32]).unwrap();
            line.nodes[0].inject(now, p).unwrap();
        }
        if let (Some((proto, _)), Some(hh)) = (&hostile, hh)
            && k % 4 == 0
        {
            seq += 1;
            let flow = u64::from(*proto) << 56 | seq;
            let p = capsule_packet(hh, addr(0), addr(2), 16, flow, &[0; 32]).unwrap();
            let _ = line.nodes[0].inject(now, p);
        }
        line.advance(Duration::from_micros(100));
    }
    line.advance(Duration::from_millis(200));
    let benign = line.nodes[2]
        .ee_mut(TYPE_CAPSULE)
        .and_then(|e| e.as_any_mut().downcast_mut::<Sink>())
        .and_then(|s| s.by_proto.get(&0).copied())
        .unwrap_or(0);
    let drops = line.nodes[1].counters().ee_drop_map();
    let g = line.nodes[1]
        .ee_mut(TYPE_CAPSULE)
        .and_then(|e| e.as_any_mut().downcast_mut::<DomainGuard<MeteredCapsule>>())
        .unwrap();
    let peak = g.nodeos().pools().node_peak();
    let reason = line.logs.iter().find(|l| l.contains("terminated")).cloned();
    Outcome {
        benign,
        reason,
        peak,
        drops,
    }
}

#[test]
fn hostile_wasm_protocols_beside_a_benign_one() {
    contained(1);
}

/// The same with the router running capsules on two threads: the benign and the hostile
/// protocol's capsules are held per batch and run in parallel groups; a terminated
/// protocol's held capsules are dropped with it.
#[test]
fn hostile_wasm_protocols_beside_a_benign_one_with_two_workers() {
    contained(2);
}

fn contained(workers: usize) {
    let alone = run(None, workers);
    println!(
        "capsule benign alone ({workers} workers): {} of 1000 delivered",
        alone.benign
    );
    assert!(alone.benign >= 990, "benign alone {}", alone.benign);
    for (proto, name, wasm) in [
        (LOOP, "infinite loop", infinite_loop()),
        (BOMB, "memory bomb", memory_bomb()),
        (STORM, "capsule storm", storm()),
        (FLOOD, "soft-state flood", flood()),
    ] {
        let o = run(Some((proto, wasm)), workers);
        let ratio = o.benign as f64 / alone.benign as f64;
        println!(
            "capsule {name:16} ({workers} workers): benign {} ({:.1}% of alone); NodeOS memory peak {} B (bound {NODE_MEMORY}); drops {:?}; {}",
            o.benign,
            ratio * 100.0,
            o.peak,
            o.drops,
            o.reason
                .clone()
                .unwrap_or_else(|| "not terminated (throttled)".into())
        );
        assert!(ratio >= 0.9, "{name}: benign kept {:.1}%", ratio * 100.0);
        assert!(o.peak <= NODE_MEMORY);
        if proto == LOOP || proto == BOMB || proto == FLOOD {
            assert!(o.reason.is_some(), "{name} not terminated");
        }
    }
}

/// CPU is charged exactly: each run's fuel (as the capsule EE reports it) plus the node's
/// per-packet work, and the guard's run-time limit becomes the EE's fuel per run.
#[test]
fn cpu_is_the_fuel_each_run_used_and_the_guard_sets_the_limit() {
    use anode_capsule::{CapsuleConfig, CapsuleEe};
    let good = benign();
    let gh = anode_capsule::code_hash(&good);
    // The fuel one benign run uses, from a bare EE recording its runs.
    let mut bare = CapsuleEe::new(CapsuleConfig {
        record_runs: true,
        ..CapsuleConfig::default()
    })
    .unwrap();
    bare.install(&good).unwrap();
    let mut line = Line::new(3);
    line.nodes[1].register_ee(Box::new(bare));
    line.nodes[0].register_ee(Box::new(Sink::default()));
    line.nodes[2].register_ee(Box::new(Sink::default()));
    line.advance(Duration::from_secs(5));
    let p = capsule_packet(gh, addr(0), addr(2), 16, 1, &[0; 32]).unwrap();
    let now = line.now;
    line.nodes[0].inject(now, p).unwrap();
    line.advance(Duration::from_millis(10));
    let runs: Vec<_> = line.nodes[1]
        .ee_mut(TYPE_CAPSULE)
        .and_then(|e| e.as_any_mut().downcast_mut::<CapsuleEe>())
        .unwrap()
        .drain_runs()
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let per_run = runs[0].fuel_used;
    assert!(per_run > 2_000, "{per_run}");

    // Guarded, with a 30 µs limit (30,000 fuel) below the EE's own 100,000.
    let looping = infinite_loop();
    let lh = anode_capsule::code_hash(&looping);
    let mut line = Line::new(3);
    line.nodes[0].register_ee(Box::new(Sink::default()));
    line.nodes[1].register_ee(Box::new(guard_with(
        &[good.clone(), looping],
        200_000_000,
        30_000,
    )));
    line.nodes[2].register_ee(Box::new(Sink::default()));
    line.advance(Duration::from_secs(5));
    for seq in 0..10 {
        let now = line.now;
        let p = capsule_packet(gh, addr(0), addr(2), 16, seq, &[0; 32]).unwrap();
        line.nodes[0].inject(now, p).unwrap();
        let p = capsule_packet(lh, addr(0), addr(2), 16, 100 + seq, &[0; 32]).unwrap();
        line.nodes[0].inject(now, p).unwrap();
        line.advance(Duration::from_millis(10));
    }
    let g = line.nodes[1]
        .ee_mut(TYPE_CAPSULE)
        .and_then(|e| e.as_any_mut().downcast_mut::<DomainGuard<MeteredCapsule>>())
        .unwrap();
    assert_eq!(g.inner().inner().fuel(), 30_000);
    let cpu = |g: &DomainGuard<MeteredCapsule>, h| {
        let d = g.domain_of(&MeteredCapsule::principal_of_code(&h));
        d.and_then(|d| g.nodeos().counters(d).map(|c| (c.cpu_ns, c.packets)))
    };
    let (benign_ns, n) = cpu(g, gh).unwrap();
    assert_eq!(n, 10);
    assert_eq!(benign_ns, 10 * (per_run + 500), "per run {per_run}");
    // The loop ran out of its 30,000 fuel 8 times and was terminated; each run charged
    // exactly the limit.
    let rec = g
        .nodeos()
        .recent_terminations()
        .find(|r| r.principal == MeteredCapsule::principal_of_code(&lh))
        .cloned()
        .expect("loop terminated");
    assert_eq!(rec.counters.cpu_ns, 8 * (30_000 + 500));
    assert_eq!(rec.counters.cpu_exhausted, 8);
}

/// The EE's CPU budget holds when its capsules run on workers: the batch's fuel comes out of
/// the budget at the batch's timeout, so a protocol offered far more than the budget gets
/// what the budget allows, with one thread or two (the guard's budget here is the same for
/// both; `anode node` gives a capsule EE with N workers N times `cpu_percent`).
#[test]
fn the_cpu_budget_holds_with_workers() {
    let good = benign();
    let gh = anode_capsule::code_hash(&good);
    let mut delivered = Vec::new();
    for workers in [1, 2] {
        let mut line = Line::new(3);
        line.nodes[0].register_ee(Box::new(Sink::default()));
        // 5 ms of CPU a second for the EE (its protocol's 256 KB/s would allow ~900).
        let g = guard_workers(std::slice::from_ref(&good), 5_000_000, FUEL, workers);
        line.nodes[1].register_ee(Box::new(g));
        line.nodes[2].register_ee(Box::new(Sink::default()));
        line.advance(Duration::from_secs(5));
        // 50,000 capsules a second for half a second: about 10.5 µs each is charged.
        for seq in 0..25_000u64 {
            let now = line.now;
            let p = capsule_packet(gh, addr(0), addr(2), 16, seq, &[0; 32]).unwrap();
            let _ = line.nodes[0].inject(now, p);
            line.advance(Duration::from_micros(20));
        }
        line.advance(Duration::from_millis(100));
        let n = line.nodes[2]
            .ee_mut(TYPE_CAPSULE)
            .and_then(|e| e.as_any_mut().downcast_mut::<Sink>())
            .and_then(|s| s.by_proto.get(&0).copied())
            .unwrap_or(0);
        println!("cpu budget: {workers} workers: {n} of 25000 capsules run and delivered");
        delivered.push(n);
    }
    // 0.6 s at 5 ms/s, 10.5 µs a capsule: about 290 (303 measured). Before the batch's
    // fuel came out of the budget, two workers ran 915, as many as the bandwidth let out.
    for n in &delivered {
        assert!((250..=400).contains(n), "{delivered:?}");
    }
}
