//! ICMPv6 (RFC 4443) and the neighbor discovery messages a router needs (RFC 4861 §4.3,
//! §4.4: neighbor solicitation and advertisement, with the link-layer address options).
//!
//! ```text
//! 0      8      16          31
//! | type | code | checksum   |   checksum over the IPv6 pseudo-header and the message
//! | rest of header (4 bytes) |   echo: ident, seq; PTB: MTU; param problem: pointer;
//! | body ...                 |   NS/NA: reserved/flags, then a 16-byte target and options
//! ```
//!
//! Contract: [`Icmpv6Packet::new_checked`] guarantees 8 bytes. [`Icmpv6Repr::parse`]
//! verifies the checksum against the pseudo-header of the given source and destination,
//! checks NS/NA lengths and walks their options (an option of length 0 is an error, RFC
//! 4861 §4.6), and never reads past the message.

use std::net::Ipv6Addr;

use super::checksum;
use super::{MacAddr, WireError, arr, be16, be32, byte, need, put_bytes, put8, put16, put32};

/// Length of the ICMPv6 header.
pub const HEADER_LEN: usize = 8;

/// Message types.
pub mod kind {
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Router solicitation.
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router advertisement.
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbor solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
}

/// Destination-unreachable codes.
pub mod unreach {
    /// No route to destination.
    pub const NO_ROUTE: u8 = 0;
    /// Administratively prohibited.
    pub const ADMIN_PROHIBITED: u8 = 1;
    /// Beyond scope of source address.
    pub const BEYOND_SCOPE: u8 = 2;
    /// Address unreachable.
    pub const ADDRESS: u8 = 3;
    /// Port unreachable.
    pub const PORT: u8 = 4;
}

/// Neighbor advertisement flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NdpFlags {
    /// R: the sender is a router.
    pub router: bool,
    /// S: sent in response to a solicitation.
    pub solicited: bool,
    /// O: override an existing cache entry.
    pub override_: bool,
}

/// A checked view of an ICMPv6 message.
#[derive(Debug, Clone)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wraps after checking the 8-byte header is present.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        need("icmpv6", buffer.as_ref().len(), HEADER_LEN)?;
        Ok(Icmpv6Packet { buffer })
    }
    /// Type.
    pub fn msg_type(&self) -> u8 {
        byte(self.buffer.as_ref(), 0)
    }
    /// Code.
    pub fn code(&self) -> u8 {
        byte(self.buffer.as_ref(), 1)
    }
    /// True if the checksum verifies for this source and destination.
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_v6(src, dst, 58, b.len() as u32);
        checksum::combine(&[ph, checksum::sum(b)]) == 0xffff
    }
}

/// An ICMPv6 message the router sends or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Echo request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Destination unreachable.
    DstUnreachable {
        /// Code.
        code: u8,
        /// As much of the invoking packet as fits.
        data: &'a [u8],
    },
    /// Packet too big.
    PacketTooBig {
        /// The MTU of the next-hop link.
        mtu: u32,
        /// As much of the invoking packet as fits.
        data: &'a [u8],
    },
    /// Time exceeded (0: hop limit, 1: reassembly).
    TimeExceeded {
        /// Code.
        code: u8,
        /// As much of the invoking packet as fits.
        data: &'a [u8],
    },
    /// Parameter problem.
    ParamProblem {
        /// Code.
        code: u8,
        /// Offset of the offending byte.
        pointer: u32,
        /// As much of the invoking packet as fits.
        data: &'a [u8],
    },
    /// Neighbor solicitation.
    NeighborSolicit {
        /// The address asked about.
        target: Ipv6Addr,
        /// Source link-layer address option.
        lladdr: Option<MacAddr>,
    },
    /// Neighbor advertisement.
    NeighborAdvert {
        /// Flags.
        flags: NdpFlags,
        /// The address advertised.
        target: Ipv6Addr,
        /// Target link-layer address option.
        lladdr: Option<MacAddr>,
    },
}

/// Walks NDP options (RFC 4861 §4.6) and returns the Ethernet address of option `want`
/// (1: source, 2: target link-layer address).
fn ndp_lladdr(opts: &[u8], want: u8) -> Result<Option<MacAddr>, WireError> {
    let mut i = 0;
    let mut found = None;
    while i < opts.len() {
        need("ndp option", opts.len() - i, 2)?;
        let t = byte(opts, i);
        let l = usize::from(byte(opts, i + 1)) * 8;
        if l == 0 {
            return Err(WireError::BadField {
                what: "ndp option",
                field: "length",
                value: 0,
            });
        }
        need("ndp option", opts.len() - i, l)?;
        if t == want && l == 8 {
            found = Some(MacAddr(arr(opts, i + 2)));
        }
        i += l;
    }
    Ok(found)
}

