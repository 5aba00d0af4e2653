//! [`NodeOs`]: domains, their pools, channels and counters, as one sans-IO state machine.
//!
//! Driving: call the charge/count methods as work happens, [`NodeOs::handle_timeout`] at
//! [`NodeOs::poll_timeout`], and drain [`NodeOs::poll_event`]. Nothing here reads a clock.
//!
//! ## Invariants
//! - Every live domain but the root has a live parent; a terminated domain's subtree is gone.
//! - Terminating a domain returns every resource it held: its memory (all kinds) to its pool
//!   and the node, its channels, its pool when it was the last member. After every domain
//!   but the root is gone, `pools().node_used()` is what the root holds (tested: zero).
//! - A domain's resources come only from its principal's configured policy, and never
//!   exceed its parent's.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anode_core::DropReason;
use anode_wire::NodeAddr;
use rustc_hash::FxHashMap;
use tracing::info;

use crate::chan::{
    ChanId, Classifier, HandlerId, InChan, InChanSpec, OutChan, ProtocolSpec, TokenBucket,
};
use crate::domain::Domain;
use crate::memory::Pools;
use crate::{
    Credentials, DomainCounters, DomainId, DomainInfo, HandlerBudget, MemKind, NodeOsError,
    NodeOsEvent, Policy, PolicyStore, PoolId, Principal, TerminationHandler, TerminationReason,
    Terminator,
};

/// How many terminations [`NodeOs::recent_terminations`] remembers.
const RECENT: usize = 64;

/// Node-wide NodeOS settings.
#[derive(Debug, Clone)]
pub struct NodeOsConfig {
    /// Total bytes all domains together may hold.
    pub node_memory_bytes: u64,
    /// How long a pool may stay over its limit before the node acts.
    pub memory_grace: Duration,
    /// Events queued at most (older ones are dropped first).
    pub max_events: usize,
    /// The configured policies.
    pub policies: PolicyStore,
}

impl Default for NodeOsConfig {
    fn default() -> Self {
        NodeOsConfig {
            node_memory_bytes: 256 << 20,
            memory_grace: Duration::from_millis(100),
            max_events: 4096,
            policies: PolicyStore::new(),
        }
    }
}

#[derive(Debug)]
enum Chan {
    In(InChan),
    Out(OutChan),
}

/// A packet's input channel, as [`NodeOs::demux`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InMatch {
    /// The channel.
    pub chan: ChanId,
    /// Its domain.
    pub domain: DomainId,
    /// The handler.
    pub handler: HandlerId,
}

/// A child of the root (in a node, an EE's domain): its policy's `memory_bytes` bounds what
/// its whole subtree holds.
#[derive(Debug, Clone, Copy)]
struct Top {
    id: DomainId,
    held: u64,
    limit: u64,
}

/// A remembered termination.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TerminationRecord {
    /// The domain.
    pub domain: DomainId,
    /// The top domain it was under (its EE's).
    pub top: DomainId,
    /// Its principal.
    pub principal: String,
    /// Who.
    pub by: Terminator,
    /// Why, as text.
    pub reason: String,
    /// Its counters at the end.
    pub counters: DomainCounters,
}

/// The NodeOS of one node.
#[derive(Debug)]
pub struct NodeOs {
    domains: FxHashMap<DomainId, Domain>,
    next_domain: u32,
    pools: Pools,
    chans: FxHashMap<ChanId, (DomainId, Chan)>,
    classifier: Classifier<ChanId>,
    next_chan: u64,
    /// Events, each with the top domain (the EE's) it concerns (see [`NodeOs::poll_event_under`]).
    events: VecDeque<(DomainId, NodeOsEvent)>,
    max_events: usize,
    policies: PolicyStore,
    terminations: u64,
    /// The root's children (the EEs' domains) with the bytes their subtrees hold.
    tops: Vec<Top>,
    /// Terminations by top domain (an EE's count in [`NodeOs::report_under`]).
    terminations_under: FxHashMap<DomainId, u64>,
    recent: VecDeque<TerminationRecord>,
}

