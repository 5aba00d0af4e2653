//! The distance-vector routing table, stored compactly: one 48-byte entry per destination
//! (the destination, metric, kind, the changed flag, the index of its next hop in a
//! [`HopTable`] and both deadlines as nanoseconds since the table's epoch) where a hash map
//! of [`Route`]s took 130 bytes a bucket: about 1 MB a node at 3,815 destinations (8,192
//! buckets), 5 GB over an emulated network of that size.
//!
//! The entries sit densely behind a hash table of 4-byte indices ([`DenseMap`], as the
//! forwarding table's do): about 230 KB a node at 3,815 destinations, where keeping them in
//! the hash table's own buckets took 400 KB. The index costs one cache miss more per lookup,
//! which made the 3,815-node emulation 20-30 % slower while every periodic update was a
//! full table looked up entry by entry; since periodic updates became digests (`sync.rs`)
//! lookups are few, and the passes over the whole table (a digest's refresh, the deadline
//! scan) run faster over the dense vector.
//!
//! The table hands out [`Route`] values, not references; changes go through
//! [`RouteTable::update`], which keeps the next-hop counts right. Deadlines round-trip
//! exactly (an `Instant` is whole nanoseconds past the epoch; none is before it, as the epoch
//! is the service's creation time and deadlines lie after "now").

use std::time::{Duration, Instant};

use anode_wire::NodeAddr;

use super::{Route, RouteKind};
use crate::NextHop;
use crate::dense::{DenseMap, HopTable, Keyed, NO_HOP};

/// A deadline field's value for "none".
const NO_TIME: u64 = u64::MAX;

/// One stored route.
#[derive(Debug, Clone, Copy)]
struct Entry {
    dest: NodeAddr,
    metric: u16,
    kind: RouteKind,
    changed: bool,
    hop: u32,
    expires: u64,
    gc_at: u64,
}

impl Keyed for Entry {
    type Key = NodeAddr;
    #[inline]
    fn key(&self) -> NodeAddr {
        self.dest
    }
}

/// See the module docs.
#[derive(Debug)]
pub(super) struct RouteTable {
    map: DenseMap<Entry>,
    hops: HopTable,
    epoch: Instant,
}

impl RouteTable {
    /// An empty table whose deadlines count from `epoch`.
    pub(super) fn new(epoch: Instant) -> Self {
        RouteTable {
            map: DenseMap::default(),
            hops: HopTable::default(),
            epoch,
        }
    }

    fn time(&self, t: Option<Instant>) -> u64 {
        encode(self.epoch, t)
    }

    #[inline]
    fn route(&self, e: &Entry) -> Route {
        decode(&self.hops, self.epoch, e)
    }

    /// The route to `dest`.
    #[inline]
    pub(super) fn get(&self, dest: &NodeAddr) -> Option<Route> {
        self.map.get(dest).map(|e| self.route(e))
    }

    /// Stores `r` (replacing the route to its destination); the route it replaced.
    pub(super) fn insert(&mut self, r: Route) -> Option<Route> {
        let e = Entry {
            dest: r.dest,
            metric: r.metric,
            kind: r.kind,
            changed: r.changed,
            hop: self.hops.acquire_opt(r.next_hop),
            expires: self.time(r.expires),
            gc_at: self.time(r.gc_at),
        };
        let old = self.map.insert(e).0?;
        let route = self.route(&old);
        self.hops.release(old.hop);
        Some(route)
    }

    /// Changes the route to `dest` with `f`; false if there is none. `f` may change anything
    /// but the destination.
    pub(super) fn update(&mut self, dest: &NodeAddr, f: impl FnOnce(&mut Route)) -> bool {
        let Self { map, hops, epoch } = self;
        let Some(e) = map.get_mut(dest) else {
            return false;
        };
        let mut r = decode(hops, *epoch, e);
        let before = r.next_hop;
        f(&mut r);
        if r.next_hop != before {
            let h = hops.acquire_opt(r.next_hop);
            hops.release(std::mem::replace(&mut e.hop, h));
        }
        e.metric = r.metric;
        e.kind = r.kind;
        e.changed = r.changed;
        e.expires = encode(*epoch, r.expires);
        e.gc_at = encode(*epoch, r.gc_at);
        true
    }

