//! Isolation under attack, in virtual time: hostile protocols (infinite loop, memory bomb,
//! capsule storm, soft-state flood) each beside a benign flow, through two guarded routers.
//!
//! Topology: 0 (source) - 1 (router, guarded) - 2 (router, guarded) - 3 (sink). Every capsule
//! is evaluated at every hop. The benign flow is 2,000 capsules/s of 20 µs each; the hostile
//! one 5,000 capsules/s. Each router gives the EE 200 ms of CPU per second. Checks: the
//! hostile domain is throttled or terminated with a logged reason, the benign flow keeps
//! ≥ 90% of the throughput it has alone, nothing panics, and each router's NodeOS memory
//! stays within its configured bound. Run with `--nocapture` for the figures.

mod common;

use std::time::Duration;

use anode_core::wire::anep::TYPE_CAPSULE;
use anode_nodeos::guard::{DomainGuard, GuardConfig};
use anode_nodeos::{CpuMeter, NodeOs, Policy};
use common::*;

fn guard() -> DomainGuard<BurnEe> {
    guard_with(8, true)
}

fn guard_with(max_exhaustions: u32, terminate: bool) -> DomainGuard<BurnEe> {
    // The soft-state flood's principal has a configured policy with a small soft-state limit.
    let cfg = nodeos_config(BURN_MEMORY, true);
    let gc = GuardConfig {
        ee_principal: "capsule-ee".into(),
        // Protocols by default: 256 KiB, soft state bounded by the pool only.
        protocol_policy: Policy {
            memory_bytes: 256 << 10,
            soft_state_bytes: 1 << 20,
            ..Policy::default()
        },
        cpu_ns_per_sec: 200_000_000,
        max_burst_ns: 2_000_000,
        max_slice_ns: 1_000_000,
        quantum_ns: 50_000,
        max_queue: 128,
        node_ns_per_packet: 500,
        max_exhaustions,
        meter: CpuMeter::new(1000),
        max_banned: 1024,
        terminate,
    };
    DomainGuard::new(BurnEe::default(), NodeOs::new(cfg), gc).unwrap()
}

struct Outcome {
    benign: u64,
    hostile_at_sink: u64,
    logs: Vec<String>,
    peaks: Vec<u64>,
    hostile_cpu_ns: Vec<u64>,
    drops: Vec<std::collections::BTreeMap<String, u64>>,
}

fn g(line: &mut Line, i: usize) -> &mut DomainGuard<BurnEe> {
    line.nodes[i]
        .ee_mut(TYPE_CAPSULE)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<DomainGuard<BurnEe>>()
        .unwrap()
}

fn run(hostile: Option<u8>) -> Outcome {
    run_with(hostile, 8)
}

fn run_with(hostile: Option<u8>, max_exhaustions: u32) -> Outcome {
    let mut line = Line::new(4);
    line.nodes[0].register_ee(Box::new(Sink::default()));
    line.nodes[1].register_ee(Box::new(guard_with(max_exhaustions, true)));
    line.nodes[2].register_ee(Box::new(guard_with(max_exhaustions, true)));
    line.nodes[3].register_ee(Box::new(Sink::default()));
    line.advance(Duration::from_secs(5)); // routing converges
    assert!(line.nodes[0].lookup(&addr(3)).is_some());
    let step = Duration::from_micros(100);
    let mut seq = 0u64;
    // 1 s of traffic: every 100 µs, 0.2 benign capsules and 0.5 hostile ones on average.
    for k in 0..10_000u64 {
        if k % 5 == 0 {
            seq += 1;
            let now = line.now;
            line.nodes[0]
                .inject(now, capsule(0, 3, BENIGN, 0, seq))
                .unwrap();
        }
        if let Some(h) = hostile
            && k % 2 == 0
        {
            seq += 1;
            let now = line.now;
            let _ = line.nodes[0].inject(now, capsule(0, 3, h, h, seq));
        }
        line.advance(step);
    }
    line.advance(Duration::from_millis(200)); // drain
    let sink = line.nodes[3]
        .ee_mut(TYPE_CAPSULE)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<Sink>()
        .unwrap();
    let benign = sink.got.get(&BENIGN).copied().unwrap_or(0);
    let hostile_at_sink = hostile.map_or(0, |h| sink.got.get(&h).copied().unwrap_or(0));
    let mut peaks = vec![];
    let mut hostile_cpu_ns = vec![];
    let mut drops = vec![];
    for i in [1, 2] {
        let gd = g(&mut line, i);
        let os = gd.nodeos();
        peaks.push(os.pools().node_peak());
        assert!(os.pools().node_peak() <= BURN_MEMORY, "memory bound broken");
        let name = hostile.map(|h| format!("proto-{h}"));
        let rec = os
            .recent_terminations()
            .find(|r| Some(&r.principal) == name.as_ref())
            .map(|r| r.counters.cpu_ns);
        let live = name
            .as_ref()
            .and_then(|n| gd.domain_of(n))
            .and_then(|d| os.counters(d).map(|c| c.cpu_ns));
        hostile_cpu_ns.push(rec.or(live).unwrap_or(0));
        drop(os);
        drops.push(line.nodes[i].counters().ee_drop_map());
        // Terminated principals' state is gone from the EE.
        let gd = g(&mut line, i);
        for t in gd.inner_mut().terminated.clone() {
            assert!(!gd.inner_mut().state.contains_key(&t));
        }
    }
    Outcome {
        benign,
        hostile_at_sink,
        logs: line.logs.clone(),
        peaks,
        hostile_cpu_ns,
        drops,
    }
}

