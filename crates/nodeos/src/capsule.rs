//! [`MeteredCapsule`]: the capsule EE (`anode-capsule`) under a [`crate::guard::DomainGuard`],
//! without changes to the capsule crate (feature `capsule`).
//!
//! - **Principal**: each protocol (code group) is one principal, keyed by the code object's
//!   SHA-256 read from the capsule header (once per packet: the guard hands the key back with
//!   the packet) and named `capsule/<hex of the hash>`; packets that are not capsules belong
//!   to the EE itself.
//! - **Memory**: soft-state bytes are measured around each call (the EE's soft-state total
//!   before and after, attributed to the capsule's protocol; an expiry of another protocol's
//!   entries during the call is attributed to the caller too, and release is clamped to what
//!   it holds); code bytes are the code object's module and compiled sizes in memory.
//! - **CPU**: exact. The EE records a `RunReport` per run of guest code (`accept` per capsule,
//!   `init` per instantiation; `CapsuleConfig::record_runs`, which [`MeteredCapsule::new`]
//!   turns on): the fuel it used — a trapped run what it used up to the trap, a run out of
//!   fuel the whole budget — and how it ended. Each run is charged to the protocol of its
//!   code; a run of code whose capsules were never seen (a dependency's `init`) is charged to
//!   the protocol whose capsule caused it. A run out of fuel counts as hitting the run-time
//!   limit; any other trap (memory limit, `unreachable`, a refused host call) as a fault.
//!   The guard's run-time limit is the per-run fuel ([`MeteredEe::set_budget`] sets it).
//! - **Code bytes**: module plus compiled size of the code in the memory cache
//!   (`CapsuleEe::code_mem_bytes`; code only on disk holds no memory), looked up when a
//!   protocol is first seen, when the EE's code set may have changed (compile, load, tier-up
//!   counters) and every [`CODE_REFRESH`] packets (for evictions).
//! - **Files** (ABI v2): measured like soft state, around each call, charged as `file`.
//! - **Output bytes**: each run reports what it sent (`RunReport::tx_bytes`), charged to its
//!   protocol's output bucket ([`MeteredEe::reports_tx`]); what a call sent besides runs
//!   (code transfer) goes to the call's protocol, outside a call to the EE.
//! - **Worker batches** (`CapsuleConfig::workers` > 1): capsules held for a batch run at the
//!   EE's timeout (or before the packet that would fill the batch); the soft state and files
//!   of the held protocols are measured per protocol around it.
//! - **Termination**: the code object is evicted and its soft state and files cleared (files
//!   stay when the operator stops the EE, `EeStopped`); the
//!   guard then refuses the protocol's capsules.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use anode_capsule::{CapsuleConfig, CapsuleEe, CapsuleError, CodeHash, RunOutcome, Runtime};
use anode_core::{EePacket, ExecutionEnvironment, NodeContext};
use anode_routing::LinkId;
use anode_wire::control::Control;
use rustc_hash::FxHashMap;

use crate::TerminationReason;
use crate::guard::{MeteredEe, UsageReport};

/// Packets between code-size refreshes.
pub const CODE_REFRESH: u64 = 1024;

/// The capsule EE, reporting to the NodeOS.
pub struct MeteredCapsule {
    ee: CapsuleEe,
    /// Code bytes charged per protocol seen.
    code_bytes: FxHashMap<CodeHash, u64>,
    /// The EE's code counters when code sizes were last read.
    code_epoch: u64,
    packets: u64,
    reports: Vec<UsageReport<CodeHash>>,
}

impl std::fmt::Debug for MeteredCapsule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeteredCapsule")
            .field("ee", &self.ee)
            .field("protocols", &self.code_bytes.len())
            .finish()
    }
}

fn code_of(pkt: &EePacket) -> Option<CodeHash> {
    pkt.header.capsule().map(|h| h.code)
}

/// `after - before`, signed.
fn delta(after: usize, before: usize) -> i64 {
    i64::try_from(after).unwrap_or(i64::MAX) - i64::try_from(before).unwrap_or(i64::MAX)
}

fn code_epoch(ee: &CapsuleEe) -> u64 {
    let s = ee.stats();
    s.compiled + s.disk_loads + s.loads_completed + s.tier_ups
}

