//! The routing table: longest-prefix match over connected, static and learned routes.
//!
//! Every route is kept in `routes`; for lookups the table keeps, per address family, one
//! hash map per prefix length in use (longest first), each mapping a masked prefix to the
//! best route's next hop. A lookup is one hash probe per prefix length in use; the index is
//! rebuilt when routes change (rare next to lookups).
//!
//! Invariant: among routes to the same prefix the best is chosen by origin (connected, then
//! static, then learned) and then by lowest metric; removing it exposes the next best.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rustc_hash::FxHashMap;

use super::IfaceId;
use crate::wire::{Ipv4Cidr, Ipv6Cidr};

/// A prefix of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpCidr {
    /// IPv4.
    V4(Ipv4Cidr),
    /// IPv6.
    V6(Ipv6Cidr),
}

impl IpCidr {
    /// The network form (host bits cleared).
    pub fn network(&self) -> IpCidr {
        match self {
            IpCidr::V4(c) => IpCidr::V4(c.network()),
            IpCidr::V6(c) => IpCidr::V6(c.network()),
        }
    }
    /// True if `a` is inside.
    pub fn contains(&self, a: IpAddr) -> bool {
        match (self, a) {
            (IpCidr::V4(c), IpAddr::V4(a)) => c.contains(a),
            (IpCidr::V6(c), IpAddr::V6(a)) => c.contains(a),
            _ => false,
        }
    }
}

impl std::fmt::Display for IpCidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IpCidr::V4(c) => c.fmt(f),
            IpCidr::V6(c) => c.fmt(f),
        }
    }
}

impl std::str::FromStr for IpCidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.contains(':') {
            s.parse().map(IpCidr::V6).map_err(|e| e.to_string())
        } else {
            s.parse().map(IpCidr::V4).map_err(|e| e.to_string())
        }
    }
}

/// Where a route came from; earlier variants win over later ones for the same prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteOrigin {
    /// A prefix of one of the router's interface addresses.
    Connected,
    /// Configuration.
    Static,
    /// Learned from a routing protocol (the distance-vector service).
    Learned,
}

/// One route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Destination prefix (network form).
    pub prefix: IpCidr,
    /// Gateway; `None` for a connected prefix (the destination itself is the next hop).
    pub gateway: Option<IpAddr>,
    /// Outgoing interface.
    pub iface: IfaceId,
    /// Cost (lower wins among routes of one origin).
    pub metric: u32,
    /// Origin.
    pub origin: RouteOrigin,
}

/// What a lookup returns: the interface and the next hop's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// Outgoing interface.
    pub iface: IfaceId,
    /// Gateway (`None`: on-link, the destination is the next hop).
    pub gateway: Option<IpAddr>,
}

type Level<K> = (u8, FxHashMap<K, Hop>);

/// The table.
#[derive(Debug, Default, Clone)]
pub struct RouteTable {
    routes: Vec<Route>,
    v4: Vec<Level<u32>>,
    v6: Vec<Level<u128>>,
}

impl RouteTable {
    /// Adds a route, replacing one of the same prefix, origin and gateway.
    pub fn add(&mut self, mut r: Route) {
        r.prefix = r.prefix.network();
        self.routes
            .retain(|x| !(x.prefix == r.prefix && x.origin == r.origin && x.gateway == r.gateway));
        self.routes.push(r);
        self.rebuild();
    }

    /// Removes the routes to `prefix` of `origin`; returns how many.
    pub fn remove(&mut self, prefix: IpCidr, origin: RouteOrigin) -> usize {
        let p = prefix.network();
        let before = self.routes.len();
        self.routes
            .retain(|x| !(x.prefix == p && x.origin == origin));
        let n = before - self.routes.len();
        if n > 0 {
            self.rebuild();
        }
        n
    }

    /// Removes every route of `origin` (e.g. before installing a fresh set of learned routes).
    pub fn clear_origin(&mut self, origin: RouteOrigin) {
        self.routes.retain(|x| x.origin != origin);
        self.rebuild();
    }

    /// All routes, best first within each prefix, sorted by prefix.
    pub fn routes(&self) -> Vec<Route> {
        let mut v = self.routes.clone();
        v.sort_by_key(|r| (r.prefix.to_string(), r.origin, r.metric));
        v
    }

    /// The route lookups use for each prefix: the best origin, then the lowest metric.
    fn best_map(&self) -> FxHashMap<IpCidr, Route> {
        let mut best: FxHashMap<IpCidr, Route> = FxHashMap::default();
        for r in &self.routes {
            let e = best.entry(r.prefix).or_insert(*r);
            if (r.origin, r.metric) < (e.origin, e.metric) {
                *e = *r;
            }
        }
        best
    }

    /// The routes lookups use, one per prefix (see [`RouteTable::routes`] for all).
    pub fn best(&self) -> Vec<Route> {
        let mut v: Vec<Route> = self.best_map().into_values().collect();
        v.sort_by_key(|r| (r.prefix.to_string(), r.origin, r.metric));
        v
    }

