//! The link-state routing service (OSPF / IS-IS style, simplified for anode's flat network of
//! nodes).
//!
//! Each node originates an LSA listing its up neighbors and link costs (split into fragments
//! of at most [`MAX_LSA_LINKS`] links), with a sequence number and a lifetime. LSAs are
//! flooded: a node that receives one newer than the copy it holds stores it and passes it to
//! every other neighbor; older or equal copies are dropped. A new neighbor gets the whole
//! database. Originators re-originate before the lifetime runs out (`lsa_refresh`); an LSA
//! not refreshed is dropped when its lifetime ends. Routes come from Dijkstra over the
//! database, using a link u -> v only when v's LSA lists u too (the two-way check), so a
//! failed node's stale LSA stops carrying traffic as soon as its neighbors' LSAs drop it.
//!
//! Flooding is not acknowledged; instead every `update_interval` each node sends each
//! neighbor a digest of its database (the LSA count and the XOR of a 64-bit hash of every
//! (origin, fragment, seq), kept up to date on every change). A neighbor whose database
//! differs answers with a summary of its own (origin, fragment, sequence number per LSA, in
//! key ranges), and a node that holds something newer or missing from a neighbor's summary
//! sends it (IS-IS's CSNP-style sync). Both sides send digests, so a difference either way is
//! found, and an LSA lost to a full queue or a lossy link is repaired within one interval and
//! two round trips. While databases agree the sync costs one 36-byte message per link and
//! interval, not one summary entry per LSA.
//!
//! Batching, so the cost grows with changes rather than with LSAs x links: floods leave in
//! batches `triggered_delay` after the first pending one, packed into messages of up to
//! [`MAX_LSAS_BODY`] bytes; SPF runs `spf_delay` after a change, and while changes keep
//! arriving within twice the current hold of the last run, the hold doubles up to
//! `spf_max_delay` (OSPF's SPF throttling).
//!
//! Files: this one is the protocol (floods, sync, timers, the forwarding-table update);
//! `db.rs` the database and its digest; `spf.rs` Dijkstra. In an emulator the link lists of
//! stored LSAs can be shared among nodes ([`LsaPool`]).
//!
//! Invariants:
//! - the forwarding table ([`Fib`]) holds exactly the destinations the last SPF run (or a
//!   static route whose neighbor is up) reached, with the first hop of a shortest path; ties
//!   are broken by address order, so identical inputs give identical tables;
//! - the node's own LSA is never taken from a neighbor: a copy with a sequence number at or
//!   above ours (we restarted) makes us re-originate above it;
//! - nothing reads a clock: `now` comes in, deadlines go out ([`LinkState::poll_timeout`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anode_wire::NodeAddr;
use anode_wire::addr::NODE_ADDR_LEN;
use anode_wire::control::{
    Control, Lsa, LsaDigest, LsaSummary, Lsas, MAX_LSA_LINKS, MAX_LSAS_BODY, MAX_SUMMARY_ENTRIES,
};
use rustc_hash::FxHashMap;

mod db;
mod spf;

use db::{Db, Key, Stored};
use spf::Spf;

use crate::LsaPool;
use crate::dv::{Route, RouteKind, StaticRoute};
use crate::fib::{ChangeLog, Fib};
use crate::handover::{LsaRecord, after_ms, ms_until};
use crate::{LinkId, NextHop, RoutingConfig};

/// A node address in its 18-byte wire form (compact keys for the database).
type Raw = [u8; NODE_ADDR_LEN];

/// Most LSA bytes one flood round sends a neighbor (see [`crate::PACE_BYTES`]).
const FLOOD_BUDGET_BYTES: usize = crate::PACE_BYTES;

/// The link-state state machine of one node.
#[derive(Debug)]
pub struct LinkState {
    me: NodeAddr,
    me_raw: Raw,
    cfg: RoutingConfig,
    /// Up neighbors: address -> (link, cost).
    neighbors: FxHashMap<NodeAddr, (LinkId, u16)>,
    /// The database, with its digest and keys in order.
    db: Db,
    own_seq: u32,
    /// Fragments this node has ever originated (emptied ones are still re-originated
    /// empty, so their old contents are replaced everywhere).
    own_frags: u8,
    next_refresh: Instant,
    next_sync: Instant,
    /// LSAs waiting to be flooded: key -> the neighbor it came from (not sent back there).
    /// The LSA itself rides along, so a flood round reads no database entry.
    pending: FxHashMap<Key, (Option<NodeAddr>, Lsa)>,
    /// Per new neighbor: the database keys still to send it (paced like floods).
    backlog: FxHashMap<NodeAddr, VecDeque<Key>>,
    flood_at: Option<Instant>,
    spf_at: Option<Instant>,
    last_spf: Option<Instant>,
    spf_hold: Duration,
    /// A lower bound of the earliest LSA expiry (scanned exactly when it passes).
    expiry_bound: Option<Instant>,
    statics: Vec<StaticRoute>,
    fib: Arc<Fib>,
    log: ChangeLog,
    changes: u64,
    spf_runs: u64,
    outbox: VecDeque<(LinkId, NodeAddr, Control)>,
    /// Where stored link lists are shared with other nodes of the process, if anywhere.
    pool: Option<LsaPool>,
    stats: crate::RoutingStats,
}

