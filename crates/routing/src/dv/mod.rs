//! The built-in distance-vector routing service (RIP-like, RFC 2453 semantics).
//!
//! Invariants:
//! - the node's own address is always present with metric 0 and no next hop;
//! - a route with `metric >= infinity` is unreachable: [`DistanceVector::lookup`] never
//!   returns it, it is advertised as infinity until its garbage-collection deadline, then
//!   deleted;
//! - a learned route is refreshed by every update from its next hop; one not refreshed within
//!   `route_timeout` becomes unreachable;
//! - static routes (configuration) win over learned ones; one whose next hop is not an up
//!   neighbor is unreachable until that neighbor comes up;
//! - updates to neighbor N advertise routes whose next hop is N with metric infinity
//!   (split horizon with poisoned reverse);
//! - a periodic update is a digest to a neighbor in step with this node's stream, the full
//!   table to one that asked for it (`sync.rs` has the rule and why it keeps RIP's
//!   semantics).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use anode_wire::NodeAddr;
use anode_wire::addr::NODE_ADDR_LEN;
use anode_wire::control::{MAX_ROUTES_PER_MESSAGE, Routes};
use rustc_hash::FxHashMap;

use sync::Neighbor;
use table::RouteTable;

use crate::fib::{ChangeLog, Fib};
use crate::handover::{RouteRecord, after_ms, ms_until};
use crate::{LinkId, NextHop, RoutingConfig};

mod sync;
mod table;

/// How a route was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteKind {
    /// The node itself.
    Local,
    /// From configuration.
    Static,
    /// Learned from a neighbor (a directly connected neighbor is learned from its hello).
    Learned,
}

/// One routing-table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Destination node.
    pub dest: NodeAddr,
    /// Cost; `>= infinity` is unreachable.
    pub metric: u16,
    /// Where to send; `None` for the node itself.
    pub next_hop: Option<NextHop>,
    /// Origin.
    pub kind: RouteKind,
    /// Learned routes: when the route times out unless refreshed.
    pub expires: Option<Instant>,
    /// Unreachable routes: when they are deleted.
    pub gc_at: Option<Instant>,
    changed: bool,
}

impl Route {
    /// A route with no deadlines (as the link-state service reports them).
    pub(crate) fn new(
        dest: NodeAddr,
        metric: u16,
        next_hop: Option<NextHop>,
        kind: RouteKind,
    ) -> Route {
        Route {
            dest,
            metric,
            next_hop,
            kind,
            expires: None,
            gc_at: None,
            changed: false,
        }
    }
}

/// A static route from configuration (both services keep them the same way).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StaticRoute {
    pub(crate) dest: NodeAddr,
    pub(crate) via: NodeAddr,
    pub(crate) metric: u16,
}

/// The distance-vector state machine of one node.
#[derive(Debug)]
pub struct DistanceVector {
    me: NodeAddr,
    cfg: RoutingConfig,
    /// Every route, compactly (`table.rs`).
    routes: RouteTable,
    /// The forwarding table the fast path reads (`fib.rs`), kept in step with `routes`.
    fib: Arc<Fib>,
    neighbors: FxHashMap<NodeAddr, Neighbor>,
    statics: Vec<StaticRoute>,
    next_periodic: Instant,
    triggered_at: Option<Instant>,
    outbox: VecDeque<(LinkId, NodeAddr, Routes)>,
    /// Per neighbor, update messages not yet released to `outbox`: at most
    /// [`crate::PACE_BYTES`] leave per neighbor per pacing round (`triggered_delay`), so a
    /// full table of thousands of routes never overflows a link queue at once (its tail
    /// would be lost every round, and the destinations in it never learned).
    paced: std::collections::BTreeMap<NodeAddr, (LinkId, VecDeque<Routes>)>,
    /// When the current pacing round ends (`None`: no round running, a release may go now).
    pace_at: Option<Instant>,
    /// A lower bound of the earliest route expiry or garbage-collection deadline: lowered
    /// whenever a route gets a deadline (O(1)), recomputed exactly by a scan only in
    /// `handle_timeout`. So `poll_timeout` (called by drivers on every loop iteration) and
    /// `on_update` (every routing message) never scan the table; a deadline that turns out
    /// to have moved later costs one early wake-up, which rescans.
    route_deadline: Option<Instant>,
    changes: u64,
    /// Forwarding changes for a consumer that asked ([`DistanceVector::change_log`]).
    log: ChangeLog,
    stats: crate::RoutingStats,
}

impl DistanceVector {
    /// A table holding only the node itself.
    pub fn new(me: NodeAddr, cfg: RoutingConfig, now: Instant) -> Self {
        let mut routes = RouteTable::new(now);
        routes.insert(Route {
            dest: me,
            metric: 0,
            next_hop: None,
            kind: RouteKind::Local,
            expires: None,
            gc_at: None,
            changed: false,
        });
        DistanceVector {
            me,
            cfg,
            routes,
            fib: Arc::default(),
            neighbors: FxHashMap::default(),
            statics: Vec::new(),
            next_periodic: now + cfg.update_interval,
            triggered_at: None,
            outbox: VecDeque::new(),
            paced: std::collections::BTreeMap::new(),
            pace_at: None,
            route_deadline: None,
            changes: 0,
            log: ChangeLog::default(),
            stats: crate::RoutingStats::default(),
        }
    }

    /// Counters of the protocol's work (`stats.rs`).
    pub fn stats(&self) -> crate::RoutingStats {
        self.stats
    }

    /// The infinity bound.
    pub fn infinity(&self) -> u16 {
        self.cfg.infinity
    }

    /// The next hop toward `dest`, if reachable. This is the fast path's lookup.
    #[inline]
    pub fn lookup(&self, dest: &NodeAddr) -> Option<NextHop> {
        let r = self.routes.get(dest)?;
        if r.metric >= self.cfg.infinity {
            return None;
        }
        r.next_hop
    }

    /// The next hop toward the destination given in its 18-byte wire encoding (the transit
    /// header's bytes): the fast path's lookup, with no decoding.
    #[inline]
    pub fn lookup_raw(&self, dest: &[u8; NODE_ADDR_LEN]) -> Option<NextHop> {
        self.fib.lookup_raw(dest)
    }

