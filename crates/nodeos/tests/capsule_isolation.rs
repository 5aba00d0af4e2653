//! Isolation with the real capsule EE (wasmtime) under the NodeOS (feature `capsule`):
//! hostile WebAssembly protocols (infinite loop, memory bomb, capsule storm, soft-state flood)
//! each beside a benign forwarding protocol, in virtual time, through one guarded router.
//!
//! Topology: 0 (source) - 1 (router: `DomainGuard<MeteredCapsule>`) - 2 (sink). Each
//! protocol is its own domain (`capsule/<code hash>`). Benign: 1,000 capsules/s; hostile:
//! 2,500/s; the router's EE gets 200 ms of CPU per second. Run with `--nocapture`.

mod common;

use std::time::Duration;

use anode_capsule::{CapsuleConfig, CapsuleEe, capsule_packet};
use anode_core::wire::anep::TYPE_CAPSULE;
use anode_nodeos::capsule::MeteredCapsule;
use anode_nodeos::guard::{DomainGuard, GuardConfig};
use anode_nodeos::{CpuMeter, NodeOs, NodeOsConfig, Policy};
use common::*;

const NODE_MEMORY: u64 = 64 << 20;
const FUEL: u64 = 100_000;

const HEAD: &str = r#"(memory (export "memory") 1) (func (export "anode_abi_v1"))"#;

fn benign() -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module {HEAD} (func (export "accept") (param i32 i32) (result i32) (i32.const 1)))"#
    ))
    .unwrap()
}

fn infinite_loop() -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module {HEAD} (func (export "accept") (param i32 i32) (result i32)
             (loop $l (br $l)) (i32.const 1)))"#
    ))
    .unwrap()
}

fn memory_bomb() -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module {HEAD} (func (export "accept") (param i32 i32) (result i32)
             (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
             (i32.const 1)))"#
    ))
    .unwrap()
}

/// Copies the capsule to every neighbor, 8 times: copies that come back are evaluated again.
fn storm() -> Vec<u8> {
    wat::parse_str(
        r#"(module
             (import "anode" "neighbors" (func $nb (param i32 i32) (result i32)))
             (import "anode" "copy_via" (func $copy (param i32) (result i32)))
             (memory (export "memory") 1) (func (export "anode_abi_v1"))
             (func (export "accept") (param i32 i32) (result i32)
               (local $i i32) (local $n i32)
               (local.set $n (call $nb (i32.const 0) (i32.const 4)))
               (loop $l
                 (drop (call $copy (i32.mul (i32.rem_u (local.get $i) (local.get $n)) (i32.const 18))))
                 (local.set $i (i32.add (local.get $i) (i32.const 1)))
                 (br_if $l (i32.lt_u (local.get $i) (i32.const 8))))
               (i32.const 1)))"#,
    )
    .unwrap()
}

/// Puts four fresh 1 KiB entries per capsule, for a minute each.
fn flood() -> Vec<u8> {
    wat::parse_str(
        r#"(module
             (import "anode" "state_put" (func $put (param i32 i32 i32 i32 i32) (result i32)))
             (memory (export "memory") 1) (func (export "anode_abi_v1"))
             (global $n (mut i32) (i32.const 0))
             (func (export "accept") (param i32 i32) (result i32)
               (local $i i32)
               (loop $l
                 (global.set $n (i32.add (global.get $n) (i32.const 1)))
                 (i32.store (i32.const 0) (global.get $n))
                 (drop (call $put (i32.const 0) (i32.const 4) (i32.const 16) (i32.const 1024) (i32.const 60000)))
                 (local.set $i (i32.add (local.get $i) (i32.const 1)))
                 (br_if $l (i32.lt_u (local.get $i) (i32.const 4))))
               (i32.const 1)))"#,
    )
    .unwrap()
}

fn guard(code: &[Vec<u8>]) -> DomainGuard<MeteredCapsule> {
    let mut cfg = NodeOsConfig {
        node_memory_bytes: NODE_MEMORY,
        memory_grace: Duration::from_millis(20),
        ..Default::default()
    };
    cfg.policies.insert(
        "capsule-ee",
        Policy {
            cpu_share: 16,
            memory_bytes: NODE_MEMORY,
            soft_state_bytes: NODE_MEMORY,
            code_bytes: NODE_MEMORY,
            max_children: 64,
            max_channels: 64,
            channels: vec!["*".into()],
            ..Policy::default()
        },
    );
    let mut ee = CapsuleEe::new(CapsuleConfig {
        fuel: FUEL,
        ..CapsuleConfig::default()
    })
    .unwrap();
    for c in code {
        ee.install(c).unwrap();
    }
    let gc = GuardConfig {
        ee_principal: "capsule-ee".into(),
        // Every protocol: 4 MiB (its compiled code fits), 64 KiB of soft state.
        protocol_policy: Policy {
            memory_bytes: 4 << 20,
            soft_state_bytes: 64 << 10,
            code_bytes: 4 << 20,
            ..Policy::default()
        },
        cpu_ns_per_sec: 200_000_000,
        max_burst_ns: 2_000_000,
        // 100,000 fuel at 1 ns per unit: a 100 µs run-time limit.
        max_slice_ns: FUEL,
        quantum_ns: 20_000,
        max_queue: 128,
        node_ns_per_packet: 500,
        max_exhaustions: 8,
        meter: CpuMeter::new(1000),
        max_banned: 1024,
        terminate: true,
    };
    // A completed run is charged 20 µs (20,000 units): the benign flow's cost.
    DomainGuard::new(MeteredCapsule::new(ee, FUEL, 20_000), NodeOs::new(cfg), gc).unwrap()
}

struct Outcome {
    benign: u64,
    reason: Option<String>,
    peak: u64,
    drops: std::collections::BTreeMap<String, u64>,
}

fn run(hostile: Option<(u8, Vec<u8>)>) -> Outcome {
    let good = benign();
    let mut code = vec![good.clone()];
    if let Some((_, h)) = &hostile {
        code.push(h.clone());
    }
    let mut line = Line::new(3);
    line.nodes[0].register_ee(Box::new(Sink::default()));
    line.nodes[1].register_ee(Box::new(guard(&code)));
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
    let drops = line.nodes[1].counters().ee_drops.clone();
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
    let alone = run(None);
    println!("capsule benign alone: {} of 1000 delivered", alone.benign);
    assert!(alone.benign >= 990, "benign alone {}", alone.benign);
    for (proto, name, wasm) in [
        (LOOP, "infinite loop", infinite_loop()),
        (BOMB, "memory bomb", memory_bomb()),
        (STORM, "capsule storm", storm()),
        (FLOOD, "soft-state flood", flood()),
    ] {
        let o = run(Some((proto, wasm)));
        let ratio = o.benign as f64 / alone.benign as f64;
        println!(
            "capsule {name:16}: benign {} ({:.1}% of alone); NodeOS memory peak {} B (bound {NODE_MEMORY}); drops {:?}; {}",
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
