//! [`MeteredPlan`]: the PLAN EE (`anode-plan`) under a [`crate::guard::DomainGuard`]
//! (feature `plan`), without changes to the PLAN crate.
//!
//! - **Principal** ([`PlanPrincipal`]): a packet signed (ANEP authentication option,
//!   scheme 1: [`crate::auth`]) by a key the node's policy names, `plan/key/<hex of the
//!   key>`, belongs to its signer, **authenticated**: its signature and sequence number are
//!   checked when the packet's turn comes (in the call the guard charges to that domain, the
//!   check's cost counted as [`VERIFY_STEPS`]), and a packet that fails is dropped
//!   (`bad_signature`, `replayed`) without running. Every other packet (unsigned, or signed
//!   by a key the policy does not name) belongs to the node it comes from,
//!   **unauthenticated**: keyed by the source address in its transit header, which anyone
//!   can forge, and named `plan/<source address>` (PLAN has no code identity: a packet
//!   carries its program). The two kinds have separate policies (`["plan/key/<hex>"]` per
//!   key; `["plan/<address>"]` or `["plan/*"]` for unauthenticated sources), so a node can
//!   give signed traffic more than anyone who merely claims an address. Every
//!   unauthenticated source's domain is a member of the group [`UNAUTHENTICATED`]
//!   (`plan/unauthenticated`, created under the EE's domain; the guard's groups), whose
//!   policy limits them all together: one CPU share against each signer's, one memory pool,
//!   one output bucket, at most `max_children` sources at once. So forging many source
//!   addresses buys no more than one. Packets a program sends on (`OnRemote`) are new,
//!   unsigned packets.
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

use crate::auth::Authenticator;
use crate::guard::{MeteredEe, UsageReport};

/// What checking one packet's signature costs, in interpreter steps: an ed25519
/// verification took 40.3 µs on the 2-core test machine (`cargo bench -p anode-nodeos
/// --features plan --bench auth`), 800 steps at the node's 50 ns per step.
pub const VERIFY_STEPS: u64 = 800;

/// The group of every unauthenticated PLAN principal (see the module docs): its policy
/// limits all unsigned traffic together.
pub const UNAUTHENTICATED: &str = "plan/unauthenticated";

/// The key of the signers' replay windows in the handed-over state.
const REPLAY_WINDOWS: &str = "replay_windows";

/// Whose work a PLAN packet is (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlanPrincipal {
    /// Unauthenticated: the source address its transit header claims.
    Source(NodeAddr),
    /// Authenticated: the ed25519 public key it is signed with (one the policy names).
    Key([u8; 32]),
}

impl PlanPrincipal {
    /// Whether the principal is a verified signer.
    pub fn is_authenticated(&self) -> bool {
        matches!(self, PlanPrincipal::Key(_))
    }
}

/// The PLAN EE, reporting to the NodeOS.
#[derive(Debug)]
pub struct MeteredPlan {
    ee: PlanEe,
    auth: Authenticator,
    reports: Vec<UsageReport<PlanPrincipal>>,
}

impl MeteredPlan {
    /// Wraps `ee`; every packet's principal is its source (no key is named).
    pub fn new(ee: PlanEe) -> Self {
        Self::with_keys(ee, [])
    }

    /// Wraps `ee`; packets signed by one of `keys` (ed25519 public keys) get their signer as
    /// principal.
    pub fn with_keys(ee: PlanEe, keys: impl IntoIterator<Item = [u8; 32]>) -> Self {
        MeteredPlan {
            ee,
            auth: Authenticator::new(keys),
            reports: Vec::new(),
        }
    }

    /// The keys a policy names: the principals `plan/key/<hex>` among `names`.
    pub fn keys_named<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<[u8; 32]> {
        names
            .into_iter()
            .filter_map(|n| match Self::principal_key(n) {
                Some(PlanPrincipal::Key(k)) => Some(k),
                _ => None,
            })
            .collect()
    }

