//! Routing functions: how a PLAN packet that names a routing function other than
//! `defaultRoute` chooses its next hop at intermediate nodes, and the flow table that
//! flow-based routing functions read.
//!
//! Contract:
//! * a [`RouteFn`] sees only the transit header fields it needs ([`RouteQuery`]: destination
//!   and flow id), the node (through a read-only [`NodeContext`]) and the [`FlowTable`]; it
//!   never sees the chunk, which stays marshalled on the header-only path;
//! * every routing function is also a PLAN service of type `host -> host * dev` (so programs
//!   that name it type-check and may call it); [`crate::ee::PlanEe::register_route`] does both;
//! * `defaultRoute` (the distance-vector route) is built in and is never looked up here;
//!   `flowRoute` (flow table, falling back to the default route) is registered by default.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use anode_core::wire::NodeAddr;
use anode_core::{NextHop, NodeContext};

/// What a routing function is asked.
#[derive(Debug)]
pub struct RouteQuery<'c, 'a> {
    /// The node.
    pub ctx: &'c NodeContext<'a>,
    /// Flow-based routes installed on this node.
    pub flows: &'c FlowTable,
    /// The evaluation destination.
    pub dst: NodeAddr,
    /// The packet's flow id.
    pub flow: u64,
}

/// A named routing function.
pub trait RouteFn: Send {
    /// The next hop toward `q.dst`, or `None` if there is no route.
    fn next_hop(&mut self, q: &RouteQuery<'_, '_>) -> Option<NextHop>;
}

/// Follows the flow table entry of the packet's flow; without one (or after it expired),
/// the default route.
#[derive(Debug, Default, Clone, Copy)]
pub struct FlowRoute;

impl RouteFn for FlowRoute {
    fn next_hop(&mut self, q: &RouteQuery<'_, '_>) -> Option<NextHop> {
        q.flows
            .lookup(q.flow, q.ctx.now())
            .or_else(|| q.ctx.lookup(&q.dst))
    }
}

/// A multiplicative hasher for flow ids (integers chosen by the network, looked up per
/// packet on the routing path; the table is bounded, so adversarial collisions cost at most
/// a bounded probe sequence).
#[derive(Debug, Default, Clone, Copy)]
pub struct FlowHasher(u64);

impl Hasher for FlowHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// Flow id -> next hop, each entry living for a time-to-live after it was (re)installed.
/// Bounded: when full, expired entries are purged and, if none, the install is refused.
#[derive(Debug)]
pub struct FlowTable {
    map: HashMap<u64, (NextHop, Instant), BuildHasherDefault<FlowHasher>>,
    ttl: Duration,
    cap: usize,
}

impl FlowTable {
    /// A table whose entries live `ttl` and that holds at most `cap` of them.
    pub fn new(ttl: Duration, cap: usize) -> Self {
        FlowTable {
            map: HashMap::default(),
            ttl,
            cap: cap.max(1),
        }
    }

    /// Installs (or refreshes) `flow -> hop`. False if the table is full of live entries.
    pub fn install(&mut self, flow: u64, hop: NextHop, now: Instant) -> bool {
        if !self.map.contains_key(&flow) && self.map.len() >= self.cap {
            self.map.retain(|_, (_, exp)| *exp > now);
            if self.map.len() >= self.cap {
                return false;
            }
        }
        self.map.insert(flow, (hop, now + self.ttl));
        true
    }

    /// The live entry for `flow`.
    pub fn lookup(&self, flow: u64, now: Instant) -> Option<NextHop> {
        self.map
            .get(&flow)
            .filter(|(_, exp)| *exp > now)
            .map(|(h, _)| *h)
    }

    /// Number of entries (live or not yet purged).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every live entry: (flow, next hop, time left), for a handover.
    pub(crate) fn export(&self, now: Instant) -> Vec<(u64, NextHop, Duration)> {
        let mut v: Vec<_> = self
            .map
            .iter()
            .filter(|(_, (_, exp))| *exp > now)
            .map(|(f, (h, exp))| (*f, *h, *exp - now))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }

    /// Puts back an entry with the time it had left; false if the table is full.
    pub(crate) fn import(&mut self, flow: u64, hop: NextHop, left: Duration, now: Instant) -> bool {
        if self.map.len() >= self.cap {
            return false;
        }
        self.map.insert(flow, (hop, now + left.min(self.ttl)));
        true
    }
}

/// The registered routing functions by name, and the PLAN service ids that call them.
/// A handful of entries: a linear scan of short names beats hashing on the per-packet path.
#[derive(Default)]
pub struct RouteRegistry {
    by_name: Vec<(String, Box<dyn RouteFn>)>,
    by_service: HashMap<u32, String>,
}

impl std::fmt::Debug for RouteRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteRegistry")
            .field("names", &self.names().collect::<Vec<_>>())
            .finish()
    }
}

impl RouteRegistry {
    pub(crate) fn insert(&mut self, name: &str, service_id: u32, f: Box<dyn RouteFn>) {
        self.by_name.retain(|(n, _)| n != name);
        self.by_name.push((name.to_string(), f));
        self.by_service.insert(service_id, name.to_string());
    }

    /// Removes the routing function `name`; its PLAN service id stays known, so calling it
    /// fails with `NoRoute` like any routing function not installed here. Whether it was there.
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        let before = self.by_name.len();
        self.by_name.retain(|(n, _)| n != name);
        self.by_name.len() != before
    }

    /// The PLAN service id `name` was registered under, if it ever was.
    pub(crate) fn service_id(&self, name: &str) -> Option<u32> {
        self.by_service
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map(|(id, _)| *id)
    }

    /// Whether `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.iter().any(|(n, _)| n == name)
    }

    /// The routing function `name`.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut (dyn RouteFn + 'static)> {
        self.by_name
            .iter_mut()
            .find(|(n, _)| n == name)
            .map(|(_, b)| &mut **b)
    }

    /// Whether PLAN service `id` is a routing function.
    pub(crate) fn is_service(&self, id: u32) -> bool {
        self.by_service.contains_key(&id)
    }

    /// Names of the registered routing functions (not including `defaultRoute`).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.iter().map(|(n, _)| n.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_core::LinkId;
    use anode_core::wire::addr::v4;

    #[test]
    fn flow_table_expires_and_is_bounded() {
        let now = Instant::now();
        let mut t = FlowTable::new(Duration::from_secs(1), 2);
        let h = NextHop {
            link: LinkId(1),
            addr: v4(10, 0, 0, 1, 1),
        };
        assert!(t.install(1, h, now));
        assert!(t.install(2, h, now));
        assert!(!t.install(3, h, now));
        assert_eq!(t.lookup(1, now), Some(h));
        let later = now + Duration::from_secs(2);
        assert_eq!(t.lookup(1, later), None);
        assert!(t.install(3, h, later));
        assert_eq!(t.len(), 1);
    }
}