impl LinkState {
    /// A node that knows only itself; its first LSA goes out once a neighbor comes up.
    pub fn new(me: NodeAddr, cfg: RoutingConfig, now: Instant) -> Self {
        LinkState {
            me,
            me_raw: me.to_bytes(),
            cfg,
            neighbors: FxHashMap::default(),
            db: Db::new(now),
            own_seq: 0,
            own_frags: 1,
            next_refresh: now + cfg.lsa_refresh,
            next_sync: now + cfg.update_interval,
            pending: FxHashMap::default(),
            backlog: FxHashMap::default(),
            flood_at: None,
            spf_at: None,
            last_spf: None,
            spf_hold: cfg.spf_delay,
            expiry_bound: None,
            statics: Vec::new(),
            fib: Arc::default(),
            log: ChangeLog::default(),
            changes: 0,
            spf_runs: 0,
            outbox: VecDeque::new(),
            pool: None,
            stats: crate::RoutingStats::default(),
        }
    }

    /// Counters of the protocol's work (`stats.rs`).
    pub fn stats(&self) -> crate::RoutingStats {
        crate::RoutingStats {
            spf_runs: self.spf_runs,
            ..self.stats
        }
    }

    /// The next hop toward `dest`, if reachable.
    #[inline]
    pub fn lookup(&self, dest: &NodeAddr) -> Option<NextHop> {
        self.fib.get(dest).map(|e| e.hop)
    }

    /// Stores link lists in `pool`, shared with the other nodes using it.
    pub fn share_lists(&mut self, pool: LsaPool) {
        self.pool = Some(pool);
    }

    /// The forwarding table.
    pub fn fib(&self) -> &Arc<Fib> {
        &self.fib
    }

    /// How many times a route's next hop or metric changed.
    pub fn change_count(&self) -> u64 {
        self.changes
    }

    /// SPF runs so far.
    pub fn spf_runs(&self) -> u64 {
        self.spf_runs
    }

    /// LSA fragments in the database (this node's own included).
    pub fn database_len(&self) -> usize {
        self.db.len()
    }

    /// The log of forwarding changes (see [`ChangeLog`]).
    pub fn change_log(&mut self) -> &mut ChangeLog {
        &mut self.log
    }

    /// All routes (the node itself with metric 0 first in address order), sorted by
    /// destination.
    pub fn routes(&self) -> Vec<Route> {
        let mut v = vec![Route::new(self.me, 0, None, RouteKind::Local)];
        // A destination with an up static route is reported as static (a handful of them);
        // every other forwarding entry came from SPF.
        let statics: Vec<NodeAddr> = self
            .statics
            .iter()
            .filter(|s| self.neighbors.contains_key(&s.via))
            .map(|s| s.dest)
            .collect();
        for (raw, e) in self.fib.entries() {
            let Ok(dest) = NodeAddr::read(&raw, 0) else {
                continue;
            };
            let kind = if statics.contains(&dest) {
                RouteKind::Static
            } else {
                RouteKind::Learned
            };
            v.push(Route::new(dest, e.metric, Some(e.hop), kind));
        }
        v.sort_by_key(|r| r.dest);
        v
    }

    /// Adds a static route to `dest` through neighbor `via` (it wins over SPF while `via`
    /// is up).
    pub fn add_static(&mut self, now: Instant, dest: NodeAddr, via: NodeAddr, metric: u16) {
        self.statics.retain(|s| s.dest != dest);
        self.statics.push(StaticRoute { dest, via, metric });
        self.schedule_spf(now);
        self.run_spf(now);
    }

    /// Removes the static route to `dest`; false if there was none.
    pub fn remove_static(&mut self, now: Instant, dest: NodeAddr) -> bool {
        let before = self.statics.len();
        self.statics.retain(|s| s.dest != dest);
        if self.statics.len() == before {
            return false;
        }
        self.run_spf(now);
        true
    }

    /// A neighbor came up on `link` at cost `cost`: it gets our whole database, our LSA
    /// changes, routes are recomputed.
    pub fn neighbor_up(&mut self, now: Instant, link: LinkId, addr: NodeAddr, cost: u16) {
        self.neighbors.insert(addr, (link, cost.max(1)));
        self.originate(now);
        // The whole database, in key order, paced over flood rounds (own LSA included: it
        // is pending for everyone too, which is harmless).
        self.backlog.insert(addr, self.db.keys().copied().collect());
        self.schedule_spf(now);
    }

    /// The static routes: (destination, via, metric).
    pub fn static_routes(&self) -> Vec<(NodeAddr, NodeAddr, u16)> {
        self.statics
            .iter()
            .map(|s| (s.dest, s.via, s.metric))
            .collect()
    }

    /// The database and this node's sequence number, for the process that takes its place
    /// (`handover.rs`).
    pub fn export_lsas(&self, now: Instant) -> (Vec<LsaRecord>, u32) {
        let v = self
            .db
            .ordered()
            .filter_map(|(key, st)| {
                Some(LsaRecord {
                    origin: NodeAddr::read(&key.0, 0).ok()?,
                    fragment: key.1,
                    seq: st.seq,
                    expires_in_ms: ms_until(now, self.db.instant(st.expires)),
                    links: st.links.as_ref().clone(),
                })
            })
            .collect();
        (v, self.own_seq)
    }

