//! [`Routing`]: the routing service a node runs, distance vector or link state
//! (`[routing] protocol`), behind one interface the node core drives. Each message kind goes
//! to the service that speaks it; a message of the other protocol (a misconfigured
//! neighbor) is refused, and the node counts it.

use std::sync::Arc;
use std::time::Instant;

use anode_wire::NodeAddr;
use anode_wire::addr::NODE_ADDR_LEN;
use anode_wire::control::Control;

use crate::dv::{DistanceVector, Route};
use crate::fib::{ChangeLog, Fib};
use crate::handover::{NeighborRecord, Restored, RoutingHandover};
use crate::ls::LinkState;
use crate::{LinkId, NextHop, Protocol, RoutingConfig};

/// The node's routing service.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per node; the distance vector stays inline so the fast path's lookup chases no extra pointer"
)]
pub enum Routing {
    /// RIP-like distance vector.
    Dv(DistanceVector),
    /// Link state.
    Ls(Box<LinkState>),
}

impl Routing {
    /// The service `cfg.protocol` names.
    pub fn new(me: NodeAddr, cfg: RoutingConfig, now: Instant) -> Routing {
        match cfg.protocol {
            Protocol::Dv => Routing::Dv(DistanceVector::new(me, cfg, now)),
            Protocol::Ls => Routing::Ls(Box::new(LinkState::new(me, cfg, now))),
        }
    }

    /// Which protocol it is.
    pub fn protocol(&self) -> Protocol {
        match self {
            Routing::Dv(_) => Protocol::Dv,
            Routing::Ls(_) => Protocol::Ls,
        }
    }

    /// The metric at and above which a route is unreachable (link state: none below
    /// `u16::MAX`).
    pub fn infinity(&self) -> u16 {
        match self {
            Routing::Dv(d) => d.infinity(),
            Routing::Ls(_) => u16::MAX,
        }
    }

    /// The next hop toward `dest`, if reachable.
    #[inline]
    pub fn lookup(&self, dest: &NodeAddr) -> Option<NextHop> {
        match self {
            Routing::Dv(d) => d.lookup(dest),
            Routing::Ls(l) => l.lookup(dest),
        }
    }

    /// The next hop toward a destination in its wire encoding (the fast path's lookup).
    #[inline]
    pub fn lookup_raw(&self, dest: &[u8; NODE_ADDR_LEN]) -> Option<NextHop> {
        self.fib().lookup_raw(dest)
    }

    /// The forwarding table.
    pub fn fib(&self) -> &Arc<Fib> {
        match self {
            Routing::Dv(d) => d.fib(),
            Routing::Ls(l) => l.fib(),
        }
    }

    /// All routes, sorted by destination.
    pub fn routes(&self) -> Vec<Route> {
        match self {
            Routing::Dv(d) => d.routes(),
            Routing::Ls(l) => l.routes(),
        }
    }

    /// Counters of the protocol's work (`stats.rs`).
    pub fn stats(&self) -> crate::RoutingStats {
        match self {
            Routing::Dv(d) => d.stats(),
            Routing::Ls(l) => l.stats(),
        }
    }

    /// How many times a route changed.
    pub fn change_count(&self) -> u64 {
        match self {
            Routing::Dv(d) => d.change_count(),
            Routing::Ls(l) => l.change_count(),
        }
    }

    /// Shares LSA link lists with the other nodes given the same pool (link state; the
    /// distance vector has none).
    pub fn share_lsa_lists(&mut self, pool: crate::LsaPool) {
        if let Routing::Ls(l) = self {
            l.share_lists(pool);
        }
    }

    /// The log of forwarding changes.
    pub fn change_log(&mut self) -> &mut ChangeLog {
        match self {
            Routing::Dv(d) => d.change_log(),
            Routing::Ls(l) => l.change_log(),
        }
    }

    /// Adds a static route.
    pub fn add_static(&mut self, now: Instant, dest: NodeAddr, via: NodeAddr, metric: u16) {
        match self {
            Routing::Dv(d) => d.add_static(now, dest, via, metric),
            Routing::Ls(l) => l.add_static(now, dest, via, metric),
        }
    }

    /// Removes a static route; false if there was none.
    pub fn remove_static(&mut self, now: Instant, dest: NodeAddr) -> bool {
        match self {
            Routing::Dv(d) => d.remove_static(now, dest),
            Routing::Ls(l) => l.remove_static(now, dest),
        }
    }

