//! Tiering: new code runs on Winch code at once, is recompiled by Cranelift on the runtime's
//! worker thread and swapped in at a later `handle_packet`/`handle_timeout`, keeping its soft
//! state; the disk cache then holds the optimized artifact. Winch code keeps every bound.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anode_capsule::{
    CapsuleConfig, CodeHash, CodeTier, RunOutcome, Runtime, RuntimeConfig, Tiering, capsule_packet,
    protocols,
};
use common::*;

const PORT: u16 = 7;

fn rt(tiering: Tiering) -> Arc<Runtime> {
    Runtime::new(RuntimeConfig {
        max_instances: 32,
        tiering,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

fn tier_of(net: &mut Net, i: usize, h: &CodeHash) -> Option<CodeTier> {
    net.ee(i)
        .code_list()
        .into_iter()
        .find(|c| c.hash == *h)
        .and_then(|c| c.tier)
}

/// Runs the network (virtual time, while really waiting) until node `i` has swapped in
/// optimized code for every pending tier-up; bounded by 60 s of real time.
fn wait_tier_up(net: &mut Net, i: usize) {
    let end = Instant::now() + Duration::from_secs(60);
    while net.ee(i).tier_ups_pending() > 0 {
        assert!(Instant::now() < end, "tier-up did not finish in 60 s");
        std::thread::sleep(Duration::from_millis(5));
        net.run_for(Duration::from_millis(5));
    }
}

/// Sends one counter capsule of flow 9 from node 0 to node 1; returns the count node 1 saw.
fn count(net: &mut Net, h: CodeHash) -> u64 {
    let mut p = vec![0u8; 16];
    p[12..14].copy_from_slice(&PORT.to_be_bytes());
    let pkt = capsule_packet(h, addr(0), addr(1), 16, 9, &p).unwrap();
    let now = net.now;
    net.nodes[0].inject(now, pkt).unwrap();
    let (d, _) = net
        .wait_delivery(1, Duration::from_secs(5))
        .expect("delivery");
    u64::from_be_bytes(d.payload()[0..8].try_into().unwrap())
}

#[test]
fn demand_loaded_code_runs_on_winch_then_tiers_up_keeping_its_soft_state() {
    let rt = rt(Tiering::Tiered);
    let mut net = Net::new(2, &[(0, 1)], &rt, |_| CapsuleConfig::default());
    let h = net.ee(0).install(protocols::COUNTER).unwrap();
    net.ee(1).register_port(PORT);
    assert_eq!(tier_of(&mut net, 0, &h), Some(CodeTier::Baseline));
    // Node 1 loads the code from node 0, compiles it with Winch and runs it at once.
    assert_eq!(count(&mut net, h), 1);
    assert_eq!(count(&mut net, h), 2);
    assert_eq!(tier_of(&mut net, 1, &h), Some(CodeTier::Baseline));
    assert_eq!(net.ee(1).stats().tier_ups, 0);
    wait_tier_up(&mut net, 1);
    wait_tier_up(&mut net, 0);
    for i in 0..2 {
        assert_eq!(
            tier_of(&mut net, i, &h),
            Some(CodeTier::Optimized),
            "node {i}"
        );
        assert_eq!(net.ee(i).stats().tier_ups, 1);
        assert_eq!(net.ee(i).stats().tier_up_failures, 0);
    }
    // The optimized code counts on from the soft state the Winch code left.
    assert_eq!(count(&mut net, h), 3);
    assert_eq!(net.ee(1).stats().traps, 0);
}

#[test]
fn the_disk_cache_gets_the_optimized_artifact_for_the_next_start() {
    let rt = rt(Tiering::Tiered);
    let dir: PathBuf =
        std::env::temp_dir().join(format!("anode-capsule-tiering-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = CapsuleConfig {
        cache_dir: Some(dir.clone()),
        ..CapsuleConfig::default()
    };
    let mut net = Net::new(2, &[(0, 1)], &rt, |_| CapsuleConfig::default());
    let h = {
        let mut ee = anode_capsule::CapsuleEe::with_runtime(rt.clone(), cfg.clone()).unwrap();
        let h = ee.install(protocols::PING).unwrap();
        // Only the module bytes until the worker is done.
        assert!(dir.join(format!("{}.wasm", hex::encode(h))).exists());
        let end = Instant::now() + Duration::from_secs(60);
        while !dir.join(format!("{}.meta", hex::encode(h))).exists() {
            assert!(Instant::now() < end, "no artifact after 60 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        h
    };
    // A restarted node: optimized code from disk, nothing compiled, nothing to tier up.
    let mut ee = anode_capsule::CapsuleEe::with_runtime(rt.clone(), cfg).unwrap();
    assert!(ee.has_code(&h));
    assert_eq!((ee.stats().disk_loads, ee.stats().compiled), (1, 0));
    assert_eq!(ee.tier_ups_pending(), 0);
    let info = ee.code_list().into_iter().find(|c| c.hash == h).unwrap();
    assert_eq!(info.tier, Some(CodeTier::Optimized));
    drop(ee);
    net.run_for(Duration::from_millis(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn winch_code_is_held_to_the_same_bounds() {
    let rt = rt(Tiering::Baseline);
    let fuel = 50_000;
    let mut net = Net::new(2, &[(0, 1)], &rt, |_| CapsuleConfig {
        fuel,
        record_runs: true,
        ..CapsuleConfig::default()
    });
    let cases = [
        ("(loop $l (br $l)) (i32.const 1)", RunOutcome::FuelExhausted),
        (
            "(loop $l (drop (memory.grow (i32.const 16))) (br $l)) (i32.const 1)",
            RunOutcome::MemoryLimit,
        ),
        ("(unreachable)", RunOutcome::Trap),
    ];
    for (body, want) in cases {
        let wasm = wat::parse_str(format!(
            r#"(module (memory (export "memory") 1) (func (export "anode_abi_v1"))
                (func (export "accept") (param i32 i32) (result i32) {body}))"#
        ))
        .unwrap();
        let h = net.ee(0).install(&wasm).unwrap();
        assert_eq!(tier_of(&mut net, 0, &h), Some(CodeTier::Baseline));
        let pkt = capsule_packet(h, addr(0), addr(1), 16, 1, b"x").unwrap();
        let now = net.now;
        assert!(net.nodes[0].inject(now, pkt).is_err());
        let r: Vec<_> = net.ee(0).drain_runs().collect();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].outcome, want);
        if want == RunOutcome::FuelExhausted {
            assert_eq!(r[0].fuel_used, fuel);
        }
        net.run_for(Duration::from_millis(5));
        assert_eq!(net.drops(0, want.drop_reason().unwrap().as_str()), 1);
    }
    // Winch code runs real protocols: a ping round trip, demand-loaded at node 1.
    let ping = net.ee(0).install(protocols::PING).unwrap();
    net.ee(0).register_port(PORT);
    let pkt = capsule_packet(ping, addr(0), addr(1), 16, 1, &ping_payload(PORT)).unwrap();
    let now = net.now;
    net.nodes[0].inject(now, pkt).unwrap();
    net.wait_delivery(0, Duration::from_secs(5))
        .expect("ping reply");
    assert_eq!(tier_of(&mut net, 1, &ping), Some(CodeTier::Baseline));
    assert_eq!(net.ee(1).tier_ups_pending(), 0, "Baseline never tiers up");
}
