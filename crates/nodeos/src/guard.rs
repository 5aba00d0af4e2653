//! [`DomainGuard`]: puts an execution environment under the NodeOS.
//!
//! The guard is itself an `ExecutionEnvironment` registered for the inner EE's Type ID. Each
//! packet the node hands it is mapped to a domain (one per principal the inner EE names, e.g.
//! one per protocol / code group, created under the EE's own domain with the principal's
//! configured policy, or the guard's protocol policy when none is configured), charged as a
//! packet buffer to that domain's pool, and queued on the domain's queue of a
//! [`TieredScheduler`]. Queues are served by deficit round robin while the EE's CPU budget
//! lasts: the budget refills at `cpu_ns_per_sec` of virtual time (the CPU capacity given to
//! this EE) up to `max_burst_ns`. Each call gets at most `max_slice_ns` of run time (converted
//! to the EE's units: fuel, steps) — the maximum run time between yields.
//!
//! What a call sends (the node's transmit totals before and after it) is charged to the
//! domain's output bucket at its policy's `channel_bandwidth` (bytes per second, a burst of
//! a tenth of a second, at least [`MIN_OUT_BURST`]); while the domain owes bytes its packets
//! are dropped (`bandwidth`) instead of run, so a protocol that multiplies packets (a capsule
//! storm) is held to its bandwidth on the wire, not only to its CPU share.
//!
//! After every call the inner EE reports ([`MeteredEe::take_reports`]) the units it used and
//! the memory it gained or freed per principal; the guard charges them to the domains. Policy:
//! - a domain that hits the run-time limit `max_exhaustions` calls in a row is terminated
//!   (`cpu over limit`); one whose code faults (traps) that many calls in a row too
//!   (`policy violation`); before that, DRR already confines it to its share;
//! - a soft-state or code charge over the domain's policy terminates it (`policy violation`);
//! - a pool over its limit gets [`MeteredEe::on_memory_pressure`] and, if not remedied by the
//!   grace deadline, the NodeOS terminates its largest member (`memory over limit`).
//!
//! With [`GuardConfig::terminate`] off the guard terminates nothing itself: a domain at the
//! run-time limit is only confined by DRR, and a refused soft-state or code charge gets
//! [`MeteredEe::on_memory_pressure`] instead (the EE frees the state it holds for the
//! principal). The NodeOS still terminates a pool that stays over its limit past the grace
//! period, so the node's memory bound holds either way.
//!
//! A terminated domain's queued packets are dropped, its cut-through channels closed, its
//! memory returned, the inner EE told
//! ([`MeteredEe::on_terminated`]) to discard its state, and the reason logged as an
//! `Event::Log` from "nodeos". Its principal stays refused for the guard's lifetime (up to
//! `max_banned` principals), so a hostile protocol cannot come straight back.
//!
//! **Groups.** A principal the EE puts in a group ([`MeteredEe::group_of`], e.g. every
//! unauthenticated PLAN source in `plan/unauthenticated`) gets its domain under the group's
//! domain, which the guard creates under the EE's at the group's first member with the
//! group's configured policy (or the EE's own with a CPU share of 1). The group limits its
//! members together: its CPU share is one entry of the DRR's top tier, shared by its members
//! in a tier of their own; their packet buffers share one memory pool of the group's
//! `memory_bytes`; what each sends is charged to its own output bucket and to the group's;
//! and no more members live at once than the group's `max_children`. A group holds no state
//! of its own: it lives as long as the guard.

use std::any::Any;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::{Duration, Instant};

use anode_core::{DropReason, EePacket, ExecutionEnvironment, NodeContext};
use anode_routing::LinkId;
use anode_wire::control::Control;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::chan::TokenBucket;
use crate::{
    CpuMeter, Credentials, DomainId, MemKind, NodeOs, NodeOsEvent, Policy, PoolId, Principal,
    SharedNodeOs, TerminationReason, Terminator, TieredScheduler,
};

/// Smallest burst of a domain's output bucket, bytes.
pub const MIN_OUT_BURST: u64 = 16 << 10;

