//! IPv6 and neighbor discovery: the IPv6 fast path, packets for the router, and NDP
//! (RFC 4861: NS/NA must arrive with hop limit 255; an NS from a specified source with a
//! source link-layer option creates or updates the sender's entry; an NA updates an
//! existing entry only).

use std::net::{IpAddr, Ipv6Addr};
use std::time::Instant;

use super::{DropReason, IpRouter, RxCtx, Verdict, is_link_local};
use crate::wire::{
    EtherType, Icmpv6Packet, Icmpv6Repr, Ipv6Packet, NdpFlags, UdpPacket, WireError, ethernet,
    icmpv6, ipv4, ipv6,
};

impl IpRouter {
    pub(crate) fn ipv6(&mut self, now: Instant, ctx: RxCtx, frame: &mut [u8]) -> Verdict {
        let l3 = ctx.l3;
        let (total, src, dst, hop_limit) = {
            let Some(b) = frame.get(l3..) else {
                return self.drop(DropReason::MalformedIpv6);
            };
            let Ok(p) = Ipv6Packet::new_checked(b) else {
                return self.drop(DropReason::MalformedIpv6);
            };
            (
                ipv6::HEADER_LEN + usize::from(p.payload_len()),
                p.src(),
                p.dst(),
                p.hop_limit(),
            )
        };
        if src.is_multicast() || src.is_loopback() {
            return self.drop(DropReason::MartianSource);
        }
        if dst.is_multicast() || self.local_v6.iter().any(|(a, _)| *a == dst) {
            return self.local_v6(now, ctx, frame, total, src, dst, hop_limit);
        }
        if dst.is_unspecified() || dst.is_loopback() || ctx.link_multicast {
            return self.drop(DropReason::NotForwarded);
        }
        if src.is_unspecified() {
            return self.drop(DropReason::MartianSource);
        }
        let pkt_range = l3..l3 + total;
        if is_link_local(dst) {
            return self.drop(DropReason::BeyondScope);
        }
        if is_link_local(src) {
            let pkt = frame.get(pkt_range).unwrap_or(&[]);
            self.icmp6_error(now, pkt, false, |data| Icmpv6Repr::DstUnreachable {
                code: icmpv6::unreach::BEYOND_SCOPE,
                data,
            });
            return self.drop(DropReason::BeyondScope);
        }
        if self.filters.any_demux
            && !self.skip_demux
            && let Some(filter) = self
                .filters
                .match_demux(EtherType::IPV6, frame.get(pkt_range.clone()).unwrap_or(&[]))
        {
            self.counters.diverted += 1;
            return Verdict::Divert {
                filter,
                l3_offset: l3,
            };
        }
        if hop_limit <= 1 {
            let pkt = frame.get(pkt_range).unwrap_or(&[]);
            self.icmp6_error(now, pkt, false, |data| Icmpv6Repr::TimeExceeded {
                code: 0,
                data,
            });
            return self.drop(DropReason::TtlExceeded);
        }
        let Some(hop) = self.routes.lookup_v6(dst) else {
            let pkt = frame.get(pkt_range).unwrap_or(&[]);
            self.icmp6_error(now, pkt, false, |data| Icmpv6Repr::DstUnreachable {
                code: icmpv6::unreach::NO_ROUTE,
                data,
            });
            return self.drop(DropReason::NoRoute);
        };
        let out = hop.iface;
        let mtu = self.mtus.get(out.0 as usize).copied().unwrap_or(0);
        if total > mtu {
            let pkt = frame.get(pkt_range).unwrap_or(&[]);
            self.icmp6_error(now, pkt, false, |data| Icmpv6Repr::PacketTooBig {
                mtu: mtu as u32,
                data,
            });
            return self.drop(DropReason::PacketTooBig);
        }
        if let Some(b) = frame.get_mut(pkt_range) {
            Ipv6Packet::new_unchecked(b).set_hop_limit(hop_limit - 1);
        }
        let next = hop.gateway.unwrap_or(IpAddr::V6(dst));
        let start = l3 - ethernet::HEADER_LEN;
        let len = ethernet::HEADER_LEN + total;
        let my = self.macs.get(out.0 as usize).copied().unwrap_or_default();
        match self.neigh.lookup(now, (out, next)) {
            Some(mac) => {
                if let Some(hdr) = frame.get_mut(start..start + 12) {
                    let (d, s) = hdr.split_at_mut(6);
                    d.copy_from_slice(&mac.0);
                    s.copy_from_slice(&my.0);
                }
                self.counters.forwarded += 1;
                self.counters.forwarded_v6 += 1;
                Verdict::Forward {
                    iface: out,
                    start,
                    len,
                }
            }
            None => self.queue_copy(now, out, next, frame.get(start..start + len)),
        }
    }

    fn multicast_for_us(&self, ctx: RxCtx, dst: Ipv6Addr) -> bool {
        let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        let all_routers = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
        dst == all_nodes
            || dst == all_routers
            || self
                .local_v6
                .iter()
                .any(|(a, i)| *i == ctx.iface && ipv6::solicited_node(*a) == dst)
    }