    /// The forwarding table (a snapshot costs a reference-count increment).
    pub fn fib(&self) -> &Arc<Fib> {
        &self.fib
    }

    /// The route entry for `dest` (reachable or not).
    pub fn route(&self, dest: &NodeAddr) -> Option<Route> {
        self.routes.get(dest)
    }

    /// All routes, sorted by destination.
    pub fn routes(&self) -> Vec<Route> {
        let mut v: Vec<Route> = self.routes.routes().collect();
        v.sort_by_key(|r| r.dest);
        v
    }

    /// How many times a route's next hop or metric changed (for reports).
    pub fn change_count(&self) -> u64 {
        self.changes
    }

    /// The log of forwarding changes (off until enabled; see [`ChangeLog`]).
    pub fn change_log(&mut self) -> &mut ChangeLog {
        &mut self.log
    }

    /// Adds a static route to `dest` through neighbor `via`.
    pub fn add_static(&mut self, now: Instant, dest: NodeAddr, via: NodeAddr, metric: u16) {
        self.statics.retain(|s| s.dest != dest);
        self.statics.push(StaticRoute { dest, via, metric });
        self.resolve_statics(now);
    }

    /// Removes the static route to `dest`. Returns false if there was none. The route
    /// becomes unreachable (poisoned, then collected) unless the neighbor is the
    /// destination itself, in which case the route learned from its hellos takes over.
    pub fn remove_static(&mut self, now: Instant, dest: NodeAddr) -> bool {
        let before = self.statics.len();
        self.statics.retain(|s| s.dest != dest);
        if self.statics.len() == before {
            return false;
        }
        if self
            .routes
            .get(&dest)
            .is_some_and(|r| r.kind == RouteKind::Static)
        {
            match self.neighbors.get(&dest).map(|n| (n.link, n.cost)) {
                Some((link, cost)) => {
                    let nh = Some(NextHop { link, addr: dest });
                    self.set_route(
                        now,
                        dest,
                        cost.min(self.cfg.infinity),
                        nh,
                        RouteKind::Learned,
                    );
                    self.routes.update(&dest, |r| r.expires = None);
                }
                None => {
                    self.routes.update(&dest, |r| r.kind = RouteKind::Learned);
                    self.make_unreachable(now, dest);
                }
            }
        }
        true
    }

    /// A neighbor came up on `link` at link cost `cost`.
    pub fn neighbor_up(&mut self, now: Instant, link: LinkId, addr: NodeAddr, cost: u16) {
        // A neighbor up again keeps numbering where it left off (its peer resyncs on the
        // full table below either way).
        let mut n = Neighbor::new(link, cost);
        if let Some(old) = self.neighbors.get(&addr) {
            n.tx_seq = old.tx_seq;
        }
        self.neighbors.insert(addr, n);
        let metric = cost.min(self.cfg.infinity);
        let better = match self.routes.get(&addr) {
            None => true,
            Some(r) => {
                r.kind == RouteKind::Learned
                    && (r.metric > metric || r.next_hop.map(|n| n.addr) == Some(addr))
            }
        };
        if better {
            self.set_route(
                now,
                addr,
                metric,
                Some(NextHop { link, addr }),
                RouteKind::Learned,
            );
            // Kept alive by the neighbor's hellos, not by updates.
            self.routes.update(&addr, |r| r.expires = None);
        }
        self.resolve_statics(now);
        // Tell the new neighbor everything (paced).
        self.queue_full_update_to(addr, link);
        self.release(now);
    }

    /// The static routes: (destination, via, metric).
    pub fn static_routes(&self) -> Vec<(NodeAddr, NodeAddr, u16)> {
        self.statics
            .iter()
            .map(|s| (s.dest, s.via, s.metric))
            .collect()
    }

    /// The learned, reachable routes, for the process that takes this node's place
    /// (`handover.rs`).
    pub fn export_routes(&self, now: Instant) -> Vec<RouteRecord> {
        let mut v: Vec<RouteRecord> = self
            .routes
            .routes()
            .filter(|r| r.kind == RouteKind::Learned && r.metric < self.cfg.infinity)
            .filter_map(|r| {
                Some(RouteRecord {
                    dest: r.dest,
                    via: r.next_hop?.addr,
                    metric: r.metric,
                    expires_in_ms: r.expires.map(|e| ms_until(now, e)),
                })
            })
            .collect();
        v.sort_by_key(|r| r.dest);
        v
    }

    /// Restores what another process exported: `neighbors` (link, address, cost) as
    /// [`DistanceVector::neighbor_up`] adds them but without the full update it sends (they
    /// hold this node's routes already), then `routes` through them as learned routes with
    /// the time they had left. No update is triggered. Returns (restored, skipped) routes.
    pub fn restore(
        &mut self,
        now: Instant,
        neighbors: &[(LinkId, NodeAddr, u16)],
        routes: &[RouteRecord],
    ) -> (usize, usize) {
        for &(link, addr, cost) in neighbors {
            // Not in step with anyone: the first digests ask for the tables.
            self.neighbors.insert(addr, Neighbor::new(link, cost));
        }
        let (mut ok, mut skipped) = (0, 0);
        for r in routes {
            let hop = self.neighbors.get(&r.via).map(|n| NextHop {
                link: n.link,
                addr: r.via,
            });
            let taken = self
                .routes
                .get(&r.dest)
                .is_some_and(|x| x.kind != RouteKind::Learned);
            let Some(hop) =
                hop.filter(|_| r.dest != self.me && r.metric < self.cfg.infinity && !taken)
            else {
                skipped += 1;
                continue;
            };
            self.set_route(now, r.dest, r.metric, Some(hop), RouteKind::Learned);
            let expires = r.expires_in_ms.map(|ms| after_ms(now, ms));
            self.routes.update(&r.dest, |x| x.expires = expires);
            if let Some(t) = expires {
                self.note_deadline(t);
            }
            ok += 1;
        }
        self.resolve_statics(now);
        self.routes.clear_changed();
        self.triggered_at = None;
        (ok, skipped)
    }