    /// The PLAN EE.
    pub fn inner(&self) -> &PlanEe {
        &self.ee
    }

    /// The PLAN EE, mutably.
    pub fn inner_mut(&mut self) -> &mut PlanEe {
        &mut self.ee
    }

    /// The principal of unauthenticated packets from `src`.
    pub fn principal_of_source(src: NodeAddr) -> String {
        format!("plan/{src}")
    }

    /// The principal of packets signed by `key`.
    pub fn principal_of_signer(key: &[u8; 32]) -> String {
        format!("plan/key/{}", hex::encode(key))
    }

    /// The signers' replay windows as JSON (`None` while no signer sent anything).
    fn windows_json(&self) -> Option<serde_json::Value> {
        let windows = self.auth.windows();
        (!windows.is_empty()).then(|| {
            windows
                .into_iter()
                .map(|(k, top, seen)| {
                    serde_json::json!({ "key": hex::encode(k), "top": top, "seen": seen })
                })
                .collect()
        })
    }

    /// Restores the replay windows `windows_json` gave (from another process or from disk);
    /// how many were not restored (a key no longer named, or malformed).
    fn restore_windows(&mut self, windows: &[serde_json::Value]) -> usize {
        let mut lost = 0;
        for w in windows {
            let mut k = [0u8; 32];
            let restored = w
                .get("key")
                .and_then(serde_json::Value::as_str)
                .and_then(|h| hex::decode_to_slice(h, &mut k).ok())
                .zip(w.get("top").and_then(serde_json::Value::as_u64))
                .zip(w.get("seen").and_then(serde_json::Value::as_u64))
                .is_some_and(|((_, top), seen)| self.auth.restore_window(&k, top, seen));
            if !restored {
                lost += 1;
            }
        }
        lost
    }

    fn usage(&self) -> (u64, u64) {
        let s = self.ee.stats();
        (s.steps, s.dropped(anode_core::DropReason::BudgetExhausted))
    }

    fn report(&mut self, principal: Option<PlanPrincipal>, before: (u64, u64), extra: u64) {
        let after = self.usage();
        let units = after.0.saturating_sub(before.0).saturating_add(extra);
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
        self.report(None, before, 0);
    }

    fn handle_timeout(&mut self, ctx: &mut NodeContext<'_>) {
        let before = self.usage();
        self.ee.handle_timeout(ctx);
        self.report(None, before, 0);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.ee.poll_timeout()
    }

    fn hand_over(&mut self, now: Instant, out: &mut anode_core::handover::EeHandover) {
        self.ee.hand_over(now, out);
        if let Some(w) = self.windows_json() {
            // The signers' replay windows go with the EE's state, so a packet accepted before
            // an upgrade is still a replay after it.
            out.state = serde_json::json!({ "plan_ee": out.state.take(), REPLAY_WINDOWS: w });
        }
    }

