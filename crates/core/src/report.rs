//! Domain reports: how an EE running under the NodeOS layer (`anode-nodeos`) shows its
//! per-domain accounting to the node's control socket and metrics, without the core knowing
//! about domains. An EE that keeps no domains reports nothing (the default).

use std::collections::BTreeMap;

/// One domain's counters, as an EE reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DomainStat {
    /// The domain's id (unique within its EE's NodeOS).
    pub id: u32,
    /// Its parent (`None` for the root).
    pub parent: Option<u32>,
    /// Its principal.
    pub principal: String,
    /// Packets handled for it.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// CPU time charged, ns.
    pub cpu_ns: u64,
    /// Memory held now, bytes.
    pub memory_bytes: u64,
    /// Its policy's memory limit, bytes.
    pub memory_limit: u64,
    /// Drops by reason.
    pub drops: BTreeMap<crate::DropReason, u64>,
    /// Its children terminated so far.
    pub child_terminations: u64,
    /// Whether its principal was authenticated: `Some(true)` a verified signer,
    /// `Some(false)` a principal its packets merely claim (a PLAN source address); `None`
    /// where the EE's principals need no authentication (a capsule protocol is its code's
    /// hash, checked when the code is loaded) or for the EE's own domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authenticated: Option<bool>,
}

/// An EE's domains and NodeOS totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DomainReport {
    /// The EE's name.
    pub ee: String,
    /// Memory charged to all its domains, bytes.
    pub memory_used: u64,
    /// The bound on it, bytes.
    pub memory_limit: u64,
    /// Domains terminated so far.
    pub terminations: u64,
    /// The most recent terminations: (domain, principal, reason).
    pub recent_terminations: Vec<(u32, String, String)>,
    /// Live domains, by id.
    pub domains: Vec<DomainStat>,
}