#[test]
fn hostile_protocols_beside_a_benign_flow() {
    let alone = run(None);
    println!(
        "benign alone: {} capsules/s delivered (2000 sent)",
        alone.benign
    );
    assert!(alone.benign >= 1990, "benign alone {}", alone.benign);
    for (h, name) in [
        (LOOP, "infinite loop"),
        (BOMB, "memory bomb"),
        (STORM, "capsule storm"),
        (FLOOD, "soft-state flood"),
    ] {
        let o = run(Some(h));
        let ratio = o.benign as f64 / alone.benign as f64;
        let reason = o
            .logs
            .iter()
            .find(|l| l.contains(&format!("(proto-{h}) terminated")))
            .cloned();
        println!(
            "{name:16}: benign {} ({:.1}% of alone); hostile at sink {}; hostile CPU at routers {:?} ns; \
             NodeOS memory peak {:?} B (bound {BURN_MEMORY}); drops {:?}; {}",
            o.benign,
            ratio * 100.0,
            o.hostile_at_sink,
            o.hostile_cpu_ns,
            o.peaks,
            o.drops,
            reason
                .clone()
                .unwrap_or_else(|| "not terminated (throttled)".into())
        );
        assert!(
            ratio >= 0.9,
            "{name}: benign kept only {:.1}%",
            ratio * 100.0
        );
        match h {
            LOOP => {
                let r = reason.expect("loop terminated");
                assert!(r.contains("cpu over limit"), "{r}");
            }
            BOMB => {
                let r = reason.expect("bomb terminated");
                assert!(
                    r.contains("memory over limit") || r.contains("node total"),
                    "{r}"
                );
            }
            FLOOD => {
                let r = reason.expect("flood terminated");
                assert!(r.contains("policy allows 65536 bytes of soft_state"), "{r}");
            }
            STORM => {
                // Throttled: its queue overflows and it gets no more than its share.
                let dropped: u64 = o.drops[1]
                    .iter()
                    .filter(|(k, _)| k.ends_with("queue_full") || k.ends_with("bandwidth"))
                    .map(|(_, v)| v)
                    .sum();
                assert!(dropped > 0, "storm not throttled: {:?}", o.drops);
                // At router 2 it can use at most the CPU capacity of the run (1.2 s at 200 ms/s).
                assert!(o.hostile_cpu_ns[1] <= 250_000_000, "{:?}", o.hostile_cpu_ns);
            }
            _ => {}
        }
    }
}