    /// The replay windows, so a packet accepted before a cold restart is still a replay
    /// after it (the driver snapshots them every second: see `anode_node::durable`).
    fn durable_state(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({ REPLAY_WINDOWS: self.windows_json()? }))
    }

    fn restore_durable(&mut self, state: &serde_json::Value) -> Result<(), String> {
        let windows = state
            .get(REPLAY_WINDOWS)
            .and_then(serde_json::Value::as_array)
            .ok_or("no replay windows in the PLAN EE's kept state")?;
        match self.restore_windows(windows) {
            0 => Ok(()),
            lost => Err(format!(
                "{lost} signer replay window(s) not restored (key no longer named, or malformed)"
            )),
        }
    }

    fn take_over(
        &mut self,
        ctx: &mut NodeContext<'_>,
        state: &serde_json::Value,
    ) -> Result<(), String> {
        let Some(windows) = state
            .get(REPLAY_WINDOWS)
            .and_then(serde_json::Value::as_array)
        else {
            // No signer had sent anything (or an older node): the state is the EE's alone.
            return self.ee.take_over(ctx, state);
        };
        let lost = self.restore_windows(windows);
        let inner = state.get("plan_ee").unwrap_or(&serde_json::Value::Null);
        let r = if inner.is_null() {
            Ok(())
        } else {
            self.ee.take_over(ctx, inner)
        };
        match (r, lost) {
            (Ok(()), 0) => Ok(()),
            (r, lost) => Err([
                r.err(),
                (lost > 0).then(|| {
                    format!("{lost} signer replay window(s) not restored (key no longer named, or malformed)")
                }),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; ")),
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl MeteredEe for MeteredPlan {
    type Key = PlanPrincipal;

    fn principal_of(&self, pkt: &EePacket) -> Option<PlanPrincipal> {
        Some(match self.auth.claimed(&pkt.buf) {
            Some(k) => PlanPrincipal::Key(k),
            None => PlanPrincipal::Source(pkt.transit().src()),
        })
    }

    fn principal_name(key: &PlanPrincipal) -> String {
        match key {
            PlanPrincipal::Source(a) => Self::principal_of_source(*a),
            PlanPrincipal::Key(k) => Self::principal_of_signer(k),
        }
    }

    fn principal_key(name: &str) -> Option<PlanPrincipal> {
        let rest = name.strip_prefix("plan/")?;
        if let Some(h) = rest.strip_prefix("key/") {
            let mut k = [0u8; 32];
            hex::decode_to_slice(h, &mut k).ok()?;
            return Some(PlanPrincipal::Key(k));
        }
        rest.parse().ok().map(PlanPrincipal::Source)
    }

    fn group_of(key: &PlanPrincipal) -> Option<&'static str> {
        (!key.is_authenticated()).then_some(UNAUTHENTICATED)
    }

    fn authenticated(&self, key: &PlanPrincipal) -> Option<bool> {
        Some(key.is_authenticated())
    }

    fn handle_keyed(
        &mut self,
        ctx: &mut NodeContext<'_>,
        pkt: EePacket,
        key: Option<&PlanPrincipal>,
    ) {
        let before = self.usage();
        if let Some(PlanPrincipal::Key(k)) = key {
            // Checked here, in the call the guard charges to the key's domain, so a flood of
            // forgeries in a key's name spends that key's share, no one else's.
            if let Err(r) = self.auth.verify(k, &pkt.buf) {
                ctx.count_drop(self.ee.name(), r);
                self.report(key.copied(), before, VERIFY_STEPS);
                return;
            }
            self.ee.handle_packet(ctx, pkt);
            return self.report(key.copied(), before, VERIFY_STEPS);
        }
        self.ee.handle_packet(ctx, pkt);
        self.report(key.copied(), before, 0);
    }

    fn set_budget(&mut self, units: u64) {
        // `Limits::steps` is fixed at construction (see the module docs).
        let _ = units;
    }

    fn take_reports(&mut self, out: &mut Vec<UsageReport<PlanPrincipal>>) {
        out.append(&mut self.reports);
    }

    fn on_terminated(&mut self, principal: &PlanPrincipal, reason: crate::TerminationReason) {
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
        assert_eq!(
            MeteredPlan::principal_key("plan/198.18.0.1:3322"),
            Some(PlanPrincipal::Source(a))
        );
    }

    #[test]
    fn signers_are_named_by_their_key_and_parsed_back() {
        let k = [0xab; 32];
        let name = MeteredPlan::principal_of_signer(&k);
        assert_eq!(name, format!("plan/key/{}", "ab".repeat(32)));
        assert_eq!(
            MeteredPlan::principal_name(&PlanPrincipal::Key(k)),
            name.clone()
        );
        assert_eq!(
            MeteredPlan::principal_key(&name),
            Some(PlanPrincipal::Key(k))
        );
        assert_eq!(MeteredPlan::principal_key("plan/key/abcd"), None);
        assert_eq!(
            MeteredPlan::keys_named(["plan/*", name.as_str(), "capsule/*", "plan"]),
            vec![k]
        );
    }
}
