//! The sans-IO IP router: [`IpRouter`].
//!
//! It is fed `(now, interface, frame)` with [`IpRouter::handle_frame`] and returns a
//! [`Verdict`] for that frame; it is polled for frames it generated ([`IpRouter::poll_transmit`]:
//! ARP/NDP, ICMP, released queued packets, fragments) and for its next deadline
//! ([`IpRouter::poll_timeout`], then [`IpRouter::handle_timeout`]). It never reads a clock
//! or touches a socket.
//!
//! ## The fast path
//! A frame to be forwarded is rewritten **in place** in the caller's buffer (destination and
//! source MAC, TTL or hop limit, IPv4 checksum by RFC 1624 incremental update) and the
//! verdict [`Verdict::Forward`] tells the driver to send `frame[start..start+len]` on an
//! interface: no allocation, no copy. It costs one header validation, one scan of the
//! router's own addresses, one longest-prefix match and one neighbor-cache probe.
//!
//! ## Everything else (the general path)
//! ARP and neighbor discovery, ICMP echo to the router, ICMP errors (time exceeded,
//! unreachable, frag-needed / packet too big, parameter problem: rate-limited by a token
//! bucket and never sent about ICMP errors, fragments other than the first, or
//! multicast/broadcast), packets waiting for a next hop to resolve (copied into a bounded
//! queue), IPv4 fragmentation, and the filter hook ([`Filter`]).
//!
//! ## Choices where the RFCs allow several
//! - IPv4 options are validated (malformed: parameter problem) and forwarded unchanged; loose
//!   and strict source routes are dropped (RFC 7126 §4.3-4.4). Record-route and timestamp
//!   are not filled in (RFC 1812 §5.2.4 lets a router skip them).
//! - IPv4 packets larger than the outgoing MTU: DF set, ICMP frag-needed with the next-hop
//!   MTU (RFC 1191); DF clear, the router fragments them (RFC 791, RFC 1812 §5.2.6) on the
//!   general path. IPv6: packet too big (RFC 8200 §5: routers never fragment).
//! - Fragments are forwarded as they are; fragments addressed to the router are dropped
//!   (it does not reassemble: it only answers echo and NDP, which fit one packet).
//! - No ICMP redirects (a packet leaving on the interface it came in on is still forwarded).
//! - UDP to the router on a port no filter claims: port unreachable; other transport
//!   protocols (TCP included): protocol unreachable (IPv4) / parameter problem (IPv6).
//! - Directed broadcasts are not forwarded (RFC 2644).
//!
//! ## Invariants
//! - No input frame makes the router panic (fuzz target `ip_router`, garbled-frame tests).
//! - Every frame is counted in exactly one outcome (see [`Counters`]).
//! - The transmit queue and the neighbor queues are bounded; every drop is counted.

mod config;
mod counters;
mod fast;
mod filter;
mod neigh;
mod output;
mod ratelimit;
mod table;
mod v4;
mod v6;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

pub use config::{IfaceId, InterfaceConfig, NeighConfig, RouterConfig};
pub use counters::{Counters, DropReason};
pub use fast::{FastDemux, FastIface, FastRoute, FastTable};
pub use filter::{DemuxKey, Filter, FilterId};
pub use neigh::NeighKey;
pub use ratelimit::TokenBucket;
pub use table::{Hop, IpCidr, Route, RouteOrigin, RouteTable};

use crate::wire::{EtherType, EthernetFrame, Ipv6Cidr, MacAddr, ipv6};
use filter::Filters;
use neigh::NeighCache;

/// What to do with the frame just handed to [`IpRouter::handle_frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send `frame[start..start + len]` (rewritten in place) on `iface`.
    Forward {
        /// Outgoing interface.
        iface: IfaceId,
        /// Offset of the Ethernet header to send (4 when an incoming VLAN tag was stripped).
        start: usize,
        /// Bytes to send (link padding of the incoming frame excluded).
        len: usize,
    },
    /// An installed filter claimed the frame; it is untouched.
    Divert {
        /// The filter.
        filter: FilterId,
        /// Offset of the network-layer header (after Ethernet and any VLAN tag).
        l3_offset: usize,
    },
    /// The router consumed it (answered, queued, or dropped and counted).
    Consumed,
}

/// A frame the router generated, to send on `iface`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Interface.
    pub iface: IfaceId,
    /// The whole Ethernet frame. Hand it back with [`IpRouter::recycle`] once sent.
    pub frame: Vec<u8>,
}

