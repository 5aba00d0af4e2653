//! Fuel reports: with `record_runs` on, every `accept` and `init` run of real WebAssembly code
//! is reported with the fuel it used and how it ended; with it off nothing is recorded.

mod common;

use std::time::Duration;

use anode_capsule::{
    CapsuleConfig, CodeHash, RunOutcome, RunReport, capsule_packet, code_hash, protocols,
};
use common::*;

const PORT: u16 = 7;
const FUEL: u64 = 200_000;

fn recording(_: usize) -> CapsuleConfig {
    CapsuleConfig {
        record_runs: true,
        fuel: FUEL,
        ..CapsuleConfig::default()
    }
}

/// A module following the ABI with `accept` body `accept` and extra items `extra`.
fn module(accept: &str, extra: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (import "anode" "sha256" (func $sha256 (param i32 i32 i32) (result i32)))
            (memory (export "memory") 2)
            (func (export "anode_abi_v1"))
            (func (export "accept") (param $len i32) (param $why i32) (result i32)
                {accept})
            {extra})"#
    ))
    .unwrap()
}

fn runs(net: &mut Net, i: usize) -> Vec<RunReport> {
    net.ee(i).drain_runs().collect()
}

/// Sends one capsule of `code` from node 0 toward node `to` with `payload`.
fn send(net: &mut Net, code: CodeHash, to: usize, flow: u64, payload: &[u8]) {
    let pkt = capsule_packet(code, addr(0), addr(to), 16, flow, payload).unwrap();
    let now = net.now;
    let _ = net.nodes[0].inject(now, pkt);
}

#[test]
fn a_benign_protocol_reports_stable_nonzero_fuel_at_every_node() {
    let rt = runtime();
    let mut net = Net::new(3, &[(0, 1), (1, 2)], &rt, recording);
    let ping = net.ee(0).install(protocols::PING).unwrap();
    net.ee(0).register_port(PORT);
    let mut per_ping = Vec::new();
    for _ in 0..3 {
        send(&mut net, ping, 2, 1, &ping_payload(PORT));
        net.wait_delivery(0, Duration::from_secs(5))
            .expect("ping reply");
        // Node 1 ran the capsule twice (out and back), after loading the code on demand the
        // first time: the parked capsule's run is reported like any other.
        let r1 = runs(&mut net, 1);
        assert_eq!(r1.len(), 2, "{r1:?}");
        for r in &r1 {
            assert_eq!(r.code, ping);
            assert_eq!(r.outcome, RunOutcome::Completed);
            assert!(r.fuel_used > 0 && r.fuel_used < FUEL, "{r:?}");
        }
        assert!(!runs(&mut net, 2).is_empty());
        per_ping.push(r1.iter().map(|r| r.fuel_used).collect::<Vec<_>>());
        // Drained: nothing is reported twice.
        assert!(runs(&mut net, 1).is_empty());
    }
    // Same capsule, same code, same path: the same fuel, run after run.
    assert!(per_ping.windows(2).all(|w| w[0] == w[1]), "{per_ping:?}");
}

#[test]
fn an_infinite_loop_reports_fuel_exhausted_with_the_whole_budget() {
    let rt = runtime();
    let mut net = Net::new(2, &[(0, 1)], &rt, recording);
    let spin = net
        .ee(0)
        .install(&module("(loop $l (br $l)) (i32.const 1)", ""))
        .unwrap();
    send(&mut net, spin, 1, 1, b"x");
    assert_eq!(
        runs(&mut net, 0),
        vec![RunReport {
            code: spin,
            fuel_used: FUEL,
            outcome: RunOutcome::FuelExhausted,
            tx_bytes: 0,
        }]
    );
    // The budget changes at run time, for the next run.
    net.ee(0).set_fuel(5_000);
    assert_eq!(net.ee(0).fuel(), 5_000);
    send(&mut net, spin, 1, 2, b"x");
    let r = runs(&mut net, 0);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].fuel_used, r[0].outcome),
        (5_000, RunOutcome::FuelExhausted)
    );
    net.run_for(Duration::from_millis(10));
    assert_eq!(net.drops(0, "fuel_exhausted"), 2);
}

#[test]
fn host_charged_fuel_is_counted() {
    let rt = runtime();
    let mut net = Net::new(2, &[(0, 1)], &rt, recording);
    // Hash 0 bytes vs 64 KiB of linear memory: the host charges 1 unit per 64 bytes.
    let small = "(drop (call $sha256 (i32.const 0) (i32.const 0) (i32.const 65536))) (i32.const 1)";
    let big =
        "(drop (call $sha256 (i32.const 0) (i32.const 65536) (i32.const 65536))) (i32.const 1)";
    let a = net.ee(0).install(&module(small, "")).unwrap();
    let b = net.ee(0).install(&module(big, "")).unwrap();
    send(&mut net, a, 1, 1, b"x");
    send(&mut net, b, 1, 1, b"x");
    let r = runs(&mut net, 0);
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(r.iter().all(|r| r.outcome == RunOutcome::Completed));
    assert_eq!(r[1].fuel_used - r[0].fuel_used, 65536 / 64, "{r:?}");
}

#[test]
fn init_runs_are_reported_and_end_like_accept_runs() {
    let rt = runtime();
    let mut net = Net::new(2, &[(0, 1)], &rt, recording);
    let ok = module(
        "(i32.const 1)",
        "(func (export \"init\") (result i32) (i32.const 0))",
    );
    let refuses = module(
        "(i32.const 1)",
        "(func (export \"init\") (result i32) (i32.const 3))",
    );
    let spins = module(
        "(i32.const 1)",
        "(func (export \"init\") (result i32) (loop $l (br $l)) (i32.const 0))",
    );
    let cases = [
        (ok, vec![RunOutcome::Completed, RunOutcome::Completed]),
        (refuses, vec![RunOutcome::InitFailed]),
        (spins, vec![RunOutcome::FuelExhausted]),
    ];
    for (wasm, want) in cases {
        let h = net.ee(0).install(&wasm).unwrap();
        assert_eq!(h, code_hash(&wasm));
        send(&mut net, h, 1, 1, b"x");
        let r = runs(&mut net, 0);
        assert_eq!(r.iter().map(|r| r.outcome).collect::<Vec<_>>(), want);
        assert!(r.iter().all(|r| r.code == h && r.fuel_used > 0));
        if want[0] == RunOutcome::FuelExhausted {
            assert_eq!(r[0].fuel_used, FUEL);
        }
    }
    net.run_for(Duration::from_millis(10));
    assert_eq!(net.drops(0, "instantiate_failed"), 2);
}

#[test]
fn nothing_is_recorded_unless_asked() {
    let rt = runtime();
    let mut net = Net::line(2, &rt);
    let ping = net.ee(0).install(protocols::PING).unwrap();
    net.ee(0).register_port(PORT);
    send(&mut net, ping, 1, 1, &ping_payload(PORT));
    net.wait_delivery(0, Duration::from_secs(5))
        .expect("ping reply");
    assert!(net.ee(0).stats().runs >= 2);
    assert!(runs(&mut net, 0).is_empty());
    assert!(runs(&mut net, 1).is_empty());
}