impl NodeOs {
    /// A NodeOS with only the root domain.
    pub fn new(cfg: NodeOsConfig) -> Self {
        let mut pools = Pools::new(cfg.node_memory_bytes, cfg.memory_grace);
        let root_pool = pools.create(cfg.node_memory_bytes);
        if let Some(p) = pools.pools.get_mut(&root_pool) {
            p.members.push(DomainId::ROOT);
        }
        let mut domains = FxHashMap::default();
        domains.insert(
            DomainId::ROOT,
            Domain {
                parent: None,
                children: Vec::new(),
                principal: Principal("node".into()),
                policy: Policy::unlimited(),
                pool: root_pool,
                mem: [0; 4],
                top: DomainId::ROOT,
                counters: DomainCounters::default(),
                handler: None,
            },
        );
        NodeOs {
            domains,
            next_domain: 1,
            pools,
            chans: FxHashMap::default(),
            classifier: Classifier::new(),
            next_chan: 0,
            events: VecDeque::new(),
            max_events: cfg.max_events.max(1),
            policies: cfg.policies,
            terminations: 0,
            terminations_under: FxHashMap::default(),
            tops: Vec::new(),
            recent: VecDeque::new(),
        }
    }

    fn dom(&self, d: DomainId) -> Result<&Domain, NodeOsError> {
        self.domains.get(&d).ok_or(NodeOsError::NoSuchDomain(d))
    }

    fn dom_mut(&mut self, d: DomainId) -> Result<&mut Domain, NodeOsError> {
        self.domains.get_mut(&d).ok_or(NodeOsError::NoSuchDomain(d))
    }

    /// The memory account of the top domain `top` (a linear scan: a node has a few EEs).
    fn top_mut(&mut self, top: DomainId) -> Option<&mut Top> {
        self.tops.iter_mut().find(|t| t.id == top)
    }

    /// The top domain `d` is under (the root for an unknown one).
    pub fn top_of(&self, d: DomainId) -> DomainId {
        self.domains.get(&d).map_or(DomainId::ROOT, |x| x.top)
    }

    fn push(&mut self, top: DomainId, e: NodeOsEvent) {
        if self.events.len() >= self.max_events {
            self.events.pop_front();
        }
        self.events.push_back((top, e));
    }

    /// The top domain of a pool's members (they share one: a pool is a domain's own or a
    /// group's, shared only within the group).
    fn top_of_pool(&self, pool: PoolId) -> DomainId {
        self.pools
            .pools
            .get(&pool)
            .and_then(|p| p.members.first())
            .map_or(DomainId::ROOT, |m| self.top_of(*m))
    }

    /// The policies (e.g. to add one at run time).
    pub fn policies_mut(&mut self) -> &mut PolicyStore {
        &mut self.policies
    }