    /// Restores what another process exported: `neighbors` (link, address, cost) without
    /// the database dump [`LinkState::neighbor_up`] sends them (they hold it), the database
    /// with the time each entry had left, and this node's sequence number (its next LSA
    /// continues from there); then runs SPF at once, so the forwarding table is ready before
    /// the first packet. Returns (restored, skipped) entries.
    pub fn restore(
        &mut self,
        now: Instant,
        neighbors: &[(LinkId, NodeAddr, u16)],
        lsas: &[LsaRecord],
        own_seq: u32,
    ) -> (usize, usize) {
        for &(link, addr, cost) in neighbors {
            self.neighbors.insert(addr, (link, cost.max(1)));
        }
        self.own_seq = self.own_seq.max(own_seq);
        let (mut ok, mut skipped) = (0, 0);
        for l in lsas {
            if l.links.len() > MAX_LSA_LINKS || l.expires_in_ms == 0 {
                skipped += 1;
                continue;
            }
            if l.origin == self.me {
                self.own_frags = self.own_frags.max(l.fragment.saturating_add(1));
            }
            let expires = self.db.expiry(after_ms(now, l.expires_in_ms));
            self.db.put(
                (l.origin.to_bytes(), l.fragment),
                Stored {
                    seq: l.seq,
                    expires,
                    links: Arc::new(l.links.clone()),
                },
            );
            self.note_expiry(self.db.instant(expires));
            ok += 1;
        }
        self.run_spf(now);
        (ok, skipped)
    }

    /// A neighbor went down: our LSA drops it, routes are recomputed.
    pub fn neighbor_down(&mut self, now: Instant, addr: NodeAddr) {
        self.backlog.remove(&addr);
        if self.neighbors.remove(&addr).is_some() {
            self.originate(now);
            // Routes through it are gone at once; the rest follows the SPF run.
            self.run_spf(now);
        }
    }

    /// Handles LSAs from neighbor `msg.sender` on `link`; false (ignored) if the sender is
    /// not an up neighbor on that link.
    pub fn on_lsas(&mut self, now: Instant, link: LinkId, msg: &Lsas) -> bool {
        if !self.is_neighbor_on(link, &msg.sender) {
            return false;
        }
        let mut changed = false;
        self.stats.lsas_received += msg.lsas.len() as u64;
        for lsa in &msg.lsas {
            let origin = lsa.origin.to_bytes();
            if origin == self.me_raw {
                if lsa.seq >= self.own_seq {
                    self.own_seq = lsa.seq;
                    self.originate(now);
                }
                continue;
            }
            let key = (origin, lsa.fragment);
            let life = Duration::from_millis(u64::from(lsa.lifetime_ms).max(1));
            let expires = self.db.expiry(now + life);
            let pool = self.pool.as_ref();
            // Interned only if newer: most copies in a flood are ones we hold already.
            let offered = self.db.offer(key, lsa.seq, || Stored {
                seq: lsa.seq,
                expires,
                links: match pool {
                    Some(p) => p.intern(&lsa.origin, lsa.fragment, lsa.seq, &lsa.links),
                    None => Arc::clone(&lsa.links),
                },
            });
            let Some((same, links)) = offered else {
                continue;
            };
            self.stats.lsas_installed += 1;
            self.note_expiry(self.db.instant(expires));
            let out = Lsa {
                origin: lsa.origin,
                fragment: lsa.fragment,
                seq: lsa.seq,
                lifetime_ms: self.lifetime_ms(),
                links,
            };
            self.queue_flood(now, key, Some(msg.sender), out);
            changed |= !same;
        }
        if changed {
            self.schedule_spf(now);
        }
        true
    }

    /// Handles a database summary from neighbor `msg.sender` on `link`: sends it every LSA
    /// in the summary's range [lo, hi) that it lacks or holds an older copy of. False (ignored) if
    /// the sender is not an up neighbor on that link.
    pub fn on_summary(&mut self, link: LinkId, msg: &LsaSummary) -> bool {
        if !self.is_neighbor_on(link, &msg.sender) {
            return false;
        }
        let lo = (msg.lo.0.to_bytes(), msg.lo.1);
        let hi = (msg.hi.0.to_bytes(), msg.hi.1);
        if lo >= hi {
            return true;
        }
        let mut theirs: Vec<(Key, u32)> = msg
            .entries
            .iter()
            .map(|(a, f, seq)| ((a.to_bytes(), *f), *seq))
            .collect();
        theirs.sort_unstable();
        let in_range = self.db.range(&lo, &hi);
        let keys: Vec<Key> = in_range
            .into_iter()
            .filter(|k| {
                let Some(s) = self.db.get(k) else {
                    return false;
                };
                match theirs.binary_search_by(|t| t.0.cmp(k)) {
                    Ok(i) => theirs.get(i).is_some_and(|t| t.1 < s.seq),
                    Err(_) => true,
                }
            })
            .collect();
        let lsas: Vec<Lsa> = keys.iter().filter_map(|k| self.lsa_of(k)).collect();
        self.pack(link, msg.sender, lsas);
        true
    }

