//! IPv4 and ARP: the IPv4 fast path, packets for the router, and ARP (RFC 826 merge rule:
//! a sender already in the cache is updated by any ARP packet; one that asks for us is
//! added).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use super::{DropReason, IpRouter, RxCtx, Verdict};
use crate::wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetRepr, Icmpv4Packet, Icmpv4Repr,
    Ipv4Packet, UdpPacket, WireError, ethernet, icmpv4, ipv4,
};

/// What the fast path reads from a checked IPv4 header.
#[derive(Debug, Clone, Copy)]
struct Hdr {
    hl: usize,
    total: usize,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ttl: u8,
    df: bool,
    proto: u8,
    frag: bool,
}

impl IpRouter {
    pub(crate) fn ipv4(&mut self, now: Instant, ctx: RxCtx, frame: &mut [u8]) -> Verdict {
        let l3 = ctx.l3;
        let h = {
            let Some(b) = frame.get(l3..) else {
                return self.drop(DropReason::MalformedIpv4);
            };
            let Ok(p) = Ipv4Packet::new_checked(b) else {
                return self.drop(DropReason::MalformedIpv4);
            };
            if !p.verify_checksum() {
                return self.drop(DropReason::BadIpv4Checksum);
            }
            Hdr {
                hl: p.header_len(),
                total: usize::from(p.total_len()),
                src: p.src(),
                dst: p.dst(),
                ttl: p.ttl(),
                df: p.dont_frag(),
                proto: p.protocol(),
                frag: p.is_fragment(),
            }
        };
        if h.src.is_multicast() || h.src.is_broadcast() || h.src.is_loopback() {
            return self.drop(DropReason::MartianSource);
        }
        if self.local_v4.iter().any(|(a, _)| *a == h.dst) {
            return self.local_v4(now, ctx, frame, h);
        }
        if h.dst.is_broadcast()
            || h.dst.is_multicast()
            || h.dst.is_loopback()
            || h.dst.is_unspecified()
            || h.src.is_unspecified()
            || ctx.link_multicast
            || self.is_directed_broadcast(h.dst)
        {
            return self.drop(DropReason::NotForwarded);
        }
        let pkt_range = l3..l3 + h.total;
        if h.hl > ipv4::HEADER_LEN {
            let opts = frame.get(l3 + ipv4::HEADER_LEN..l3 + h.hl).unwrap_or(&[]);
            match ipv4::check_options(opts) {
                Err(ptr) => {
                    let pkt = frame.get(pkt_range).unwrap_or(&[]);
                    self.icmp4_error(now, pkt, false, |data| Icmpv4Repr::ParamProblem {
                        pointer: ptr.min(255) as u8,
                        data,
                    });
                    return self.drop(DropReason::BadIpv4Options);
                }
                Ok(s) if s.source_route => return self.drop(DropReason::SourceRoute),
                Ok(_) => {}
            }
        }
        if self.filters.any_demux
            && !self.skip_demux
            && let Some(filter) = self
                .filters
                .match_demux(EtherType::IPV4, frame.get(pkt_range.clone()).unwrap_or(&[]))
        {
            self.counters.diverted += 1;
            return Verdict::Divert {
                filter,
                l3_offset: l3,
            };
        }
        if h.ttl <= 1 {
            let pkt = frame.get(pkt_range).unwrap_or(&[]);
            self.icmp4_error(now, pkt, false, |data| Icmpv4Repr::TimeExceeded {
                code: 0,
                data,
            });
            return self.drop(DropReason::TtlExceeded);
        }
        let Some(hop) = self.routes.lookup_v4(h.dst) else {
            let pkt = frame.get(pkt_range).unwrap_or(&[]);
            self.icmp4_error(now, pkt, false, |data| Icmpv4Repr::DstUnreachable {
                code: icmpv4::unreach::NET,
                mtu: 0,
                data,
            });
            return self.drop(DropReason::NoRoute);
        };
        let out = hop.iface;
        let mtu = self.mtus.get(out.0 as usize).copied().unwrap_or(0);
        let next = hop.gateway.unwrap_or(IpAddr::V4(h.dst));
        if h.total > mtu {
            if h.df {
                let pkt = frame.get(pkt_range).unwrap_or(&[]);
                self.icmp4_error(now, pkt, false, |data| Icmpv4Repr::DstUnreachable {
                    code: icmpv4::unreach::FRAG_NEEDED,
                    mtu: mtu.min(65535) as u16,
                    data,
                });
                return self.drop(DropReason::FragNeeded);
            }
            if let Some(b) = frame.get_mut(pkt_range.clone()) {
                Ipv4Packet::new_unchecked(b).decrement_ttl();
            }
            let pkt = frame.get(pkt_range).unwrap_or(&[]);
            self.fragment_v4(now, out, next, pkt, mtu);
            self.counters.fragmented += 1;
            return Verdict::Consumed;
        }
        // Rewrite in place: TTL and checksum, then the MACs.
        if let Some(b) = frame.get_mut(pkt_range) {
            Ipv4Packet::new_unchecked(b).decrement_ttl();
        }
        let start = l3 - ethernet::HEADER_LEN;
        let len = ethernet::HEADER_LEN + h.total;
        let my = self.macs.get(out.0 as usize).copied().unwrap_or_default();
        match self.neigh.lookup(now, (out, next)) {
            Some(mac) => {
                if let Some(hdr) = frame.get_mut(start..start + 12) {
                    let (d, s) = hdr.split_at_mut(6);
                    d.copy_from_slice(&mac.0);
                    s.copy_from_slice(&my.0);
                }
                self.counters.forwarded += 1;
                Verdict::Forward {
                    iface: out,
                    start,
                    len,
                }
            }
            None => self.queue_copy(now, out, next, frame.get(start..start + len)),
        }
    }