    /// A neighbor came up.
    pub fn neighbor_up(&mut self, now: Instant, link: LinkId, addr: NodeAddr, cost: u16) {
        match self {
            Routing::Dv(d) => d.neighbor_up(now, link, addr, cost),
            Routing::Ls(l) => l.neighbor_up(now, link, addr, cost),
        }
    }

    /// This service's state for the process that takes the node's place, with the
    /// `neighbors` the caller's table exported (`handover.rs`).
    pub fn export(&self, now: Instant, neighbors: Vec<NeighborRecord>) -> RoutingHandover {
        let mut h = RoutingHandover {
            protocol: self.protocol(),
            neighbors,
            ..RoutingHandover::default()
        };
        match self {
            Routing::Dv(d) => {
                h.routes = d.export_routes(now);
                h.statics = d.static_routes();
            }
            Routing::Ls(l) => {
                (h.lsas, h.own_seq) = l.export_lsas(now);
                h.statics = l.static_routes();
            }
        }
        h
    }

    /// Restores an exported state: `neighbors` are the (link, address, cost) the caller
    /// restored in its neighbor table; routes or database entries of the other protocol are
    /// skipped. Returns what was restored and skipped (neighbors counted by the caller).
    pub fn restore(
        &mut self,
        now: Instant,
        neighbors: &[(LinkId, NodeAddr, u16)],
        h: &RoutingHandover,
    ) -> Restored {
        let mut r = Restored::default();
        for &(dest, via, metric) in &h.statics {
            self.add_static(now, dest, via, metric);
        }
        let other = h.protocol != self.protocol();
        match self {
            Routing::Dv(d) => {
                let routes: &[_] = if other { &[] } else { &h.routes };
                (r.routes, r.skipped) = d.restore(now, neighbors, routes);
            }
            Routing::Ls(l) => {
                let lsas: &[_] = if other { &[] } else { &h.lsas };
                (r.lsas, r.skipped) = l.restore(now, neighbors, lsas, h.own_seq);
            }
        }
        if other {
            r.skipped += h.routes.len() + h.lsas.len();
        }
        r
    }

    /// A neighbor went down.
    pub fn neighbor_down(&mut self, now: Instant, addr: NodeAddr) {
        match self {
            Routing::Dv(d) => d.neighbor_down(now, addr),
            Routing::Ls(l) => l.neighbor_down(now, addr),
        }
    }

    /// Whether `msg` is a message of this node's routing protocol (one of the other protocol
    /// means a neighbor configured differently).
    pub fn speaks(&self, msg: &Control) -> bool {
        matches!(
            (self, msg),
            (Routing::Dv(_), Control::Routes(_))
                | (
                    Routing::Ls(_),
                    Control::Lsas(_) | Control::LsaSummary(_) | Control::LsaDigest(_)
                )
        )
    }

    /// A routing message from a neighbor on `link`; false if refused (not from an up
    /// neighbor on that link, or of the other protocol).
    pub fn on_message(&mut self, now: Instant, link: LinkId, msg: &Control) -> bool {
        match (self, msg) {
            (Routing::Dv(d), Control::Routes(r)) => d.on_update(now, link, r),
            (Routing::Ls(l), Control::Lsas(m)) => l.on_lsas(now, link, m),
            (Routing::Ls(l), Control::LsaSummary(m)) => l.on_summary(link, m),
            (Routing::Ls(l), Control::LsaDigest(m)) => l.on_digest(link, m),
            _ => false,
        }
    }

    /// Runs the timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self {
            Routing::Dv(d) => d.handle_timeout(now),
            Routing::Ls(l) => l.handle_timeout(now),
        }
    }

    /// The next deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Routing::Dv(d) => d.poll_timeout(),
            Routing::Ls(l) => l.poll_timeout(),
        }
    }

    /// The next message to send: (link, message).
    pub fn poll_message(&mut self) -> Option<(LinkId, Control)> {
        match self {
            Routing::Dv(d) => d.poll_update().map(|(l, _, r)| (l, Control::Routes(r))),
            Routing::Ls(s) => s.poll_update().map(|(l, _, m)| (l, m)),
        }
    }
}