    /// A neighbor went down: every route through it becomes unreachable.
    pub fn neighbor_down(&mut self, now: Instant, addr: NodeAddr) {
        self.neighbors.remove(&addr);
        self.paced.remove(&addr);
        let dead: Vec<NodeAddr> = self
            .routes
            .routes()
            .filter(|r| r.next_hop.map(|n| n.addr) == Some(addr) && r.metric < self.cfg.infinity)
            .map(|r| r.dest)
            .collect();
        for d in dead {
            self.make_unreachable(now, d);
        }
        self.resolve_statics(now);
    }

    /// Handles an update from neighbor `msg.sender` on `link`. Returns false (and ignores it)
    /// if the sender is not an up neighbor on that link.
    pub fn on_update(&mut self, now: Instant, link: LinkId, msg: &Routes) -> bool {
        let Some(n) = self.neighbors.get_mut(&msg.sender) else {
            return false;
        };
        if n.link != link {
            return false;
        }
        let cost = n.cost;
        let via = NextHop {
            link,
            addr: msg.sender,
        };
        if msg.flags != 0 {
            n.understands_digests = true;
        }
        if msg.has(Routes::REQUEST) {
            self.stats.requests_received += 1;
        }
        if msg.has(Routes::DIGEST) {
            self.stats.digests_received += 1;
            if n.rx.matches(msg.seq) {
                // What the full table would have done: every route through the sender
                // refreshed (deadlines only move later, so `route_deadline` stays a bound).
                let (inf, timeout) = (self.cfg.infinity, self.cfg.route_timeout);
                self.routes.refresh_via(via, inf, now + timeout);
            } else {
                n.ask = true;
                self.stats.digests_out_of_step += 1;
                self.trigger(now);
            }
            return true;
        }
        if !msg.entries.is_empty() {
            self.stats.updates_received += 1;
        }
        n.rx.accept(
            msg.seq,
            msg.has(Routes::FULL_FIRST),
            msg.has(Routes::FULL_LAST),
        );
        let mut answer = false;
        if msg.has(Routes::REQUEST) {
            n.wants_table = true;
            if n.last_full
                .is_none_or(|t| now >= t + self.cfg.update_interval)
            {
                n.answer_now = true;
                answer = true;
            }
        }
        if answer {
            self.trigger(now);
        }
        let inf = self.cfg.infinity;
        for &(dest, m) in &msg.entries {
            if dest == self.me {
                continue;
            }
            let metric = m.saturating_add(cost).min(inf);
            match self.routes.get(&dest) {
                None => {
                    if metric < inf {
                        self.set_route(now, dest, metric, Some(via), RouteKind::Learned);
                    }
                }
                Some(r) if r.kind != RouteKind::Learned => {}
                Some(r) if r.next_hop.map(|n| n.addr) == Some(msg.sender) => {
                    if dest == msg.sender {
                        continue; // the direct route lives by hellos
                    }
                    if metric < inf {
                        if metric != r.metric {
                            if metric > r.metric {
                                // Worse news: hear the alternatives again.
                                self.ask_all();
                            }
                            self.set_route(now, dest, metric, Some(via), RouteKind::Learned);
                        } else {
                            self.routes.refresh(&dest, now + self.cfg.route_timeout);
                        }
                    } else if r.metric < inf {
                        self.make_unreachable(now, dest);
                    }
                }
                Some(r) => {
                    // Another next hop: switch if strictly better, or equal and the current
                    // one is half-way to timing out (RFC 2453 §3.9.2 heuristic).
                    let stale = r.expires.is_some_and(|e| {
                        e.saturating_duration_since(now) < self.cfg.route_timeout / 2
                    });
                    if metric < r.metric || (metric == r.metric && metric < inf && stale) {
                        self.set_route(now, dest, metric, Some(via), RouteKind::Learned);
                    }
                }
            }
        }
        true
    }

    /// Runs the timers: route timeout, garbage collection, periodic and triggered updates.
    pub fn handle_timeout(&mut self, now: Instant) {
        let inf = self.cfg.infinity;
        // Scan the table only when a route deadline may have passed (the bound is never
        // later than the earliest one): timers of hellos and updates fire far more often.
        let due = self.route_deadline.is_some_and(|d| d <= now);
        if due {
            let expired: Vec<NodeAddr> = self
                .routes
                .routes()
                .filter(|r| r.metric < inf && r.expires.is_some_and(|e| e <= now))
                .map(|r| r.dest)
                .collect();
            for d in expired {
                self.make_unreachable(now, d);
            }
            self.routes
                .retain(|r| r.kind == RouteKind::Local || r.gc_at.is_none_or(|g| g > now));
        }
        if now >= self.next_periodic {
            self.next_periodic = now + self.cfg.update_interval;
            // Changes and requests first, so the digests after them cover them.
            self.triggered_round(now);
            self.periodic_round(now);
        }
        if self.triggered_at.is_some_and(|t| t <= now) {
            self.triggered_round(now);
        }
        if due {
            self.refresh_route_deadline();
        }
        if self.pace_at.is_some_and(|t| t <= now) {
            self.pace_at = None;
        }
        self.release(now);
    }

    /// The periodic update: the full table to each neighbor that asked for it, a digest to
    /// every other.
    fn periodic_round(&mut self, now: Instant) {
        let ns = self.sorted_neighbors();
        let all = if self
            .neighbors
            .values()
            .any(|n| n.wants_table || !n.understands_digests)
        {
            self.routes()
        } else {
            Vec::new()
        };
        for (addr, link) in ns {
            let Some(n) = self.neighbors.get_mut(&addr) else {
                continue;
            };
            if std::mem::take(&mut n.wants_table) || !n.understands_digests {
                n.answer_now = false;
                n.last_full = Some(now);
                self.queue_update(addr, link, &all, true);
            } else {
                let seq = n.last_seq();
                self.queue_signal(addr, link, seq, Routes::DIGEST);
            }
        }
    }