    /// Creates a child of `parent` for `creds`. Its policy is the one configured for the
    /// principal; it gets its own pool unless `pool` names a shared one its parent may use.
    pub fn create_domain(
        &mut self,
        parent: DomainId,
        creds: &Credentials,
        pool: Option<PoolId>,
    ) -> Result<DomainId, NodeOsError> {
        let policy = self
            .policies
            .get(&creds.principal)
            .cloned()
            .ok_or_else(|| NodeOsError::UnknownPrincipal(creds.principal.0.clone()))?;
        let p = self.dom(parent)?;
        let live_children = p.children.len();
        if live_children >= p.policy.max_children as usize {
            return Err(NodeOsError::TooManyChildren {
                parent,
                max: p.policy.max_children,
            });
        }
        policy
            .within(&p.policy)
            .map_err(NodeOsError::ExceedsParent)?;
        let pool = match pool {
            Some(id) => {
                if self.pools.pool(id).is_none() {
                    return Err(NodeOsError::NoSuchPool(id.0));
                }
                id
            }
            None => self.pools.create(policy.memory_bytes),
        };
        let id = DomainId(self.next_domain);
        self.next_domain += 1;
        let top = match self.dom(parent)?.top {
            DomainId::ROOT => {
                self.tops.push(Top {
                    id,
                    held: 0,
                    limit: policy.memory_bytes,
                });
                id
            }
            t => t,
        };
        if let Some(pl) = self.pools.pools.get_mut(&pool) {
            pl.members.push(id);
        }
        if let Ok(p) = self.dom_mut(parent) {
            p.children.push(id);
        }
        info!(domain = %id, principal = %creds.principal.0, %parent, "domain created");
        self.domains.insert(
            id,
            Domain {
                parent: Some(parent),
                children: Vec::new(),
                principal: creds.principal.clone(),
                policy,
                pool,
                mem: [0; 4],
                top,
                counters: DomainCounters::default(),
                handler: None,
            },
        );
        Ok(id)
    }

    /// A pool `owner` and the domains it names may share, holding at most `limit` bytes (no
    /// more than the owner's own memory policy). It lives while it has members.
    pub fn create_shared_pool(
        &mut self,
        owner: DomainId,
        limit: u64,
    ) -> Result<PoolId, NodeOsError> {
        let d = self.dom(owner)?;
        if limit > d.policy.memory_bytes {
            return Err(NodeOsError::ExceedsParent(format!(
                "shared pool of {limit} bytes > owner's memory_bytes {}",
                d.policy.memory_bytes
            )));
        }
        Ok(self.pools.create(limit))
    }

    /// Sets the handler told before each of `d`'s children ends.
    pub fn set_termination_handler(
        &mut self,
        d: DomainId,
        h: Box<dyn TerminationHandler>,
    ) -> Result<(), NodeOsError> {
        self.dom_mut(d)?.handler = Some(h);
        Ok(())
    }

    /// `d` ends itself (and its subtree).
    pub fn exit(&mut self, d: DomainId) -> Result<Vec<DomainId>, NodeOsError> {
        self.terminate(d, Terminator::SelfExit, TerminationReason::Exit)
    }

    /// `parent` ends its child `child`.
    pub fn terminate_child(
        &mut self,
        parent: DomainId,
        child: DomainId,
    ) -> Result<Vec<DomainId>, NodeOsError> {
        if self.dom(child)?.parent != Some(parent) {
            return Err(NodeOsError::NoSuchDomain(child));
        }
        self.terminate(
            child,
            Terminator::Parent(parent),
            TerminationReason::ByParent,
        )
    }

    /// Ends `d` and its subtree (children first). Returns every domain ended.
    pub fn terminate(
        &mut self,
        d: DomainId,
        by: Terminator,
        reason: TerminationReason,
    ) -> Result<Vec<DomainId>, NodeOsError> {
        if d == DomainId::ROOT {
            return Err(NodeOsError::RootIsPermanent);
        }
        self.dom(d)?;
        let mut order = Vec::new();
        self.post_order(d, &mut order);
        for x in &order {
            if *x == d {
                self.end_one(*x, by, reason.clone());
            } else {
                self.end_one(
                    *x,
                    Terminator::Parent(d),
                    TerminationReason::AncestorTerminated(d),
                );
            }
        }
        Ok(order)
    }

    fn post_order(&self, d: DomainId, out: &mut Vec<DomainId>) {
        // Iterative, so a deep tree cannot overflow the stack.
        let mut stack = vec![(d, false)];
        while let Some((x, expanded)) = stack.pop() {
            if expanded {
                out.push(x);
                continue;
            }
            stack.push((x, true));
            if let Some(dom) = self.domains.get(&x) {
                for c in dom.children.iter().rev() {
                    stack.push((*c, false));
                }
            }
        }
    }