    #[allow(clippy::too_many_arguments)]
    fn local_v6(
        &mut self,
        now: Instant,
        ctx: RxCtx,
        frame: &mut [u8],
        total: usize,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        hop_limit: u8,
    ) -> Verdict {
        let multicast = dst.is_multicast();
        if multicast && !self.multicast_for_us(ctx, dst) {
            return self.drop(DropReason::NotForwarded);
        }
        let pkt = frame.get(ctx.l3..ctx.l3 + total).unwrap_or(&[]);
        let Ok(ul) = Ipv6Packet::new_unchecked(pkt).upper_layer() else {
            return self.drop(DropReason::MalformedExtHeaders);
        };
        if ul.fragment {
            return self.drop(DropReason::LocalFragment);
        }
        let body = pkt.get(ul.offset..).unwrap_or(&[]);
        match ul.protocol {
            ipv4::proto::ICMPV6 => {
                let Ok(p) = Icmpv6Packet::new_checked(body) else {
                    return self.drop(DropReason::MalformedIcmp);
                };
                let ndp = matches!(
                    p.msg_type(),
                    icmpv6::kind::NEIGHBOR_SOLICIT | icmpv6::kind::NEIGHBOR_ADVERT
                );
                match Icmpv6Repr::parse(&p, src, dst) {
                    Ok(Icmpv6Repr::EchoRequest { ident, seq, data }) => {
                        if multicast || src.is_unspecified() {
                            return self.local();
                        }
                        let reply = Icmpv6Repr::EchoReply { ident, seq, data };
                        match self.originate_v6(
                            now,
                            Some(dst),
                            src,
                            ipv4::proto::ICMPV6,
                            reply.buffer_len(),
                            |b, s, d| reply.emit(b, s, d),
                        ) {
                            Ok(_) => self.counters.echo_replies += 1,
                            Err(_) => self.counters.local_send_failed += 1,
                        }
                        self.local()
                    }
                    Ok(Icmpv6Repr::NeighborSolicit { target, lladdr }) => {
                        if hop_limit != 255 {
                            return self.drop(DropReason::MalformedNdp);
                        }
                        self.neighbor_solicit(now, ctx, src, target, lladdr)
                    }
                    Ok(Icmpv6Repr::NeighborAdvert {
                        flags: _,
                        target,
                        lladdr,
                    }) => {
                        if hop_limit != 255 {
                            return self.drop(DropReason::MalformedNdp);
                        }
                        let mac = lladdr.unwrap_or(ctx.src_mac);
                        let key = (ctx.iface, IpAddr::V6(target));
                        if let Some(q) = self.neigh.confirm(now, key, mac, false) {
                            self.release(key, mac, q);
                        }
                        self.local()
                    }
                    Ok(_) => self.local(),
                    Err(WireError::BadChecksum { .. }) => self.drop(DropReason::BadIcmpChecksum),
                    Err(_) if ndp => self.drop(DropReason::MalformedNdp),
                    // Router solicitations, MLD and other types the router does not serve.
                    Err(WireError::Unsupported { .. }) => self.local(),
                    Err(_) => self.drop(DropReason::MalformedIcmp),
                }
            }
            ipv4::proto::UDP if !multicast => {
                let Ok(u) = UdpPacket::new_checked(body) else {
                    return self.drop(DropReason::MalformedUdp);
                };
                if !u.verify_checksum(src.into(), dst.into()) {
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
                self.icmp6_error(now, pkt, ctx.link_multicast, |data| {
                    Icmpv6Repr::DstUnreachable {
                        code: icmpv6::unreach::PORT,
                        data,
                    }
                });
                self.drop(DropReason::PortUnreachable)
            }
            ipv4::proto::TCP if !multicast => {
                self.icmp6_error(now, pkt, ctx.link_multicast, |data| {
                    Icmpv6Repr::DstUnreachable {
                        code: icmpv6::unreach::PORT,
                        data,
                    }
                });
                self.drop(DropReason::ProtocolUnreachable)
            }
            _ if multicast => self.local(),
            _ => {
                if ul.offset == ipv6::HEADER_LEN {
                    self.icmp6_error(now, pkt, ctx.link_multicast, |data| {
                        Icmpv6Repr::ParamProblem {
                            code: 1,
                            pointer: 6,
                            data,
                        }
                    });
                }
                self.drop(DropReason::ProtocolUnreachable)
            }
        }
    }

    fn neighbor_solicit(
        &mut self,
        now: Instant,
        ctx: RxCtx,
        src: Ipv6Addr,
        target: Ipv6Addr,
        lladdr: Option<crate::wire::MacAddr>,
    ) -> Verdict {
        let ours = self
            .local_v6
            .iter()
            .any(|(a, i)| *a == target && *i == ctx.iface);
        if !ours {
            return self.drop(DropReason::NdpNotForUs);
        }
        if src.is_unspecified() {
            // Duplicate address detection by a host: nothing to learn, nothing to answer
            // unless it collides with us (it does: we own the target), which RFC 4862 §5.4.3
            // answers with an NA to all-nodes.
            let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
            let my = self
                .macs
                .get(ctx.iface.0 as usize)
                .copied()
                .unwrap_or_default();
            let na = Icmpv6Repr::NeighborAdvert {
                flags: NdpFlags {
                    router: true,
                    solicited: false,
                    override_: true,
                },
                target,
                lladdr: Some(my),
            };
            if self.emit_v6_direct(
                ctx.iface,
                crate::wire::MacAddr::ipv6_multicast(all_nodes),
                target,
                all_nodes,
                255,
                &na,
            ) {
                self.counters.na_sent += 1;
            }
            return self.local();
        }
        let mac = lladdr.unwrap_or(ctx.src_mac);
        let key = (ctx.iface, IpAddr::V6(src));
        if lladdr.is_some()
            && let Some(q) = self.neigh.confirm(now, key, mac, true)
        {
            self.release(key, mac, q);
        }
        let my = self
            .macs
            .get(ctx.iface.0 as usize)
            .copied()
            .unwrap_or_default();
        let na = Icmpv6Repr::NeighborAdvert {
            flags: NdpFlags {
                router: true,
                solicited: true,
                override_: true,
            },
            target,
            lladdr: Some(my),
        };
        if self.emit_v6_direct(ctx.iface, mac, target, src, 255, &na) {
            self.counters.na_sent += 1;
        }
        self.local()
    }
}