/// What the inner EE reports for one principal after a call; `K` is the EE's
/// [`MeteredEe::Key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageReport<K = String> {
    /// The principal (protocol / code group); `None` for the EE itself.
    pub principal: Option<K>,
    /// Work units used (fuel, steps).
    pub units: u64,
    /// Whether the call hit its run-time limit.
    pub exhausted: bool,
    /// The call failed otherwise (a trap: memory limit, bad access...), named.
    pub fault: Option<DropReason>,
    /// Soft-state bytes gained (positive) or freed (negative).
    pub soft_state_delta: i64,
    /// Code bytes gained or freed.
    pub code_delta: i64,
    /// File bytes gained or freed.
    pub file_delta: i64,
    /// Bytes sent for the principal's packets by work the guard did not wrap itself (a
    /// batch run at a timeout, capsules released when their code came): charged to the
    /// domain's output bucket. Work inside a packet's call is measured by the guard.
    pub tx_bytes: u64,
}

impl<K> Default for UsageReport<K> {
    fn default() -> Self {
        UsageReport {
            principal: None,
            units: 0,
            exhausted: false,
            fault: None,
            soft_state_delta: 0,
            code_delta: 0,
            file_delta: 0,
            tx_bytes: 0,
        }
    }
}

/// An EE that reports its work to the NodeOS.
///
/// Principals are named twice: by a [`MeteredEe::Key`] the guard works with per packet (a
/// code hash, a source address: cheap to hash and compare, no allocation), and by the
/// string [`MeteredEe::principal_name`] makes of it once, when the principal's domain is
/// created (its NodeOS credentials and the name policies are configured under).
pub trait MeteredEe: ExecutionEnvironment {
    /// A principal as the EE identifies it.
    type Key: Clone + Eq + Hash + Debug + Send + 'static;
    /// The principal a packet's work belongs to (`None`: the EE's own domain).
    fn principal_of(&self, pkt: &EePacket) -> Option<Self::Key>;
    /// The principal's name: its NodeOS credentials (e.g. `capsule/<hex>`).
    fn principal_name(key: &Self::Key) -> String;
    /// Runs a packet whose principal the guard already read with
    /// [`MeteredEe::principal_of`] (so the EE need not read it again).
    fn handle_keyed(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket, key: Option<&Self::Key>) {
        let _ = key;
        self.handle_packet(ctx, pkt);
    }
    /// The principal a [`MeteredEe::principal_name`] names, for state handed over by another
    /// process (`None`: not one of this EE's names; the default knows none).
    fn principal_key(name: &str) -> Option<Self::Key> {
        let _ = name;
        None
    }
    /// The group `key` belongs to (a principal name, e.g. `plan/unauthenticated`), whose
    /// domain's policy limits all its members together (see the module docs); `None` (the
    /// default): its domain is a child of the EE's.
    fn group_of(key: &Self::Key) -> Option<&'static str> {
        let _ = key;
        None
    }
    /// Whether `key` is an authenticated principal: `Some(true)` a verified signer,
    /// `Some(false)` one its packets merely claim; `None` (the default) where the question
    /// does not arise (a capsule protocol is its code's hash).
    fn authenticated(&self, key: &Self::Key) -> Option<bool> {
        let _ = key;
        None
    }
    /// Whether the EE reports every byte it sends for a principal in
    /// [`UsageReport::tx_bytes`] (the guard then does not measure its calls' sends itself).
    /// The default: no, the guard charges what a packet's call sent to its domain.
    fn reports_tx(&self) -> bool {
        false
    }
    /// The run-time limit of the next call, in the EE's units.
    fn set_budget(&mut self, units: u64);
    /// Appends the usage since the last call, per principal, to `out` (a buffer the guard
    /// reuses, so reporting allocates nothing per packet).
    fn take_reports(&mut self, out: &mut Vec<UsageReport<Self::Key>>);
    /// `principal`'s pool is over its limit: free what you can (report it).
    fn on_memory_pressure(&mut self, principal: &Self::Key) {
        let _ = principal;
    }
    /// `principal`'s domain ended: discard its state (without reporting it). With
    /// [`TerminationReason::EeStopped`] (the operator stopped the EE, no fault) state meant to
    /// outlive the EE's run, such as a capsule protocol's files, stays.
    fn on_terminated(&mut self, principal: &Self::Key, reason: TerminationReason);
}