    fn end_one(&mut self, x: DomainId, by: Terminator, reason: TerminationReason) {
        let parent = self.domains.get(&x).and_then(|d| d.parent);
        // The parent's imminent-termination handler, under its fixed budget.
        if let Some(p) = parent
            && let Some(mut h) = self.domains.get_mut(&p).and_then(|pd| pd.handler.take())
        {
            let mut budget = HandlerBudget::new();
            h.imminent(x, &reason, &mut budget);
            if let Some(pd) = self.domains.get_mut(&p) {
                pd.handler = Some(h);
                pd.counters.cpu_ns = pd.counters.cpu_ns.saturating_add(budget.used());
            }
            if budget.overrun() {
                let top = self.top_of(x);
                self.push(
                    top,
                    NodeOsEvent::HandlerOverrun {
                        parent: p,
                        child: x,
                    },
                );
            }
        }
        let Some(dom) = self.domains.remove(&x) else {
            return;
        };
        let held: u64 = dom.mem.iter().sum();
        self.pools.sub(dom.pool, held);
        if dom.top == x {
            self.tops.retain(|t| t.id != x);
        } else if let Some(t) = self.top_mut(dom.top) {
            t.held = t.held.saturating_sub(held);
        }
        let mut pool_gone = false;
        if let Some(pl) = self.pools.pools.get_mut(&dom.pool) {
            pl.members.retain(|m| *m != x);
            pool_gone = pl.members.is_empty();
        }
        if pool_gone {
            self.pools.pools.remove(&dom.pool);
        } else {
            self.check_relief(dom.pool);
        }
        let owned: Vec<ChanId> = self
            .chans
            .iter()
            .filter(|(_, (o, _))| *o == x)
            .map(|(id, _)| *id)
            .collect();
        for c in owned {
            self.close_chan_inner(c);
        }
        if let Some(p) = parent
            && let Some(pd) = self.domains.get_mut(&p)
        {
            pd.children.retain(|c| *c != x);
            pd.counters.child_terminations += 1;
        }
        self.terminations += 1;
        *self.terminations_under.entry(dom.top).or_insert(0) += 1;
        info!(domain = %x, principal = %dom.principal.0, ?by, %reason, "domain terminated");
        let mut counters = dom.counters;
        counters.memory_bytes = 0;
        if self.recent.len() >= RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(TerminationRecord {
            domain: x,
            top: dom.top,
            principal: dom.principal.0.clone(),
            by,
            reason: reason.to_string(),
            counters,
        });
        self.push(
            dom.top,
            NodeOsEvent::Terminated {
                domain: x,
                principal: dom.principal.0,
                by,
                reason,
            },
        );
    }

    fn check_relief(&mut self, pool: PoolId) {
        let relieved = match self.pools.pools.get_mut(&pool) {
            Some(p) if p.deadline.is_some() && p.used <= p.limit && !p.starved => {
                p.deadline = None;
                true
            }
            _ => false,
        };
        if relieved {
            let top = self.top_of_pool(pool);
            self.push(top, NodeOsEvent::MemoryRelieved { pool });
        }
    }

