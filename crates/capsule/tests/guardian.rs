//! Dependencies between code objects (PAN's guardians): a code object imports functions from
//! `code:<hash>`; the node demand-loads the dependency like any code, instantiates it first in
//! the same store, and while its functions run they use its own memory and soft state.

mod common;

use std::time::Duration;

use anode_capsule::{CapsuleError, capsule_packet, code_hash};
use common::*;

const PORT: u16 = 7;

/// A guardian: `incr()` bumps a counter kept in its own soft state and returns it.
fn guardian() -> Vec<u8> {
    wat::parse_str(
        r#"(module
          (import "anode" "state_get" (func $get (param i32 i32 i32 i32) (result i32)))
          (import "anode" "state_put" (func $put (param i32 i32 i32 i32 i32) (result i32)))
          (memory (export "memory") 1)
          (data (i32.const 0) "n")
          (func (export "anode_abi_v1"))
          (func (export "accept") (param i32 i32) (result i32) (i32.const 2))
          (func (export "incr") (result i32)
            (i32.store (i32.const 8) (i32.const 0))
            (drop (call $get (i32.const 0) (i32.const 1) (i32.const 8) (i32.const 4)))
            (i32.store (i32.const 8) (i32.add (i32.load (i32.const 8)) (i32.const 1)))
            (drop (call $put (i32.const 0) (i32.const 1) (i32.const 8) (i32.const 4) (i32.const 60000)))
            (i32.load (i32.const 8))))"#,
    )
    .unwrap()
}

/// A capsule code object that, at its destination, asks the guardian for the next number,
/// writes it into the payload and delivers it. `k` makes distinct code objects.
fn user(g: &[u8; 32], k: u32) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
          (import "anode" "cap_write" (func $w (param i32 i32 i32) (result i32)))
          (import "anode" "deliver" (func $deliver (param i32) (result i32)))
          (import "code:{g}" "incr" (func $incr (result i32)))
          (memory (export "memory") 1)
          (data (i32.const 0) "zzzz")
          (func (export "anode_abi_v1"))
          (func (export "which") (result i32) (i32.const {k}))
          (func (export "accept") (param $len i32) (param $why i32) (result i32)
            (if (i32.ne (local.get $why) (i32.const 0)) (then (return (i32.const 1))))
            (i32.store (i32.const 0) (call $incr))
            (drop (call $w (i32.const 0) (i32.const 0) (i32.const 4)))
            (drop (call $deliver (i32.const {PORT})))
            (i32.const 0)))"#,
        g = hex::encode(g)
    ))
    .unwrap()
}

#[test]
fn dependencies_are_demand_loaded_and_guard_their_shared_state() {
    let rt = runtime();
    let mut net = Net::line(2, &rt);
    let g = net.ee(0).install(&guardian()).unwrap();
    let a = net.ee(0).install(&user(&g, 1)).unwrap();
    let b = net.ee(0).install(&user(&g, 2)).unwrap();
    assert_ne!(a, b);
    net.ee(1).register_port(PORT);
    let mut seen = Vec::new();
    for (i, code) in [a, b, a, b].into_iter().enumerate() {
        let pkt = capsule_packet(code, addr(0), addr(1), 8, i as u64, &[0; 4]).unwrap();
        let now = net.now;
        net.nodes[0].inject(now, pkt).unwrap();
        let (d, _) = net
            .wait_delivery(1, Duration::from_secs(5))
            .expect("delivered");
        seen.push(u32::from_le_bytes(d.payload()[..4].try_into().unwrap()));
    }
    // One counter, guarded by g, shared by both users.
    assert_eq!(seen, vec![1, 2, 3, 4]);
    let s = net.ee(1).stats().clone();
    assert_eq!(s.loads_completed, 3, "a, then its dependency g, then b");
    assert_eq!(net.ee(1).soft_state().len(&g), 1);
    assert_eq!(net.ee(1).soft_state().len(&a), 0);
    assert_eq!(net.nodes[1].counters().ee_drop_map().len(), 0);
}

#[test]
fn a_missing_dependency_that_cannot_be_loaded_drops_the_capsule_counted() {
    let rt = runtime();
    let mut net = Net::line(2, &rt);
    // Node 0 holds the user but not its dependency.
    let g = code_hash(b"a guardian nobody has");
    let a = net.ee(0).install(&user(&g, 1)).unwrap();
    let pkt = capsule_packet(a, addr(0), addr(1), 8, 1, &[0; 4]).unwrap();
    let now = net.now;
    // At node 0 itself the dependency is missing and a local capsule has no source to ask.
    assert!(net.nodes[0].inject(now, pkt.clone()).is_err());
    assert_eq!(net.drops(0, "no_code_source"), 1);
    // Arriving at node 1, the user loads, the dependency is asked for and refused.
    let link = net.nodes[1].link_by_peer(&addr(0)).unwrap();
    net.nodes[1].handle_packet(now, link, pkt);
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.ee(1).stats().loads_completed, 1);
    assert_eq!(net.drops(1, "code_unavailable"), 1);
    assert_eq!(net.ee(1).parked(), 0);
    // Importing a non-function or from a malformed `code:` module is refused.
    let bad = wat::parse_str(
        r#"(module (import "code:xyz" "f" (func)) (memory (export "memory") 1)
           (func (export "anode_abi_v1")) (func (export "accept") (param i32 i32) (result i32) (i32.const 0)))"#,
    )
    .unwrap();
    assert!(matches!(
        net.ee(0).install(&bad),
        Err(CapsuleError::Abi { .. })
    ));
}
