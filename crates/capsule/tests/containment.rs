//! Containment: code that loops forever, grows memory without bound, traps, or hands the host
//! bad pointers is stopped at its bound, the capsule dropped with a counted reason, and the
//! node keeps forwarding other traffic.

mod common;

use std::time::Duration;

use anode_capsule::{CapsuleError, capsule_packet, protocols};
use common::*;

const PORT: u16 = 7;

/// A module that follows the ABI with `body` as the body of `accept` (returns i32).
fn module(body: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (import "anode" "cap_read" (func $cap_read (param i32 i32 i32) (result i32)))
            (import "anode" "state_put" (func $state_put (param i32 i32 i32 i32 i32) (result i32)))
            (memory (export "memory") 1)
            (func (export "anode_abi_v1"))
            (func (export "accept") (param $len i32) (param $why i32) (result i32)
                {body}))"#
    ))
    .unwrap()
}

fn hostile() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("fuel_exhausted", module("(loop $l (br $l)) (i32.const 1)")),
        (
            "memory_limit",
            module("(loop $l (drop (memory.grow (i32.const 16))) (br $l)) (i32.const 1)"),
        ),
        ("trap", module("(unreachable)")),
    ]
}

/// A line 0-1-2: node 0 sends capsules of `code` to node 2, plus a datagram and a ping.
#[test]
fn hostile_code_is_stopped_at_its_bound_and_traffic_keeps_flowing() {
    let rt = runtime();
    let mut net = Net::line(3, &rt);
    let ping = net.ee(0).install(protocols::PING).unwrap();
    net.ee(0).register_port(PORT);
    for (reason, wasm) in hostile() {
        let h = net.ee(0).install(&wasm).unwrap();
        // Local evaluation at node 0 already stops it: each capsule is dropped there.
        for flow in 0..3 {
            let pkt = capsule_packet(h, addr(0), addr(2), 16, flow, b"payload").unwrap();
            let now = net.now;
            assert!(net.nodes[0].inject(now, pkt).is_err(), "{reason}");
        }
        net.run_for(Duration::from_millis(20));
        assert_eq!(net.drops(0, reason), 3, "{reason}");
        assert_eq!(net.ee(0).stats().traps % 3, 0);

        // The node goes on: the fast path forwards a datagram through node 1 ...
        let now = net.now;
        net.nodes[0]
            .send_datagram(now, addr(2), 9, 0, None, b"still here")
            .unwrap();
        let (d, _) = net
            .wait_delivery(2, Duration::from_secs(1))
            .expect("datagram");
        assert_eq!(d.payload(), b"still here");
        // ... and well-behaved capsule code still runs on every node.
        let pkt = capsule_packet(ping, addr(0), addr(2), 16, 1, &ping_payload(PORT)).unwrap();
        let now = net.now;
        net.nodes[0].inject(now, pkt).unwrap();
        let (d, _) = net
            .wait_delivery(0, Duration::from_secs(5))
            .expect("ping reply");
        assert_eq!(d.payload()[0], 1, "{reason}");
    }
}

#[test]
fn hostile_code_arriving_from_a_neighbor_is_contained_at_transit_nodes() {
    let rt = runtime();
    let mut net = Net::line(3, &rt);
    // A capsule whose code behaves at its origin (why = local) and loops at every later hop.
    let wasm = module(
        "(if (i32.eq (local.get $why) (i32.const 3)) (then (return (i32.const 1))))
         (loop $l (br $l)) (i32.const 1)",
    );
    let h = net.ee(0).install(&wasm).unwrap();
    for flow in 0..4 {
        let pkt = capsule_packet(h, addr(0), addr(2), 16, flow, b"x").unwrap();
        let now = net.now;
        net.nodes[0].inject(now, pkt).unwrap();
    }
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.ee(1).stats().loads_completed, 1);
    assert_eq!(net.drops(1, "fuel_exhausted"), 4);
    assert_eq!(net.nodes[2].counters().to_ee, 0, "nothing got past node 1");
    let now = net.now;
    net.nodes[0]
        .send_datagram(now, addr(2), 9, 0, None, b"ok")
        .unwrap();
    assert!(net.wait_delivery(2, Duration::from_secs(1)).is_some());
}

#[test]
fn bad_pointers_get_errors_not_crashes() {
    let rt = runtime();
    let mut net = Net::line(2, &rt);
    // cap_read into memory far out of range, then state_put with a negative length: both
    // must return BOUNDS (-2); only then is the capsule forwarded.
    let wasm = module(
        "(if (i32.ne (call $cap_read (i32.const 0) (i32.const 0x7fffff00) (i32.const 64)) (i32.const -2))
             (then (return (i32.const 2))))
         (if (i32.ne (call $cap_read (i32.const 0) (i32.const 65530) (i32.const 64)) (i32.const -2))
             (then (return (i32.const 2))))
         (if (i32.ne (call $state_put (i32.const 0) (i32.const -5) (i32.const 0) (i32.const 4) (i32.const 10)) (i32.const -2))
             (then (return (i32.const 2))))
         (i32.const 1)",
    );
    let h = net.ee(0).install(&wasm).unwrap();
    net.ee(1).install(&wasm).unwrap();
    let pkt = capsule_packet(h, addr(0), addr(1), 16, 1, &[0xab; 100]).unwrap();
    let now = net.now;
    net.nodes[0].inject(now, pkt).unwrap();
    net.run_for(Duration::from_millis(10));
    assert_eq!(net.ee(1).stats().runs, 1);
    assert_eq!(net.drops(0, "guest_drop"), 0);
    // Every check passed at the destination too (else the verdict would be DROP).
    assert_eq!(net.drops(1, "guest_drop"), 0);
}

#[test]
fn modules_that_break_the_abi_are_refused() {
    let rt = runtime();
    let mut net = Net::line(2, &rt);
    let no_accept =
        wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "anode_abi_v1")))"#)
            .unwrap();
    let foreign_import = wat::parse_str(
        r#"(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
           (memory (export "memory") 1) (func (export "anode_abi_v1"))
           (func (export "accept") (param i32 i32) (result i32) (i32.const 0)))"#,
    )
    .unwrap();
    let no_marker = wat::parse_str(
        r#"(module (memory (export "memory") 1)
           (func (export "accept") (param i32 i32) (result i32) (i32.const 0)))"#,
    )
    .unwrap();
    let bad_import_type = wat::parse_str(
        r#"(module (import "anode" "cap_len" (func (param i64)))
           (memory (export "memory") 1) (func (export "anode_abi_v1"))
           (func (export "accept") (param i32 i32) (result i32) (i32.const 0)))"#,
    )
    .unwrap();
    for (what, w) in [
        ("no accept", no_accept),
        ("foreign import", foreign_import),
        ("no marker", no_marker),
        ("bad import type", bad_import_type),
    ] {
        assert!(
            matches!(net.ee(0).install(&w), Err(CapsuleError::Abi { .. })),
            "{what}"
        );
    }
    assert!(matches!(
        net.ee(0).install(b"not wasm"),
        Err(CapsuleError::Compile(_))
    ));
    // A memory larger than the instance bound is refused when the module is loaded.
    let big = wat::parse_str(
        r#"(module (memory (export "memory") 1000) (func (export "anode_abi_v1"))
           (func (export "accept") (param i32 i32) (result i32) (i32.const 1)))"#,
    )
    .unwrap();
    assert!(net.ee(0).install(&big).is_err());
}
