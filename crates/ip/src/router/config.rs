//! Router and interface configuration (sans-IO: names, MACs, addresses, MTUs, timers).

use std::time::Duration;

use crate::wire::{Ipv4Cidr, Ipv6Cidr, MacAddr};

/// Index of an interface of one router (the order of [`crate::IpRouter::add_interface`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfaceId(pub u32);

impl std::fmt::Display for IfaceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "if{}", self.0)
    }
}

/// One interface as the router sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceConfig {
    /// A name for reports (the Linux interface name for `anode router`).
    pub name: String,
    /// The MAC address the router uses on this interface.
    pub mac: MacAddr,
    /// IP MTU (largest IP packet, header included) of the link.
    pub mtu: usize,
    /// IPv4 addresses with their prefix lengths (each adds a connected route).
    pub ipv4: Vec<Ipv4Cidr>,
    /// IPv6 addresses with their prefix lengths (each adds a connected route). An EUI-64
    /// link-local address is always added.
    pub ipv6: Vec<Ipv6Cidr>,
}

/// Neighbor-cache (ARP and NDP) timers and bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighConfig {
    /// A confirmed entry is used without question for this long (RFC 4861 REACHABLE_TIME).
    pub reachable_time: Duration,
    /// Interval between solicitations while resolving or probing (RFC 4861 RETRANS_TIMER).
    pub retrans_interval: Duration,
    /// Solicitations sent before giving up (RFC 4861 MAX_MULTICAST_SOLICIT).
    pub max_retries: u32,
    /// Packets queued per unresolved next hop (Linux's unres_qlen is of this order).
    pub queue_per_entry: usize,
    /// Packets queued for all unresolved next hops together.
    pub queue_total: usize,
    /// Most entries in the cache.
    pub max_entries: usize,
}

impl Default for NeighConfig {
    fn default() -> Self {
        NeighConfig {
            reachable_time: Duration::from_secs(30),
            retrans_interval: Duration::from_secs(1),
            max_retries: 3,
            queue_per_entry: 8,
            queue_total: 256,
            max_entries: 4096,
        }
    }
}

/// Router-wide settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterConfig {
    /// ICMP error messages per second (token bucket rate; RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)).
    pub icmp_rate: u32,
    /// ICMP error burst (token bucket depth).
    pub icmp_burst: u32,
    /// TTL / hop limit of packets the router originates.
    pub default_ttl: u8,
    /// Frames waiting to be collected by [`crate::IpRouter::poll_transmit`].
    pub max_tx_queue: usize,
    /// Neighbor cache.
    pub neigh: NeighConfig,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            icmp_rate: 100,
            icmp_burst: 50,
            default_ttl: 64,
            max_tx_queue: 4096,
            neigh: NeighConfig::default(),
        }
    }
}
