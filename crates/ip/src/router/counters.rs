//! Counters: what the router did with every frame, drops by reason.
//!
//! Invariant (tested, and checked by the `ip_router` fuzz target): every frame handed to
//! [`crate::IpRouter::handle_frame`] is counted exactly once in one outcome, so
//! `rx_frames == forwarded + fragmented + queued + local + diverted + total_drops()`.

macro_rules! drop_reasons {
    ($($(#[doc = $doc:literal])* $name:ident = $text:literal,)*) => {
        /// Why the router dropped a frame. Every drop is counted under one of these.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum DropReason {
            $($(#[doc = $doc])* $name,)*
        }

        impl DropReason {
            /// All reasons, in counter order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$name,)*];

            /// A short stable name (reports, JSON).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(DropReason::$name => $text,)*
                }
            }
        }
    };
}

drop_reasons! {
    /// Arrived on an interface the router does not have.
    UnknownIface = "unknown_iface",
    /// Shorter than an Ethernet header (or its VLAN tag).
    MalformedEthernet = "malformed_ethernet",
    /// Unicast to another station's MAC.
    NotForUs = "not_for_us",
    /// An EtherType the router does not handle and no filter claims.
    UnknownEtherType = "unknown_ethertype",
    /// ARP that is truncated or not Ethernet/IPv4.
    MalformedArp = "malformed_arp",
    /// ARP about someone else's address.
    ArpNotForUs = "arp_not_for_us",
    /// IPv4 with a bad version or impossible lengths.
    MalformedIpv4 = "malformed_ipv4",
    /// IPv4 header checksum does not verify.
    BadIpv4Checksum = "bad_ipv4_checksum",
    /// IPv4 options that do not parse (ICMP parameter problem sent).
    BadIpv4Options = "bad_ipv4_options",
    /// IPv4 loose/strict source route (dropped, RFC 7126 §4.3-4.4).
    SourceRoute = "source_route",
    /// IPv6 with a bad version or payload length longer than the frame.
    MalformedIpv6 = "malformed_ipv6",
    /// IPv6 extension headers that do not parse.
    MalformedExtHeaders = "malformed_ext_headers",
    /// Source address that must never appear (multicast, broadcast, loopback, unspecified).
    MartianSource = "martian_source",
    /// Destination that is not forwarded (broadcast, multicast not for us, loopback).
    NotForwarded = "not_forwarded",
    /// IPv6 link-local source or destination that would leave its link.
    BeyondScope = "beyond_scope",
    /// TTL / hop limit expired (time exceeded sent).
    TtlExceeded = "ttl_exceeded",
    /// No route to the destination (unreachable sent).
    NoRoute = "no_route",
    /// IPv4 too big for the next link with DF set (frag-needed sent).
    FragNeeded = "frag_needed",
    /// IPv6 too big for the next link (packet too big sent).
    PacketTooBig = "packet_too_big",
    /// A fragment addressed to the router itself (it does not reassemble).
    LocalFragment = "local_fragment",
    /// ICMP / ICMPv6 to the router that is truncated or of an unsupported type.
    MalformedIcmp = "malformed_icmp",
    /// ICMP / ICMPv6 checksum does not verify.
    BadIcmpChecksum = "bad_icmp_checksum",
    /// Neighbor discovery message that breaks RFC 4861 §7.1 (hop limit, code, options).
    MalformedNdp = "malformed_ndp",
    /// UDP to the router that is truncated or fails its checksum.
    MalformedUdp = "malformed_udp",
    /// UDP to a router port no filter claims (port unreachable sent).
    PortUnreachable = "port_unreachable",
    /// A transport protocol the router does not serve (unreachable sent).
    ProtocolUnreachable = "protocol_unreachable",
    /// The neighbor cache is full.
    NeighTableFull = "neigh_table_full",
    /// The queue of packets waiting for a neighbor is full.
    NeighQueueFull = "neigh_queue_full",
    /// The transmit queue was full (generated frames only).
    TxQueueFull = "tx_queue_full",
    /// Neighbor solicitation for an address that is not the router's.
    NdpNotForUs = "ndp_not_for_us",
    /// The router has no address to send from on the needed interface.
    NoSourceAddress = "no_source_address",
}

/// Counters of one router.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames handed in.
    pub rx_frames: u64,
    /// Bytes handed in.
    pub rx_bytes: u64,
    /// Outcome: forwarded in place on the fast path.
    pub forwarded: u64,
    /// Of `forwarded`, IPv6.
    pub forwarded_v6: u64,
    /// Outcome: forwarded as IPv4 fragments.
    pub fragmented: u64,
    /// Outcome: queued waiting for ARP / neighbor discovery.
    pub queued: u64,
    /// Outcome: consumed by the router itself (ARP, NDP, echo, ICMP to it).
    pub local: u64,
    /// Outcome: diverted to an installed filter.
    pub diverted: u64,
    /// Fragments sent.
    pub fragments_out: u64,
    /// Frames the router generated or released (collected by `poll_transmit`).
    pub tx_generated: u64,
    /// Echo replies sent.
    pub echo_replies: u64,
    /// ICMP / ICMPv6 errors sent.
    pub icmp_errors: u64,
    /// ICMP errors suppressed by the rate limit.
    pub icmp_rate_limited: u64,
    /// ARP requests sent.
    pub arp_requests: u64,
    /// ARP replies sent.
    pub arp_replies: u64,
    /// Neighbor solicitations sent.
    pub ns_sent: u64,
    /// Neighbor advertisements sent.
    pub na_sent: u64,
    /// Next hops resolved.
    pub neigh_resolved: u64,
    /// Next hops that did not answer.
    pub neigh_failed: u64,
    /// Queued packets released after resolution.
    pub queued_released: u64,
    /// Queued packets dropped because resolution failed.
    pub queued_dropped: u64,
    /// Generated packets that could not be sent (no route, neighbor or transmit queue full).
    pub local_send_failed: u64,
    /// Frames handed back with [`crate::IpRouter::reinject`] after a hook (each is also
    /// counted in `rx_frames` and one outcome, like any frame handed in).
    pub reinjected: u64,
    drops: [u64; DROP_REASONS],
}

