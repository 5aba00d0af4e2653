//! IP routes learned over the distance-vector service.
//!
//! The distance-vector service of anode (`anode-routing`) computes routes to *nodes*. To
//! route IP prefixes with it, every anode router sends a [`PrefixAd`] (its interface
//! addresses and the prefixes it reaches) as an anode datagram to [`PREFIX_AD_PORT`] of
//! every node it has a route to; the [`PrefixLearner`] of each receiver keeps the newest
//! advertisement of each origin node for its hold time. [`PrefixLearner::sync`] then joins
//! them with the node's distance-vector routes ([`Reach`]: origin node, metric, next-hop
//! node) and installs into the [`IpRouter`], for each advertised prefix,
//! `prefix -> gateway` with [`RouteOrigin::Learned`] and metric `DV metric + advertised
//! metric`, where the gateway is the **next-hop** router's interface address on a segment
//! this router is connected to (taken from the next hop's own advertisement, or its node
//! address when that is on a connected segment).
//!
//! Withdrawal: a prefix's route disappears at the next `sync` after its origin becomes
//! unreachable in the distance-vector table (neighbor down, route timed out) or after the
//! origin's advertisement expired ([`PrefixLearner::expire`]).
//!
//! Contracts: sans-IO (time comes in as arguments); never panics on any advertisement bytes
//! (malformed ones are counted in [`LearnCounters`] and ignored); prefixes the router is
//! connected to itself are never installed as learned routes; `sync` rewrites the router's
//! learned routes only when the computed set changed.

pub mod ad;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use anode_wire::NodeAddr;
use rustc_hash::FxHashMap;

pub use ad::{AD_VERSION, AdError, MAX_AD_ENTRIES, PREFIX_AD_PORT, PrefixAd};

use crate::router::{IpCidr, IpRouter, RouteOrigin};

/// One reachable origin in the distance-vector table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    /// The node the route leads to.
    pub origin: NodeAddr,
    /// Its distance-vector metric (below infinity).
    pub metric: u32,
    /// The neighbor node the route goes through (the origin itself when adjacent).
    pub next_hop: NodeAddr,
}

/// One route the learner installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnedRoute {
    /// The prefix.
    pub prefix: IpCidr,
    /// The next-hop router's address on a connected segment.
    pub gateway: IpAddr,
    /// Distance-vector metric to the origin plus the origin's metric to the prefix.
    pub metric: u32,
    /// The node that advertised the prefix.
    pub origin: NodeAddr,
}

impl std::fmt::Display for LearnedRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} via {} metric {} (from {})",
            self.prefix, self.gateway, self.metric, self.origin
        )
    }
}

/// Counters of the learner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LearnCounters {
    /// Advertisements accepted.
    pub ads_received: u64,
    /// Advertisements dropped as malformed.
    pub ads_malformed: u64,
    /// Advertisements that expired without being refreshed.
    pub ads_expired: u64,
    /// Advertised prefixes skipped because no gateway on a connected segment was known.
    pub no_gateway: u64,
    /// Times the installed set changed.
    pub syncs: u64,
}

/// The shortest and longest hold time honored (a sender's value is clamped into this).
const HOLD_MIN: Duration = Duration::from_millis(100);
const HOLD_MAX: Duration = Duration::from_secs(3600);

/// Advertisements by origin and the routes made from them.
#[derive(Debug, Default)]
pub struct PrefixLearner {
    ads: FxHashMap<NodeAddr, (PrefixAd, Instant)>,
    wanted: Vec<LearnedRoute>,
    installed: Vec<LearnedRoute>,
    counters: LearnCounters,
}

impl PrefixLearner {
    /// An empty learner.
    pub fn new() -> Self {
        PrefixLearner::default()
    }

    /// Takes the payload of a datagram from `origin` to [`PREFIX_AD_PORT`]. Returns whether
    /// the origin's advertised contents changed (then call [`PrefixLearner::sync`]).
    pub fn receive(
        &mut self,
        now: Instant,
        origin: NodeAddr,
        bytes: &[u8],
    ) -> Result<bool, AdError> {
        let ad = match PrefixAd::parse(bytes) {
            Ok(ad) => ad,
            Err(e) => {
                self.counters.ads_malformed += 1;
                return Err(e);
            }
        };
        self.counters.ads_received += 1;
        let hold = Duration::from_millis(u64::from(ad.hold_ms)).clamp(HOLD_MIN, HOLD_MAX);
        let expires = now + hold;
        let changed = match self.ads.get(&origin) {
            Some((old, _)) => old.addrs != ad.addrs || old.prefixes != ad.prefixes,
            None => true,
        };
        self.ads.insert(origin, (ad, expires));
        Ok(changed)
    }

