//! Per-run fuel reports: what each run of guest code (an `accept` per capsule, an `init` per
//! instantiation) cost and how it ended, for a NodeOS that accounts CPU per protocol.
//!
//! Contract: when [`CapsuleConfig::record_runs`](crate::CapsuleConfig::record_runs) is true,
//! the EE appends one [`RunReport`] per `accept` or `init` call it makes (one
//! `handle_packet` may make several: parked capsules released by a code load, a new instance's
//! `init` before its first `accept`), in call order, and keeps them until
//! [`CapsuleEe::drain_runs`](crate::CapsuleEe::drain_runs). When it is false nothing is
//! recorded and the per-capsule path does no extra work. `fuel_used` counts every unit taken
//! from the run's budget: WebAssembly instructions, host work charged by length (copies,
//! hashes), and calls into dependencies made during the run; a run that ran out of fuel
//! reports exactly the budget.

use anode_core::DropReason;

use crate::CodeHash;

/// How one run of guest code ended. The drop reasons named below are those of a failing
/// `accept`; a failing `init` drops the capsule that needed the instance as
/// `capsule/instantiate_failed` whatever the outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunOutcome {
    /// The export returned a value the ABI defines: `accept` a verdict (forward, done or
    /// drop — what became of the capsule is counted by the EE as usual), `init` zero.
    Completed,
    /// `accept` returned a value that is no verdict (the capsule is dropped as
    /// `capsule/bad_verdict`).
    BadVerdict,
    /// `init` returned non-zero: the code object refused to start (the capsule is dropped as
    /// `capsule/instantiate_failed`).
    InitFailed,
    /// The run used its whole fuel budget and was stopped (`capsule/fuel_exhausted`).
    FuelExhausted,
    /// The code tried to grow memory or a table past the runtime's bound
    /// (`capsule/memory_limit`).
    MemoryLimit,
    /// Any other trap: `unreachable`, out-of-bounds access, stack overflow, division by zero,
    /// a host import refusing hostile arguments (`capsule/trap`).
    Trap,
}

impl RunOutcome {
    /// The reason string the EE counts a capsule drop under for this outcome (`None` for
    /// [`RunOutcome::Completed`], which drops nothing by itself).
    pub fn drop_reason(self) -> Option<DropReason> {
        match self {
            RunOutcome::Completed => None,
            RunOutcome::BadVerdict => Some(DropReason::BadVerdict),
            RunOutcome::InitFailed => Some(DropReason::InstantiateFailed),
            RunOutcome::FuelExhausted => Some(DropReason::FuelExhausted),
            RunOutcome::MemoryLimit => Some(DropReason::MemoryLimit),
            RunOutcome::Trap => Some(DropReason::Trap),
        }
    }
}

/// One run of guest code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunReport {
    /// The code object whose export ran (for an `init` of a dependency: the dependency).
    pub code: CodeHash,
    /// Fuel the run took from its budget, host-charged fuel included.
    pub fuel_used: u64,
    /// How it ended.
    pub outcome: RunOutcome,
    /// Bytes the node queued to send for what the run did (its capsule and what it made;
    /// 0 for `init` runs).
    pub tx_bytes: u64,
}

/// Classifies a failed call: out of fuel, a refused growth (`limit_hit`), or another trap.
pub(crate) fn outcome_of_error(e: &wasmtime::Error, limit_hit: bool) -> RunOutcome {
    if e.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::OutOfFuel) {
        RunOutcome::FuelExhausted
    } else if limit_hit {
        RunOutcome::MemoryLimit
    } else {
        RunOutcome::Trap
    }
}