/// Settings of a guard.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    /// The EE's own principal (its domain is created under the root).
    pub ee_principal: String,
    /// Policy for protocol principals with none configured.
    pub protocol_policy: Policy,
    /// CPU capacity for this EE, ns per second of (virtual) time.
    pub cpu_ns_per_sec: u64,
    /// Most CPU budget banked, ns.
    pub max_burst_ns: u64,
    /// Maximum run time of one call, ns.
    pub max_slice_ns: u64,
    /// DRR quantum per weight unit, ns.
    pub quantum_ns: u64,
    /// Packets queued per domain.
    pub max_queue: usize,
    /// Node work charged per packet (classification, queueing), ns.
    pub node_ns_per_packet: u64,
    /// Consecutive run-time exhaustions before termination.
    pub max_exhaustions: u32,
    /// Unit conversion.
    pub meter: CpuMeter,
    /// Principals remembered as refused.
    pub max_banned: usize,
    /// Whether the guard terminates domains (run-time streaks, policy violations); off: it
    /// only throttles and asks the EE to free memory (see the module docs).
    pub terminate: bool,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            ee_principal: "ee".into(),
            protocol_policy: Policy::default(),
            cpu_ns_per_sec: 500_000_000,
            max_burst_ns: 5_000_000,
            max_slice_ns: 1_000_000,
            quantum_ns: 100_000,
            max_queue: 256,
            node_ns_per_packet: 500,
            max_exhaustions: 8,
            meter: CpuMeter::new(1000),
            max_banned: 4096,
            terminate: true,
        }
    }
}

/// An EE under the NodeOS (see the module docs).
pub struct DomainGuard<E: MeteredEe> {
    inner: E,
    os: SharedNodeOs,
    cfg: GuardConfig,
    sched: TieredScheduler<EePacket>,
    ee_domain: DomainId,
    /// Group domains by name, with their shared memory pools (members: `sched.group_of`).
    groups: FxHashMap<&'static str, (DomainId, PoolId)>,
    by_principal: FxHashMap<E::Key, DomainId>,
    /// The principal of each live domain but the EE's own.
    keys: FxHashMap<DomainId, E::Key>,
    streak: FxHashMap<DomainId, u32>,
    out: FxHashMap<DomainId, TokenBucket>,
    banned: FxHashSet<E::Key>,
    /// Reports being applied (reused).
    scratch: Vec<UsageReport<E::Key>>,
    budget_ns: i64,
    last: Option<Instant>,
    name: String,
}

impl<E: MeteredEe> std::fmt::Debug for DomainGuard<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DomainGuard")
            .field("name", &self.name)
            .field("queued", &self.sched.len())
            .field("domains", &self.by_principal.len())
            .finish()
    }
}

impl<E: MeteredEe> DomainGuard<E> {
    /// Guards `inner` with a NodeOS of its own, `os`; the EE's own domain is created for
    /// `cfg.ee_principal` (whose policy must be configured in `os`).
    pub fn new(inner: E, os: NodeOs, cfg: GuardConfig) -> Result<Self, crate::NodeOsError> {
        Self::shared(inner, SharedNodeOs::new(os), cfg)
    }

    /// Guards `inner` with the node's NodeOS `os`, shared with the node's other EEs: the
    /// EE's own domain is created under the node's root for `cfg.ee_principal` (whose policy
    /// must be configured in `os`), and this guard takes only the NodeOS events about
    /// domains under it.
    pub fn shared(
        inner: E,
        os: SharedNodeOs,
        cfg: GuardConfig,
    ) -> Result<Self, crate::NodeOsError> {
        let ee_domain =
            os.lock()
                .create_domain(DomainId::ROOT, &Credentials::new(&cfg.ee_principal), None)?;
        let name = format!("{}+nodeos", inner.name());
        // Start with a full burst, so the first packets need not wait for a timer.
        let budget_ns = i64::try_from(cfg.max_burst_ns).unwrap_or(i64::MAX);
        Ok(DomainGuard {
            inner,
            os,
            sched: TieredScheduler::new(cfg.quantum_ns, cfg.max_queue),
            cfg,
            ee_domain,
            groups: FxHashMap::default(),
            by_principal: FxHashMap::default(),
            keys: FxHashMap::default(),
            streak: FxHashMap::default(),
            out: FxHashMap::default(),
            banned: FxHashSet::default(),
            scratch: Vec::new(),
            budget_ns,
            last: None,
            name,
        })
    }