/// An interface as the router holds it.
#[derive(Debug, Clone)]
pub(crate) struct Iface {
    pub cfg: InterfaceConfig,
    pub link_local: Ipv6Addr,
}

/// The IP router.
#[derive(Debug)]
pub struct IpRouter {
    pub(crate) cfg: RouterConfig,
    pub(crate) ifaces: Vec<Iface>,
    pub(crate) macs: Vec<MacAddr>,
    pub(crate) mtus: Vec<usize>,
    pub(crate) local_v4: Vec<(Ipv4Addr, IfaceId)>,
    pub(crate) local_v6: Vec<(Ipv6Addr, IfaceId)>,
    pub(crate) routes: RouteTable,
    pub(crate) neigh: NeighCache,
    pub(crate) icmp_bucket: TokenBucket,
    pub(crate) filters: Filters,
    pub(crate) out: VecDeque<Transmit>,
    pub(crate) pool: Vec<Vec<u8>>,
    pub(crate) counters: Counters,
    pub(crate) ident: u16,
    /// Set only inside [`IpRouter::reinject`]: demux filters are not consulted.
    pub(crate) skip_demux: bool,
    /// Bumped by every change of interfaces, routes or filters (see [`IpRouter::fast_generation`]).
    pub(crate) generation: u64,
}

/// A configuration the router cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The MAC is multicast or zero.
    #[error("interface {name}: MAC {mac} is not a unicast address")]
    BadMac {
        /// Interface.
        name: String,
        /// MAC.
        mac: MacAddr,
    },
    /// The MTU is outside 1280..=65535 (IPv6 needs 1280).
    #[error("interface {name}: MTU {mtu} out of range (1280..=65535)")]
    BadMtu {
        /// Interface.
        name: String,
        /// MTU.
        mtu: usize,
    },
    /// A route's gateway is not on any connected prefix.
    #[error("route {prefix}: gateway {gateway} is not on a connected prefix")]
    GatewayNotConnected {
        /// Prefix.
        prefix: IpCidr,
        /// Gateway.
        gateway: IpAddr,
    },
    /// A route names an interface the router does not have.
    #[error("route {prefix}: no interface {iface}")]
    NoSuchIface {
        /// Prefix.
        prefix: IpCidr,
        /// Interface.
        iface: IfaceId,
    },
}

const POOL_MAX: usize = 512;

impl IpRouter {
    /// A router with no interfaces.
    pub fn new(cfg: RouterConfig) -> Self {
        IpRouter {
            icmp_bucket: TokenBucket::new(cfg.icmp_rate, cfg.icmp_burst),
            neigh: NeighCache::new(cfg.neigh),
            cfg,
            ifaces: Vec::new(),
            macs: Vec::new(),
            mtus: Vec::new(),
            local_v4: Vec::new(),
            local_v6: Vec::new(),
            routes: RouteTable::default(),
            filters: Filters::default(),
            out: VecDeque::new(),
            pool: Vec::new(),
            counters: Counters::default(),
            ident: 1,
            skip_demux: false,
            generation: 0,
        }
    }

    /// Adds an interface: its addresses become the router's, their prefixes connected routes.
    pub fn add_interface(&mut self, cfg: InterfaceConfig) -> Result<IfaceId, ConfigError> {
        if !cfg.mac.is_unicast() {
            return Err(ConfigError::BadMac {
                name: cfg.name,
                mac: cfg.mac,
            });
        }
        if !(1280..=65535).contains(&cfg.mtu) {
            return Err(ConfigError::BadMtu {
                name: cfg.name,
                mtu: cfg.mtu,
            });
        }
        let id = IfaceId(self.ifaces.len() as u32);
        let link_local = ipv6::link_local_from_mac(cfg.mac);
        for a in &cfg.ipv4 {
            self.local_v4.push((a.addr, id));
            self.routes.add(Route {
                prefix: IpCidr::V4(*a),
                gateway: None,
                iface: id,
                metric: 0,
                origin: RouteOrigin::Connected,
            });
        }
        self.local_v6.push((link_local, id));
        for a in &cfg.ipv6 {
            self.local_v6.push((a.addr, id));
            self.routes.add(Route {
                prefix: IpCidr::V6(*a),
                gateway: None,
                iface: id,
                metric: 0,
                origin: RouteOrigin::Connected,
            });
        }
        self.macs.push(cfg.mac);
        self.mtus.push(cfg.mtu);
        self.ifaces.push(Iface { cfg, link_local });
        self.generation += 1;
        Ok(id)
    }

