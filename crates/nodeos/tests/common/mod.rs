//! Shared test harness: a line of anode nodes on the test kit's network (zero-delay links, virtual time), a test EE
//! that burns CPU and memory the way hostile protocols do, and a sink.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use anode_core::wire::anep::TYPE_CAPSULE;
use anode_core::wire::routed_packet;
use anode_core::wire::transit::{FLAG_EVAL_EVERY_HOP, TransitRepr};
use anode_core::{Dispatch, EePacket, Event, ExecutionEnvironment, NodeContext};
use anode_nodeos::guard::{MeteredEe, UsageReport};
use anode_nodeos::{NodeOsConfig, Policy, TerminationReason};

pub mod udp;
#[cfg(feature = "capsule")]
pub mod wasm;

pub const BENIGN: u8 = 0;
pub const LOOP: u8 = 1;
pub const BOMB: u8 = 2;
pub const STORM: u8 = 3;
pub const FLOOD: u8 = 4;

pub use anode_testkit::addr;

/// The memory bound of the NodeOS in the burn-EE isolation tests.
pub const BURN_MEMORY: u64 = 4 << 20;

/// The test node's NodeOS: `memory` in all, the EE's own domain `capsule-ee` allowed all of
/// it (CPU share 16, 64 children and channels, every channel), and with `proto4` a
/// configured policy for principal `proto-4` with a small soft-state limit (64 KiB).
pub fn nodeos_config(memory: u64, proto4: bool) -> NodeOsConfig {
    let mut cfg = NodeOsConfig {
        node_memory_bytes: memory,
        memory_grace: Duration::from_millis(20),
        ..Default::default()
    };
    cfg.policies.insert(
        "capsule-ee",
        Policy {
            cpu_share: 16,
            memory_bytes: memory,
            soft_state_bytes: memory,
            code_bytes: memory,
            max_children: 64,
            max_channels: 64,
            channels: vec!["*".into()],
            ..Policy::default()
        },
    );
    if proto4 {
        cfg.policies.insert(
            "proto-4",
            Policy {
                memory_bytes: 256 << 10,
                soft_state_bytes: 64 << 10,
                ..Policy::default()
            },
        );
    }
    cfg
}

/// A capsule from node `src` to node `dst` evaluated at every hop; EE bytes: kind, protocol.
pub fn capsule(src: usize, dst: usize, kind: u8, proto: u8, seq: u64) -> Vec<u8> {
    let t = TransitRepr {
        flags: FLAG_EVAL_EVERY_HOP,
        rb: 16,
        flow: u64::from(proto) << 56 | seq,
        src: addr(src),
        dst: addr(dst),
        prev_hop: addr(src),
    };
    routed_packet(TYPE_CAPSULE, &t, &[kind, proto], &[0u8; 64]).unwrap()
}

/// The test EE: behavior by the capsule's first EE byte, principal `proto-N` by the second.
#[derive(Debug, Default)]
pub struct BurnEe {
    budget: u64,
    reports: Vec<UsageReport>,
    /// Soft state held per principal, bytes (what a real EE would have allocated).
    pub state: BTreeMap<String, u64>,
    pub terminated: Vec<String>,
    /// Frees a principal's soft state when told its pool is over its limit.
    pub polite: bool,
    /// Pressure callbacks received, by principal.
    pub pressure: Vec<String>,
}

fn principal(pkt: &EePacket) -> Option<String> {
    pkt.ee_bytes().get(1).map(|p| format!("proto-{p}"))
}