    /// Charges `bytes` of `kind` to `d` (see `memory.rs` for which limits refuse and which
    /// start a grace period).
    pub fn charge_mem(
        &mut self,
        d: DomainId,
        kind: MemKind,
        bytes: u64,
        now: Instant,
    ) -> Result<(), NodeOsError> {
        let dom = self.dom(d)?;
        let k = kind.index();
        let held = dom.mem.get(k).copied().unwrap_or(0);
        let kind_limit = match kind {
            MemKind::Packet => u64::MAX,
            MemKind::SoftState => dom.policy.soft_state_bytes,
            MemKind::Code => dom.policy.code_bytes,
            // Bounded per code object by the EE's file quotas, and by the pool.
            MemKind::File => u64::MAX,
        };
        let refuse = |why: String| NodeOsError::OverLimit {
            domain: d,
            kind: kind.as_str(),
            bytes,
            why,
        };
        if held.saturating_add(bytes) > kind_limit {
            return Err(refuse(format!(
                "policy allows {kind_limit} bytes of {}",
                kind.as_str()
            )));
        }
        if !self.pools.node_room(bytes) {
            return Err(refuse(format!(
                "node total {} of {} bytes",
                self.pools.node_used(),
                self.pools.node_limit()
            )));
        }
        let top = dom.top;
        if let Some(t) = self.tops.iter().find(|t| t.id == top)
            && t.held.saturating_add(bytes) > t.limit
        {
            let name = self
                .domains
                .get(&top)
                .map_or("", |d| d.principal.0.as_str());
            return Err(refuse(format!(
                "{name} and its domains hold {} of {} bytes",
                t.held, t.limit
            )));
        }
        let pool = dom.pool;
        let (used, limit) = self.pools.pool(pool).unwrap_or((0, 0));
        if kind == MemKind::Packet && used.saturating_add(bytes) > limit {
            self.start_pressure(pool, now, true);
            return Err(refuse(format!(
                "pool {} holds {used} of {limit} bytes",
                pool.0
            )));
        }
        self.pools.add(pool, bytes);
        if let Some(t) = self.top_mut(top) {
            t.held = t.held.saturating_add(bytes);
        }
        if let Ok(dom) = self.dom_mut(d) {
            if let Some(m) = dom.mem.get_mut(k) {
                *m = m.saturating_add(bytes);
            }
            let total: u64 = dom.mem.iter().sum();
            dom.counters.memory_bytes = total;
            dom.counters.memory_peak = dom.counters.memory_peak.max(total);
        }
        self.start_pressure(pool, now, false);
        Ok(())
    }

    /// Starts a pool's grace period if it is over its limit (or `starved`) and none runs.
    fn start_pressure(&mut self, pool: PoolId, now: Instant, starved: bool) {
        let grace = self.pools.grace;
        let pressure = match self.pools.pools.get_mut(&pool) {
            Some(p) => {
                p.starved |= starved;
                if (p.used > p.limit || p.starved) && p.deadline.is_none() {
                    let deadline = now + grace;
                    p.deadline = Some(deadline);
                    Some(NodeOsEvent::MemoryPressure {
                        pool,
                        used: p.used,
                        limit: p.limit,
                        deadline,
                        domains: p.members.clone(),
                    })
                } else {
                    None
                }
            }
            None => None,
        };
        if let Some(e) = pressure {
            info!(pool = pool.0, "memory pool over its limit");
            let top = self.top_of_pool(pool);
            self.push(top, e);
        }
    }

    /// Returns `bytes` of `kind` from `d` (clamped to what it holds).
    pub fn release_mem(&mut self, d: DomainId, kind: MemKind, bytes: u64) {
        let Some(dom) = self.domains.get_mut(&d) else {
            return;
        };
        let Some(m) = dom.mem.get_mut(kind.index()) else {
            return;
        };
        let b = bytes.min(*m);
        *m -= b;
        dom.counters.memory_bytes = dom.mem.iter().sum();
        let (pool, top) = (dom.pool, dom.top);
        if let Some(t) = self.top_mut(top) {
            t.held = t.held.saturating_sub(b);
        }
        self.pools.sub(pool, b);
        if kind != MemKind::Packet
            && b > 0
            && let Some(p) = self.pools.pools.get_mut(&pool)
        {
            p.starved = false;
        }
        self.check_relief(pool);
    }

    /// Charges CPU time (EE code or node work on its behalf) to `d`.
    pub fn charge_cpu(&mut self, d: DomainId, ns: u64) {
        if let Some(dom) = self.domains.get_mut(&d) {
            dom.counters.cpu_ns = dom.counters.cpu_ns.saturating_add(ns);
        }
    }

