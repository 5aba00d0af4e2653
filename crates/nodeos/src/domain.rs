//! Domains: identities, what each one holds, why one ends.
//!
//! A domain is the unit of accounting and protection (NodeOS §II-A): every packet flow's work,
//! in the node and in its EE, is charged to one. Domains form a tree rooted at the node
//! ([`DomainId::ROOT`]); a domain ends by its own request, by its parent, or by the node on a
//! policy violation, and its whole subtree ends with it (children first). The parent's
//! [`TerminationHandler`] is told before each child goes, under a fixed budget
//! ([`HANDLER_BUDGET_NS`]) that it must charge its work against: sans-IO, the node cannot
//! preempt a Rust closure, so the budget is cooperative for native handlers and enforced by
//! fuel for EE handlers (the EE runs its guest handler with that much fuel).

use std::collections::BTreeMap;
use std::time::Instant;

use anode_core::DropReason;

use serde::Serialize;

use crate::{Policy, Principal};

/// How much work (ns) a parent's imminent-termination handler may do per child.
pub const HANDLER_BUDGET_NS: u64 = 100_000;

/// A domain's identity. Ids are never reused within a [`crate::NodeOs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DomainId(pub u32);

impl DomainId {
    /// The node itself.
    pub const ROOT: DomainId = DomainId(0);
}

impl std::fmt::Display for DomainId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "d{}", self.0)
    }
}

/// Who ended a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Terminator {
    /// The domain itself.
    SelfExit,
    /// Its parent (or an ancestor, for the cascade).
    Parent(DomainId),
    /// The node, on a policy violation.
    Node,
}

/// Why a domain ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum TerminationReason {
    /// It asked to.
    Exit,
    /// Its parent ended it.
    ByParent,
    /// An ancestor ended, taking it along.
    AncestorTerminated(DomainId),
    /// Its memory pool stayed over its limit (or full and refusing packets) past the grace
    /// period.
    MemoryOverLimit {
        /// Bytes in the pool when the node acted.
        used: u64,
        /// The pool's limit.
        limit: u64,
    },
    /// It used more CPU than it may (e.g. ran out of fuel too often).
    CpuOverLimit(String),
    /// Another policy violation, described.
    Policy(String),
    /// Its execution environment was stopped by the operator (`anode module stop`): not a
    /// fault, so its principal is not banned.
    EeStopped,
}

impl TerminationReason {
    /// The reason a terminated domain's queued or held packets are dropped for:
    /// `ee_stopped` when the operator stopped the EE, `domain_refused` otherwise.
    pub fn packet_drop_reason(&self) -> DropReason {
        match self {
            TerminationReason::EeStopped => DropReason::EeStopped,
            _ => DropReason::DomainRefused,
        }
    }
}

impl std::fmt::Display for TerminationReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TerminationReason::Exit => f.write_str("exit"),
            TerminationReason::ByParent => f.write_str("terminated by parent"),
            TerminationReason::AncestorTerminated(a) => write!(f, "ancestor {a} terminated"),
            TerminationReason::MemoryOverLimit { used, limit } => {
                write!(
                    f,
                    "memory over limit: pool holds {used} of {limit} bytes and was not relieved in time"
                )
            }
            TerminationReason::CpuOverLimit(s) => write!(f, "cpu over limit: {s}"),
            TerminationReason::Policy(s) => write!(f, "policy violation: {s}"),
            TerminationReason::EeStopped => f.write_str("its execution environment was stopped"),
        }
    }
}

/// Kinds of memory a domain is charged for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum MemKind {
    /// Packet buffers queued or held.
    Packet,
    /// Soft state.
    SoftState,
    /// Code (modules, compiled code).
    Code,
    /// Files (a capsule protocol's files, ABI v2).
    File,
}

impl MemKind {
    /// A short stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemKind::Packet => "packet",
            MemKind::SoftState => "soft_state",
            MemKind::Code => "code",
            MemKind::File => "file",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            MemKind::Packet => 0,
            MemKind::SoftState => 1,
            MemKind::Code => 2,
            MemKind::File => 3,
        }
    }
}

/// A memory pool's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PoolId(pub u32);