    fn is_directed_broadcast(&self, dst: Ipv4Addr) -> bool {
        self.ifaces.iter().any(|f| {
            f.cfg
                .ipv4
                .iter()
                .any(|c| c.prefix_len < 31 && c.broadcast() == dst)
        })
    }

    /// Copies a rewritten frame (Ethernet header first) into the queue of its unresolved
    /// next hop.
    pub(crate) fn queue_copy(
        &mut self,
        now: Instant,
        out: super::IfaceId,
        next: IpAddr,
        frame: Option<&[u8]>,
    ) -> Verdict {
        let Some(src) = frame else {
            return self.drop(DropReason::MalformedEthernet);
        };
        let mut f = self.alloc(src.len());
        f.copy_from_slice(src);
        // A stripped VLAN tag: the copy starts at the rewritten header, whose EtherType is
        // the inner one already.
        match self.output(now, out, next, f) {
            Ok(true) => {
                self.counters.forwarded += 1;
                Verdict::Consumed
            }
            Ok(false) => {
                self.counters.queued += 1;
                Verdict::Consumed
            }
            Err(r) => self.drop(r),
        }
    }

    fn local_v4(&mut self, now: Instant, ctx: RxCtx, frame: &mut [u8], h: Hdr) -> Verdict {
        if h.frag {
            return self.drop(DropReason::LocalFragment);
        }
        let pkt = frame.get(ctx.l3..ctx.l3 + h.total).unwrap_or(&[]);
        let payload = pkt.get(h.hl..).unwrap_or(&[]);
        match h.proto {
            ipv4::proto::ICMP => {
                let Ok(p) = Icmpv4Packet::new_checked(payload) else {
                    return self.drop(DropReason::MalformedIcmp);
                };
                match Icmpv4Repr::parse(&p) {
                    Ok(Icmpv4Repr::EchoRequest { ident, seq, data }) => {
                        if ctx.link_multicast {
                            return self.local();
                        }
                        let reply = Icmpv4Repr::EchoReply { ident, seq, data };
                        match self.originate_v4(
                            now,
                            Some(h.dst),
                            h.src,
                            ipv4::proto::ICMP,
                            reply.buffer_len(),
                            |b, _, _| reply.emit(b),
                        ) {
                            Ok(_) => self.counters.echo_replies += 1,
                            Err(_) => self.counters.local_send_failed += 1,
                        }
                        self.local()
                    }
                    Ok(_) => self.local(),
                    Err(WireError::BadChecksum { .. }) => self.drop(DropReason::BadIcmpChecksum),
                    Err(_) => self.drop(DropReason::MalformedIcmp),
                }
            }
            ipv4::proto::UDP => {
                let Ok(u) = UdpPacket::new_checked(payload) else {
                    return self.drop(DropReason::MalformedUdp);
                };
                if !u.verify_checksum(h.src.into(), h.dst.into()) {
                    return self.drop(DropReason::MalformedUdp);
                }
                if self.filters.any_udp
                    && let Some(filter) = self.filters.match_udp(u.dst_port())
                {
                    self.counters.diverted += 1;
                    return Verdict::Divert {
                        filter,
                        l3_offset: ctx.l3,
                    };
                }
                self.icmp4_error(now, pkt, ctx.link_multicast, |data| {
                    Icmpv4Repr::DstUnreachable {
                        code: icmpv4::unreach::PORT,
                        mtu: 0,
                        data,
                    }
                });
                self.drop(DropReason::PortUnreachable)
            }
            _ => {
                self.icmp4_error(now, pkt, ctx.link_multicast, |data| {
                    Icmpv4Repr::DstUnreachable {
                        code: icmpv4::unreach::PROTOCOL,
                        mtu: 0,
                        data,
                    }
                });
                self.drop(DropReason::ProtocolUnreachable)
            }
        }
    }

