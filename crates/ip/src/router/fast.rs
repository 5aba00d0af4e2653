//! What a fast path outside the router needs to forward plain IP packets exactly as
//! [`IpRouter::handle_frame`] would: [`FastTable`], a snapshot of the router's interfaces,
//! best routes, resolved neighbors, own addresses and filters.
//!
//! The driver of a kernel fast path (crates/ether's eBPF program) rebuilds its maps from a
//! snapshot whenever [`IpRouter::fast_generation`] changes, and reports the neighbor entries
//! it used back with [`IpRouter::touch_neighbor`], so entries that are used only there still
//! go stale and get probed (RFC 4861) as if the router had used them.
//!
//! Contract for such a fast path (what keeps its forwarding identical to the router's): it
//! forwards a packet only when all of the following hold, and hands every other packet to
//! the router unchanged:
//! - the frame is untagged Ethernet II to the receiving interface's own unicast MAC;
//! - IPv4: version 4, header length 20 (no options), valid header checksum, total length
//!   within the frame, not a fragment, source not multicast/broadcast/loopback/unspecified,
//!   destination not multicast/broadcast/loopback/unspecified and not in
//!   [`FastTable::punt_v4`] (own addresses, directed broadcasts);
//! - IPv6: version 6, payload within the frame, next header not hop-by-hop options (0),
//!   source not multicast/loopback/unspecified/link-local, destination not
//!   multicast/loopback/unspecified/link-local and not in [`FastTable::punt_v6`];
//! - the family is not diverted as a whole ([`FastTable::punt_all_v4`] / `punt_all_v6`)
//!   and no [`FastTable::demux`] filter matches;
//! - TTL / hop limit above 1, a route exists (longest prefix over [`FastTable::routes`]),
//!   the packet fits the outgoing interface's MTU, and the next hop (the gateway, or the
//!   destination itself) has an entry in [`FastTable::neighbors`] on that interface.
//!
//! It then decrements the TTL (IPv4: RFC 1624 checksum update) or hop limit, writes the
//! neighbor's MAC as destination and the outgoing interface's as source, and sends the frame.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use super::{DemuxKey, EtherType, Filter, IfaceId, IpCidr, IpRouter, NeighKey};
use crate::wire::MacAddr;

/// One interface as a fast path sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastIface {
    /// The router's id for it.
    pub id: IfaceId,
    /// Its MAC (frames to it are candidates; frames it sends carry it as source).
    pub mac: MacAddr,
    /// Its MTU (bigger packets go to the router: fragmentation or an ICMP error).
    pub mtu: usize,
}

/// One route as lookups use it (the best of its prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastRoute {
    /// Destination prefix (network form).
    pub prefix: IpCidr,
    /// Outgoing interface.
    pub iface: IfaceId,
    /// Gateway; `None`: the destination itself is the next hop.
    pub gateway: Option<IpAddr>,
}

/// One demux filter (see [`Filter::Demux`]): matching packets go to the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastDemux {
    /// Only this family (0x0800 / 0x86DD), or both.
    pub ethertype: Option<u16>,
    /// Keys, all of which must match (offsets from the IP header).
    pub keys: Vec<DemuxKey>,
}

/// A snapshot of everything a fast path needs (see the module docs for the contract).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FastTable {
    /// Interfaces, in id order.
    pub ifaces: Vec<FastIface>,
    /// Best route per prefix.
    pub routes: Vec<FastRoute>,
    /// Resolved neighbors: (outgoing interface, next-hop address) -> MAC.
    pub neighbors: Vec<(NeighKey, MacAddr)>,
    /// IPv4 destinations never forwarded by the fast path: the router's own addresses and
    /// the directed-broadcast addresses of its prefixes.
    pub punt_v4: Vec<Ipv4Addr>,
    /// IPv6 destinations never forwarded by the fast path: the router's own addresses
    /// (link-local ones included).
    pub punt_v6: Vec<Ipv6Addr>,
    /// An EtherType filter takes every IPv4 frame.
    pub punt_all_v4: bool,
    /// An EtherType filter takes every IPv6 frame.
    pub punt_all_v6: bool,
    /// Demux filters.
    pub demux: Vec<FastDemux>,
}

impl IpRouter {
    /// Changes whenever anything in [`IpRouter::fast_table`] may have changed (interfaces,
    /// routes, filters, resolved neighbors). Cheap: poll it every loop round.
    pub fn fast_generation(&self) -> u64 {
        self.generation.wrapping_add(self.neigh.generation)
    }

    /// A snapshot for a fast path outside the router.
    pub fn fast_table(&self) -> FastTable {
        let ifaces = self
            .ifaces
            .iter()
            .enumerate()
            .map(|(i, f)| FastIface {
                id: IfaceId(i as u32),
                mac: f.cfg.mac,
                mtu: f.cfg.mtu,
            })
            .collect();
        let routes = self
            .routes
            .best()
            .into_iter()
            .map(|r| FastRoute {
                prefix: r.prefix,
                iface: r.iface,
                gateway: r.gateway,
            })
            .collect();
        let mut neighbors: Vec<(NeighKey, MacAddr)> = self.neigh.resolved().collect();
        neighbors.sort_by_key(|((i, a), _)| (i.0, *a));
        let mut punt_v4: Vec<Ipv4Addr> = self.local_v4.iter().map(|(a, _)| *a).collect();
        for f in &self.ifaces {
            for c in &f.cfg.ipv4 {
                if c.prefix_len < 31 {
                    punt_v4.push(c.broadcast());
                }
            }
        }
        punt_v4.sort();
        punt_v4.dedup();
        let mut punt_v6: Vec<Ipv6Addr> = self.local_v6.iter().map(|(a, _)| *a).collect();
        punt_v6.sort();
        punt_v6.dedup();
        let mut t = FastTable {
            ifaces,
            routes,
            neighbors,
            punt_v4,
            punt_v6,
            ..FastTable::default()
        };
        for f in self.filters.iter() {
            match f {
                Filter::EtherType(e) if *e == EtherType::IPV4 => t.punt_all_v4 = true,
                Filter::EtherType(e) if *e == EtherType::IPV6 => t.punt_all_v6 = true,
                Filter::Demux { ethertype, keys } => t.demux.push(FastDemux {
                    ethertype: *ethertype,
                    keys: keys.clone(),
                }),
                _ => {}
            }
        }
        t
    }