    /// The inner EE.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// The inner EE, mutably (e.g. for an operator's code install or evict; what that changes
    /// is reported at the EE's next call).
    pub fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }

    /// The guard's settings.
    pub fn config(&self) -> &GuardConfig {
        &self.cfg
    }

    /// The NodeOS (domains, pools, counters), locked: shared with the node's other EEs.
    pub fn nodeos(&self) -> std::sync::MutexGuard<'_, NodeOs> {
        self.os.lock()
    }

    /// The EE's own domain.
    pub fn ee_domain(&self) -> DomainId {
        self.ee_domain
    }

    /// The domain of the principal named `principal`, if live (a scan: for tools and tests).
    pub fn domain_of(&self, principal: &str) -> Option<DomainId> {
        self.by_principal
            .iter()
            .find(|(k, _)| E::principal_name(k) == principal)
            .map(|(_, d)| *d)
    }

    /// The domain of the principal `key`, if live.
    pub fn domain_of_key(&self, key: &E::Key) -> Option<DomainId> {
        self.by_principal.get(key).copied()
    }

    /// Whether the principal named `principal` was terminated and is refused (a scan).
    pub fn is_banned(&self, principal: &str) -> bool {
        self.banned
            .iter()
            .any(|k| E::principal_name(k) == principal)
    }

    /// Packets queued.
    pub fn queued(&self) -> usize {
        self.sched.len()
    }

    fn refill(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let dt = now.saturating_duration_since(last).as_nanos();
            let add = dt.saturating_mul(u128::from(self.cfg.cpu_ns_per_sec)) / 1_000_000_000;
            let add = i64::try_from(add).unwrap_or(i64::MAX);
            let cap = i64::try_from(self.cfg.max_burst_ns).unwrap_or(i64::MAX);
            self.budget_ns = self.budget_ns.saturating_add(add).min(cap);
        }
        if self.last.is_none_or(|l| now > l) {
            self.last = Some(now);
        }
    }

    fn domain_for(&mut self, principal: Option<&E::Key>) -> Option<DomainId> {
        let Some(key) = principal else {
            return Some(self.ee_domain);
        };
        if let Some(d) = self.by_principal.get(key) {
            return Some(*d);
        }
        if self.banned.contains(key) {
            return None;
        }
        let group = match E::group_of(key) {
            Some(name) => Some(self.group(name)?),
            None => None,
        };
        let p = E::principal_name(key);
        let (parent, pool) = group.map_or((self.ee_domain, None), |(g, pool)| (g, Some(pool)));
        let d = {
            let mut os = self.os.lock();
            if os.policies_mut().get(&Principal(p.clone())).is_none() {
                os.policies_mut()
                    .insert(&p, self.cfg.protocol_policy.clone());
            }
            os.create_domain(parent, &Credentials::new(&p), pool).ok()?
        };
        if let Some((g, _)) = group {
            self.sched.join(d, g);
        }
        self.weigh(d);
        self.by_principal.insert(key.clone(), d);
        self.keys.insert(d, key.clone());
        Some(d)
    }

    /// Sets `d`'s DRR weight and output bucket from its policy.
    fn weigh(&mut self, d: DomainId) {
        let (w, bw) = self
            .os
            .lock()
            .policy(d)
            .map_or((1, u64::MAX), |x| (x.cpu_share, x.channel_bandwidth));
        self.sched.set_weight(d, w);
        // An unlimited bandwidth needs no bucket (nothing to check or charge per packet).
        if bw != u64::MAX {
            self.out
                .insert(d, TokenBucket::new(bw, (bw / 10).max(MIN_OUT_BURST)));
        }
    }

    /// The domain of group `name` and its members' shared pool, created at its first member
    /// (see the module docs); `None` if the NodeOS refuses it.
    fn group(&mut self, name: &'static str) -> Option<(DomainId, PoolId)> {
        if let Some(g) = self.groups.get(name) {
            return Some(*g);
        }
        let (g, pool) = {
            let mut os = self.os.lock();
            if os
                .policies_mut()
                .get(&Principal(name.to_string()))
                .is_none()
            {
                // By default the group may have what the EE has, and weighs as one principal.
                let pol = Policy {
                    cpu_share: 1,
                    ..os.policy(self.ee_domain)?.clone()
                };
                os.policies_mut().insert(name, pol);
            }
            let g = os
                .create_domain(self.ee_domain, &Credentials::new(name), None)
                .ok()?;
            let limit = os.policy(g).map_or(0, |p| p.memory_bytes);
            (g, os.create_shared_pool(g, limit).ok()?)
        };
        self.sched.add_group(g);
        self.weigh(g);
        self.groups.insert(name, (g, pool));
        Some((g, pool))
    }

    /// Charges `bytes` sent for `d` to its output bucket and its group's.
    fn charge_out(&mut self, d: DomainId, now: Instant, bytes: u64) {
        if let Some(b) = self.out.get_mut(&d) {
            b.charge(now, bytes);
        }
        if let Some(g) = self.sched.group_of(d)
            && let Some(b) = self.out.get_mut(&g)
        {
            b.charge(now, bytes);
        }
    }

    /// Applies the usage the EE reports for work outside a packet's call (a timeout: the
    /// capsules its workers ran in a batch; a control message: capsules released when their
    /// code came): the CPU it charged comes out of the EE's budget, as a call's does in
    /// `serve`.
    fn apply_outside_reports(&mut self, now: Instant) {
        let charged = self.apply_reports(now);
        self.budget_ns = self
            .budget_ns
            .saturating_sub(i64::try_from(charged).unwrap_or(i64::MAX));
    }

    /// Applies the EE's usage reports, each domain's CPU also off its DRR deficit; returns
    /// the CPU they charged, ns (to any domain).
    fn apply_reports(&mut self, now: Instant) -> u64 {
        let mut charged = 0u64;
        // Two rounds: the second applies what an `on_memory_pressure` of the first freed.
        for _ in 0..2 {
            let mut reports = std::mem::take(&mut self.scratch);
            self.inner.take_reports(&mut reports);
            let done = reports.is_empty();
            if !done {
                charged = charged.saturating_add(self.apply(&mut reports, now));
            }
            reports.clear();
            self.scratch = reports;
            if done {
                break;
            }
        }
        charged
    }

    /// Applies `reports`; returns the CPU they charged, ns.
    fn apply(&mut self, reports: &mut Vec<UsageReport<E::Key>>, now: Instant) -> u64 {
        let mut charged = 0u64;
        for r in reports.drain(..) {
            // CPU for a principal without a live domain (terminated meanwhile, or never
            // seen) is the EE's own; its memory changes are not (its state was discarded).
            let known = match &r.principal {
                None => Some(self.ee_domain),
                Some(p) => self.by_principal.get(p).copied(),
            };
            let d = known.unwrap_or(self.ee_domain);
            if r.tx_bytes > 0 {
                self.charge_out(d, now, r.tx_bytes);
            }
            let ns = self.cfg.meter.to_ns(r.units);
            charged = charged.saturating_add(ns);
            self.os.lock().charge_cpu(d, ns);
            if ns > 0 {
                // The work is the reporting domain's, whichever packet's call it came in.
                self.sched.complete(d, ns);
            }
            if r.exhausted {
                self.os.lock().note_cpu_exhausted(d);
            }
            if r.exhausted || r.fault.is_some() {
                let s = self.streak.entry(d).or_insert(0);
                *s += 1;
                if self.cfg.terminate && *s >= self.cfg.max_exhaustions && d != self.ee_domain {
                    let reason = match r.fault {
                        None => TerminationReason::CpuOverLimit(format!(
                            "hit the {} ns run-time limit {} calls in a row",
                            self.cfg.max_slice_ns, s
                        )),
                        Some(f) => TerminationReason::Policy(format!(
                            "its code failed ({f}) {s} calls in a row"
                        )),
                    };
                    let _ = self.os.lock().terminate(d, Terminator::Node, reason);
                    continue;
                }
            } else if r.units > 0 {
                // A run that completed ends the streak (memory-only reports do not).
                self.streak.remove(&d);
            }
            if known.is_none() {
                continue;
            }
            for (kind, delta) in [
                (MemKind::SoftState, r.soft_state_delta),
                (MemKind::Code, r.code_delta),
                (MemKind::File, r.file_delta),
            ] {
                if delta > 0 {
                    let charged = self
                        .os
                        .lock()
                        .charge_mem(d, kind, delta.unsigned_abs(), now);
                    if let Err(e) = charged
                        && d != self.ee_domain
                    {
                        if self.cfg.terminate {
                            let _ = self.os.lock().terminate(
                                d,
                                Terminator::Node,
                                TerminationReason::Policy(e.to_string()),
                            );
                        } else if let Some(p) = &r.principal {
                            self.os.lock().count_drop(d, DropReason::MemoryRefused);
                            // What it frees is reported and applied in the next round.
                            self.inner.on_memory_pressure(p);
                        }
                        break;
                    }
                } else if delta < 0 {
                    self.os.lock().release_mem(d, kind, delta.unsigned_abs());
                }
            }
        }
        charged
    }

    fn drain_events(&mut self, ctx: &mut NodeContext<'_>) {
        loop {
            // Bound first: the lock must not live into the arms, which take it again.
            let next = self.os.lock().poll_event_under(self.ee_domain);
            let Some(e) = next else {
                break;
            };
            match e {
                NodeOsEvent::Terminated {
                    domain,
                    principal,
                    by,
                    reason,
                } => {
                    // Its queued packets end here: dropped, each counted.
                    let stopped = reason == TerminationReason::EeStopped;
                    let why = reason.packet_drop_reason();
                    for pkt in self.sched.remove(domain) {
                        ctx.drop_held(&self.name, pkt, why);
                    }
                    self.streak.remove(&domain);
                    self.out.remove(&domain);
                    // A group terminated (its members go with it): made afresh at the next.
                    self.groups.retain(|_, (g, _)| *g != domain);
                    if let Some(k) = self.keys.remove(&domain) {
                        self.by_principal.remove(&k);
                        self.inner.on_terminated(&k, reason.clone());
                        // A fault bans the principal; the operator stopping the EE does not.
                        if !stopped && self.banned.len() < self.cfg.max_banned {
                            self.banned.insert(k);
                        }
                    }
                    // Its cut-through channels close with it.
                    let cuts = ctx.close_cut_owner(&principal);
                    let cuts = if cuts > 0 {
                        format!(" ({cuts} cut-through channels closed)")
                    } else {
                        String::new()
                    };
                    ctx.log(
                        "nodeos",
                        format!(
                            "domain {domain} ({principal}) terminated by {by:?}: {reason}{cuts}"
                        ),
                    );
                }
                NodeOsEvent::MemoryPressure { domains, .. } => {
                    for d in domains {
                        if let Some(k) = self.keys.get(&d).cloned() {
                            self.inner.on_memory_pressure(&k);
                        }
                    }
                    let now = ctx.now();
                    self.apply_reports(now);
                }
                NodeOsEvent::MemoryRelieved { .. } | NodeOsEvent::HandlerOverrun { .. } => {}
            }
        }
    }

    /// Whether `d` (or its group) still owes output bytes at `now`.
    fn owes(&mut self, d: DomainId, now: Instant) -> bool {
        if self.out.get_mut(&d).is_some_and(|b| b.in_debt(now)) {
            return true;
        }
        self.sched
            .group_of(d)
            .is_some_and(|g| self.out.get_mut(&g).is_some_and(|b| b.in_debt(now)))
    }

    /// Counts a drop of one of `d`'s packets for the domain and for the EE.
    fn count_drop(&mut self, ctx: &mut NodeContext<'_>, d: DomainId, r: DropReason) {
        self.os.lock().count_drop(d, r);
        ctx.count_drop(&self.name, r);
    }

    fn serve(&mut self, ctx: &mut NodeContext<'_>) {
        let now = ctx.now();
        let units = self.cfg.meter.units_for(self.cfg.max_slice_ns);
        // Whether the events were drained since the last thing that could raise one.
        let mut drained = false;
        while self.budget_ns > 0 {
            let Some((d, mut pkt)) = self.sched.dequeue() else {
                break;
            };
            drained = false;
            let len = pkt.buf.len() as u64;
            let owes = self.owes(d, now);
            {
                // One lock for the packet's bookkeeping before its call.
                let mut os = self.os.lock();
                os.release_mem(d, MemKind::Packet, len);
                if owes {
                    os.count_drop(d, DropReason::Bandwidth);
                    os.charge_cpu(d, self.cfg.node_ns_per_packet);
                } else {
                    os.count_packet(d, len);
                }
            }
            if owes {
                ctx.drop_held(&self.name, pkt, DropReason::Bandwidth);
                self.sched.complete(d, self.cfg.node_ns_per_packet);
                self.budget_ns = self
                    .budget_ns
                    .saturating_sub(i64::try_from(self.cfg.node_ns_per_packet).unwrap_or(i64::MAX));
                continue;
            }
            let resumed = ctx.resume(&mut pkt);
            self.inner.set_budget(units);
            let (_, tx0) = ctx.tx_totals();
            let key = self.keys.get(&d).cloned();
            self.inner.handle_keyed(ctx, pkt, key.as_ref());
            ctx.finish(resumed);
            let sent = ctx.tx_totals().1.saturating_sub(tx0);
            if sent > 0 && !self.inner.reports_tx() {
                self.charge_out(d, now, sent);
            }
            // The node's work on the packet to `d`, and what the EE's reports charged to
            // their domains (each deficit too), once each (also when the reports
            // terminated `d`).
            self.os.lock().charge_cpu(d, self.cfg.node_ns_per_packet);
            self.sched.complete(d, self.cfg.node_ns_per_packet);
            let cost = self
                .apply_reports(now)
                .saturating_add(self.cfg.node_ns_per_packet);
            self.budget_ns = self
                .budget_ns
                .saturating_sub(i64::try_from(cost).unwrap_or(i64::MAX));
            self.drain_events(ctx);
            drained = true;
        }
        if !drained {
            self.drain_events(ctx);
        }
    }
}

