//! [`MeteredCapsule`]: the capsule EE (`anode-capsule`) under a [`crate::guard::DomainGuard`],
//! without changes to the capsule crate (feature `capsule`).
//!
//! - **Principal**: each protocol (code group) is one principal, `capsule/<hex of the code
//!   object's SHA-256>`, read from the capsule header; packets that are not capsules belong to
//!   the EE itself.
//! - **Memory**: soft-state bytes are measured around each call (the EE's soft-state total
//!   before and after, attributed to the capsule's protocol; an expiry of another protocol's
//!   entries during the call is attributed to the caller too, and release is clamped to what
//!   it holds); code bytes are the code object's module and compiled sizes from `code_list`.
//! - **CPU**: the capsule EE does not report the fuel a run used. A run that trapped (fuel
//!   exhausted, memory limit, other trap) is charged the whole per-call fuel budget and
//!   counts as hitting the run-time limit; a run that completed is charged `run_estimate`
//!   units. This is an upper bound for hostile code and an estimate for benign code; exact
//!   figures need the hook documented in the crate README (fuel used per `accept`).
//! - **Termination**: the code object is evicted and its soft state cleared; the guard then
//!   refuses the protocol's capsules.

use std::any::Any;
use std::collections::HashMap;
use std::time::Instant;

use anode_capsule::{CapsuleEe, CodeHash};
use anode_core::{EePacket, ExecutionEnvironment, NodeContext};
use anode_routing::LinkId;
use anode_wire::capsule::CapsuleRepr;
use anode_wire::control::Control;

use crate::guard::{MeteredEe, UsageReport};

/// The capsule EE, reporting to the NodeOS.
pub struct MeteredCapsule {
    ee: CapsuleEe,
    fuel: u64,
    run_estimate: u64,
    code_bytes: HashMap<CodeHash, u64>,
    reports: Vec<UsageReport>,
}

impl std::fmt::Debug for MeteredCapsule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeteredCapsule")
            .field("ee", &self.ee)
            .field("fuel", &self.fuel)
            .finish()
    }
}

fn principal(code: &CodeHash) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(8 + 2 * code.len());
    s.push_str("capsule/");
    let digit = |n: u8| char::from(HEX.get(usize::from(n)).copied().unwrap_or(b'0'));
    for b in code {
        s.push(digit(b >> 4));
        s.push(digit(b & 15));
    }
    s
}

fn code_of(pkt: &EePacket) -> Option<CodeHash> {
    CapsuleRepr::parse(pkt.ee_bytes()).ok().map(|(h, _)| h.code)
}

impl MeteredCapsule {
    /// Wraps `ee`, whose per-call fuel is `fuel` (its `CapsuleConfig::fuel`); a completed run
    /// is charged `run_estimate` units.
    pub fn new(ee: CapsuleEe, fuel: u64, run_estimate: u64) -> Self {
        MeteredCapsule {
            ee,
            fuel,
            run_estimate,
            code_bytes: HashMap::new(),
            reports: Vec::new(),
        }
    }

    /// The capsule EE.
    pub fn inner(&self) -> &CapsuleEe {
        &self.ee
    }

    /// The capsule EE, mutably.
    pub fn inner_mut(&mut self) -> &mut CapsuleEe {
        &mut self.ee
    }

    /// The principal of a code object.
    pub fn principal_of_code(code: &CodeHash) -> String {
        principal(code)
    }

    /// Code bytes of `code` now, and the change since last looked at.
    fn code_delta(&mut self, code: &CodeHash) -> i64 {
        let now = self
            .ee
            .code_list()
            .iter()
            .find(|c| c.hash == *code)
            .map_or(0, |c| (c.wasm_len + c.cost) as u64);
        let before = self.code_bytes.insert(*code, now).unwrap_or(0);
        i64::try_from(now).unwrap_or(i64::MAX) - i64::try_from(before).unwrap_or(i64::MAX)
    }
}

impl ExecutionEnvironment for MeteredCapsule {
    fn type_id(&self) -> u16 {
        ExecutionEnvironment::type_id(&self.ee)
    }

    fn name(&self) -> &str {
        self.ee.name()
    }

    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        let code = code_of(&pkt);
        let (traps, runs) = (self.ee.stats().traps, self.ee.stats().runs);
        let soft = self.ee.soft_state().bytes();
        self.ee.handle_packet(ctx, pkt);
        let trapped = self.ee.stats().traps > traps;
        let ran = self.ee.stats().runs > runs;
        let soft_after = self.ee.soft_state().bytes();
        let code_delta = code.map_or(0, |c| self.code_delta(&c));
        self.reports.push(UsageReport {
            principal: code.as_ref().map(principal),
            units: if trapped {
                self.fuel
            } else if ran {
                self.run_estimate
            } else {
                0
            },
            exhausted: trapped,
            soft_state_delta: i64::try_from(soft_after).unwrap_or(i64::MAX)
                - i64::try_from(soft).unwrap_or(i64::MAX),
            code_delta,
        });
    }

    fn handle_control(&mut self, ctx: &mut NodeContext<'_>, link: LinkId, msg: &Control) {
        self.ee.handle_control(ctx, link, msg);
    }

    fn handle_timeout(&mut self, ctx: &mut NodeContext<'_>) {
        self.ee.handle_timeout(ctx);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.ee.poll_timeout()
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl MeteredEe for MeteredCapsule {
    fn principal_of(&self, pkt: &EePacket) -> Option<String> {
        code_of(pkt).as_ref().map(principal)
    }

    fn set_budget(&mut self, units: u64) {
        // The capsule EE's fuel per call is fixed at construction; the guard's run-time
        // limit is configured to match it.
        let _ = units;
    }

    fn take_reports(&mut self) -> Vec<UsageReport> {
        std::mem::take(&mut self.reports)
    }

    /// Clears the protocol's soft state (soft state may vanish at any time) and reports it.
    fn on_memory_pressure(&mut self, p: &str) {
        let hit = self.code_bytes.keys().find(|c| principal(c) == p).copied();
        if let Some(code) = hit {
            let before = self.ee.soft_state().bytes();
            self.ee.soft_state().clear(&code);
            let freed = before.saturating_sub(self.ee.soft_state().bytes());
            self.reports.push(UsageReport {
                principal: Some(p.to_string()),
                soft_state_delta: -i64::try_from(freed).unwrap_or(i64::MAX),
                ..UsageReport::default()
            });
        }
    }

    fn on_terminated(&mut self, p: &str) {
        let hit = self.code_bytes.keys().find(|c| principal(c) == p).copied();
        if let Some(code) = hit {
            self.ee.evict(&code);
            self.ee.soft_state().clear(&code);
            self.code_bytes.remove(&code);
        }
    }
}
