//! # anode NodeOS layer
//!
//! Contract: Domains, policies and accounting: every run of an EE under a `DomainGuard` is
//! charged to its principal's domain, and a domain over its policy is throttled or terminated.
//!
//! The NodeOS interface of the "OS interface for active routers" paper (§II-III) for anode:
//! **domains** (the unit of accounting and protection, a tree rooted at the node, created with
//! credentials whose configured policy alone sets their resources), **CPU** accounting and a
//! deficit-round-robin [`DomainScheduler`], **memory** pools with limits and a grace period,
//! **channels** (input channels with protocol/address specs and demux keys compiled into a
//! fast [`Classifier`]; output channels with token-bucket bandwidth; cut-through channels
//! the node core consults before EE dispatch, [`CutTable`]), **files** ([`RootedDir`]), and
//! **observability** (per-domain counters in [`DomainReport`](anode_core::DomainReport)s; the
//! `[metrics]` settings).
//! [`guard::DomainGuard`] puts an EE under all of this: its packets are queued per domain and
//! served by DRR with a CPU budget per poll and a maximum run time per call.
//!
//! Everything is sans-IO: time comes in as `now`, nothing reads a clock,
//! opens a socket or draws random numbers.
//!
//! Layout: `policy.rs` (credentials, policies), `signed.rs` (ed25519-signed policies),
//! `auth.rs` (signed packets: principals authenticated by their signer), `domain.rs` (ids, reasons, events, handler
//! budget), `memory.rs` (pools), `cpu.rs` (unit conversion), `sched.rs` (DRR), `tiered.rs` (DRR in two tiers: groups of
//! domains), `nodeos.rs`
//! (the [`NodeOs`] facade), `chan/` (specs, classifier, token bucket, cut-through table),
//! `files.rs`, `metrics.rs`, `guard.rs`; the EEs under the guard: `capsule.rs` (feature
//! `capsule`), `plan.rs` (feature `plan`).

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod auth;
#[cfg(feature = "capsule")]
pub mod capsule;
pub mod chan;
mod cpu;
mod domain;
mod error;
pub mod files;
pub mod guard;
mod memory;
pub mod metrics;
mod nodeos;
#[cfg(feature = "plan")]
pub mod plan;
mod policy;
mod sched;
mod shared;
mod signed;
mod tiered;

pub use chan::{
    AddrSpec, ChanId, Classifier, CutTable, DemuxKey, HandlerId, InChanSpec, ProtocolSpec,
    SpecError, TokenBucket, capsule_protocol_key, flow_key,
};
pub use cpu::CpuMeter;
pub use domain::{
    BudgetExceeded, DomainCounters, DomainId, DomainInfo, HANDLER_BUDGET_NS, HandlerBudget,
    MemKind, NodeOsEvent, PoolId, TerminationHandler, TerminationReason, Terminator,
};
pub use error::NodeOsError;
pub use files::{FileError, RootedDir};
pub use memory::Pools;
pub use nodeos::{InMatch, NodeOs, NodeOsConfig, TerminationRecord};
pub use policy::{Credentials, Policy, PolicyStore, Principal};
pub use sched::DomainScheduler;
pub use shared::SharedNodeOs;
pub use signed::{SignedPolicy, SignedPolicyError};
pub use tiered::TieredScheduler;

#[cfg(test)]
mod tests;
