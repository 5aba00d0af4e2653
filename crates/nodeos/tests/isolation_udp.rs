//! Isolation over real UDP: three nodes on 127.0.0.1, each in an `anode_io` driver (source,
//! guarded router, sink). A benign flow (1,000 capsules/s for 1 s) runs alone, then beside each
//! hostile protocol (500 capsules/s): the router's guard must terminate or throttle the hostile
//! domain with a logged reason while the benign flow keeps ≥ 90% of its alone throughput and
//! the NodeOS memory stays within its bound. Bounded in time (each run ≈ 2 s). Run with
//! `--nocapture` for the figures.

mod common;

use std::time::{Duration, Instant};

use anode_core::Event;
use anode_core::wire::NodeAddr;
use anode_core::wire::anep::TYPE_CAPSULE;
use anode_io::DriverConfig;
use anode_nodeos::guard::{DomainGuard, GuardConfig};
use anode_nodeos::{CpuMeter, NodeOs, Policy};
use common::udp::*;
use common::*;

fn guard() -> DomainGuard<BurnEe> {
    // The soft-state flood's principal has a configured policy with a small soft-state limit.
    let cfg = nodeos_config(BURN_MEMORY, true);
    let gc = GuardConfig {
        ee_principal: "capsule-ee".into(),
        protocol_policy: Policy {
            memory_bytes: 256 << 10,
            soft_state_bytes: 1 << 20,
            ..Policy::default()
        },
        cpu_ns_per_sec: 100_000_000,
        max_burst_ns: 5_000_000,
        max_slice_ns: 1_000_000,
        quantum_ns: 50_000,
        max_queue: 256,
        node_ns_per_packet: 500,
        max_exhaustions: 8,
        meter: CpuMeter::new(1000),
        max_banned: 1024,
        terminate: true,
    };
    DomainGuard::new(BurnEe::default(), NodeOs::new(cfg), gc).unwrap()
}

struct Outcome {
    benign: u64,
    reason: Option<String>,
    peak: u64,
}

fn run(hostile: Option<u8>) -> Outcome {
    let [a, b, c] = [free_addr(), free_addr(), free_addr()];
    let mut na = node(a, &[b]);
    na.register_ee(Box::new(Sink::default()));
    let mut nb = node(b, &[a, c]);
    nb.register_ee(Box::new(guard()));
    let mut nc = node(c, &[b]);
    nc.register_ee(Box::new(Sink::default()));
    let ha = anode_io::spawn(na, DriverConfig::new(a)).unwrap();
    let hb = anode_io::spawn(nb, DriverConfig::new(b)).unwrap();
    let hc = anode_io::spawn(nc, DriverConfig::new(c)).unwrap();
    let events = hb.take_events().unwrap();
    assert!(wait_route(&ha, c), "no route a -> c");
    let (sa, sc) = (NodeAddr::from(a), NodeAddr::from(c));
    let mk = move |kind: u8, proto: u8, seq: u64| {
        let mut p = capsule(0, 2, kind, proto, seq);
        // Re-address the capsule from the harness's addresses to the UDP nodes'.
        use anode_core::wire::transit::Transit;
        let mut t = Transit::new_checked(&mut p[8..]).unwrap();
        t.set_dst(sc);
        t.set_prev_hop(sa);
        p[8 + 16..8 + 34].copy_from_slice(&sa.to_bytes());
        p
    };
    // 1 s: every 10 ms, 10 benign and (if any) 5 hostile capsules.
    let start = Instant::now();
    let mut seq = 0u64;
    for tick in 0..100u32 {
        let mut batch = Vec::new();
        for _ in 0..10 {
            seq += 1;
            batch.push(mk(BENIGN, 0, seq));
        }
        if let Some(h) = hostile {
            for _ in 0..5 {
                seq += 1;
                batch.push(mk(h, h, seq));
            }
        }
        inject_tick(&ha, batch, start, tick);
    }
    std::thread::sleep(Duration::from_millis(300));
    let benign = hc
        .call(|n, _| {
            n.ee_mut(TYPE_CAPSULE)
                .and_then(|e| e.as_any_mut().downcast_mut::<Sink>())
                .and_then(|s| s.got.get(&BENIGN).copied())
                .unwrap_or(0)
        })
        .unwrap();
    let peak = hb
        .call(|n, _| {
            n.ee_mut(TYPE_CAPSULE)
                .and_then(|e| e.as_any_mut().downcast_mut::<DomainGuard<BurnEe>>())
                .map(|g| g.nodeos().pools().node_peak())
                .unwrap_or(u64::MAX)
        })
        .unwrap();
    let mut reason = None;
    while let Ok(e) = events.try_recv() {
        if let Event::Log { ee, message } = e
            && ee == "nodeos"
        {
            reason = Some(message);
        }
    }
    drop((ha.shutdown(), hb.shutdown(), hc.shutdown()));
    Outcome {
        benign,
        reason,
        peak,
    }
}

#[test]
fn hostile_protocols_beside_a_benign_flow_over_udp() {
    let alone = run(None);
    println!("udp benign alone: {} of 1000 delivered", alone.benign);
    assert!(alone.benign >= 900, "benign alone {}", alone.benign);
    for (h, name) in [
        (LOOP, "infinite loop"),
        (BOMB, "memory bomb"),
        (STORM, "capsule storm"),
        (FLOOD, "soft-state flood"),
    ] {
        let o = run(Some(h));
        let ratio = o.benign as f64 / alone.benign as f64;
        println!(
            "udp {name:16}: benign {} ({:.1}% of alone); NodeOS memory peak {} B (bound {BURN_MEMORY}); {}",
            o.benign,
            ratio * 100.0,
            o.peak,
            o.reason.clone().unwrap_or_else(|| "not terminated".into())
        );
        assert!(ratio >= 0.9, "{name}: benign kept {:.1}%", ratio * 100.0);
        assert!(o.peak <= BURN_MEMORY);
        if h != STORM {
            let r = o
                .reason
                .expect("hostile domain terminated with a logged reason");
            assert!(r.contains(&format!("(proto-{h}) terminated")), "{r}");
        }
    }
}
