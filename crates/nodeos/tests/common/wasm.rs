//! The hostile WebAssembly protocols (and a benign one) of the capsule isolation tests, and
//! the guarded capsule EE they run under (feature `capsule`).

use anode_capsule::CapsuleConfig;
use anode_nodeos::capsule::MeteredCapsule;
use anode_nodeos::guard::{DomainGuard, GuardConfig};
use anode_nodeos::{CpuMeter, NodeOs, Policy};

pub const NODE_MEMORY: u64 = 64 << 20;
pub const FUEL: u64 = 100_000;

const HEAD: &str = r#"(memory (export "memory") 1) (func (export "anode_abi_v1"))"#;

/// Forwards each capsule after 2,000 loop iterations of work (about 10,000 fuel).
pub fn benign() -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module {HEAD} (func (export "accept") (param i32 i32) (result i32)
             (local $i i32)
             (loop $l
               (local.set $i (i32.add (local.get $i) (i32.const 1)))
               (br_if $l (i32.lt_u (local.get $i) (i32.const 2000))))
             (i32.const 1)))"#
    ))
    .unwrap()
}

pub fn infinite_loop() -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module {HEAD} (func (export "accept") (param i32 i32) (result i32)
             (loop $l (br $l)) (i32.const 1)))"#
    ))
    .unwrap()
}

pub fn memory_bomb() -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module {HEAD} (func (export "accept") (param i32 i32) (result i32)
             (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
             (i32.const 1)))"#
    ))
    .unwrap()
}

/// Copies the capsule to every neighbor, 8 times: copies that come back are evaluated again.
pub fn storm() -> Vec<u8> {
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
pub fn flood() -> Vec<u8> {
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

/// A guarded capsule EE with `code` installed; the EE gets `cpu_ns_per_sec` of CPU.
pub fn guard(code: &[Vec<u8>], cpu_ns_per_sec: u64) -> DomainGuard<MeteredCapsule> {
    guard_with(code, cpu_ns_per_sec, FUEL)
}

/// [`guard`] with a run-time limit of `slice_ns` (the EE is built with [`FUEL`] per run; the
/// guard sets its own limit before each call).
pub fn guard_with(
    code: &[Vec<u8>],
    cpu_ns_per_sec: u64,
    slice_ns: u64,
) -> DomainGuard<MeteredCapsule> {
    guard_workers(code, cpu_ns_per_sec, slice_ns, 1)
}

/// [`guard_with`] whose EE runs capsules on `workers` threads (`CapsuleConfig::workers`).
pub fn guard_workers(
    code: &[Vec<u8>],
    cpu_ns_per_sec: u64,
    slice_ns: u64,
    workers: usize,
) -> DomainGuard<MeteredCapsule> {
    let cfg = super::nodeos_config(NODE_MEMORY, false);
    let mut ee = MeteredCapsule::new(
        CapsuleConfig {
            fuel: FUEL,
            workers,
            ..CapsuleConfig::default()
        },
        None,
    )
    .unwrap();
    for c in code {
        ee.inner_mut().install(c).unwrap();
    }
    let gc = GuardConfig {
        ee_principal: "capsule-ee".into(),
        // Every protocol: 4 MiB (its compiled code fits), 64 KiB of soft state.
        protocol_policy: Policy {
            memory_bytes: 4 << 20,
            soft_state_bytes: 64 << 10,
            code_bytes: 4 << 20,
            // 256 KB/s out per protocol: the benign flow sends about 130 KB/s.
            channel_bandwidth: 256_000,
            ..Policy::default()
        },
        cpu_ns_per_sec,
        max_burst_ns: 2_000_000,
        // At 1 ns per fuel unit: FUEL is a 100 µs run-time limit.
        max_slice_ns: slice_ns,
        quantum_ns: 20_000,
        max_queue: 128,
        node_ns_per_packet: 500,
        max_exhaustions: 8,
        meter: CpuMeter::new(1000),
        max_banned: 1024,
        terminate: true,
    };
    DomainGuard::new(ee, NodeOs::new(cfg), gc).unwrap()
}