const DROP_REASONS: usize = 31;
const _: () = assert!(DropReason::ALL.len() == DROP_REASONS);

impl Counters {
    /// Counts one drop.
    #[inline]
    pub fn drop(&mut self, r: DropReason) {
        if let Some(c) = self.drops.get_mut(r as usize) {
            *c += 1;
        }
    }

    /// Drops for one reason.
    pub fn drops(&self, r: DropReason) -> u64 {
        self.drops.get(r as usize).copied().unwrap_or(0)
    }

    /// All drops.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Sum of all outcomes; equals `rx_frames` (the accounting invariant).
    pub fn outcomes(&self) -> u64 {
        self.forwarded
            + self.fragmented
            + self.queued
            + self.local
            + self.diverted
            + self.total_drops()
    }

    /// Every counter as (name, value), drops as `drop.<reason>` (non-zero only).
    pub fn entries(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = [
            ("rx_frames", self.rx_frames),
            ("rx_bytes", self.rx_bytes),
            ("forwarded", self.forwarded),
            ("forwarded_v6", self.forwarded_v6),
            ("fragmented", self.fragmented),
            ("queued", self.queued),
            ("local", self.local),
            ("diverted", self.diverted),
            ("dropped", self.total_drops()),
            ("fragments_out", self.fragments_out),
            ("tx_generated", self.tx_generated),
            ("echo_replies", self.echo_replies),
            ("icmp_errors", self.icmp_errors),
            ("icmp_rate_limited", self.icmp_rate_limited),
            ("arp_requests", self.arp_requests),
            ("arp_replies", self.arp_replies),
            ("ns_sent", self.ns_sent),
            ("na_sent", self.na_sent),
            ("neigh_resolved", self.neigh_resolved),
            ("neigh_failed", self.neigh_failed),
            ("queued_released", self.queued_released),
            ("queued_dropped", self.queued_dropped),
            ("local_send_failed", self.local_send_failed),
            ("reinjected", self.reinjected),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for r in DropReason::ALL {
            let n = self.drops(*r);
            if n > 0 {
                v.push((format!("drop.{}", r.as_str()), n));
            }
        }
        v
    }
}