impl<'a> Icmpv6Repr<'a> {
    /// Parses a checked message, verifying the checksum against `src`/`dst`.
    pub fn parse(
        p: &Icmpv6Packet<&'a [u8]>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) -> Result<Self, WireError> {
        if !p.verify_checksum(src, dst) {
            return Err(WireError::BadChecksum { what: "icmpv6" });
        }
        let b: &'a [u8] = p.buffer;
        let data = b.get(HEADER_LEN..).unwrap_or(&[]);
        Ok(match p.msg_type() {
            kind::ECHO_REQUEST => Icmpv6Repr::EchoRequest {
                ident: be16(b, 4),
                seq: be16(b, 6),
                data,
            },
            kind::ECHO_REPLY => Icmpv6Repr::EchoReply {
                ident: be16(b, 4),
                seq: be16(b, 6),
                data,
            },
            kind::DST_UNREACHABLE => Icmpv6Repr::DstUnreachable {
                code: p.code(),
                data,
            },
            kind::PACKET_TOO_BIG => Icmpv6Repr::PacketTooBig {
                mtu: be32(b, 4),
                data,
            },
            kind::TIME_EXCEEDED => Icmpv6Repr::TimeExceeded {
                code: p.code(),
                data,
            },
            kind::PARAM_PROBLEM => Icmpv6Repr::ParamProblem {
                code: p.code(),
                pointer: be32(b, 4),
                data,
            },
            kind::NEIGHBOR_SOLICIT | kind::NEIGHBOR_ADVERT => {
                need("ndp", b.len(), 24)?;
                if p.code() != 0 {
                    return Err(WireError::BadField {
                        what: "ndp",
                        field: "code",
                        value: u32::from(p.code()),
                    });
                }
                let target = Ipv6Addr::from(arr::<16>(b, 8));
                let opts = b.get(24..).unwrap_or(&[]);
                if p.msg_type() == kind::NEIGHBOR_SOLICIT {
                    Icmpv6Repr::NeighborSolicit {
                        target,
                        lladdr: ndp_lladdr(opts, 1)?,
                    }
                } else {
                    let f = byte(b, 4);
                    Icmpv6Repr::NeighborAdvert {
                        flags: NdpFlags {
                            router: f & 0x80 != 0,
                            solicited: f & 0x40 != 0,
                            override_: f & 0x20 != 0,
                        },
                        target,
                        lladdr: ndp_lladdr(opts, 2)?,
                    }
                }
            }
            t => {
                return Err(WireError::Unsupported {
                    what: "icmpv6",
                    field: "type",
                    value: u32::from(t),
                });
            }
        })
    }