    /// The triggered update: the routes changed since the last one to every neighbor, a
    /// request for the full table to each neighbor this node wants to hear again, and the
    /// full table to each neighbor that asked for it (at most once per update interval each;
    /// a neighbor asking more often gets it at the periodic update).
    fn triggered_round(&mut self, now: Instant) {
        self.triggered_at = None;
        let mut changed: Vec<Route> = self.routes.routes().filter(|r| r.changed).collect();
        changed.sort_by_key(|r| r.dest);
        self.routes.clear_changed();
        // Neighbors whose request is answered now; their tables go after every update and
        // request of this round.
        let mut answer: Vec<(NodeAddr, LinkId)> = Vec::new();
        for (addr, link) in self.sorted_neighbors() {
            if !changed.is_empty() {
                self.queue_update(addr, link, &changed, false);
            }
            let Some(n) = self.neighbors.get_mut(&addr) else {
                continue;
            };
            if std::mem::take(&mut n.answer_now) {
                n.wants_table = false;
                n.last_full = Some(now);
                answer.push((addr, link));
            }
            if std::mem::take(&mut n.ask) {
                let seq = n.take_seq();
                self.queue_signal(addr, link, seq, Routes::REQUEST);
            }
        }
        if answer.is_empty() {
            return;
        }
        let all = self.routes();
        for (addr, link) in answer {
            self.queue_update(addr, link, &all, true);
        }
    }

    /// Ask every neighbor for its full table (in the next triggered round).
    fn ask_all(&mut self) {
        for n in self.neighbors.values_mut() {
            n.ask = true;
        }
    }

    /// Queues a message with no entries (a digest or a request) for `to`.
    fn queue_signal(&mut self, to: NodeAddr, link: LinkId, seq: u16, flags: u16) {
        let m = Routes {
            sender: self.me,
            seq,
            flags,
            entries: Vec::new(),
        };
        self.paced_queue(to, link).push_back(m);
    }

    /// The queue of messages waiting for pacing toward `to` on `link`.
    fn paced_queue(&mut self, to: NodeAddr, link: LinkId) -> &mut VecDeque<Routes> {
        let slot = self
            .paced
            .entry(to)
            .or_insert_with(|| (link, VecDeque::new()));
        slot.0 = link;
        &mut slot.1
    }

    /// Starts a pacing round if none is running and messages wait: up to
    /// [`crate::PACE_BYTES`] per neighbor move to the outbox, the rest wait for the next
    /// round.
    fn release(&mut self, now: Instant) {
        if self.pace_at.is_some() || self.paced.is_empty() {
            return;
        }
        for (to, (link, q)) in &mut self.paced {
            let mut bytes = 0;
            while bytes < crate::PACE_BYTES {
                let Some(m) = q.pop_front() else {
                    break;
                };
                bytes += 24 + m.entries.len() * 20;
                let s = &mut self.stats;
                s.updates_sent += u64::from(!m.entries.is_empty());
                s.full_tables_sent += u64::from(m.has(Routes::FULL_FIRST));
                s.digests_sent += u64::from(m.has(Routes::DIGEST));
                s.requests_sent += u64::from(m.has(Routes::REQUEST));
                self.outbox.push_back((*link, *to, m));
            }
        }
        self.paced.retain(|_, (_, q)| !q.is_empty());
        self.pace_at = Some(now + self.cfg.triggered_delay);
    }

    /// The next deadline: periodic update, triggered update, or a route's expiry or
    /// garbage collection. O(1).
    pub fn poll_timeout(&self) -> Option<Instant> {
        debug_assert!(
            match (self.route_deadline, self.scan_route_deadline()) {
                (_, None) => true,
                (Some(bound), Some(exact)) => bound <= exact,
                (None, Some(_)) => false,
            },
            "the route deadline must not be later than the earliest route deadline"
        );
        let mut t = self.next_periodic;
        for d in [self.triggered_at, self.route_deadline, self.pace_at]
            .into_iter()
            .flatten()
        {
            t = t.min(d);
        }
        Some(t)
    }

    fn refresh_route_deadline(&mut self) {
        self.route_deadline = self.scan_route_deadline();
    }

    /// A route got deadline `t`: keep `route_deadline` a lower bound.
    fn note_deadline(&mut self, t: Instant) {
        self.route_deadline = Some(self.route_deadline.map_or(t, |d| d.min(t)));
    }

    fn scan_route_deadline(&self) -> Option<Instant> {
        self.routes
            .routes()
            .filter_map(|r| {
                if r.metric < self.cfg.infinity {
                    r.expires
                } else {
                    r.gc_at
                }
            })
            .min()
    }

    /// Next update message to send: (link, neighbor, message).
    pub fn poll_update(&mut self) -> Option<(LinkId, NodeAddr, Routes)> {
        self.outbox.pop_front()
    }

    fn sorted_neighbors(&self) -> Vec<(NodeAddr, LinkId)> {
        let mut v: Vec<(NodeAddr, LinkId)> =
            self.neighbors.iter().map(|(a, n)| (*a, n.link)).collect();
        v.sort();
        v
    }

    fn queue_full_update_to(&mut self, addr: NodeAddr, link: LinkId) {
        let all = self.routes();
        self.queue_update(addr, link, &all, true);
    }

    /// Queues `routes` for neighbor `to` (poisoned reverse applied), numbered; `full` marks
    /// its first and last message as a full table's.
    fn queue_update(&mut self, to: NodeAddr, link: LinkId, routes: &[Route], full: bool) {
        let inf = self.cfg.infinity;
        let entries: Vec<(NodeAddr, u16)> = routes
            .iter()
            .filter(|r| r.dest != to)
            .map(|r| {
                let poisoned = r.next_hop.is_some_and(|n| n.addr == to);
                (r.dest, if poisoned { inf } else { r.metric.min(inf) })
            })
            .collect();
        let Some(n) = self.neighbors.get_mut(&to) else {
            return;
        };
        let mut chunks: Vec<&[(NodeAddr, u16)]> = entries.chunks(MAX_ROUTES_PER_MESSAGE).collect();
        if full && chunks.is_empty() {
            chunks.push(&[]); // an empty table is still a table
        }
        let last = chunks.len().saturating_sub(1);
        let me = self.me;
        let numbered: Vec<Routes> = chunks
            .into_iter()
            .enumerate()
            .map(|(i, chunk)| {
                let mut flags = 0;
                if full && i == 0 {
                    flags |= Routes::FULL_FIRST;
                }
                if full && i == last {
                    flags |= Routes::FULL_LAST;
                }
                Routes {
                    sender: me,
                    seq: n.take_seq(),
                    flags,
                    entries: chunk.to_vec(),
                }
            })
            .collect();
        self.paced_queue(to, link).extend(numbered);
    }