    /// Queues a digest of the database to every neighbor.
    fn sync(&mut self) {
        let (count, digest) = self.db.summary();
        for (addr, link) in self.sorted_neighbors() {
            self.stats.db_digests_sent += 1;
            let msg = LsaDigest {
                sender: self.me,
                count,
                digest,
            };
            self.outbox.push_back((link, addr, Control::LsaDigest(msg)));
        }
    }

    /// The up neighbors (address, link) in address order.
    fn sorted_neighbors(&self) -> Vec<(NodeAddr, LinkId)> {
        let mut ns: Vec<(NodeAddr, LinkId)> =
            self.neighbors.iter().map(|(a, (l, _))| (*a, *l)).collect();
        ns.sort_unstable();
        ns
    }

    /// True if `sender` is an up neighbor on `link` (routing messages from anyone else are
    /// ignored).
    fn is_neighbor_on(&self, link: LinkId, sender: &NodeAddr) -> bool {
        self.neighbors.get(sender).is_some_and(|&(l, _)| l == link)
    }

    /// Handles a database digest from neighbor `msg.sender` on `link`: if our database
    /// differs, sends it our summary, so it sends us nothing we have and we learn from its
    /// answer what it lacks. False (ignored) if the sender is not an up neighbor on that
    /// link.
    pub fn on_digest(&mut self, link: LinkId, msg: &LsaDigest) -> bool {
        if !self.is_neighbor_on(link, &msg.sender) {
            return false;
        }
        if (msg.count, msg.digest) != self.db.summary() {
            self.summaries_to(link, msg.sender);
        }
        true
    }

    /// Queues a summary of the whole database to one neighbor, in key ranges.
    fn summaries_to(&mut self, link: LinkId, addr: NodeAddr) {
        let keys: Vec<(Key, u32)> = self.db.ordered().map(|(k, s)| (*k, s.seq)).collect();
        let chunks: Vec<&[(Key, u32)]> = keys.chunks(MAX_SUMMARY_ENTRIES).collect();
        for (i, c) in chunks.iter().enumerate() {
            let lo = if i == 0 {
                ([0u8; NODE_ADDR_LEN], 0)
            } else {
                c.first().map_or(([0u8; NODE_ADDR_LEN], 0), |e| e.0)
            };
            // Ranges are [lo, hi): up to the next chunk's first key, so together they cover
            // every key (the last one reaches the largest key there can be).
            let hi = chunks
                .get(i + 1)
                .and_then(|n| n.first())
                .map_or(([0xffu8; NODE_ADDR_LEN], u8::MAX), |e| e.0);
            let entries = c
                .iter()
                .filter_map(|(k, seq)| Some((NodeAddr::read(&k.0, 0).ok()?, k.1, *seq)))
                .collect();
            let (Ok(lo_a), Ok(hi_a)) = (NodeAddr::read(&lo.0, 0), NodeAddr::read(&hi.0, 0)) else {
                continue;
            };
            self.stats.summaries_sent += 1;
            self.outbox.push_back((
                link,
                addr,
                Control::LsaSummary(LsaSummary {
                    sender: self.me,
                    lo: (lo_a, lo.1),
                    hi: (hi_a, hi.1),
                    entries,
                }),
            ));
        }
    }

    /// Runs what is due: LSA refresh, database sync, expiry, the flood batch, SPF.
    pub fn handle_timeout(&mut self, now: Instant) {
        if now >= self.next_refresh {
            self.originate(now);
        }
        if now >= self.next_sync {
            self.next_sync = now + self.cfg.update_interval;
            self.sync();
        }
        if self.expiry_bound.is_some_and(|t| t <= now) {
            let gone = self.db.expire(now);
            self.expiry_bound = self.db.earliest_expiry();
            if gone > 0 {
                self.schedule_spf(now);
            }
        }
        if self.flood_at.is_some_and(|t| t <= now) {
            self.flood_at = None;
            self.flood(now);
        }
        if self.spf_at.is_some_and(|t| t <= now) {
            self.run_spf(now);
        }
    }