    /// Sets the expiry of the route to `dest` (the common case of an update: a route
    /// refreshed by its next hop), in one lookup.
    #[inline]
    pub(super) fn refresh(&mut self, dest: &NodeAddr, expires: Instant) {
        let t = encode(self.epoch, Some(expires));
        if let Some(e) = self.map.get_mut(dest) {
            e.expires = t;
        }
    }

    /// Sets the expiry of every learned, reachable route through `hop` that has one (what a
    /// digest from `hop` does): one pass over the table in memory order, no lookups.
    /// Returns how many it refreshed.
    pub(super) fn refresh_via(&mut self, hop: NextHop, infinity: u16, expires: Instant) -> usize {
        let Some(h) = self.hops.find(hop) else {
            return 0;
        };
        let t = encode(self.epoch, Some(expires));
        let mut n = 0;
        for e in self.map.iter_mut() {
            if e.hop == h
                && e.kind == RouteKind::Learned
                && e.metric < infinity
                && e.expires != NO_TIME
            {
                e.expires = t;
                n += 1;
            }
        }
        n
    }

    /// Every route (in no particular order).
    pub(super) fn routes(&self) -> impl Iterator<Item = Route> + '_ {
        self.map.iter().map(|e| self.route(e))
    }

    /// Clears every route's changed flag.
    pub(super) fn clear_changed(&mut self) {
        for e in self.map.iter_mut() {
            e.changed = false;
        }
    }

    /// Keeps the routes `keep` accepts.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Route) -> bool) {
        let mut released = Vec::new();
        let Self { map, hops, epoch } = self;
        map.retain(|e| keep(&decode(hops, *epoch, e)), |e| released.push(e.hop));
        for h in released {
            hops.release(h);
        }
    }
}

/// A deadline as stored: nanoseconds since `epoch`, [`NO_TIME`] for none.
#[inline]
fn encode(epoch: Instant, t: Option<Instant>) -> u64 {
    t.map_or(NO_TIME, |t| {
        let n = t.saturating_duration_since(epoch).as_nanos();
        u64::try_from(n).unwrap_or(NO_TIME - 1).min(NO_TIME - 1)
    })
}

/// The route an entry stands for.
#[inline]
fn decode(hops: &HopTable, epoch: Instant, e: &Entry) -> Route {
    let instant = |n: u64| (n != NO_TIME).then(|| epoch + Duration::from_nanos(n));
    Route {
        dest: e.dest,
        metric: e.metric,
        next_hop: if e.hop == NO_HOP {
            None
        } else {
            hops.get(e.hop)
        },
        kind: e.kind,
        expires: instant(e.expires),
        gc_at: instant(e.gc_at),
        changed: e.changed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinkId, NextHop};
    use anode_wire::addr::v4;

    #[test]
    fn routes_round_trip_and_next_hops_are_counted() {
        let now = Instant::now();
        let mut t = RouteTable::new(now);
        let hop = |l: u32| NextHop {
            link: LinkId(l),
            addr: v4(198, 18, 0, 1, l as u16),
        };
        let r = |i: u8, h: Option<NextHop>| Route {
            dest: v4(198, 18, 1, i, 1),
            metric: u16::from(i),
            next_hop: h,
            kind: RouteKind::Learned,
            expires: Some(now + Duration::new(30, 123_456_789)),
            gc_at: None,
            changed: true,
        };
        for i in 0..10 {
            assert_eq!(t.insert(r(i, Some(hop(u32::from(i % 2))))), None);
        }
        assert_eq!(t.get(&r(3, None).dest), Some(r(3, Some(hop(1)))), "exact");
        assert_eq!(t.hops.in_use(), 2);
        // Moving every route of hop 1 to none frees its slot.
        for i in (1..10).step_by(2) {
            assert!(t.update(&r(i, None).dest, |x| x.next_hop = None));
        }
        assert_eq!(t.hops.in_use(), 1);
        assert!(!t.update(&r(42, None).dest, |_| {}), "no such route");
        // Retain drops the routes and their next-hop uses.
        t.retain(|x| x.next_hop.is_none());
        assert_eq!((t.routes().count(), t.hops.in_use()), (5, 0));
        t.clear_changed();
        assert!(t.routes().all(|x| !x.changed));
        let g = now + Duration::from_secs(20);
        assert!(t.update(&r(1, None).dest, |x| x.gc_at = Some(g)));
        assert_eq!(t.get(&r(1, None).dest).and_then(|x| x.gc_at), Some(g));
    }
}