impl<E: MeteredEe + 'static> ExecutionEnvironment for DomainGuard<E> {
    fn type_id(&self) -> u16 {
        self.inner.type_id()
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        let now = ctx.now();
        self.refill(now);
        let principal = self.inner.principal_of(&pkt);
        let Some(d) = self.domain_for(principal.as_ref()) else {
            ctx.count_drop(&self.name, DropReason::DomainRefused);
            return;
        };
        if self.owes(d, now) {
            return self.count_drop(ctx, d, DropReason::Bandwidth);
        }
        let len = pkt.buf.len() as u64;
        if self
            .os
            .lock()
            .charge_mem(d, MemKind::Packet, len, now)
            .is_err()
        {
            self.count_drop(ctx, d, DropReason::Memory);
            // The refusal may have started a grace period: tell the EE now.
            self.drain_events(ctx);
            return;
        }
        let mut pkt = pkt;
        ctx.hold(&mut pkt);
        if self.sched.enqueue(d, pkt).is_err() {
            ctx.unhold();
            self.os.lock().release_mem(d, MemKind::Packet, len);
            self.count_drop(ctx, d, DropReason::QueueFull);
            return;
        }
        self.serve(ctx);
    }

    fn handle_control(&mut self, ctx: &mut NodeContext<'_>, link: LinkId, msg: &Control) {
        self.inner.handle_control(ctx, link, msg);
        let now = ctx.now();
        self.apply_outside_reports(now);
        self.drain_events(ctx);
    }

    fn handle_timeout(&mut self, ctx: &mut NodeContext<'_>) {
        let now = ctx.now();
        self.refill(now);
        // Pending callbacks first, so the EE gets its chance before a deadline acts.
        self.drain_events(ctx);
        self.os.lock().handle_timeout(now);
        if self.inner.poll_timeout().is_some_and(|t| t <= now) {
            self.inner.handle_timeout(ctx);
            self.apply_outside_reports(now);
        }
        self.drain_events(ctx);
        self.serve(ctx);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let queued = (!self.sched.is_empty())
            .then_some(self.last)
            .flatten()
            .map(|last| {
                if self.budget_ns > 0 {
                    last
                } else {
                    let need = u128::from(self.budget_ns.unsigned_abs()) + 1;
                    let ns = need * 1_000_000_000 / u128::from(self.cfg.cpu_ns_per_sec.max(1));
                    last + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
                }
            });
        // Events another EE's call raised about our domains (a pool deadline it ran) are
        // ours to act on at once.
        let os = {
            let os = self.os.lock();
            if os.has_events_under(self.ee_domain) {
                self.last.or(os.poll_timeout())
            } else {
                os.poll_timeout()
            }
        };
        [self.inner.poll_timeout(), os, queued]
            .into_iter()
            .flatten()
            .min()
    }

    /// The operator stopped this EE: every protocol domain under it ends (reason
    /// [`TerminationReason::EeStopped`], no ban): its queued packets are dropped as
    /// `ee_stopped`, the EE forgets its state (code in memory, soft state) and its cut-through
    /// channels close. The EE's own domain stays, and domains are made afresh once it runs
    /// again.
    fn on_stop(&mut self, ctx: &mut NodeContext<'_>) {
        let mut ds: Vec<DomainId> = self.keys.keys().copied().collect();
        ds.sort_unstable();
        for d in &ds {
            let _ = self
                .os
                .lock()
                .terminate(*d, Terminator::Node, TerminationReason::EeStopped);
        }
        self.drain_events(ctx);
        if !ds.is_empty() {
            ctx.log(
                "nodeos",
                format!("{} stopped: {} protocol domains ended", self.name, ds.len()),
            );
        }
    }

    /// The packets queued for domains (copies) and the inner EE's part; the banned
    /// principals by name, so a terminated hostile protocol stays out after an upgrade. The
    /// domains themselves end with this process: the successor creates them afresh.
    fn hand_over(&mut self, now: Instant, out: &mut anode_core::handover::EeHandover) {
        self.inner.hand_over(now, out);
        out.held.extend(
            self.sched
                .items()
                .map(|p| anode_core::handover::HeldPacket {
                    link: p.link.map(|l| l.0),
                    buf: p.buf.clone(),
                }),
        );
        let mut banned: Vec<String> = self.banned.iter().map(E::principal_name).collect();
        banned.sort_unstable();
        out.state = serde_json::json!({ "inner": out.state.take(), "banned": banned });
    }

    fn take_over(
        &mut self,
        ctx: &mut NodeContext<'_>,
        state: &serde_json::Value,
    ) -> Result<(), String> {
        let mut refused = Vec::new();
        let banned = state.get("banned").and_then(serde_json::Value::as_array);
        for name in banned.into_iter().flatten() {
            match name.as_str().and_then(E::principal_key) {
                Some(k) if self.banned.len() < self.cfg.max_banned => {
                    self.banned.insert(k);
                }
                _ => refused.push(format!("banned principal {name} not restored")),
            }
        }
        let inner = state.get("inner").unwrap_or(&serde_json::Value::Null);
        if !inner.is_null()
            && let Err(e) = self.inner.take_over(ctx, inner)
        {
            refused.push(e);
        }
        if refused.is_empty() {
            Ok(())
        } else {
            Err(refused.join("; "))
        }
    }

    fn durable_state(&self) -> Option<serde_json::Value> {
        self.inner.durable_state()
    }

    fn restore_durable(&mut self, state: &serde_json::Value) -> Result<(), String> {
        self.inner.restore_durable(state)
    }

    fn domain_report(&self) -> Option<anode_core::DomainReport> {
        let mut r = self.os.lock().report_under(&self.name, self.ee_domain);
        for d in &mut r.domains {
            d.authenticated = self
                .keys
                .get(&DomainId(d.id))
                .and_then(|k| self.inner.authenticated(k));
        }
        Some(r)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
