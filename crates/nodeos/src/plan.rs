//! [`MeteredPlan`]: the PLAN EE (`anode-plan`) under a [`crate::guard::DomainGuard`]
//! (feature `plan`), without changes to the PLAN crate.
//!
//! - **Principal**: the node a PLAN packet comes from, keyed by the source address in its
//!   transit header and named `plan/<source address>` (PLAN has no code identity: a packet
//!   carries its program); a packet without a readable transit header belongs to the EE
//!   itself.
//! - **CPU**: exact — the interpreter's step count before and after each call
//!   (`PlanStats::steps`); a call whose evaluation ran out of steps (`budget_exhausted`) counts
//!   as hitting the run-time limit.
//! - **Memory**: none reported. The PLAN EE bounds its own state by entry count (flow table,
//!   soft state, local queue: `PlanEeConfig`), shared by all sources; packet buffers are
//!   charged by the guard.
//! - **Budget**: the step budget is the EE's `Limits::steps`, fixed when it is built; the
//!   guard's run-time limit should be configured to match (`set_budget` cannot change it).
//! - **Termination**: the PLAN EE keeps no per-source state to discard; the guard refuses the
//!   source's packets from then on.

use std::any::Any;
use std::time::Instant;

use anode_core::{EePacket, ExecutionEnvironment, NodeContext};
use anode_plan::ee::PlanEe;
use anode_routing::LinkId;
use anode_wire::NodeAddr;
use anode_wire::control::Control;

use crate::guard::{MeteredEe, UsageReport};

/// The PLAN EE, reporting to the NodeOS.
#[derive(Debug)]
pub struct MeteredPlan {
    ee: PlanEe,
    reports: Vec<UsageReport<NodeAddr>>,
}

impl MeteredPlan {
    /// Wraps `ee`.
    pub fn new(ee: PlanEe) -> Self {
        MeteredPlan {
            ee,
            reports: Vec::new(),
        }
    }

    /// The PLAN EE.
    pub fn inner(&self) -> &PlanEe {
        &self.ee
    }

    /// The PLAN EE, mutably.
    pub fn inner_mut(&mut self) -> &mut PlanEe {
        &mut self.ee
    }

    /// The principal of packets from `src`.
    pub fn principal_of_source(src: NodeAddr) -> String {
        format!("plan/{src}")
    }

    fn usage(&self) -> (u64, u64) {
        let s = self.ee.stats();
        (s.steps, s.dropped(anode_core::DropReason::BudgetExhausted))
    }

    fn report(&mut self, principal: Option<NodeAddr>, before: (u64, u64)) {
        let after = self.usage();
        let units = after.0.saturating_sub(before.0);
        let exhausted = after.1 > before.1;
        if units > 0 || exhausted {
            self.reports.push(UsageReport {
                principal,
                units,
                exhausted,
                ..UsageReport::default()
            });
        }
    }
}

impl ExecutionEnvironment for MeteredPlan {
    fn type_id(&self) -> u16 {
        ExecutionEnvironment::type_id(&self.ee)
    }

    fn name(&self) -> &str {
        self.ee.name()
    }

    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        let principal = self.principal_of(&pkt);
        self.handle_keyed(ctx, pkt, principal.as_ref());
    }

    fn handle_control(&mut self, ctx: &mut NodeContext<'_>, link: LinkId, msg: &Control) {
        let before = self.usage();
        self.ee.handle_control(ctx, link, msg);
        self.report(None, before);
    }

    fn handle_timeout(&mut self, ctx: &mut NodeContext<'_>) {
        let before = self.usage();
        self.ee.handle_timeout(ctx);
        self.report(None, before);
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
        self.ee.take_over(ctx, state)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl MeteredEe for MeteredPlan {
    type Key = NodeAddr;

    fn principal_of(&self, pkt: &EePacket) -> Option<NodeAddr> {
        Some(pkt.transit().src())
    }

    fn principal_name(key: &NodeAddr) -> String {
        Self::principal_of_source(*key)
    }

    fn principal_key(name: &str) -> Option<NodeAddr> {
        name.strip_prefix("plan/")?.parse().ok()
    }

    fn handle_keyed(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket, key: Option<&NodeAddr>) {
        let before = self.usage();
        self.ee.handle_packet(ctx, pkt);
        self.report(key.copied(), before);
    }

    fn set_budget(&mut self, units: u64) {
        // `Limits::steps` is fixed at construction (see the module docs).
        let _ = units;
    }

    fn take_reports(&mut self, out: &mut Vec<UsageReport<NodeAddr>>) {
        out.append(&mut self.reports);
    }

    fn on_terminated(&mut self, principal: &NodeAddr, reason: crate::TerminationReason) {
        let _ = (principal, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_names_the_source() {
        let a: anode_wire::NodeAddr = "198.18.0.1:3322".parse().unwrap();
        assert_eq!(MeteredPlan::principal_of_source(a), "plan/198.18.0.1:3322");
    }
}
