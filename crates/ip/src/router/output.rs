//! The router's own output: frames it originates (ARP, NDP, ICMP, UDP for a local node,
//! ANEP over Ethernet), next-hop resolution for them, released queued packets, and IPv4
//! fragmentation. This is the general path: it allocates from a bounded buffer pool.
//!
//! Failures here never count as a drop of an input frame (that frame already has its
//! outcome); they count in `local_send_failed`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;

use super::neigh::{NeighKey, QueueResult};
use super::{DropReason, IfaceId, IpRouter, Transmit};
use crate::wire::{
    ArpOperation, ArpRepr, EtherType, EthernetRepr, Icmpv4Repr, Icmpv6Repr, Ipv4Packet, Ipv4Repr,
    Ipv6Packet, Ipv6Repr, MacAddr, UdpRepr, WireError, ethernet, icmpv4, icmpv6, ipv4, ipv6,
};

/// RFC 1812 §4.3.2.3: an ICMP error carries as much of the invoking packet as fits in 576.
const ICMPV4_QUOTE: usize = 576 - 20 - 8;
/// RFC 4443 §2.4(c): as much as fits in the IPv6 minimum MTU.
const ICMPV6_QUOTE: usize = 1280 - 40 - 8;

fn set_macs(frame: &mut [u8], dst: MacAddr, src: MacAddr) {
    if let Some(d) = frame.get_mut(0..6) {
        d.copy_from_slice(&dst.0);
    }
    if let Some(s) = frame.get_mut(6..12) {
        s.copy_from_slice(&src.0);
    }
}