    /// Notes that `d`'s code ran out of its per-call budget (fuel, steps).
    pub fn note_cpu_exhausted(&mut self, d: DomainId) -> u64 {
        match self.domains.get_mut(&d) {
            Some(dom) => {
                dom.counters.cpu_exhausted += 1;
                dom.counters.cpu_exhausted
            }
            None => 0,
        }
    }

    /// Counts a packet handled for `d`.
    pub fn count_packet(&mut self, d: DomainId, bytes: u64) {
        if let Some(dom) = self.domains.get_mut(&d) {
            dom.counters.packets += 1;
            dom.counters.bytes = dom.counters.bytes.saturating_add(bytes);
        }
    }

    /// Counts a drop for `d` by reason.
    pub fn count_drop(&mut self, d: DomainId, reason: DropReason) {
        if let Some(dom) = self.domains.get_mut(&d) {
            dom.counters.drop(reason);
        }
    }

    /// Runs memory deadlines due at `now`: a pool still over its limit (or starved) loses its
    /// largest members until it is within it.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<PoolId> = self
            .pools
            .pools
            .iter()
            .filter(|(_, p)| p.deadline.is_some_and(|t| t <= now))
            .map(|(id, _)| *id)
            .collect();
        for pool in due {
            while let Some(p) = self.pools.pools.get(&pool) {
                let (used, limit) = (p.used, p.limit);
                if used <= limit && !p.starved {
                    break;
                }
                let victim = p
                    .members
                    .iter()
                    .filter(|m| **m != DomainId::ROOT)
                    .max_by_key(|m| self.domains.get(m).map_or(0, |d| d.mem.iter().sum::<u64>()))
                    .copied();
                let Some(v) = victim else {
                    break;
                };
                if let Some(p) = self.pools.pools.get_mut(&pool) {
                    // Termination is the remedy; the next refusal starts a new period.
                    p.starved = false;
                }
                let _ = self.terminate(
                    v,
                    Terminator::Node,
                    TerminationReason::MemoryOverLimit { used, limit },
                );
            }
            self.check_relief(pool);
        }
    }

    /// The next memory deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.pools.pools.values().filter_map(|p| p.deadline).min()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<NodeOsEvent> {
        self.events.pop_front().map(|(_, e)| e)
    }

    /// The next event about a domain under `top` (an EE sharing the NodeOS with others
    /// takes only its own).
    pub fn poll_event_under(&mut self, top: DomainId) -> Option<NodeOsEvent> {
        let i = self.events.iter().position(|(t, _)| *t == top)?;
        self.events.remove(i).map(|(_, e)| e)
    }

    /// Whether an event about a domain under `top` waits.
    pub fn has_events_under(&self, top: DomainId) -> bool {
        self.events.iter().any(|(t, _)| *t == top)
    }

    /// Opens an input channel for `d`.
    pub fn open_in_chan(&mut self, d: DomainId, spec: InChanSpec) -> Result<ChanId, NodeOsError> {
        let protocol = ProtocolSpec::parse(&spec.protocol)?;
        protocol.check_anode()?;
        let canon = protocol.canonical();
        let dom = self.dom(d)?;
        let refuse = |why: String| NodeOsError::ChannelRefused {
            domain: d,
            spec: canon.clone(),
            why,
        };
        if !dom.policy.allows_channel(&canon) {
            return Err(refuse("not in its policy's channels".into()));
        }
        self.check_chan_count(d)?;
        let mut keys = spec.addr.keys();
        keys.extend(spec.keys.iter().cloned());
        let id = ChanId(self.next_chan);
        let entry = self
            .classifier
            .insert(keys, spec.priority, id)
            .map_err(NodeOsError::BadKeys)?;
        self.next_chan += 1;
        self.chans.insert(
            id,
            (
                d,
                Chan::In(InChan {
                    protocol,
                    spec,
                    buffered: 0,
                    entry,
                }),
            ),
        );
        Ok(id)
    }

    fn check_chan_count(&self, d: DomainId) -> Result<(), NodeOsError> {
        let dom = self.dom(d)?;
        let n = self.chans.values().filter(|(o, _)| *o == d).count();
        if n >= dom.policy.max_channels as usize {
            return Err(NodeOsError::ChannelRefused {
                domain: d,
                spec: String::new(),
                why: format!(
                    "already holds {n} channels (max {})",
                    dom.policy.max_channels
                ),
            });
        }
        Ok(())
    }

    /// Opens an output channel to `dest` for `d`, at most its policy's channel bandwidth.
    pub fn open_out_chan(
        &mut self,
        d: DomainId,
        dest: NodeAddr,
        rate: u64,
        burst: u64,
    ) -> Result<ChanId, NodeOsError> {
        let cap = self.dom(d)?.policy.channel_bandwidth;
        self.check_chan_count(d)?;
        let id = ChanId(self.next_chan);
        self.next_chan += 1;
        self.chans.insert(
            id,
            (
                d,
                Chan::Out(OutChan {
                    dest,
                    bucket: TokenBucket::new(rate.min(cap), burst),
                }),
            ),
        );
        Ok(id)
    }

    /// Whether `bytes` may leave on output channel `c` at `now` (spends tokens if so).
    pub fn out_send(&mut self, c: ChanId, now: Instant, bytes: u64) -> Result<bool, NodeOsError> {
        match self.chans.get_mut(&c) {
            Some((d, Chan::Out(o))) => {
                let ok = o.bucket.take(now, bytes);
                let d = *d;
                if ok {
                    self.count_packet(d, bytes);
                } else {
                    self.count_drop(d, DropReason::Bandwidth);
                }
                Ok(ok)
            }
            _ => Err(NodeOsError::NoSuchChannel(c.0)),
        }
    }

    /// The input channel a packet belongs to.
    pub fn demux(&self, pkt: &[u8]) -> Option<InMatch> {
        let (_, id) = self.classifier.lookup(pkt)?;
        match self.chans.get(id) {
            Some((d, Chan::In(c))) => Some(InMatch {
                chan: *id,
                domain: *d,
                handler: c.spec.handler,
            }),
            _ => None,
        }
    }

    /// Buffers one packet on input channel `c` if under its buffer limit.
    pub fn in_buffer(&mut self, c: ChanId) -> bool {
        let (d, ok) = match self.chans.get_mut(&c) {
            Some((d, Chan::In(ic))) if ic.buffered < ic.spec.buffer_limit => {
                ic.buffered += 1;
                (*d, true)
            }
            Some((d, _)) => (*d, false),
            None => return false,
        };
        if !ok {
            self.count_drop(d, DropReason::InChanFull);
        }
        ok
    }

    /// The handler took one buffered packet from `c`.
    pub fn in_unbuffer(&mut self, c: ChanId) {
        if let Some((_, Chan::In(ic))) = self.chans.get_mut(&c) {
            ic.buffered = ic.buffered.saturating_sub(1);
        }
    }

    /// Closes a channel.
    pub fn close_chan(&mut self, c: ChanId) -> Result<(), NodeOsError> {
        if self.close_chan_inner(c) {
            Ok(())
        } else {
            Err(NodeOsError::NoSuchChannel(c.0))
        }
    }

    fn close_chan_inner(&mut self, c: ChanId) -> bool {
        match self.chans.remove(&c) {
            Some((_, Chan::In(ic))) => {
                self.classifier.remove(ic.entry);
                true
            }
            Some(_) => true,
            None => false,
        }
    }

    /// Open channels.
    pub fn channel_count(&self) -> usize {
        self.chans.len()
    }

    /// The pools.
    pub fn pools(&self) -> &Pools {
        &self.pools
    }

    /// Whether `d` is live.
    pub fn is_live(&self, d: DomainId) -> bool {
        self.domains.contains_key(&d)
    }

    /// The live children of `d`.
    pub fn children(&self, d: DomainId) -> Vec<DomainId> {
        self.domains
            .get(&d)
            .map_or_else(Vec::new, |x| x.children.clone())
    }

    /// A domain's policy.
    pub fn policy(&self, d: DomainId) -> Option<&Policy> {
        self.domains.get(&d).map(|x| &x.policy)
    }

    /// A domain's counters.
    pub fn counters(&self, d: DomainId) -> Option<&DomainCounters> {
        self.domains.get(&d).map(|x| &x.counters)
    }

    /// Terminations so far.
    pub fn terminations(&self) -> u64 {
        self.terminations
    }

    /// The most recent terminations, oldest first.
    pub fn recent_terminations(&self) -> impl Iterator<Item = &TerminationRecord> {
        self.recent.iter()
    }

    /// The report of the whole NodeOS, under the name `ee` (a NodeOS of one EE).
    pub fn report(&self, ee: &str) -> anode_core::DomainReport {
        anode_core::DomainReport {
            ee: ee.to_string(),
            memory_used: self.pools.node_used(),
            memory_limit: self.pools.node_limit(),
            terminations: self.terminations,
            recent_terminations: self
                .recent
                .iter()
                .map(|r| (r.domain.0, r.principal.clone(), r.reason.clone()))
                .collect(),
            domains: self.domain_stats(|_| true),
        }
    }

    /// The report the node's control socket and metrics show for the EE named `ee`, whose
    /// domain is the top domain `top`: the domains under it (ids unique in the node, the EE's
    /// own domain's parent the node's root), the memory they hold of the EE's bound, its
    /// terminations.
    pub fn report_under(&self, ee: &str, top: DomainId) -> anode_core::DomainReport {
        let limit = self
            .domains
            .get(&top)
            .map_or(0, |t| t.policy.memory_bytes)
            .min(self.pools.node_limit());
        anode_core::DomainReport {
            ee: ee.to_string(),
            memory_used: self.tops.iter().find(|t| t.id == top).map_or(0, |t| t.held),
            memory_limit: limit,
            terminations: self.terminations_under.get(&top).copied().unwrap_or(0),
            recent_terminations: self
                .recent
                .iter()
                .filter(|r| r.top == top)
                .map(|r| (r.domain.0, r.principal.clone(), r.reason.clone()))
                .collect(),
            domains: self.domain_stats(|d| self.top_of(d) == top && d != DomainId::ROOT),
        }
    }

    fn domain_stats(&self, keep: impl Fn(DomainId) -> bool) -> Vec<anode_core::DomainStat> {
        self.domains()
            .into_iter()
            .filter(|d| keep(d.id))
            .map(|d| anode_core::DomainStat {
                id: d.id.0,
                parent: d.parent.map(|p| p.0),
                principal: d.principal,
                packets: d.counters.packets,
                bytes: d.counters.bytes,
                cpu_ns: d.counters.cpu_ns,
                memory_bytes: d.counters.memory_bytes,
                // No domain can hold more than the node's bound (the root's policy is
                // unlimited).
                memory_limit: d.memory_limit.min(self.pools.node_limit()),
                drops: d.counters.drops,
                child_terminations: d.counters.child_terminations,
                authenticated: None,
            })
            .collect()
    }

    /// Every live domain, by id.
    pub fn domains(&self) -> Vec<DomainInfo> {
        let mut v: Vec<DomainInfo> = self
            .domains
            .iter()
            .map(|(id, d)| DomainInfo {
                id: *id,
                parent: d.parent,
                principal: d.principal.0.clone(),
                pool: d.pool,
                cpu_share: d.policy.cpu_share,
                memory_limit: d.policy.memory_bytes,
                memory_by_kind: d.mem,
                channels: self.chans.values().filter(|(o, _)| o == id).count(),
                counters: d.counters.clone(),
            })
            .collect();
        v.sort_by_key(|d| d.id);
        v
    }
}