    /// The interfaces, in id order.
    pub fn interfaces(&self) -> impl Iterator<Item = (IfaceId, &InterfaceConfig)> {
        self.ifaces
            .iter()
            .enumerate()
            .map(|(i, f)| (IfaceId(i as u32), &f.cfg))
    }

    /// Adds a route through `gateway` (its interface is the one of the connected prefix the
    /// gateway is on). Learned routes from the distance-vector service come in here too,
    /// with [`RouteOrigin::Learned`].
    pub fn add_route(
        &mut self,
        prefix: IpCidr,
        gateway: IpAddr,
        metric: u32,
        origin: RouteOrigin,
    ) -> Result<(), ConfigError> {
        let iface = self
            .routes
            .routes()
            .into_iter()
            .filter(|r| r.origin == RouteOrigin::Connected && r.prefix.contains(gateway))
            .max_by_key(|r| match r.prefix {
                IpCidr::V4(c) => c.prefix_len,
                IpCidr::V6(c) => c.prefix_len,
            })
            .map(|r| r.iface)
            .or_else(|| {
                // An IPv6 link-local gateway names no prefix: take the interface that
                // reaches it only when there is exactly one.
                match gateway {
                    IpAddr::V6(g) if is_link_local(g) && self.ifaces.len() == 1 => Some(IfaceId(0)),
                    _ => None,
                }
            })
            .ok_or(ConfigError::GatewayNotConnected { prefix, gateway })?;
        self.routes.add(Route {
            prefix,
            gateway: Some(gateway),
            iface,
            metric,
            origin,
        });
        self.generation += 1;
        Ok(())
    }

    /// Adds a route out of `iface` with an explicit gateway (or none: on-link).
    pub fn add_route_via(
        &mut self,
        prefix: IpCidr,
        iface: IfaceId,
        gateway: Option<IpAddr>,
        metric: u32,
        origin: RouteOrigin,
    ) -> Result<(), ConfigError> {
        if iface.0 as usize >= self.ifaces.len() {
            return Err(ConfigError::NoSuchIface { prefix, iface });
        }
        self.routes.add(Route {
            prefix,
            gateway,
            iface,
            metric,
            origin,
        });
        self.generation += 1;
        Ok(())
    }

    /// Removes the routes to `prefix` of `origin`.
    pub fn remove_route(&mut self, prefix: IpCidr, origin: RouteOrigin) -> usize {
        self.generation += 1;
        self.routes.remove(prefix, origin)
    }

    /// The routing table.
    pub fn routes(&self) -> &RouteTable {
        &self.routes
    }

    /// Mutable access to the routing table (e.g. to replace all learned routes at once).
    /// Counts as a change for [`IpRouter::fast_generation`].
    pub fn routes_mut(&mut self) -> &mut RouteTable {
        self.generation += 1;
        &mut self.routes
    }

    /// Installs a filter; matching packets are diverted (see [`Filter`]).
    pub fn add_filter(&mut self, f: Filter) -> FilterId {
        self.generation += 1;
        self.filters.add(f)
    }

    /// Removes a filter.
    pub fn remove_filter(&mut self, id: FilterId) -> bool {
        self.generation += 1;
        self.filters.remove(id)
    }

    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Neighbor-cache entries as ((interface, address), MAC if resolved).
    pub fn neighbors(&self) -> Vec<(NeighKey, Option<MacAddr>)> {
        self.neigh.entries()
    }

    /// Packets waiting for their next hop to resolve.
    pub fn queued_for_neighbors(&self) -> usize {
        self.neigh.queued()
    }

    /// True if `a` is one of the router's addresses.
    pub fn is_local(&self, a: IpAddr) -> bool {
        match a {
            IpAddr::V4(a) => self.local_v4.iter().any(|(x, _)| *x == a),
            IpAddr::V6(a) => self.local_v6.iter().any(|(x, _)| *x == a),
        }
    }

    /// The next generated frame to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// Frames waiting in [`IpRouter::poll_transmit`].
    pub fn pending_transmits(&self) -> usize {
        self.out.len()
    }

    /// Gives a sent frame's buffer back for reuse (bounded pool).
    pub fn recycle(&mut self, mut frame: Vec<u8>) {
        if self.pool.len() < POOL_MAX {
            frame.clear();
            self.pool.push(frame);
        }
    }