impl MeteredCapsule {
    /// A capsule EE built from `cfg` (with `record_runs` on), on `rt` if given.
    pub fn new(cfg: CapsuleConfig, rt: Option<Arc<Runtime>>) -> Result<Self, CapsuleError> {
        let cfg = CapsuleConfig {
            record_runs: true,
            ..cfg
        };
        let ee = match rt {
            Some(rt) => CapsuleEe::with_runtime(rt, cfg)?,
            None => CapsuleEe::new(cfg)?,
        };
        Ok(MeteredCapsule {
            code_epoch: code_epoch(&ee),
            ee,
            code_bytes: FxHashMap::default(),
            packets: 0,
            reports: Vec::new(),
        })
    }

    /// The capsule EE.
    pub fn inner(&self) -> &CapsuleEe {
        &self.ee
    }

    /// The capsule EE, mutably (an install or evict is reported at the next refresh).
    pub fn inner_mut(&mut self) -> &mut CapsuleEe {
        &mut self.ee
    }

    /// The principal of a code object.
    pub fn principal_of_code(code: &CodeHash) -> String {
        anode_capsule::principal_of_code(code)
    }

    /// Reports the runs since the last call, with what each sent; runs of unseen code go to
    /// `caller`. Returns the bytes sent it reported.
    fn collect_runs(&mut self, caller: Option<&CodeHash>) -> u64 {
        let mut sent = 0u64;
        for r in self.ee.drain_runs() {
            let code = if self.code_bytes.contains_key(&r.code) {
                Some(&r.code)
            } else {
                caller
            };
            let (exhausted, fault) = match r.outcome {
                RunOutcome::Completed => (false, None),
                RunOutcome::FuelExhausted => (true, None),
                other => (false, other.drop_reason()),
            };
            self.reports.push(UsageReport {
                principal: code.copied(),
                units: r.fuel_used,
                exhausted,
                fault,
                tx_bytes: r.tx_bytes,
                ..UsageReport::default()
            });
            sent = sent.saturating_add(r.tx_bytes);
        }
        sent
    }