    /// Bytes [`Icmpv6Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::EchoRequest { data, .. }
            | Icmpv6Repr::EchoReply { data, .. }
            | Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PacketTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. }
            | Icmpv6Repr::ParamProblem { data, .. } => HEADER_LEN + data.len(),
            Icmpv6Repr::NeighborSolicit { lladdr, .. }
            | Icmpv6Repr::NeighborAdvert { lladdr, .. } => {
                24 + if lladdr.is_some() { 8 } else { 0 }
            }
        }
    }

    /// Writes the message at the start of `buf`, checksum computed for `src`/`dst`.
    pub fn emit(&self, buf: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) -> Result<(), WireError> {
        let n = self.buffer_len();
        need("icmpv6 emit", buf.len(), n)?;
        if let Some(h) = buf.get_mut(..HEADER_LEN) {
            h.fill(0);
        }
        let (t, code, rest, data): (u8, u8, u32, &[u8]) = match *self {
            Icmpv6Repr::EchoRequest { ident, seq, data } => (
                kind::ECHO_REQUEST,
                0,
                (u32::from(ident) << 16) | u32::from(seq),
                data,
            ),
            Icmpv6Repr::EchoReply { ident, seq, data } => (
                kind::ECHO_REPLY,
                0,
                (u32::from(ident) << 16) | u32::from(seq),
                data,
            ),
            Icmpv6Repr::DstUnreachable { code, data } => (kind::DST_UNREACHABLE, code, 0, data),
            Icmpv6Repr::PacketTooBig { mtu, data } => (kind::PACKET_TOO_BIG, 0, mtu, data),
            Icmpv6Repr::TimeExceeded { code, data } => (kind::TIME_EXCEEDED, code, 0, data),
            Icmpv6Repr::ParamProblem {
                code,
                pointer,
                data,
            } => (kind::PARAM_PROBLEM, code, pointer, data),
            Icmpv6Repr::NeighborSolicit { target, lladdr } => {
                put_bytes(buf, 8, &target.octets());
                if let Some(m) = lladdr {
                    put8(buf, 24, 1);
                    put8(buf, 25, 1);
                    put_bytes(buf, 26, &m.0);
                }
                (kind::NEIGHBOR_SOLICIT, 0, 0, &[])
            }
            Icmpv6Repr::NeighborAdvert {
                flags,
                target,
                lladdr,
            } => {
                put_bytes(buf, 8, &target.octets());
                if let Some(m) = lladdr {
                    put8(buf, 24, 2);
                    put8(buf, 25, 1);
                    put_bytes(buf, 26, &m.0);
                }
                let f = (u32::from(flags.router) << 31)
                    | (u32::from(flags.solicited) << 30)
                    | (u32::from(flags.override_) << 29);
                (kind::NEIGHBOR_ADVERT, 0, f, &[])
            }
        };
        put8(buf, 0, t);
        put8(buf, 1, code);
        put32(buf, 4, rest);
        put_bytes(buf, HEADER_LEN, data);
        let ph = checksum::pseudo_v6(src, dst, 58, n as u32);
        let c = checksum::finish(checksum::combine(&[
            ph,
            checksum::sum(buf.get(..n).unwrap_or(&[])),
        ]));
        put16(buf, 2, c);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs() -> (Ipv6Addr, Ipv6Addr) {
        (
            "fe80::1".parse().unwrap(),
            "ff02::1:ff00:2".parse().unwrap(),
        )
    }

    #[test]
    fn ns_fixture() {
        let (s, d) = addrs();
        let r = Icmpv6Repr::NeighborSolicit {
            target: "2001:2:0:1::2".parse().unwrap(),
            lladdr: Some(MacAddr([2, 0, 0, 0, 0, 1])),
        };
        let mut b = [0u8; 32];
        r.emit(&mut b, s, d).unwrap();
        assert_eq!(b[0], 135);
        assert_eq!(&b[24..32], &[1, 1, 2, 0, 0, 0, 0, 1]);
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum(s, d));
        assert_eq!(Icmpv6Repr::parse(&p, s, d).unwrap(), r);
        // Wrong pseudo-header: bad checksum.
        assert!(Icmpv6Repr::parse(&p, "fe80::2".parse().unwrap(), d).is_err());
    }

    #[test]
    fn zero_length_option_rejected() {
        let (s, d) = addrs();
        let r = Icmpv6Repr::NeighborSolicit {
            target: "2001:2::2".parse().unwrap(),
            lladdr: Some(MacAddr([2, 0, 0, 0, 0, 1])),
        };
        let mut b = [0u8; 32];
        r.emit(&mut b, s, d).unwrap();
        b[25] = 0;
        // Recompute the checksum so only the option is wrong.
        b[2] = 0;
        b[3] = 0;
        let ph = checksum::pseudo_v6(s, d, 58, 32);
        let c = checksum::finish(checksum::combine(&[ph, checksum::sum(&b)]));
        b[2..4].copy_from_slice(&c.to_be_bytes());
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert!(matches!(
            Icmpv6Repr::parse(&p, s, d),
            Err(WireError::BadField { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn round_trip(which in 0u8..8, a: u16, b: u16, code: u8, x: u32, t: [u8; 16],
                      m: Option<[u8; 6]>, fl in 0u8..8, data: Vec<u8>) {
            let target = Ipv6Addr::from(t);
            let lladdr = m.map(MacAddr);
            let r = match which {
                0 => Icmpv6Repr::EchoRequest { ident: a, seq: b, data: &data },
                1 => Icmpv6Repr::EchoReply { ident: a, seq: b, data: &data },
                2 => Icmpv6Repr::DstUnreachable { code, data: &data },
                3 => Icmpv6Repr::PacketTooBig { mtu: x, data: &data },
                4 => Icmpv6Repr::TimeExceeded { code, data: &data },
                5 => Icmpv6Repr::ParamProblem { code, pointer: x, data: &data },
                6 => Icmpv6Repr::NeighborSolicit { target, lladdr },
                _ => Icmpv6Repr::NeighborAdvert {
                    flags: NdpFlags { router: fl & 1 != 0, solicited: fl & 2 != 0, override_: fl & 4 != 0 },
                    target, lladdr },
            };
            let (s, d) = addrs();
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf, s, d).unwrap();
            let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
            proptest::prop_assert_eq!(Icmpv6Repr::parse(&p, s, d).unwrap(), r);
        }
    }
}
