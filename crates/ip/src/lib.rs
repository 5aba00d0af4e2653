//! # anode IP router
//!
//! anode as a real IPv4/IPv6 router between Ethernet interfaces, sans-IO: the wire formats
//! ([`wire`]: Ethernet II with an 802.1Q tag tolerated, ARP, IPv4, IPv6 with its extension
//! headers, ICMPv4, ICMPv6 with neighbor discovery, UDP) and the router state machine
//! ([`IpRouter`]). The AF_PACKET driver (`anode-ether`) and the `anode router` command feed
//! it frames and send what it returns; tests and fuzzers feed it bytes directly.
//!
//! Like Scout's router, there are two paths: the **fast path** rewrites an option-free
//! packet's Ethernet header, TTL / hop limit and checksum in the caller's buffer and hands it
//! straight back ([`Verdict::Forward`]); the **general path** handles everything else (ARP and
//! NDP, ICMP to and from the router, options, fragmentation, unresolved next hops). Packets
//! matching an installed [`Filter`] go to whoever installed it instead ([`Verdict::Divert`]):
//! that is where ANEP over UDP port 3322 for the local anode node, ANEP directly over
//! Ethernet (EtherType 0x88B5) and the service-module hooks plug in ([`IpRouter::reinject`]
//! takes a diverted frame back once a hook let it go on).
//!
//! Routes come from the interfaces (connected), configuration (static) and the
//! distance-vector service of anode ([`learn`]: routers advertise their prefixes to the
//! other anode nodes as [`learn::PrefixAd`] datagrams, and each installs `prefix -> the
//! next-hop router's address` with the DV metric, withdrawn when the DV route dies).
//!
//! ## Contracts
//! - No input bytes make anything here panic (`ip_frame` and `ip_router` fuzz targets,
//!   garbled-frame tests); network input is never indexed unchecked.
//! - Every frame handed in is counted in exactly one outcome ([`Counters`]).
//! - Nothing here reads a clock or does I/O; identical inputs give identical outputs.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
#![forbid(unsafe_code)]

pub mod learn;
pub mod router;
pub mod wire;

pub use router::{
    ConfigError, Counters, DemuxKey, DropReason, FastDemux, FastIface, FastRoute, FastTable,
    Filter, FilterId, Hop, IfaceId, InterfaceConfig, IpCidr, IpRouter, NeighConfig, Route,
    RouteOrigin, RouteTable, RouterConfig, Transmit, Verdict,
};
pub use wire::{MacAddr, WireError};

/// EtherType under which anode carries ANEP directly over Ethernet (IEEE 802 local
/// experimental EtherType 1), so nodes on one segment need no IP (PLAN/Ether).
pub const ETHERTYPE_ANEP: u16 = wire::EtherType::ANEP;

/// The UDP port of ANEP over UDP (IANA "active-net").
pub const ANEP_UDP_PORT: u16 = 3322;