    /// Runs `f` on the EE outside a packet's call (a timeout, a control message); reports per
    /// protocol what the runs used and sent. With `batch` (`f` may run the capsules held for
    /// the workers), also what the held protocols' soft state and files gained or freed.
    /// What was sent besides runs (code transfer) is the EE's own.
    fn run_measured(
        &mut self,
        ctx: &mut NodeContext<'_>,
        batch: bool,
        f: impl FnOnce(&mut CapsuleEe, &mut NodeContext<'_>),
    ) {
        let held: Vec<(CodeHash, usize, usize)> = if batch {
            self.ee
                .held_codes()
                .into_iter()
                .map(|c| {
                    let soft = self.ee.soft_state().bytes_of(&c);
                    (c, soft, self.ee.files().bytes_of(&c))
                })
                .collect()
        } else {
            Vec::new()
        };
        let tx0 = ctx.tx_totals().1;
        f(&mut self.ee, ctx);
        let sent = ctx.tx_totals().1.saturating_sub(tx0);
        let by_runs = self.collect_runs(None);
        if sent > by_runs {
            self.reports.push(UsageReport {
                tx_bytes: sent - by_runs,
                ..UsageReport::default()
            });
        }
        for (code, soft, files) in held {
            let soft_after = self.ee.soft_state().bytes_of(&code);
            let files_after = self.ee.files().bytes_of(&code);
            if soft_after != soft || files_after != files {
                self.reports.push(UsageReport {
                    principal: Some(code),
                    soft_state_delta: delta(soft_after, soft),
                    file_delta: delta(files_after, files),
                    ..UsageReport::default()
                });
            }
        }
    }

    /// Runs one packet of protocol `code` (`None`: not a capsule) and records what it used.
    fn run(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket, code: Option<&CodeHash>) {
        self.packets += 1;
        // A protocol's first run under its domain: the files it already has (read back from
        // the disk, or kept while the EE was stopped) are charged to the new domain.
        let kept_files = match code {
            Some(c) if !self.code_bytes.contains_key(c) => self.ee.files().bytes_of(c),
            _ => 0,
        };
        if self.ee.held() + 1 >= anode_capsule::MAX_BATCH {
            // This packet would fill the workers' batch and run it inside its call: run the
            // batch first, measured per protocol, so its use is not charged to this one.
            self.run_measured(ctx, true, CapsuleEe::run_held);
        }
        let soft = self.ee.soft_state().bytes();
        let files = self.ee.files().bytes();
        let tx0 = ctx.tx_totals().1;
        self.ee.handle_packet(ctx, pkt);
        let sent = ctx.tx_totals().1.saturating_sub(tx0);
        let soft_after = self.ee.soft_state().bytes();
        let files_after = self.ee.files().bytes();
        self.refresh_code(code);
        let by_runs = self.collect_runs(code);
        if soft_after != soft || files_after != files || kept_files != 0 || sent > by_runs {
            self.reports.push(UsageReport {
                principal: code.copied(),
                soft_state_delta: delta(soft_after, soft),
                file_delta: delta(files_after, files)
                    .saturating_add(i64::try_from(kept_files).unwrap_or(i64::MAX)),
                tx_bytes: sent.saturating_sub(by_runs),
                ..UsageReport::default()
            });
        }
    }

    /// Re-reads code sizes if `code` is new, the code set may have changed, or it is time.
    fn refresh_code(&mut self, code: Option<&CodeHash>) {
        let epoch = code_epoch(&self.ee);
        let new = code.is_some_and(|c| !self.code_bytes.contains_key(c));
        if !new && epoch == self.code_epoch && !self.packets.is_multiple_of(CODE_REFRESH) {
            return;
        }
        self.code_epoch = epoch;
        if let Some(c) = code {
            self.code_bytes.entry(*c).or_insert(0);
        }
        for (hash, held) in self.code_bytes.iter_mut() {
            let now = self.ee.code_mem_bytes(hash) as u64;
            if now != *held {
                let delta = i64::try_from(now).unwrap_or(i64::MAX)
                    - i64::try_from(*held).unwrap_or(i64::MAX);
                *held = now;
                self.reports.push(UsageReport {
                    principal: Some(*hash),
                    code_delta: delta,
                    ..UsageReport::default()
                });
            }
        }
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
        self.run(ctx, pkt, code.as_ref());
    }
    fn handle_control(&mut self, ctx: &mut NodeContext<'_>, link: LinkId, msg: &Control) {
        // A code arrival may release parked capsules: their runs are reported here.
        self.run_measured(ctx, false, |ee, ctx| ee.handle_control(ctx, link, msg));
        self.refresh_code(None);
    }

    fn handle_timeout(&mut self, ctx: &mut NodeContext<'_>) {
        self.run_measured(ctx, true, |ee, ctx| ee.handle_timeout(ctx));
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.ee.poll_timeout()
    }

    fn hand_over(&mut self, now: Instant, out: &mut anode_core::handover::EeHandover) {
        self.ee.hand_over(now, out);
    }

    fn take_over(
        &mut self,
        ctx: &mut NodeContext<'_>,
        state: &serde_json::Value,
    ) -> Result<(), String> {
        let r = self.ee.take_over(ctx, state);
        self.refresh_code(None);
        r
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl MeteredEe for MeteredCapsule {
    type Key = CodeHash;

    fn principal_of(&self, pkt: &EePacket) -> Option<CodeHash> {
        code_of(pkt)
    }

    fn principal_name(key: &CodeHash) -> String {
        anode_capsule::principal_of_code(key)
    }

    fn principal_key(name: &str) -> Option<CodeHash> {
        let hex = name.strip_prefix("capsule/")?;
        let mut h = [0u8; 32];
        hex::decode_to_slice(hex, &mut h).ok()?;
        Some(h)
    }

    fn handle_keyed(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket, key: Option<&CodeHash>) {
        self.run(ctx, pkt, key);
    }

    fn reports_tx(&self) -> bool {
        true
    }

    fn set_budget(&mut self, units: u64) {
        if self.ee.fuel() != units {
            self.ee.set_fuel(units);
        }
    }

    fn take_reports(&mut self, out: &mut Vec<UsageReport<CodeHash>>) {
        out.append(&mut self.reports);
    }

    /// Clears the protocol's soft state (soft state may vanish at any time) and reports it.
    fn on_memory_pressure(&mut self, code: &CodeHash) {
        if self.code_bytes.contains_key(code) {
            let before = self.ee.soft_state().bytes();
            self.ee.soft_state().clear(code);
            let freed = before.saturating_sub(self.ee.soft_state().bytes());
            self.reports.push(UsageReport {
                principal: Some(*code),
                soft_state_delta: -i64::try_from(freed).unwrap_or(i64::MAX),
                ..UsageReport::default()
            });
        }
    }

    fn on_terminated(&mut self, code: &CodeHash, reason: TerminationReason) {
        if self.code_bytes.remove(code).is_some() {
            // Its capsules held for the workers end with it, as its queued packets do.
            self.ee.cancel_held(code, reason.packet_drop_reason());
            self.ee.evict(code);
            self.ee.soft_state().clear(code);
            // Files outlive the operator stopping the EE (they are charged again when the
            // protocol's next domain is made); a terminated protocol loses them.
            if reason != TerminationReason::EeStopped {
                self.ee.files_mut().clear(code);
            }
        }
    }
}