    /// Forgets advertisements whose hold time ran out; returns whether any did.
    pub fn expire(&mut self, now: Instant) -> bool {
        let before = self.ads.len();
        self.ads.retain(|_, (_, t)| *t > now);
        let n = before - self.ads.len();
        self.counters.ads_expired += n as u64;
        n > 0
    }

    /// When the next advertisement expires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.ads.values().map(|(_, t)| *t).min()
    }

    /// The routes installed by the last [`PrefixLearner::sync`].
    pub fn installed(&self) -> &[LearnedRoute] {
        &self.installed
    }

    /// Counters.
    pub fn counters(&self) -> &LearnCounters {
        &self.counters
    }

    /// The origins whose advertisements are held.
    pub fn origins(&self) -> impl Iterator<Item = &NodeAddr> {
        self.ads.keys()
    }

    /// The routes the held advertisements and `reach` give for `router`.
    pub fn compute(&mut self, reach: &[Reach], router: &IpRouter) -> Vec<LearnedRoute> {
        let connected: Vec<IpCidr> = router
            .routes()
            .routes()
            .into_iter()
            .filter(|r| r.origin == RouteOrigin::Connected)
            .map(|r| r.prefix)
            .collect();
        let usable = |a: IpAddr| !router.is_local(a) && connected.iter().any(|c| c.contains(a));
        let mut best: FxHashMap<(IpCidr, IpAddr), LearnedRoute> = FxHashMap::default();
        for r in reach {
            let Some((ad, _)) = self.ads.get(&r.origin) else {
                continue;
            };
            let nh_addrs: &[IpCidr] = self
                .ads
                .get(&r.next_hop)
                .map(|(a, _)| a.addrs.as_slice())
                .unwrap_or(&[]);
            for (prefix, m) in &ad.prefixes {
                if connected.iter().any(|c| c.network() == *prefix) {
                    continue;
                }
                let v4 = matches!(prefix, IpCidr::V4(_));
                let fallback = r.next_hop.socket_addr().ip();
                let gateway = nh_addrs
                    .iter()
                    .map(ad::cidr_addr)
                    .chain(std::iter::once(fallback))
                    .find(|a| a.is_ipv4() == v4 && usable(*a));
                let Some(gateway) = gateway else {
                    self.counters.no_gateway += 1;
                    continue;
                };
                let route = LearnedRoute {
                    prefix: *prefix,
                    gateway,
                    metric: r.metric.saturating_add(*m),
                    origin: r.origin,
                };
                best.entry((*prefix, gateway))
                    .and_modify(|e| {
                        if route.metric < e.metric {
                            *e = route;
                        }
                    })
                    .or_insert(route);
            }
        }
        let mut v: Vec<LearnedRoute> = best.into_values().collect();
        v.sort_by_key(|r| (r.prefix.to_string(), r.metric, r.gateway));
        v
    }

    /// Installs what [`PrefixLearner::compute`] gives as the router's learned routes
    /// (replacing all of them) if it differs from what is installed; returns the new set
    /// when it changed.
    pub fn sync(&mut self, reach: &[Reach], router: &mut IpRouter) -> Option<&[LearnedRoute]> {
        let want = self.compute(reach, router);
        if want == self.wanted {
            return None;
        }
        router.routes_mut().clear_origin(RouteOrigin::Learned);
        let mut installed = Vec::with_capacity(want.len());
        for r in want.iter().copied() {
            if router
                .add_route(r.prefix, r.gateway, r.metric, RouteOrigin::Learned)
                .is_ok()
            {
                installed.push(r);
            }
        }
        self.installed = installed;
        self.wanted = want;
        self.counters.syncs += 1;
        Some(&self.installed)
    }
}

#[cfg(test)]
mod tests;