    /// When [`IpRouter::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.neigh.poll_timeout()
    }

    /// Runs due neighbor retransmissions, probes and expiries.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut acts = Vec::new();
        self.neigh.handle_timeout(now, &mut acts);
        for a in acts {
            match a {
                neigh::NeighAction::Solicit { key, unicast } => self.solicit(now, key, unicast),
                neigh::NeighAction::Failed { queue } => {
                    self.counters.neigh_failed += 1;
                    for frame in queue {
                        self.counters.queued_dropped += 1;
                        self.unreachable_for_queued(now, &frame);
                        self.recycle(frame);
                    }
                }
            }
        }
    }

    /// Handles one frame that arrived on `iface`. Forwarded frames are rewritten in place;
    /// see [`Verdict`].
    pub fn handle_frame(&mut self, now: Instant, iface: IfaceId, frame: &mut [u8]) -> Verdict {
        self.counters.rx_frames += 1;
        self.counters.rx_bytes += frame.len() as u64;
        let Some(&my_mac) = self.macs.get(iface.0 as usize) else {
            return self.drop(DropReason::UnknownIface);
        };
        let Ok(eth) = EthernetFrame::new_checked(&*frame) else {
            return self.drop(DropReason::MalformedEthernet);
        };
        let dst = eth.dst();
        let link_multicast = dst.is_multicast();
        if !link_multicast && dst != my_mac {
            return self.drop(DropReason::NotForUs);
        }
        let ethertype = eth.ethertype();
        let l3 = eth.payload_offset();
        let src_mac = eth.src();
        if self.filters.any_ethertype
            && let Some(filter) = self.filters.match_ethertype(ethertype)
        {
            self.counters.diverted += 1;
            return Verdict::Divert {
                filter,
                l3_offset: l3,
            };
        }
        let ctx = RxCtx {
            iface,
            l3,
            src_mac,
            link_multicast,
        };
        match ethertype {
            EtherType::IPV4 => self.ipv4(now, ctx, frame),
            EtherType::IPV6 => self.ipv6(now, ctx, frame),
            EtherType::ARP => self.arp(now, ctx, frame),
            _ => self.drop(DropReason::UnknownEtherType),
        }
    }

    /// Hands back a frame a [`Filter::Demux`] diverted, once whoever took it (the
    /// service-module hooks) let it go on, possibly modified (an IPv4 header checksum must
    /// be valid again). It is handled like [`IpRouter::handle_frame`] with the demux filters
    /// skipped (so it is not diverted twice); a frame to forward is rewritten and queued for
    /// [`IpRouter::poll_transmit`] (it is owned, not in a ring: the general path). Counted in
    /// `rx_frames` and one outcome like any frame handed in, and in `reinjected`.
    pub fn reinject(&mut self, now: Instant, iface: IfaceId, mut frame: Vec<u8>) -> Verdict {
        self.counters.reinjected += 1;
        self.skip_demux = true;
        let v = self.handle_frame(now, iface, &mut frame);
        self.skip_demux = false;
        if let Verdict::Forward {
            iface: out,
            start,
            len,
        } = v
        {
            frame.truncate(start.saturating_add(len));
            frame.drain(..start.min(frame.len()));
            // A full transmit queue is counted by push_tx.
            let _ = self.push_tx(out, frame);
        }
        v
    }

    #[inline]
    pub(crate) fn drop(&mut self, r: DropReason) -> Verdict {
        self.counters.drop(r);
        Verdict::Consumed
    }

    #[inline]
    pub(crate) fn local(&mut self) -> Verdict {
        self.counters.local += 1;
        Verdict::Consumed
    }

    pub(crate) fn iface_v4(&self, iface: IfaceId, near: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
        let f = self.ifaces.get(iface.0 as usize)?;
        near.and_then(|n| f.cfg.ipv4.iter().find(|c| c.contains(n)))
            .or_else(|| f.cfg.ipv4.first())
            .map(|c| c.addr)
    }

    pub(crate) fn iface_v6(&self, iface: IfaceId, near: Option<Ipv6Addr>) -> Option<Ipv6Addr> {
        let f = self.ifaces.get(iface.0 as usize)?;
        if let Some(n) = near {
            if is_link_local(n) {
                return Some(f.link_local);
            }
            if let Some(c) = f.cfg.ipv6.iter().find(|c: &&Ipv6Cidr| c.contains(n)) {
                return Some(c.addr);
            }
        }
        f.cfg.ipv6.first().map(|c| c.addr).or(Some(f.link_local))
    }
}

/// What `handle_frame` learned about a frame before the protocol handlers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RxCtx {
    pub iface: IfaceId,
    pub l3: usize,
    pub src_mac: MacAddr,
    pub link_multicast: bool,
}

pub(crate) fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}
