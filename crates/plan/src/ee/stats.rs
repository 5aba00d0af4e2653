//! What the PLAN EE did, by outcome; every drop also goes to the node's counters as
//! `plan/<reason>`.

use std::collections::BTreeMap;

use anode_core::DropReason;

/// Counters of one PLAN EE.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanStats {
    /// Packets handed to the EE.
    pub packets: u64,
    /// Chunks evaluated (at their evaluation destination), whatever the outcome.
    pub evaluations: u64,
    /// Evaluations that ended with a value.
    pub completed: u64,
    /// Packets routed by a routing function from their header only.
    pub routed: u64,
    /// Child packets sent by OnRemote / OnNeighbor / RetransOnRemote.
    pub children: u64,
    /// Error reports sent to a handler at the source.
    pub error_reports: u64,
    /// Evaluation steps used, in total.
    pub steps: u64,
    /// `RetransOnRemote` packets sent again for want of an acknowledgement.
    pub retransmissions: u64,
    /// Packets dropped, by reason.
    pub drops: BTreeMap<DropReason, u64>,
}

impl PlanStats {
    /// Drops counted under `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops.get(&reason).copied().unwrap_or(0)
    }

    /// All drops.
    pub fn total_drops(&self) -> u64 {
        self.drops.values().sum()
    }
}