    /// A fast path used the neighbor entry `key`: the router treats it as if it had looked
    /// it up itself (an entry unconfirmed for longer than the reachable time is probed).
    pub fn touch_neighbor(&mut self, now: Instant, key: NeighKey) {
        let _ = self.neigh.lookup(now, key);
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::time::Instant;

    use super::*;
    use crate::router::{InterfaceConfig, RouteOrigin, RouterConfig};
    use crate::wire::{Ipv4Cidr, Ipv6Cidr};

    fn router() -> IpRouter {
        let mut r = IpRouter::new(RouterConfig::default());
        for (i, (v4, v6)) in [
            ("198.18.1.2/24", "2001:2:0:1::2/64"),
            ("198.18.2.1/24", "2001:2:0:2::1/64"),
        ]
        .iter()
        .enumerate()
        {
            r.add_interface(InterfaceConfig {
                name: format!("r{i}"),
                mac: MacAddr([2, 0, 0, 0, 0, i as u8 + 1]),
                mtu: 1500,
                ipv4: vec![v4.parse::<Ipv4Cidr>().unwrap()],
                ipv6: vec![v6.parse::<Ipv6Cidr>().unwrap()],
            })
            .unwrap();
        }
        r
    }

    #[test]
    fn snapshot_and_generation() {
        let mut r = router();
        let g0 = r.fast_generation();
        let t = r.fast_table();
        assert_eq!(t.ifaces.len(), 2);
        assert_eq!(t.ifaces[1].mac, MacAddr([2, 0, 0, 0, 0, 2]));
        assert_eq!(t.routes.len(), 4, "{:?}", t.routes);
        assert!(t.neighbors.is_empty());
        // Own addresses and the directed broadcasts.
        for a in ["198.18.1.2", "198.18.2.1", "198.18.1.255", "198.18.2.255"] {
            assert!(t.punt_v4.contains(&a.parse().unwrap()), "{a}");
        }
        assert_eq!(
            t.punt_v6.len(),
            4,
            "two global, two link-local: {:?}",
            t.punt_v6
        );
        assert!(!t.punt_all_v4 && !t.punt_all_v6 && t.demux.is_empty());

        r.add_route(
            "198.19.0.0/16".parse().unwrap(),
            "198.18.2.2".parse().unwrap(),
            5,
            RouteOrigin::Static,
        )
        .unwrap();
        let g1 = r.fast_generation();
        assert_ne!(g0, g1);
        let t = r.fast_table();
        let via = t
            .routes
            .iter()
            .find(|x| x.prefix == "198.19.0.0/16".parse().unwrap())
            .unwrap();
        assert_eq!(via.iface, IfaceId(1));
        assert_eq!(via.gateway, Some("198.18.2.2".parse().unwrap()));

        // A resolved neighbor appears (and changes the generation); a MAC change too.
        let now = Instant::now();
        let key = (IfaceId(1), IpAddr::from([198, 18, 2, 2]));
        let _ = r.neigh.confirm(now, key, MacAddr([2, 0, 0, 0, 9, 9]), true);
        let g2 = r.fast_generation();
        assert_ne!(g1, g2);
        assert_eq!(
            r.fast_table().neighbors,
            vec![(key, MacAddr([2, 0, 0, 0, 9, 9]))]
        );
        let _ = r.neigh.confirm(now, key, MacAddr([2, 0, 0, 0, 9, 9]), true);
        assert_eq!(r.fast_generation(), g2, "a reconfirmation changes nothing");
        let _ = r.neigh.confirm(now, key, MacAddr([2, 0, 0, 0, 9, 8]), true);
        assert_ne!(r.fast_generation(), g2);

        // Filters.
        r.add_filter(Filter::EtherType(EtherType::IPV6));
        r.add_filter(Filter::Demux {
            ethertype: Some(EtherType::IPV4),
            keys: vec![DemuxKey::exact(9, &[17])],
        });
        let t = r.fast_table();
        assert!(t.punt_all_v6 && !t.punt_all_v4);
        assert_eq!(t.demux.len(), 1);
        assert_eq!(t.demux[0].keys[0].offset, 9);
    }

    #[test]
    fn touch_probes_a_stale_entry() {
        let mut r = router();
        let t0 = Instant::now();
        let key = (IfaceId(1), IpAddr::from([198, 18, 2, 2]));
        let _ = r.neigh.confirm(t0, key, MacAddr([2, 0, 0, 0, 9, 9]), true);
        assert_eq!(r.poll_timeout(), None);
        let later = t0 + RouterConfig::default().neigh.reachable_time * 2;
        r.touch_neighbor(later, key);
        assert_eq!(r.poll_timeout(), Some(later), "a probe is due at once");
        r.handle_timeout(later);
        assert!(r.poll_transmit().is_some(), "the unicast ARP probe");
    }
}