/// Per-domain counters (observability).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DomainCounters {
    /// Packets handled for the domain.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// CPU time charged: EE code plus node work on its behalf, ns.
    pub cpu_ns: u64,
    /// Times its EE code hit the maximum run time (fuel/steps exhausted).
    pub cpu_exhausted: u64,
    /// Memory held now, bytes (all kinds).
    pub memory_bytes: u64,
    /// The most memory it ever held.
    pub memory_peak: u64,
    /// Drops by reason.
    pub drops: BTreeMap<DropReason, u64>,
    /// Child domains terminated so far.
    pub child_terminations: u64,
}

impl DomainCounters {
    /// Counts a drop.
    pub fn drop(&mut self, reason: DropReason) {
        *self.drops.entry(reason).or_insert(0) += 1;
    }
}

/// A parent's hook, told before a child domain is terminated.
pub trait TerminationHandler: Send {
    /// `child` is about to end for `reason`. Work must be charged to `budget`; work beyond
    /// it is refused and the handler should return.
    fn imminent(&mut self, child: DomainId, reason: &TerminationReason, budget: &mut HandlerBudget);
}

/// The fixed budget of one handler call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerBudget {
    used: u64,
    overrun: bool,
}

/// A handler tried to work past its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("imminent-termination handler exceeded its budget of {HANDLER_BUDGET_NS} ns")]
pub struct BudgetExceeded;

impl HandlerBudget {
    pub(crate) fn new() -> Self {
        HandlerBudget {
            used: 0,
            overrun: false,
        }
    }

    /// Charges `ns` of work; refused (and remembered) once the budget is spent.
    pub fn charge(&mut self, ns: u64) -> Result<(), BudgetExceeded> {
        let next = self.used.saturating_add(ns);
        if next > HANDLER_BUDGET_NS {
            self.used = HANDLER_BUDGET_NS;
            self.overrun = true;
            return Err(BudgetExceeded);
        }
        self.used = next;
        Ok(())
    }

    /// Work charged so far, ns.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Whether the handler tried to exceed the budget.
    pub fn overrun(&self) -> bool {
        self.overrun
    }
}

/// Something the NodeOS reports (to the driver, the EE, the control socket).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum NodeOsEvent {
    /// A domain ended; its resources are back.
    Terminated {
        /// The domain.
        domain: DomainId,
        /// Its principal.
        principal: String,
        /// Who ended it.
        by: Terminator,
        /// Why.
        reason: TerminationReason,
    },
    /// A pool went over its limit: its EE must release memory before `deadline` or the node
    /// terminates its largest member.
    MemoryPressure {
        /// The pool.
        pool: PoolId,
        /// Bytes in it.
        used: u64,
        /// Its limit.
        limit: u64,
        /// When the node acts.
        #[serde(skip)]
        deadline: Instant,
        /// Its member domains.
        domains: Vec<DomainId>,
    },
    /// A pool is back within its limit.
    MemoryRelieved {
        /// The pool.
        pool: PoolId,
    },
    /// A parent's imminent-termination handler tried to work past its budget.
    HandlerOverrun {
        /// The parent.
        parent: DomainId,
        /// The child being terminated.
        child: DomainId,
    },
}

/// One live domain.
pub(crate) struct Domain {
    pub parent: Option<DomainId>,
    pub children: Vec<DomainId>,
    pub principal: Principal,
    pub policy: Policy,
    pub pool: PoolId,
    pub mem: [u64; 4],
    /// The root's child this domain is under (itself for such a child, the root for the
    /// root): in a node, the EE's domain. Its memory bound covers its whole subtree.
    pub top: DomainId,
    pub counters: DomainCounters,
    pub handler: Option<Box<dyn TerminationHandler>>,
}

impl std::fmt::Debug for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Domain")
            .field("parent", &self.parent)
            .field("principal", &self.principal)
            .field("pool", &self.pool)
            .field("mem", &self.mem)
            .field("handler", &self.handler.is_some())
            .finish()
    }
}

/// A domain as reported (control socket, metrics).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainInfo {
    /// Its id.
    pub id: DomainId,
    /// Its parent (`None` for the root).
    pub parent: Option<DomainId>,
    /// Its principal.
    pub principal: String,
    /// Its pool.
    pub pool: PoolId,
    /// CPU weight.
    pub cpu_share: u32,
    /// Memory limit (its policy's).
    pub memory_limit: u64,
    /// Memory held by kind: packet, soft state, code.
    pub memory_by_kind: [u64; 4],
    /// Open channels.
    pub channels: usize,
    /// Counters.
    pub counters: DomainCounters,
}