    pub(crate) fn arp(&mut self, now: Instant, ctx: RxCtx, frame: &mut [u8]) -> Verdict {
        let Some(b) = frame.get(ctx.l3..) else {
            return self.drop(DropReason::MalformedArp);
        };
        let Ok(p) = ArpPacket::new_checked(b) else {
            return self.drop(DropReason::MalformedArp);
        };
        let Ok(a) = ArpRepr::parse(&p) else {
            return self.drop(DropReason::MalformedArp);
        };
        if self.local_v4.iter().any(|(x, _)| *x == a.spa) || !a.sha.is_unicast() {
            return self.drop(DropReason::ArpNotForUs);
        }
        let for_me = self
            .local_v4
            .iter()
            .any(|(x, i)| *x == a.tpa && *i == ctx.iface);
        let key = (ctx.iface, IpAddr::V4(a.spa));
        if !a.spa.is_unspecified()
            && let Some(q) = self.neigh.confirm(now, key, a.sha, for_me)
        {
            self.release(key, a.sha, q);
        }
        if !for_me {
            return self.drop(DropReason::ArpNotForUs);
        }
        if a.op == ArpOperation::Request {
            let my = self
                .macs
                .get(ctx.iface.0 as usize)
                .copied()
                .unwrap_or_default();
            let reply = ArpRepr {
                op: ArpOperation::Reply,
                sha: my,
                spa: a.tpa,
                tha: a.sha,
                tpa: a.spa,
            };
            let mut f = self.alloc(ethernet::HEADER_LEN + crate::wire::arp::LEN);
            let eth = EthernetRepr {
                src: my,
                dst: a.sha,
                ethertype: EtherType::ARP,
            };
            if eth.emit(&mut f).is_ok()
                && reply
                    .emit(f.get_mut(ethernet::HEADER_LEN..).unwrap_or(&mut []))
                    .is_ok()
                && self.push_tx(ctx.iface, f).is_ok()
            {
                self.counters.arp_replies += 1;
            }
        }
        self.local()
    }
}