impl IpRouter {
    pub(crate) fn alloc(&mut self, len: usize) -> Vec<u8> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v.resize(len, 0);
        v
    }

    pub(crate) fn push_tx(&mut self, iface: IfaceId, frame: Vec<u8>) -> Result<(), DropReason> {
        if self.out.len() >= self.cfg.max_tx_queue {
            self.counters.local_send_failed += 1;
            return Err(DropReason::TxQueueFull);
        }
        self.counters.tx_generated += 1;
        self.out.push_back(Transmit { iface, frame });
        Ok(())
    }

    fn mac_of(&self, iface: IfaceId) -> MacAddr {
        self.macs.get(iface.0 as usize).copied().unwrap_or_default()
    }

    /// Sends an owned frame (Ethernet header present, source MAC set) to next hop `next` on
    /// `iface`, resolving it first if needed. `Ok(true)`: sent; `Ok(false)`: queued.
    pub(crate) fn output(
        &mut self,
        now: Instant,
        iface: IfaceId,
        next: IpAddr,
        mut frame: Vec<u8>,
    ) -> Result<bool, DropReason> {
        let key: NeighKey = (iface, next);
        if let Some(mac) = self.neigh.lookup(now, key) {
            set_macs(&mut frame, mac, self.mac_of(iface));
            self.push_tx(iface, frame)?;
            return Ok(true);
        }
        match self.neigh.queue(now, key, frame) {
            QueueResult::Started => {
                self.solicit(now, key, None);
                Ok(false)
            }
            QueueResult::Queued => Ok(false),
            QueueResult::QueueFull => Err(DropReason::NeighQueueFull),
            QueueResult::TableFull => Err(DropReason::NeighTableFull),
        }
    }

    /// Releases frames that waited for `key`, now known to be at `mac`.
    pub(crate) fn release(
        &mut self,
        key: NeighKey,
        mac: MacAddr,
        queue: impl IntoIterator<Item = Vec<u8>>,
    ) {
        self.counters.neigh_resolved += 1;
        let src = self.mac_of(key.0);
        for mut f in queue {
            set_macs(&mut f, mac, src);
            self.counters.queued_released += 1;
            let _ = self.push_tx(key.0, f);
        }
    }

    /// Sends an ARP request or a neighbor solicitation for `key` (unicast when probing a
    /// known MAC).
    pub(crate) fn solicit(&mut self, _now: Instant, key: NeighKey, unicast: Option<MacAddr>) {
        let (iface, target) = key;
        let my = self.mac_of(iface);
        match target {
            IpAddr::V4(t) => {
                let Some(spa) = self.iface_v4(iface, Some(t)) else {
                    self.counters.local_send_failed += 1;
                    return;
                };
                let mut f = self.alloc(ethernet::HEADER_LEN + crate::wire::arp::LEN);
                let eth = EthernetRepr {
                    src: my,
                    dst: unicast.unwrap_or(MacAddr::BROADCAST),
                    ethertype: EtherType::ARP,
                };
                let arp = ArpRepr {
                    op: ArpOperation::Request,
                    sha: my,
                    spa,
                    tha: MacAddr::ZERO,
                    tpa: t,
                };
                if eth.emit(&mut f).is_ok()
                    && arp
                        .emit(f.get_mut(ethernet::HEADER_LEN..).unwrap_or(&mut []))
                        .is_ok()
                    && self.push_tx(iface, f).is_ok()
                {
                    self.counters.arp_requests += 1;
                }
            }
            IpAddr::V6(t) => {
                let Some(src) = self.iface_v6(iface, Some(t)) else {
                    self.counters.local_send_failed += 1;
                    return;
                };
                let (dst, dmac) = match unicast {
                    Some(m) => (t, m),
                    None => {
                        let g = ipv6::solicited_node(t);
                        (g, MacAddr::ipv6_multicast(g))
                    }
                };
                let icmp = Icmpv6Repr::NeighborSolicit {
                    target: t,
                    lladdr: Some(my),
                };
                if self.emit_v6_direct(iface, dmac, src, dst, 255, &icmp) {
                    self.counters.ns_sent += 1;
                }
            }
        }
    }

    /// Builds an ICMPv6 packet to a MAC known already (NDP) and queues it.
    pub(crate) fn emit_v6_direct(
        &mut self,
        iface: IfaceId,
        dmac: MacAddr,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        hop_limit: u8,
        icmp: &Icmpv6Repr<'_>,
    ) -> bool {
        let n = icmp.buffer_len();
        let mut f = self.alloc(ethernet::HEADER_LEN + ipv6::HEADER_LEN + n);
        let ok = EthernetRepr {
            src: self.mac_of(iface),
            dst: dmac,
            ethertype: EtherType::IPV6,
        }
        .emit(&mut f)
        .is_ok()
            && Ipv6Repr {
                src,
                dst,
                next_header: ipv4::proto::ICMPV6,
                hop_limit,
                traffic_class: 0,
                flow_label: 0,
                payload_len: n,
            }
            .emit(f.get_mut(ethernet::HEADER_LEN..).unwrap_or(&mut []))
            .is_ok()
            && icmp
                .emit(
                    f.get_mut(ethernet::HEADER_LEN + ipv6::HEADER_LEN..)
                        .unwrap_or(&mut []),
                    src,
                    dst,
                )
                .is_ok();
        ok && self.push_tx(iface, f).is_ok()
    }

    /// Originates an IPv4 packet: routes it, builds Ethernet + IPv4 headers, lets `fill`
    /// write the `payload_len` bytes of payload, and sends or queues it.
    pub(crate) fn originate_v4(
        &mut self,
        now: Instant,
        src: Option<Ipv4Addr>,
        dst: Ipv4Addr,
        protocol: u8,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8], Ipv4Addr, Ipv4Addr) -> Result<(), WireError>,
    ) -> Result<bool, DropReason> {
        let hop = self.routes.lookup_v4(dst).ok_or(DropReason::NoRoute)?;
        let src = src
            .or_else(|| self.iface_v4(hop.iface, Some(dst)))
            .ok_or(DropReason::NoSourceAddress)?;
        let total = ipv4::HEADER_LEN + payload_len;
        if total > self.mtus.get(hop.iface.0 as usize).copied().unwrap_or(0) {
            return Err(DropReason::FragNeeded);
        }
        let mut f = self.alloc(ethernet::HEADER_LEN + total);
        self.ident = self.ident.wrapping_add(1);
        let l3 = f.get_mut(ethernet::HEADER_LEN..).unwrap_or(&mut []);
        let built = Ipv4Repr {
            src,
            dst,
            protocol,
            ttl: self.cfg.default_ttl,
            tos: 0,
            ident: self.ident,
            dont_frag: false,
            payload_len,
        }
        .emit(l3)
        .is_ok()
            && fill(l3.get_mut(ipv4::HEADER_LEN..).unwrap_or(&mut []), src, dst).is_ok();
        let eth = EthernetRepr {
            src: self.mac_of(hop.iface),
            dst: MacAddr::ZERO,
            ethertype: EtherType::IPV4,
        };
        if !built || eth.emit(&mut f).is_err() {
            return Err(DropReason::MalformedIpv4);
        }
        let next = hop.gateway.unwrap_or(IpAddr::V4(dst));
        self.output(now, hop.iface, next, f)
    }

    /// Originates an IPv6 packet (see [`IpRouter::originate_v4`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn originate_v6(
        &mut self,
        now: Instant,
        src: Option<Ipv6Addr>,
        dst: Ipv6Addr,
        next_header: u8,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8], Ipv6Addr, Ipv6Addr) -> Result<(), WireError>,
    ) -> Result<bool, DropReason> {
        let hop = self.routes.lookup_v6(dst).ok_or(DropReason::NoRoute)?;
        let src = src
            .or_else(|| self.iface_v6(hop.iface, Some(dst)))
            .ok_or(DropReason::NoSourceAddress)?;
        let total = ipv6::HEADER_LEN + payload_len;
        if total > self.mtus.get(hop.iface.0 as usize).copied().unwrap_or(0) {
            return Err(DropReason::PacketTooBig);
        }
        let mut f = self.alloc(ethernet::HEADER_LEN + total);
        let l3 = f.get_mut(ethernet::HEADER_LEN..).unwrap_or(&mut []);
        let built = Ipv6Repr {
            src,
            dst,
            next_header,
            hop_limit: self.cfg.default_ttl,
            traffic_class: 0,
            flow_label: 0,
            payload_len,
        }
        .emit(l3)
        .is_ok()
            && fill(l3.get_mut(ipv6::HEADER_LEN..).unwrap_or(&mut []), src, dst).is_ok();
        let eth = EthernetRepr {
            src: self.mac_of(hop.iface),
            dst: MacAddr::ZERO,
            ethertype: EtherType::IPV6,
        };
        if !built || eth.emit(&mut f).is_err() {
            return Err(DropReason::MalformedIpv6);
        }
        let next = hop.gateway.unwrap_or(IpAddr::V6(dst));
        self.output(now, hop.iface, next, f)
    }

    /// Sends an ICMPv4 error about `invoking` (an IPv4 packet) unless RFC 1812 §4.3.2.7
    /// forbids it or the rate limit is exhausted.
    pub(crate) fn icmp4_error(
        &mut self,
        now: Instant,
        invoking: &[u8],
        link_multicast: bool,
        make: impl for<'a> FnOnce(&'a [u8]) -> Icmpv4Repr<'a>,
    ) {
        let p = Ipv4Packet::new_unchecked(invoking);
        let (src, dst) = (p.src(), p.dst());
        if link_multicast
            || dst.is_broadcast()
            || dst.is_multicast()
            || src.is_unspecified()
            || src.is_broadcast()
            || src.is_multicast()
            || src.is_loopback()
            || p.frag_offset() != 0
        {
            return;
        }
        if p.protocol() == ipv4::proto::ICMP {
            let t = invoking.get(p.header_len()).copied().unwrap_or(0);
            if !matches!(
                t,
                icmpv4::kind::ECHO_REQUEST | icmpv4::kind::ECHO_REPLY | 13..=18
            ) {
                return;
            }
        }
        if !self.icmp_bucket.take(now) {
            self.counters.icmp_rate_limited += 1;
            return;
        }
        let quote = invoking
            .get(..invoking.len().min(ICMPV4_QUOTE))
            .unwrap_or(&[]);
        let repr = make(quote);
        let r = self.originate_v4(
            now,
            None,
            src,
            ipv4::proto::ICMP,
            repr.buffer_len(),
            |b, _, _| repr.emit(b),
        );
        match r {
            Ok(_) => self.counters.icmp_errors += 1,
            Err(_) => self.counters.local_send_failed += 1,
        }
    }

    /// Sends an ICMPv6 error about `invoking` (an IPv6 packet) unless RFC 4443 §2.4(e)
    /// forbids it or the rate limit is exhausted.
    pub(crate) fn icmp6_error(
        &mut self,
        now: Instant,
        invoking: &[u8],
        link_multicast: bool,
        make: impl for<'a> Fn(&'a [u8]) -> Icmpv6Repr<'a>,
    ) {
        let p = Ipv6Packet::new_unchecked(invoking);
        let (src, dst) = (p.src(), p.dst());
        if src.is_unspecified() || src.is_multicast() || src.is_loopback() {
            return;
        }
        let probe = make(&[]);
        let ptb = matches!(probe, Icmpv6Repr::PacketTooBig { .. });
        if !ptb && (link_multicast || dst.is_multicast()) {
            return;
        }
        if let Ok(u) = p.upper_layer()
            && u.protocol == ipv4::proto::ICMPV6
            && !u.non_first_fragment
        {
            let t = invoking.get(u.offset).copied().unwrap_or(0);
            if t < 128 {
                return;
            }
        }
        if !self.icmp_bucket.take(now) {
            self.counters.icmp_rate_limited += 1;
            return;
        }
        let quote = invoking
            .get(..invoking.len().min(ICMPV6_QUOTE))
            .unwrap_or(&[]);
        let repr = make(quote);
        let r = self.originate_v6(
            now,
            None,
            src,
            ipv4::proto::ICMPV6,
            repr.buffer_len(),
            |b, s, d| repr.emit(b, s, d),
        );
        match r {
            Ok(_) => self.counters.icmp_errors += 1,
            Err(_) => self.counters.local_send_failed += 1,
        }
    }

    /// Host/address unreachable for a queued frame whose next hop never answered.
    pub(crate) fn unreachable_for_queued(&mut self, now: Instant, frame: &[u8]) {
        let Some(pkt) = frame.get(ethernet::HEADER_LEN..) else {
            return;
        };
        match crate::wire::ethernet::EthernetFrame::new_checked(frame).map(|e| e.ethertype()) {
            Ok(EtherType::IPV4) => {
                self.icmp4_error(now, pkt, false, |data| Icmpv4Repr::DstUnreachable {
                    code: icmpv4::unreach::HOST,
                    mtu: 0,
                    data,
                })
            }
            Ok(EtherType::IPV6) => {
                self.icmp6_error(now, pkt, false, |data| Icmpv6Repr::DstUnreachable {
                    code: icmpv6::unreach::ADDRESS,
                    data,
                })
            }
            _ => {}
        }
    }

    /// Fragments an IPv4 packet (DF clear, too big for `mtu`) whose TTL is already
    /// decremented, and sends the fragments to `next` on `iface`. Returns fragments sent.
    pub(crate) fn fragment_v4(
        &mut self,
        now: Instant,
        iface: IfaceId,
        next: IpAddr,
        pkt: &[u8],
        mtu: usize,
    ) -> usize {
        let p = Ipv4Packet::new_unchecked(pkt);
        let payload = p.payload();
        let base = p.frag_offset();
        let orig_mf = p.more_frags();
        let mut later_hdr = [0u8; 60];
        later_hdr
            .get_mut(..ipv4::HEADER_LEN)
            .unwrap_or(&mut [])
            .copy_from_slice(pkt.get(..ipv4::HEADER_LEN).unwrap_or(&[0; 20]));
        let opt_len = ipv4::copy_copied_options(
            p.options(),
            later_hdr.get_mut(ipv4::HEADER_LEN..).unwrap_or(&mut []),
        );
        let later_hl = ipv4::HEADER_LEN + opt_len;
        if let Some(b) = later_hdr.first_mut() {
            *b = 0x40 | (later_hl / 4) as u8;
        }
        let mut off = 0;
        let mut sent = 0;
        while off < payload.len() {
            let h: &[u8] = if off == 0 {
                p.header()
            } else {
                later_hdr.get(..later_hl).unwrap_or(&[])
            };
            let room = mtu.saturating_sub(h.len()) / 8 * 8;
            if room == 0 {
                break;
            }
            let chunk = room.min(payload.len() - off);
            let last = off + chunk >= payload.len();
            let total = h.len() + chunk;
            let mut f = self.alloc(ethernet::HEADER_LEN + total);
            let eth = EthernetRepr {
                src: self.mac_of(iface),
                dst: MacAddr::ZERO,
                ethertype: EtherType::IPV4,
            };
            if eth.emit(&mut f).is_err() {
                break;
            }
            if let Some(d) = f.get_mut(ethernet::HEADER_LEN..ethernet::HEADER_LEN + h.len()) {
                d.copy_from_slice(h);
            }
            if let (Some(d), Some(s)) = (
                f.get_mut(ethernet::HEADER_LEN + h.len()..),
                payload.get(off..off + chunk),
            ) {
                d.copy_from_slice(s);
            }
            {
                let mut ip =
                    Ipv4Packet::new_unchecked(f.get_mut(ethernet::HEADER_LEN..).unwrap_or(&mut []));
                ip.set_total_len(total as u16);
                ip.set_frag(false, !last || orig_mf, base + off);
                ip.fill_checksum();
            }
            match self.output(now, iface, next, f) {
                Ok(_) => sent += 1,
                Err(_) => self.counters.local_send_failed += 1,
            }
            off += chunk;
        }
        self.counters.fragments_out += sent as u64;
        sent
    }

    /// Sends a UDP datagram from the router (e.g. ANEP for the local node's peers), routed
    /// like any packet the router originates. `src` defaults to the outgoing interface's
    /// address.
    pub fn send_udp(
        &mut self,
        now: Instant,
        src: Option<IpAddr>,
        src_port: u16,
        dst: SocketAddr,
        payload: &[u8],
    ) -> Result<(), DropReason> {
        let udp = UdpRepr {
            src_port,
            dst_port: dst.port(),
        };
        let n = crate::wire::udp::HEADER_LEN + payload.len();
        let r = match dst.ip() {
            IpAddr::V4(d) => {
                let s = match src {
                    Some(IpAddr::V4(s)) => Some(s),
                    _ => None,
                };
                self.originate_v4(now, s, d, ipv4::proto::UDP, n, |b, s, d| {
                    udp.emit(b, s.into(), d.into(), payload)
                })
            }
            IpAddr::V6(d) => {
                let s = match src {
                    Some(IpAddr::V6(s)) => Some(s),
                    _ => None,
                };
                self.originate_v6(now, s, d, ipv4::proto::UDP, n, |b, s, d| {
                    udp.emit(b, s.into(), d.into(), payload)
                })
            }
        };
        r.map(|_| ())
            .inspect_err(|_| self.counters.local_send_failed += 1)
    }

    /// Sends a raw Ethernet payload (e.g. ANEP under EtherType 0x88B5) to `dst` on `iface`.
    pub fn send_ether(
        &mut self,
        iface: IfaceId,
        dst: MacAddr,
        ethertype: u16,
        payload: &[u8],
    ) -> Result<(), DropReason> {
        if iface.0 as usize >= self.ifaces.len() {
            return Err(DropReason::UnknownIface);
        }
        if payload.len() > self.mtus.get(iface.0 as usize).copied().unwrap_or(0) {
            self.counters.local_send_failed += 1;
            return Err(DropReason::PacketTooBig);
        }
        let mut f = self.alloc(ethernet::HEADER_LEN + payload.len());
        let _ = EthernetRepr {
            src: self.mac_of(iface),
            dst,
            ethertype,
        }
        .emit(&mut f);
        if let Some(d) = f.get_mut(ethernet::HEADER_LEN..) {
            d.copy_from_slice(payload);
        }
        self.push_tx(iface, f)
    }
}