    fn set_route(
        &mut self,
        now: Instant,
        dest: NodeAddr,
        metric: u16,
        next_hop: Option<NextHop>,
        kind: RouteKind,
    ) {
        let expires = (kind == RouteKind::Learned).then_some(now + self.cfg.route_timeout);
        let reachable = next_hop.filter(|_| metric < self.cfg.infinity);
        if self.fib.get(&dest).map(|e| e.hop) != reachable {
            self.log.note(dest);
        }
        match next_hop {
            Some(nh) if metric < self.cfg.infinity => {
                Arc::make_mut(&mut self.fib).insert(&dest, nh, metric);
            }
            _ => {
                Arc::make_mut(&mut self.fib).remove(&dest);
            }
        }
        if let Some(t) = expires {
            self.note_deadline(t);
        }
        let old = self.routes.insert(Route {
            dest,
            metric,
            next_hop,
            kind,
            expires,
            gc_at: None,
            changed: true,
        });
        if old.is_none_or(|o| o.metric != metric || o.next_hop != next_hop) {
            self.changes += 1;
            self.trigger(now);
        }
    }

    fn make_unreachable(&mut self, now: Instant, dest: NodeAddr) {
        let inf = self.cfg.infinity;
        let gc = now + self.cfg.gc_interval;
        let Some(r) = self.routes.get(&dest) else {
            return;
        };
        if r.kind == RouteKind::Local {
            return;
        }
        if r.metric < inf {
            // Lost: hear the alternatives again.
            self.ask_all();
        }
        if self.fib.get(&dest).is_some() {
            self.log.note(dest);
        }
        Arc::make_mut(&mut self.fib).remove(&dest);
        self.routes.update(&dest, |r| {
            r.metric = inf;
            r.expires = None;
            r.gc_at = Some(gc);
            r.changed = true;
        });
        self.changes += 1;
        self.note_deadline(gc);
        self.trigger(now);
    }

    fn trigger(&mut self, now: Instant) {
        if self.triggered_at.is_none() {
            self.triggered_at = Some(now + self.cfg.triggered_delay);
        }
    }