    fn rebuild(&mut self) {
        let best = self.best_map();
        let mut v4: FxHashMap<u8, FxHashMap<u32, Hop>> = FxHashMap::default();
        let mut v6: FxHashMap<u8, FxHashMap<u128, Hop>> = FxHashMap::default();
        for r in best.values() {
            let hop = Hop {
                iface: r.iface,
                gateway: r.gateway,
            };
            match r.prefix {
                IpCidr::V4(c) => {
                    v4.entry(c.prefix_len)
                        .or_default()
                        .insert(u32::from(c.addr) & c.mask(), hop);
                }
                IpCidr::V6(c) => {
                    v6.entry(c.prefix_len)
                        .or_default()
                        .insert(u128::from(c.addr) & c.mask(), hop);
                }
            }
        }
        self.v4 = v4.into_iter().collect();
        self.v6 = v6.into_iter().collect();
        self.v4.sort_by_key(|l| std::cmp::Reverse(l.0));
        self.v6.sort_by_key(|l| std::cmp::Reverse(l.0));
    }

    /// Longest-prefix match for an IPv4 destination.
    #[inline]
    pub fn lookup_v4(&self, a: Ipv4Addr) -> Option<Hop> {
        let a = u32::from(a);
        for (len, map) in &self.v4 {
            let m = if *len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(*len))
            };
            if let Some(h) = map.get(&(a & m)) {
                return Some(*h);
            }
        }
        None
    }

    /// Longest-prefix match for an IPv6 destination.
    #[inline]
    pub fn lookup_v6(&self, a: Ipv6Addr) -> Option<Hop> {
        let a = u128::from(a);
        for (len, map) in &self.v6 {
            let m = if *len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(*len))
            };
            if let Some(h) = map.get(&(a & m)) {
                return Some(*h);
            }
        }
        None
    }

    /// Longest-prefix match for either family.
    pub fn lookup(&self, a: IpAddr) -> Option<Hop> {
        match a {
            IpAddr::V4(a) => self.lookup_v4(a),
            IpAddr::V6(a) => self.lookup_v6(a),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(p: &str, gw: Option<&str>, i: u32, metric: u32, origin: RouteOrigin) -> Route {
        Route {
            prefix: p.parse().unwrap(),
            gateway: gw.map(|g| g.parse().unwrap()),
            iface: IfaceId(i),
            metric,
            origin,
        }
    }

    #[test]
    fn longest_prefix_wins() {
        let mut t = RouteTable::default();
        t.add(r(
            "0.0.0.0/0",
            Some("198.18.1.1"),
            0,
            1,
            RouteOrigin::Static,
        ));
        t.add(r("198.18.2.0/24", None, 1, 0, RouteOrigin::Connected));
        t.add(r(
            "198.18.2.128/25",
            Some("198.18.2.9"),
            2,
            1,
            RouteOrigin::Static,
        ));
        t.add(r(
            "2001:2::/48",
            Some("2001:2:0:1::1"),
            0,
            1,
            RouteOrigin::Static,
        ));
        t.add(r("2001:2:0:2::/64", None, 1, 0, RouteOrigin::Connected));
        let l = |a: &str| t.lookup(a.parse().unwrap());
        assert_eq!(l("198.18.2.1").unwrap().iface, IfaceId(1));
        assert_eq!(l("198.18.2.200").unwrap().iface, IfaceId(2));
        assert_eq!(l("8.8.8.8").unwrap().iface, IfaceId(0));
        assert_eq!(l("2001:2:0:2::5").unwrap().iface, IfaceId(1));
        assert_eq!(l("2001:2:0:3::5").unwrap().iface, IfaceId(0));
        assert_eq!(l("2001:3::1"), None);
    }

    #[test]
    fn origin_and_metric_preference() {
        let mut t = RouteTable::default();
        t.add(r(
            "198.18.9.0/24",
            Some("198.18.1.1"),
            0,
            5,
            RouteOrigin::Learned,
        ));
        t.add(r(
            "198.18.9.0/24",
            Some("198.18.2.1"),
            1,
            1,
            RouteOrigin::Learned,
        ));
        assert_eq!(
            t.lookup_v4("198.18.9.1".parse().unwrap()).unwrap().iface,
            IfaceId(1)
        );
        t.add(r(
            "198.18.9.0/24",
            Some("198.18.1.7"),
            0,
            9,
            RouteOrigin::Static,
        ));
        assert_eq!(
            t.lookup_v4("198.18.9.1".parse().unwrap()).unwrap().iface,
            IfaceId(0)
        );
        assert_eq!(
            t.remove("198.18.9.0/24".parse().unwrap(), RouteOrigin::Static),
            1
        );
        assert_eq!(
            t.lookup_v4("198.18.9.1".parse().unwrap()).unwrap().iface,
            IfaceId(1)
        );
        t.clear_origin(RouteOrigin::Learned);
        assert_eq!(t.lookup_v4("198.18.9.1".parse().unwrap()), None);
    }
}