/// The memory-pressure callback: an EE that frees the protocol's state when told keeps the
/// domain alive; the same load on an EE that ignores it gets the domain terminated.
#[test]
fn memory_pressure_remedied_in_time_keeps_the_domain() {
    for polite in [true, false] {
        let mut line = Line::new(3);
        line.nodes[0].register_ee(Box::new(Sink::default()));
        let mut gd = guard();
        gd.inner_mut().polite = polite;
        line.nodes[1].register_ee(Box::new(gd));
        line.nodes[2].register_ee(Box::new(Sink::default()));
        line.advance(Duration::from_secs(5));
        for seq in 0..20 {
            let now = line.now;
            let _ = line.nodes[0].inject(now, capsule(0, 2, BOMB, 2, seq));
            line.advance(Duration::from_millis(5));
        }
        line.advance(Duration::from_millis(100));
        let g1 = g(&mut line, 1);
        let pressure = g1.inner_mut().pressure.len();
        assert!(pressure > 0);
        let alive = g1.domain_of("proto-2").is_some();
        let peak = g1.nodeos().pools().node_peak();
        println!(
            "polite={polite}: pressure callbacks {pressure}, domain alive {alive}, NodeOS memory peak {peak} B"
        );
        assert_eq!(alive, polite);
        assert_eq!(g1.is_banned("proto-2"), !polite);
    }
}

/// With termination off, deficit round robin alone confines an infinite loop to its share:
/// the benign flow keeps its throughput while the loop burns the rest of the EE's CPU.
#[test]
fn drr_alone_confines_an_infinite_loop() {
    let alone = run(None);
    let o = run_with(Some(LOOP), u32::MAX);
    let ratio = o.benign as f64 / alone.benign as f64;
    println!(
        "infinite loop, never terminated: benign {} ({:.1}% of alone); loop CPU at router 1 {} ns \
         (EE capacity 200 ms/s over 1.2 s); drops {:?}",
        o.benign,
        ratio * 100.0,
        o.hostile_cpu_ns[0],
        o.drops[0]
    );
    assert!(ratio >= 0.9, "benign kept {:.1}%", ratio * 100.0);
    assert!(o.logs.iter().all(|l| !l.contains("terminated")));
    // The loop was throttled: it got at most the EE's CPU (1.2 s at 200 ms/s plus the burst),
    // and its queue overflowed.
    assert!(
        o.hostile_cpu_ns[0] <= 245_000_000,
        "{}",
        o.hostile_cpu_ns[0]
    );
    assert!(
        o.hostile_cpu_ns[0] >= 100_000_000,
        "{}",
        o.hostile_cpu_ns[0]
    );
    assert!(
        o.drops[0]
            .get("burn+nodeos/queue_full")
            .copied()
            .unwrap_or(0)
            > 0
    );
}

/// With the guard's termination off, a soft-state flood over its policy is not terminated:
/// each refused charge asks the EE to free the protocol's soft state, so the domain stays
/// within its policy and alive, and the benign flow is unaffected.
#[test]
fn termination_off_relieves_a_flood_instead() {
    let mut line = Line::new(3);
    line.nodes[0].register_ee(Box::new(Sink::default()));
    let mut gd = guard_with(u32::MAX, false);
    gd.inner_mut().polite = true;
    line.nodes[1].register_ee(Box::new(gd));
    line.nodes[2].register_ee(Box::new(Sink::default()));
    line.advance(Duration::from_secs(5));
    for seq in 0..200 {
        let now = line.now;
        let _ = line.nodes[0].inject(now, capsule(0, 2, FLOOD, FLOOD, seq));
        line.advance(Duration::from_millis(1));
    }
    line.advance(Duration::from_millis(100));
    assert!(line.logs.iter().all(|l| !l.contains("terminated")));
    let g1 = g(&mut line, 1);
    let pressure = g1.inner_mut().pressure.len();
    let d = g1.domain_of("proto-4").expect("flood domain alive");
    let c = g1.nodeos().counters(d).unwrap().clone();
    println!(
        "termination off: flood alive, {pressure} pressure callbacks, {} B held, drops {:?}",
        c.memory_bytes, c.drops
    );
    // 200 capsules x 4 KiB = 800 KiB offered against a 64 KiB soft-state policy.
    assert!(pressure >= 10, "{pressure}");
    assert!(c.memory_bytes <= 64 << 10, "{}", c.memory_bytes);
    assert!(
        c.drops
            .get(&anode_core::DropReason::MemoryRefused)
            .copied()
            .unwrap_or(0)
            >= 10
    );
    assert!(!g1.is_banned("proto-4"));
}