impl ExecutionEnvironment for BurnEe {
    fn type_id(&self) -> u16 {
        TYPE_CAPSULE
    }
    fn name(&self) -> &str {
        "burn"
    }
    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        let kind = pkt.ee_bytes().first().copied().unwrap_or(BENIGN);
        let p = principal(&pkt);
        let mut r = UsageReport {
            principal: p.clone(),
            ..Default::default()
        };
        let key = p.unwrap_or_default();
        match kind {
            BENIGN => {
                r.units = 20_000.min(self.budget);
                if pkt.why != Dispatch::Destination {
                    let _ = ctx.forward(pkt.buf, pkt.anep_len);
                }
            }
            LOOP => {
                // `loop {}`: runs until the fuel is gone.
                r.units = self.budget;
                r.exhausted = true;
            }
            BOMB => {
                r.units = 5_000;
                *self.state.entry(key).or_insert(0) += 64 << 10;
                r.soft_state_delta = 64 << 10;
            }
            STORM => {
                r.units = 5_000;
                for _ in 0..8 {
                    let _ = ctx.forward(pkt.buf.clone(), pkt.anep_len);
                }
            }
            FLOOD => {
                r.units = 2_000;
                *self.state.entry(key).or_insert(0) += 4096;
                r.soft_state_delta = 4096;
            }
            _ => {}
        }
        self.reports.push(r);
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

impl MeteredEe for BurnEe {
    type Key = String;
    fn principal_of(&self, pkt: &EePacket) -> Option<String> {
        principal(pkt)
    }
    fn principal_name(key: &String) -> String {
        key.clone()
    }
    fn set_budget(&mut self, units: u64) {
        self.budget = units;
    }
    fn take_reports(&mut self, out: &mut Vec<UsageReport>) {
        out.append(&mut self.reports);
    }
    fn on_memory_pressure(&mut self, principal: &String) {
        self.pressure.push(principal.to_string());
        if self.polite
            && let Some(b) = self.state.remove(principal)
        {
            self.reports.push(UsageReport {
                principal: Some(principal.to_string()),
                soft_state_delta: -(b as i64),
                ..Default::default()
            });
        }
    }
    fn on_terminated(&mut self, principal: &String, _reason: TerminationReason) {
        self.state.remove(principal);
        self.terminated.push(principal.to_string());
    }
}

/// Counts what arrives, by EE kind and by protocol (the flow id's top byte); forwards what
/// is injected locally or passes through.
#[derive(Debug, Default)]
pub struct Sink {
    pub got: BTreeMap<u8, u64>,
    pub by_proto: BTreeMap<u8, u64>,
}

impl ExecutionEnvironment for Sink {
    fn type_id(&self) -> u16 {
        TYPE_CAPSULE
    }
    fn name(&self) -> &str {
        "sink"
    }
    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        if pkt.why == Dispatch::Destination {
            let k = pkt.ee_bytes().first().copied().unwrap_or(255);
            *self.got.entry(k).or_insert(0) += 1;
            let p = (pkt.transit().flow() >> 56) as u8;
            *self.by_proto.entry(p).or_insert(0) += 1;
        } else {
            // A source node: send what local applications inject.
            let _ = ctx.forward(pkt.buf, pkt.anep_len);
        }
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// A line of nodes 0 - 1 - ... - n-1 on the test kit's network (zero-delay links); the
/// nodes' EE log lines are gathered into `logs` after every step.
pub struct Line {
    pub net: anode_testkit::Net,
    pub logs: Vec<String>,
}

impl Deref for Line {
    type Target = anode_testkit::Net;
    fn deref(&self) -> &anode_testkit::Net {
        &self.net
    }
}

impl DerefMut for Line {
    fn deref_mut(&mut self) -> &mut anode_testkit::Net {
        &mut self.net
    }
}

impl Line {
    pub fn new(n: usize) -> Line {
        Line {
            net: anode_testkit::Net::line(n, anode_testkit::NetOptions::default(), |_, _| {}),
            logs: Vec::new(),
        }
    }

    fn collect_logs(&mut self) {
        for n in &mut self.net.nodes {
            while let Some(e) = n.poll_event() {
                if let Event::Log { ee, message } = e {
                    self.logs.push(format!("{ee}: {message}"));
                }
            }
        }
    }

    pub fn pump(&mut self) {
        self.net.pump();
        self.collect_logs();
    }

    /// Runs timers up to `now + d`.
    pub fn advance(&mut self, d: Duration) {
        self.net.run_for(d);
        self.collect_logs();
    }
}