    fn resolve_statics(&mut self, now: Instant) {
        for s in self.statics.clone() {
            match self.neighbors.get(&s.via).map(|n| n.link) {
                Some(link) => {
                    let nh = Some(NextHop { link, addr: s.via });
                    let cur = self.routes.get(&s.dest);
                    if cur.is_none_or(|r| {
                        r.kind != RouteKind::Static || r.next_hop != nh || r.metric != s.metric
                    }) {
                        self.set_route(now, s.dest, s.metric, nh, RouteKind::Static);
                    }
                }
                None => {
                    if self.routes.get(&s.dest).is_some_and(|r| {
                        r.kind == RouteKind::Static && r.metric < self.cfg.infinity
                    }) {
                        self.routes.update(&s.dest, |r| r.kind = RouteKind::Learned);
                        self.make_unreachable(now, s.dest);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_wire::addr::v4;
    use std::time::Duration;

    fn a(n: u8) -> NodeAddr {
        v4(198, 18, 0, n, 3322)
    }

    fn cfg() -> RoutingConfig {
        RoutingConfig::default()
    }

    #[test]
    fn learns_through_neighbor_and_poisons_reverse() {
        let t0 = Instant::now();
        let mut dv = DistanceVector::new(a(1), cfg(), t0);
        dv.neighbor_up(t0, LinkId(0), a(2), 1);
        assert_eq!(
            dv.lookup(&a(2)),
            Some(NextHop {
                link: LinkId(0),
                addr: a(2)
            })
        );
        let (_, to, full) = dv.poll_update().unwrap();
        assert_eq!(to, a(2));
        assert_eq!(full.entries, vec![(a(1), 0)]); // a(2) itself is not told about itself
        assert!(dv.on_update(
            t0,
            LinkId(0),
            &Routes::plain(a(2), vec![(a(3), 1), (a(1), 1)])
        ));
        assert_eq!(dv.route(&a(3)).unwrap().metric, 2);
        // Triggered update to a(2) poisons a(3) (learned through a(2)).
        dv.handle_timeout(t0 + Duration::from_millis(60));
        let (_, _, upd) = dv.poll_update().unwrap();
        assert!(upd.entries.contains(&(a(3), 16)));
    }

    #[test]
    fn a_table_restored_from_its_export_forwards_alike_and_keeps_its_deadlines() {
        let t0 = Instant::now();
        let mut d = learned_from_a2(t0, 20);
        let t1 = t0 + Duration::from_secs(3);
        let routes = d.export_routes(t1);
        assert_eq!(routes.len(), 21, "20 learned and the neighbor itself");
        assert!(
            routes
                .iter()
                .any(|r| r.dest == a(2) && r.expires_in_ms.is_none())
        );
        let mut fresh = DistanceVector::new(a(1), cfg(), t1);
        let (ok, skipped) = fresh.restore(t1, &[(LinkId(0), a(2), 1)], &routes);
        assert_eq!((ok, skipped), (21, 0));
        for r in d.routes() {
            assert_eq!(fresh.lookup(&r.dest), d.lookup(&r.dest), "{}", r.dest);
        }
        assert!(
            fresh.poll_update().is_none(),
            "restoring triggers no update"
        );
        // The learned routes time out when they would have in the old table.
        let timeout = cfg().route_timeout;
        let last = routes.last().unwrap().dest;
        fresh.handle_timeout(t0 + timeout - Duration::from_millis(1));
        assert!(fresh.lookup(&last).is_some());
        fresh.handle_timeout(t0 + timeout + Duration::from_millis(1));
        d.handle_timeout(t0 + timeout + Duration::from_millis(1));
        assert!(fresh.lookup(&last).is_none());
        for r in &routes {
            assert_eq!(fresh.lookup(&r.dest), d.lookup(&r.dest), "{}", r.dest);
        }
        // Through a neighbor that is not up here: skipped.
        let mut other = DistanceVector::new(a(1), cfg(), t1);
        assert_eq!(other.restore(t1, &[], &routes), (0, 21));
    }

    #[test]
    fn neighbor_down_makes_routes_unreachable_then_collects_them() {
        let t0 = Instant::now();
        let mut dv = DistanceVector::new(a(1), cfg(), t0);
        dv.neighbor_up(t0, LinkId(0), a(2), 1);
        dv.on_update(t0, LinkId(0), &Routes::plain(a(2), vec![(a(3), 1)]));
        dv.neighbor_down(t0, a(2));
        assert_eq!(dv.lookup(&a(3)), None);
        assert_eq!(dv.route(&a(3)).unwrap().metric, 16);
        dv.handle_timeout(t0 + cfg().gc_interval);
        assert!(dv.route(&a(3)).is_none());
        assert!(dv.route(&a(1)).is_some());
    }

    #[test]
    fn better_path_wins_and_timeout_expires() {
        let t0 = Instant::now();
        let mut dv = DistanceVector::new(a(1), cfg(), t0);
        dv.neighbor_up(t0, LinkId(0), a(2), 1);
        dv.neighbor_up(t0, LinkId(1), a(4), 1);
        dv.on_update(t0, LinkId(0), &Routes::plain(a(2), vec![(a(9), 5)]));
        dv.on_update(t0, LinkId(1), &Routes::plain(a(4), vec![(a(9), 2)]));
        assert_eq!(dv.lookup(&a(9)).unwrap().addr, a(4));
        // Worse news from the current next hop is believed.
        dv.on_update(t0, LinkId(1), &Routes::plain(a(4), vec![(a(9), 7)]));
        assert_eq!(dv.route(&a(9)).unwrap().metric, 8);
        // Not refreshed: times out.
        dv.handle_timeout(t0 + cfg().route_timeout);
        assert_eq!(dv.lookup(&a(9)), None);
    }

    #[test]
    fn raw_lookup_agrees_with_lookup() {
        let t0 = Instant::now();
        let mut dv = DistanceVector::new(a(1), cfg(), t0);
        dv.neighbor_up(t0, LinkId(0), a(2), 1);
        dv.on_update(
            t0,
            LinkId(0),
            &Routes::plain(a(2), vec![(a(3), 1), (a(4), 15)]),
        );
        for n in 1..6 {
            assert_eq!(
                dv.lookup_raw(&a(n).to_bytes()),
                dv.lookup(&a(n)),
                "dest {n}"
            );
        }
        dv.neighbor_down(t0, a(2));
        for n in 1..6 {
            assert_eq!(dv.lookup_raw(&a(n).to_bytes()), None);
        }
    }

    #[test]
    fn update_from_non_neighbor_is_ignored() {
        let t0 = Instant::now();
        let mut dv = DistanceVector::new(a(1), cfg(), t0);
        assert!(!dv.on_update(t0, LinkId(0), &Routes::plain(a(2), vec![(a(3), 1)])));
        assert!(dv.route(&a(3)).is_none());
    }

    #[test]
    fn static_route_wins_and_needs_its_neighbor() {
        let t0 = Instant::now();
        let mut dv = DistanceVector::new(a(1), cfg(), t0);
        dv.add_static(t0, a(9), a(4), 1);
        assert_eq!(dv.lookup(&a(9)), None);
        dv.neighbor_up(t0, LinkId(0), a(2), 1);
        dv.on_update(t0, LinkId(0), &Routes::plain(a(2), vec![(a(9), 1)]));
        assert_eq!(dv.lookup(&a(9)).unwrap().addr, a(2));
        dv.neighbor_up(t0, LinkId(1), a(4), 1);
        assert_eq!(dv.lookup(&a(9)).unwrap().addr, a(4));
        assert_eq!(dv.route(&a(9)).unwrap().kind, RouteKind::Static);
        dv.on_update(t0, LinkId(0), &Routes::plain(a(2), vec![(a(9), 0)]));
        assert_eq!(dv.lookup(&a(9)).unwrap().addr, a(4));
        dv.neighbor_down(t0, a(4));
        assert_eq!(dv.lookup(&a(9)), None);
        dv.neighbor_up(t0, LinkId(1), a(4), 1);
        assert_eq!(dv.lookup(&a(9)).unwrap().addr, a(4));
        assert!(dv.remove_static(t0, a(9)));
        assert!(!dv.remove_static(t0, a(9)));
        assert_eq!(dv.lookup(&a(9)), None);
        assert_eq!(dv.route(&a(9)).unwrap().kind, RouteKind::Learned);
        // The next update from a(2) brings the learned route back.
        dv.on_update(t0, LinkId(0), &Routes::plain(a(2), vec![(a(9), 1)]));
        assert_eq!(dv.lookup(&a(9)).unwrap().addr, a(2));
    }

    /// Node a(1) with neighbor a(2) on link 0, from which it learned `n` routes (one hop
    /// beyond a(2)); its outbox drained.
    fn learned_from_a2(t0: Instant, n: u16) -> DistanceVector {
        let mut dv = DistanceVector::new(a(1), cfg(), t0);
        dv.neighbor_up(t0, LinkId(0), a(2), 1);
        while dv.poll_update().is_some() {}
        let entries: Vec<(NodeAddr, u16)> = (0..n)
            .map(|i| (v4(198, 19, (i >> 8) as u8, i as u8, 1), 1))
            .collect();
        for c in entries.chunks(64) {
            let msg = Routes::plain(a(2), c.to_vec());
            dv.on_update(t0, LinkId(0), &msg);
        }
        dv
    }

    /// A few nodes wired by links, messages delivered at once, time in 10 ms steps.
    struct Net {
        dv: Vec<DistanceVector>,
        /// (node, its link, peer, the peer's link)
        wires: Vec<(usize, u32, usize, u32)>,
        now: Instant,
        t0: Instant,
        /// Every message sent: (when, from, to, message).
        log: Vec<(Duration, usize, usize, Routes)>,
    }

    impl Net {
        /// Nodes a(1).. a(n); `edges` between node indices, cost 1.
        fn new(n: usize, edges: &[(usize, usize)]) -> Net {
            let t0 = Instant::now();
            let mut dv: Vec<DistanceVector> = (0..n)
                .map(|i| DistanceVector::new(a(i as u8 + 1), cfg(), t0))
                .collect();
            let mut links = vec![0u32; n];
            let mut wires = Vec::new();
            for &(i, j) in edges {
                let (li, lj) = (links[i], links[j]);
                links[i] += 1;
                links[j] += 1;
                wires.push((i, li, j, lj));
                dv[i].neighbor_up(t0, LinkId(li), a(j as u8 + 1), 1);
                dv[j].neighbor_up(t0, LinkId(lj), a(i as u8 + 1), 1);
            }
            Net {
                dv,
                wires,
                now: t0,
                t0,
                log: Vec::new(),
            }
        }

        fn peer(&self, node: usize, link: LinkId) -> Option<(usize, LinkId)> {
            self.wires.iter().find_map(|&(i, li, j, lj)| {
                if (i, li) == (node, link.0) {
                    Some((j, LinkId(lj)))
                } else if (j, lj) == (node, link.0) {
                    Some((i, LinkId(li)))
                } else {
                    None
                }
            })
        }

        /// Runs for `d`; a message `lose` accepts is lost.
        fn run(&mut self, d: Duration, lose: &mut impl FnMut(usize, usize, &Routes) -> bool) {
            let end = self.now + d;
            while self.now < end {
                self.now += Duration::from_millis(10);
                let now = self.now;
                for x in &mut self.dv {
                    if x.poll_timeout().is_some_and(|t| t <= now) {
                        x.handle_timeout(now);
                    }
                }
                for i in 0..self.dv.len() {
                    while let Some((link, _, m)) = self.dv[i].poll_update() {
                        let Some((j, lj)) = self.peer(i, link) else {
                            continue;
                        };
                        if !lose(i, j, &m) {
                            self.dv[j].on_update(now, lj, &m);
                        }
                        self.log.push((now - self.t0, i, j, m));
                    }
                }
            }
        }

        /// The link between nodes `i` and `j` goes down at both ends.
        fn cut(&mut self, i: usize, j: usize) {
            let now = self.now;
            self.dv[i].neighbor_down(now, a(j as u8 + 1));
            self.dv[j].neighbor_down(now, a(i as u8 + 1));
            self.wires
                .retain(|&(x, _, y, _)| (x, y) != (i, j) && (x, y) != (j, i));
        }

        /// (next hop, metric) of node `i` toward node `j`.
        fn via(&self, i: usize, j: usize) -> Option<(NodeAddr, u16)> {
            let r = self.dv[i].route(&a(j as u8 + 1))?;
            Some((self.dv[i].lookup(&r.dest)?.addr, r.metric))
        }
    }

    fn keep_all(_: usize, _: usize, _: &Routes) -> bool {
        false
    }

    #[test]
    fn after_the_first_tables_periodic_updates_are_digests_that_keep_routes_alive() {
        let mut net = Net::new(3, &[(0, 1), (1, 2)]);
        let timeout = cfg().route_timeout;
        net.run(timeout * 3, &mut keep_all);
        assert_eq!(net.via(0, 2), Some((a(2), 2)));
        assert_eq!(net.via(2, 0), Some((a(2), 2)));
        let late: Vec<&Routes> = net
            .log
            .iter()
            .filter(|(t, ..)| *t > Duration::from_secs(1))
            .map(|(.., m)| m)
            .collect();
        assert!(late.len() >= 4 * 17, "a digest per neighbor per interval");
        assert!(
            late.iter()
                .all(|m| m.has(Routes::DIGEST) && m.entries.is_empty()),
            "nothing but digests once the tables are known"
        );
        // The counters say the same: every message sent was counted once by its kind, and
        // every digest received (nothing lost) found its receiver in step.
        let sum = |f: fn(&crate::RoutingStats) -> u64| -> u64 {
            net.dv.iter().map(|d| f(&d.stats())).sum()
        };
        let digests = net.log.iter().filter(|m| m.3.has(Routes::DIGEST)).count() as u64;
        assert_eq!(sum(|s| s.digests_sent), digests);
        assert_eq!(sum(|s| s.digests_received), digests);
        assert_eq!(sum(|s| s.digests_out_of_step), 0);
        assert_eq!(sum(|s| s.requests_sent), 0);
        let updates = net.log.iter().filter(|m| !m.3.entries.is_empty()).count() as u64;
        assert_eq!(sum(|s| s.updates_sent), updates);
        assert_eq!(sum(|s| s.updates_received), updates);
        assert!(
            sum(|s| s.full_tables_sent) >= 4,
            "one to each neighbor at the start"
        );
    }

    #[test]
    fn a_lost_update_is_repaired_by_asking_for_the_table() {
        // The triggered update that tells a(1) of a(3) is lost.
        let mut net = Net::new(3, &[(0, 1), (1, 2)]);
        let mut lost = false;
        let mut lose = |from: usize, to: usize, m: &Routes| {
            let hit = !lost && (from, to) == (1, 0) && m.entries.iter().any(|e| e.0 == a(3));
            lost |= hit;
            hit
        };
        net.run(Duration::from_secs(4), &mut lose);
        assert!(lost);
        assert_eq!(net.via(0, 2), None, "not learned yet");
        // The periodic digest at 5 s shows the gap; a(1) asks; a(2) answers with its full
        // table in its next triggered round, not at its next periodic update (10 s).
        net.run(Duration::from_secs(2), &mut keep_all);
        assert_eq!(net.via(0, 2), Some((a(2), 2)), "repaired by 6 s");
        let asked = net
            .log
            .iter()
            .any(|(_, from, to, m)| (*from, *to) == (0, 1) && m.has(Routes::REQUEST));
        let full = net.log.iter().any(|(t, from, to, m)| {
            (*from, *to) == (1, 0)
                && *t > Duration::from_secs(5)
                && *t < Duration::from_secs(6)
                && m.has(Routes::FULL_LAST)
        });
        assert!(asked && full);
        let st = net.dv[0].stats();
        assert!(
            st.digests_out_of_step >= 1 && st.requests_sent >= 1,
            "{st:?}"
        );
        assert!(net.dv[1].stats().requests_received >= 1);
        // And then it is kept alive by digests.
        net.run(cfg().route_timeout * 2, &mut keep_all);
        assert_eq!(net.via(0, 2), Some((a(2), 2)));
    }

    #[test]
    fn requests_are_answered_at_once_but_at_most_once_an_interval() {
        let t0 = Instant::now();
        let me = a(1);
        let mut dv = DistanceVector::new(me, cfg(), t0);
        dv.neighbor_up(t0, LinkId(0), a(2), 1);
        // Drain the first full table to the new neighbor.
        dv.handle_timeout(t0 + Duration::from_millis(100));
        while dv.poll_update().is_some() {}
        let t1 = t0 + Duration::from_secs(1);
        let ask = |seq| Routes {
            sender: a(2),
            seq,
            flags: Routes::REQUEST,
            entries: Vec::new(),
        };
        let fulls = |dv: &mut DistanceVector, at: Instant| {
            dv.handle_timeout(at);
            let mut n = 0;
            while let Some((_, _, m)) = dv.poll_update() {
                n += usize::from(m.has(Routes::FULL_FIRST));
            }
            n
        };
        // A request is answered in the next triggered round.
        assert!(dv.on_update(t1, LinkId(0), &ask(1)));
        assert_eq!(fulls(&mut dv, t1 + Duration::from_millis(60)), 1);
        // Asking again at once, ten times, buys nothing before the periodic update.
        for i in 0..10 {
            dv.on_update(t1 + Duration::from_millis(100), LinkId(0), &ask(2 + i));
        }
        assert_eq!(fulls(&mut dv, t1 + Duration::from_millis(200)), 0);
        assert_eq!(dv.stats().requests_received, 11);
    }

    #[test]
    fn a_lost_route_hears_the_alternatives_it_ignored() {
        // a(1) reaches a(4) through a(2) (2 hops) and ignores a(3)'s offer (3 hops, by a(5)).
        let mut net = Net::new(5, &[(0, 1), (0, 2), (1, 3), (2, 4), (4, 3)]);
        net.run(Duration::from_secs(20), &mut keep_all);
        assert_eq!(net.via(0, 3), Some((a(2), 2)));
        // Long after the tables were exchanged (only digests flow), a(2)-a(4) fails.
        net.cut(1, 3);
        net.run(Duration::from_secs(11), &mut keep_all);
        assert_eq!(
            net.via(0, 3),
            Some((a(3), 3)),
            "the alternative, from a full table"
        );
        net.run(cfg().route_timeout * 2, &mut keep_all);
        assert_eq!(net.via(0, 3), Some((a(3), 3)), "kept alive by digests");
        assert_eq!(net.via(1, 3), Some((a(1), 4)));
    }

    #[test]
    fn a_neighbor_that_never_numbers_its_messages_keeps_getting_full_tables() {
        // A node from before digests: plain messages only, which it also expects.
        let t0 = Instant::now();
        let mut dv = DistanceVector::new(a(1), cfg(), t0);
        dv.neighbor_up(t0, LinkId(0), a(2), 1);
        let mut now = t0;
        for _ in 0..20 {
            dv.on_update(now, LinkId(0), &Routes::plain(a(2), vec![(a(3), 1)]));
            now += cfg().update_interval;
            dv.handle_timeout(now);
            let mut got = Vec::new();
            while let Some((_, _, m)) = dv.poll_update() {
                got.push(m);
            }
            assert!(
                got.iter().all(|m| !m.has(Routes::DIGEST)),
                "no digest for an old node"
            );
            assert!(got.iter().any(|m| m.entries.contains(&(a(1), 0))));
        }
        assert_eq!(dv.lookup(&a(3)).map(|h| h.addr), Some(a(2)));
    }

    #[test]
    fn large_tables_split_into_messages() {
        let t0 = Instant::now();
        let mut dv = learned_from_a2(t0, 200);
        dv.neighbor_up(t0, LinkId(1), a(3), 1);
        // The pacing round started by a(2)'s dump is still running: a(3) waits for it.
        assert!(dv.poll_update().is_none());
        let t1 = t0 + cfg().triggered_delay;
        assert!(dv.poll_timeout().is_some_and(|t| t <= t1));
        dv.handle_timeout(t1);
        let mut dests = std::collections::BTreeSet::new();
        while let Some((_, to, m)) = dv.poll_update() {
            assert!(m.entries.len() <= 64);
            if to == a(3) {
                dests.extend(m.entries.iter().map(|e| e.0));
            }
        }
        // 200 learned + self + a(2) (the triggered update of the learned routes, due at
        // the same time, repeats some of them).
        assert_eq!(dests.len(), 202);
    }

    #[test]
    fn a_full_table_leaves_in_paced_rounds() {
        // 3,000 routes (60 KB of entries) to a new neighbor: at most PACE_BYTES per round
        // of triggered_delay, all of it in the end, in order.
        let t0 = Instant::now();
        let mut dv = learned_from_a2(t0, 3000);
        let mut now = t0 + cfg().triggered_delay;
        dv.handle_timeout(now);
        while dv.poll_update().is_some() {}
        dv.neighbor_up(now, LinkId(1), a(3), 1);
        let mut rounds = Vec::new();
        let mut seen = Vec::new();
        for _ in 0..10 {
            let mut bytes = 0;
            while let Some((_, to, m)) = dv.poll_update() {
                if to == a(3) {
                    bytes += 24 + m.entries.len() * 20;
                    seen.extend(m.entries.iter().map(|e| e.0));
                }
            }
            if bytes > 0 {
                rounds.push(bytes);
            }
            now += cfg().triggered_delay;
            dv.handle_timeout(now);
        }
        assert!(rounds.len() >= 3, "{rounds:?}");
        assert!(
            rounds.iter().all(|b| *b < crate::PACE_BYTES + 24 + 64 * 20),
            "{rounds:?}"
        );
        assert_eq!(seen.len(), 3002);
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 3002, "each destination once");
    }
}