    /// The next deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let t = [self.flood_at, self.spf_at, self.expiry_bound]
            .into_iter()
            .flatten()
            .fold(self.next_refresh.min(self.next_sync), Instant::min);
        Some(t)
    }

    /// Next message to send: (link, neighbor, LSAs or a summary).
    pub fn poll_update(&mut self) -> Option<(LinkId, NodeAddr, Control)> {
        self.outbox.pop_front()
    }

    fn note_expiry(&mut self, t: Instant) {
        self.expiry_bound = Some(self.expiry_bound.map_or(t, |b| b.min(t)));
    }

    fn lsa_of(&self, key: &Key) -> Option<Lsa> {
        let s = self.db.get(key)?;
        let origin = NodeAddr::read(&key.0, 0).ok()?;
        Some(Lsa {
            origin,
            fragment: key.1,
            seq: s.seq,
            lifetime_ms: self.lifetime_ms(),
            links: Arc::clone(&s.links),
        })
    }

    /// Re-originates this node's LSA fragments from its up neighbors (a new sequence
    /// number) and queues them for flooding to every neighbor.
    fn originate(&mut self, now: Instant) {
        self.own_seq = self.own_seq.wrapping_add(1);
        self.next_refresh = now + self.cfg.lsa_refresh;
        let mut links: Vec<(NodeAddr, u16)> =
            self.neighbors.iter().map(|(a, (_, c))| (*a, *c)).collect();
        links.sort_unstable();
        let chunks: Vec<&[(NodeAddr, u16)]> = links.chunks(MAX_LSA_LINKS).collect();
        let frags = u8::try_from(chunks.len().max(1)).unwrap_or(u8::MAX);
        self.own_frags = self.own_frags.max(frags);
        let expires = self.db.expiry(now + self.cfg.lsa_lifetime);
        self.stats.lsas_originated += u64::from(self.own_frags);
        for f in 0..self.own_frags {
            let part = chunks.get(usize::from(f)).copied().unwrap_or(&[]);
            let key = (self.me_raw, f);
            let links = Arc::new(part.to_vec());
            self.db.put(
                key,
                Stored {
                    seq: self.own_seq,
                    expires,
                    links: Arc::clone(&links),
                },
            );
            let lsa = Lsa {
                origin: self.me,
                fragment: f,
                seq: self.own_seq,
                lifetime_ms: self.lifetime_ms(),
                links,
            };
            self.queue_flood(now, key, None, lsa);
        }
        self.note_expiry(self.db.instant(expires));
    }

    /// The lifetime this node gives the LSAs it sends.
    fn lifetime_ms(&self) -> u32 {
        u32::try_from(self.cfg.lsa_lifetime.as_millis()).unwrap_or(u32::MAX)
    }

    fn queue_flood(&mut self, now: Instant, key: Key, from: Option<NodeAddr>, lsa: Lsa) {
        self.pending.insert(key, (from, lsa));
        if self.flood_at.is_none() {
            self.flood_at = Some(now + self.cfg.triggered_delay);
        }
    }

    /// One flood round: pending LSAs (in key order, up to [`FLOOD_BUDGET_BYTES`]) to every
    /// neighbor but the one each came from, then what is left of each new neighbor's
    /// database backlog within the same budget. Whatever did not fit waits for the next
    /// round.
    fn flood(&mut self, now: Instant) {
        let mut pending: Vec<(Key, (Option<NodeAddr>, Lsa))> = self.pending.drain().collect();
        pending.sort_unstable_by_key(|p| p.0);
        let mut lsas: Vec<(Lsa, Option<NodeAddr>)> = Vec::new();
        let mut used = 0;
        let mut rest = pending.into_iter();
        for (_, (from, l)) in rest.by_ref() {
            used += l.wire_len();
            lsas.push((l, from));
            if used >= FLOOD_BUDGET_BYTES {
                break;
            }
        }
        self.pending.extend(rest);
        for (addr, link) in self.sorted_neighbors() {
            let mut out: Vec<Lsa> = lsas
                .iter()
                .filter(|(_, from)| *from != Some(addr))
                .map(|(l, _)| l.clone())
                .collect();
            let mut budget = FLOOD_BUDGET_BYTES.saturating_sub(used);
            let mut keys = self.backlog.remove(&addr).unwrap_or_default();
            while budget > 0 {
                let Some(k) = keys.pop_front() else {
                    break;
                };
                if let Some(l) = self.lsa_of(&k) {
                    budget = budget.saturating_sub(l.wire_len());
                    out.push(l);
                }
            }
            if !keys.is_empty() {
                self.backlog.insert(addr, keys);
            }
            self.pack(link, addr, out);
        }
        if !self.pending.is_empty() || !self.backlog.is_empty() {
            self.flood_at = Some(now + self.cfg.triggered_delay);
        }
    }

    /// Queues `lsas` for `to` in messages that fit [`MAX_LSAS_BODY`].
    fn pack(&mut self, link: LinkId, to: NodeAddr, lsas: Vec<Lsa>) {
        let mut batch = Vec::new();
        let mut size = 24;
        for l in lsas {
            let len = l.wire_len();
            if !batch.is_empty() && size + len > MAX_LSAS_BODY {
                self.stats.lsa_messages_sent += 1;
                self.outbox.push_back((
                    link,
                    to,
                    Control::Lsas(Lsas {
                        sender: self.me,
                        lsas: std::mem::take(&mut batch),
                    }),
                ));
                size = 24;
            }
            size += len;
            batch.push(l);
        }
        if !batch.is_empty() {
            self.stats.lsa_messages_sent += 1;
            self.outbox.push_back((
                link,
                to,
                Control::Lsas(Lsas {
                    sender: self.me,
                    lsas: batch,
                }),
            ));
        }
    }

    /// Schedules an SPF run: `spf_delay` from now, or, if the last run was recent, after a
    /// hold that doubles (up to `spf_max_delay`) while changes keep coming.
    fn schedule_spf(&mut self, now: Instant) {
        if self.spf_at.is_some() {
            return;
        }
        let at = match self.last_spf {
            Some(t) if now < t + self.spf_hold * 2 => {
                self.spf_hold = (self.spf_hold * 2).min(self.cfg.spf_max_delay);
                (t + self.spf_hold).max(now)
            }
            _ => {
                self.spf_hold = self.cfg.spf_delay;
                now + self.cfg.spf_delay
            }
        };
        self.spf_at = Some(at);
    }

    /// Dijkstra over the two-way links of the database, then static routes; the forwarding
    /// table is updated where it differs.
    fn run_spf(&mut self, now: Instant) {
        self.spf_at = None;
        self.last_spf = Some(now);
        self.spf_runs += 1;
        let mut mine: Vec<(Raw, NextHop, u16)> = self
            .neighbors
            .iter()
            .map(|(a, (link, c))| {
                let hop = NextHop {
                    link: *link,
                    addr: *a,
                };
                (a.to_bytes(), hop, *c)
            })
            .collect();
        mine.sort_unstable_by(|x, y| x.0.cmp(&y.0).then(x.1.link.0.cmp(&y.1.link.0)));
        thread_local! {
            /// The SPF's working space, one per thread rather than per node (see `spf.rs`).
            static SCRATCH: std::cell::RefCell<Spf> = std::cell::RefCell::new(Spf::default());
        }
        SCRATCH.with_borrow_mut(|spf| {
            spf.run(&self.db, &self.me_raw, &mine);
            self.apply_spf(spf.origins(), spf.best());
        });
    }

    /// Updates the forwarding table from an SPF result (`raws` in address order, `best`
    /// beside them) and the static routes, where it differs.
    fn apply_spf(&mut self, raws: &[Raw], best: &[Option<(u16, NextHop)>]) {
        let mut statics: Vec<(Raw, (u16, NextHop))> = Vec::new();
        for s in &self.statics {
            if let Some(&(link, _)) = self.neighbors.get(&s.via) {
                statics.push((s.dest.to_bytes(), (s.metric, NextHop { link, addr: s.via })));
            }
        }
        statics.sort_unstable_by_key(|e| e.0);
        statics.dedup_by_key(|e| e.0);
        let me = self.me_raw;
        // What the table should say for `k`: a static route wins over the database.
        let want = |k: &Raw, computed: Option<(u16, NextHop)>| {
            if *k == me {
                return None;
            }
            match statics.binary_search_by(|e| e.0.cmp(k)) {
                Ok(i) => statics.get(i).map(|e| e.1),
                Err(_) => computed,
            }
        };
        let mut fib_changes: Vec<(Raw, Option<(u16, NextHop)>)> = Vec::new();
        let mut wanted = 0;
        let mut diff = |k: &Raw, w: Option<(u16, NextHop)>| {
            let have = self.fib.get_raw(k).map(|e| (e.metric, e.hop));
            if w.is_some() && have.is_some() {
                wanted += 1;
            }
            if have != w {
                fib_changes.push((*k, w));
            }
        };
        for (k, b) in raws.iter().zip(best) {
            diff(k, want(k, *b));
        }
        for (k, v) in &statics {
            if raws.binary_search(k).is_err() && *k != me {
                diff(k, Some(*v));
            }
        }
        // Entries for destinations neither the database nor a static route names any more.
        if self.fib.len() > wanted {
            for (k, _) in self.fib.entries() {
                let in_db = raws.binary_search(&k).is_ok();
                let in_statics = statics.binary_search_by(|e| e.0.cmp(&k)).is_ok();
                if !in_db && !in_statics {
                    fib_changes.push((k, None));
                }
            }
        }
        if fib_changes.is_empty() {
            return;
        }
        fib_changes.sort_unstable_by_key(|c| c.0);
        let fib = Arc::make_mut(&mut self.fib);
        for (k, v) in fib_changes {
            let Ok(dest) = NodeAddr::read(&k, 0) else {
                continue;
            };
            let before = fib.lookup_raw(&k);
            match v {
                Some((m, h)) => fib.insert(&dest, h, m),
                None => fib.remove(&dest),
            }
            if before != v.map(|(_, h)| h) {
                self.log.note(dest);
            }
            self.changes += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_wire::addr::v4;

    fn cfg() -> RoutingConfig {
        RoutingConfig {
            protocol: crate::Protocol::Ls,
            triggered_delay: Duration::from_millis(10),
            spf_delay: Duration::from_millis(20),
            ..RoutingConfig::default()
        }
    }

    /// A network of link-state nodes passing messages with zero delay until quiet.
    struct Net {
        nodes: Vec<LinkState>,
        addrs: Vec<NodeAddr>,
        /// (a, b) links: node a's link id to b is the index of b in a's list.
        adj: Vec<Vec<usize>>,
        now: Instant,
        /// Directions (from, to) whose messages are lost.
        lose: Vec<(usize, usize)>,
        /// Messages delivered so far: (digests, summaries).
        syncs: (usize, usize),
    }

    impl Net {
        fn new(n: usize, edges: &[(usize, usize)]) -> Net {
            let now = Instant::now();
            let addrs: Vec<NodeAddr> = (0..n).map(|i| v4(198, 18, 0, i as u8 + 1, 3322)).collect();
            let nodes = addrs
                .iter()
                .map(|a| LinkState::new(*a, cfg(), now))
                .collect();
            let mut adj = vec![Vec::new(); n];
            for &(a, b) in edges {
                adj[a].push(b);
                adj[b].push(a);
            }
            let mut net = Net {
                nodes,
                addrs,
                adj,
                now,
                lose: Vec::new(),
                syncs: (0, 0),
            };
            for a in 0..n {
                for (li, &b) in net.adj[a].clone().iter().enumerate() {
                    let addr = net.addrs[b];
                    net.nodes[a].neighbor_up(now, LinkId(li as u32), addr, 1);
                }
            }
            net
        }

        fn run(&mut self, ms: u64) {
            let end = self.now + Duration::from_millis(ms);
            while self.now < end {
                self.now += Duration::from_millis(1);
                let now = self.now;
                for i in 0..self.nodes.len() {
                    if self.nodes[i].poll_timeout().is_some_and(|t| t <= now) {
                        self.nodes[i].handle_timeout(now);
                    }
                    while let Some((link, _to, msg)) = self.nodes[i].poll_update() {
                        let b = self.adj[i][link.0 as usize];
                        let back = LinkId(self.adj[b].iter().position(|&x| x == i).unwrap() as u32);
                        if self.lose.contains(&(i, b)) {
                            continue;
                        }
                        match msg {
                            Control::Lsas(m) => self.nodes[b].on_lsas(now, back, &m),
                            Control::LsaSummary(m) => {
                                self.syncs.1 += 1;
                                self.nodes[b].on_summary(back, &m)
                            }
                            Control::LsaDigest(m) => {
                                self.syncs.0 += 1;
                                self.nodes[b].on_digest(back, &m)
                            }
                            _ => unreachable!(),
                        };
                    }
                }
            }
        }

        fn hop(&self, from: usize, to: usize) -> Option<usize> {
            let h = self.nodes[from].lookup(&self.addrs[to])?;
            Some(self.adj[from][h.link.0 as usize])
        }

        fn down(&mut self, a: usize, b: usize) {
            let now = self.now;
            let (ab, ba) = (self.addrs[b], self.addrs[a]);
            self.nodes[a].neighbor_down(now, ab);
            self.nodes[b].neighbor_down(now, ba);
        }
    }

    #[test]
    fn a_node_restored_from_its_export_routes_at_once_and_continues_its_sequence() {
        // A ring of 6; node 2 is replaced by a fresh process restored from its export.
        let mut net = Net::new(6, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0)]);
        net.run(300);
        let now = net.now;
        let (lsas, seq) = net.nodes[2].export_lsas(now);
        assert_eq!(lsas.len(), 6);
        let neighbors: Vec<(LinkId, NodeAddr, u16)> = net.adj[2]
            .iter()
            .enumerate()
            .map(|(li, &b)| (LinkId(li as u32), net.addrs[b], 1))
            .collect();
        let mut fresh = LinkState::new(net.addrs[2], cfg(), now);
        assert_eq!(fresh.restore(now, &neighbors, &lsas, seq), (6, 0));
        for to in 0..6 {
            assert_eq!(
                fresh.lookup(&net.addrs[to]),
                net.nodes[2].lookup(&net.addrs[to])
            );
        }
        assert!(fresh.poll_update().is_none(), "restoring sends nothing");
        net.nodes[2] = fresh;
        // Its next LSA outnumbers the one the others hold, and the ring still reroutes.
        net.down(2, 3);
        net.run(300);
        assert_eq!(net.nodes[2].own_seq, seq + 1);
        assert_eq!(net.hop(2, 3), Some(1));
        assert_eq!(net.hop(3, 2), Some(4));
        // An entry over the link bound is skipped, not trusted.
        let mut bad = lsas.clone();
        bad[0].links = vec![(net.addrs[0], 1); MAX_LSA_LINKS + 1];
        let mut other = LinkState::new(net.addrs[2], cfg(), now);
        assert_eq!(other.restore(now, &neighbors, &bad, seq), (5, 1));
    }

    #[test]
    fn a_ring_converges_to_shortest_paths_and_reroutes_after_a_failure() {
        // 0-1-2-3-4-5-0
        let edges: Vec<(usize, usize)> = (0..6).map(|i| (i, (i + 1) % 6)).collect();
        let mut net = Net::new(6, &edges);
        net.run(500);
        for a in 0..6 {
            for b in 0..6 {
                if a != b {
                    assert!(net.hop(a, b).is_some(), "{a} -> {b}");
                }
            }
        }
        assert_eq!(net.hop(0, 2), Some(1));
        assert_eq!(net.hop(0, 4), Some(5));
        let r = net.nodes[0].routes();
        assert_eq!(r.len(), 6);
        assert_eq!(r.iter().find(|r| r.dest == net.addrs[3]).unwrap().metric, 3);
        net.down(0, 1);
        net.run(500);
        assert_eq!(net.hop(0, 1), Some(5), "the long way round");
        assert_eq!(net.hop(1, 0), Some(2));
        assert_eq!(
            net.nodes[0]
                .routes()
                .iter()
                .find(|r| r.dest == net.addrs[1])
                .unwrap()
                .metric,
            5
        );
    }

    #[test]
    fn a_partition_removes_routes_and_spf_is_throttled() {
        // 0-1-2, then 1-2 fails: 2 is unreachable from 0.
        let mut net = Net::new(3, &[(0, 1), (1, 2)]);
        net.run(300);
        assert_eq!(net.hop(0, 2), Some(1));
        let runs = net.nodes[0].spf_runs();
        assert!(runs <= 6, "{runs} SPF runs for a 3-node line");
        net.down(1, 2);
        net.run(300);
        assert_eq!(net.hop(0, 2), None);
        assert_eq!(net.hop(2, 0), None);
    }

    #[test]
    fn high_degree_nodes_split_their_lsa_into_fragments() {
        // A star of 70 leaves around node 0: 0's LSA needs two fragments.
        let edges: Vec<(usize, usize)> = (1..71).map(|i| (0, i)).collect();
        let mut net = Net::new(71, &edges);
        net.run(400);
        assert_eq!(net.hop(1, 70), Some(0));
        assert_eq!(net.hop(70, 1), Some(0));
        assert!(
            net.nodes[5].database_len() >= 72,
            "{}",
            net.nodes[5].database_len()
        );
        // Every message fits the MTU.
        let m = Lsas {
            sender: net.addrs[0],
            lsas: vec![net.nodes[0].lsa_of(&(net.addrs[0].to_bytes(), 0)).unwrap()],
        };
        assert!(
            anode_wire::control::Control::Lsas(m)
                .to_bytes()
                .unwrap()
                .len()
                <= 1472
        );
    }

    #[test]
    fn lost_floods_are_repaired_by_the_database_sync() {
        // 0-1-2: everything 1 sends to 2 is lost at first, so 2 learns nothing of 0.
        let mut net = Net::new(3, &[(0, 1), (1, 2)]);
        net.lose.push((1, 2));
        net.run(500);
        assert_eq!(net.hop(2, 0), None);
        net.lose.clear();
        // At the next sync (update_interval: 5 s) 1's digest differs from 2's database, so 2
        // sends 1 its summary, and 1 sends what 2 lacks.
        net.run(5_600);
        assert_eq!(net.hop(2, 0), Some(1));
    }

    #[test]
    fn agreeing_databases_exchange_only_digests() {
        let ring: Vec<(usize, usize)> = (0..8).map(|i| (i, (i + 1) % 8)).collect();
        let mut net = Net::new(8, &ring);
        net.run(1_000);
        assert!(net.hop(0, 4).is_some());
        let digests = net.nodes.iter().map(|n| n.db.digest()).collect::<Vec<_>>();
        assert!(digests.iter().all(|d| *d == digests[0] && *d != 0));
        net.syncs = (0, 0);
        let before: Vec<crate::RoutingStats> = net.nodes.iter().map(|n| n.stats()).collect();
        // Two sync rounds: 8 nodes x 2 neighbors x 2 digests, and no summary at all.
        net.run(10_500);
        assert_eq!(net.syncs, (32, 0));
        // The counters agree, and the flood stored each LSA once per node.
        let after: Vec<crate::RoutingStats> = net.nodes.iter().map(|n| n.stats()).collect();
        let sent: u64 = before
            .iter()
            .zip(&after)
            .map(|(b, a)| a.db_digests_sent - b.db_digests_sent)
            .sum();
        assert_eq!(sent, 32);
        assert!(
            after
                .iter()
                .all(|s| s.summaries_sent == 0 && s.spf_runs > 0)
        );
        assert!(after.iter().all(|s| s.lsas_installed <= s.lsas_received));
        let installed: u64 = after.iter().map(|s| s.lsas_installed).sum();
        assert_eq!(
            installed,
            8 * 7,
            "each node stored each other node's one LSA once"
        );
        // A database that differs (an LSA expired early at 3) is answered with summaries
        // and repaired.
        let key = (net.addrs[0].to_bytes(), 0);
        let st = net.nodes[3].db.forget(&key).unwrap();
        net.run(5_000);
        assert!(net.syncs.1 > 0);
        assert_eq!(net.nodes[3].db.get(&key).map(|s| s.seq), Some(st.seq));
        assert_eq!(net.nodes[3].db.digest(), digests[0]);
    }

    #[test]
    fn our_own_lsa_from_a_previous_life_is_outnumbered() {
        let now = Instant::now();
        let me = v4(198, 18, 0, 1, 3322);
        let nb = v4(198, 18, 0, 2, 3322);
        let mut n = LinkState::new(me, cfg(), now);
        n.neighbor_up(now, LinkId(0), nb, 1);
        let msg = Lsas {
            sender: nb,
            lsas: vec![Lsa {
                origin: me,
                fragment: 0,
                seq: 500,
                lifetime_ms: 60_000,
                links: Arc::new(Vec::new()),
            }],
        };
        assert!(n.on_lsas(now, LinkId(0), &msg));
        assert_eq!(n.own_seq, 501);
        assert!(!n.on_lsas(now, LinkId(1), &msg), "wrong link: ignored");
    }
}
