//! IPv6 headers (RFC 8200), the extension-header walk, and IPv6 prefixes.
//!
//! ```text
//! 0    4            12                    31
//! | 6 | traffic class |     flow label     |
//! |  payload length   | next hdr | hop lim |
//! |        source address (16 bytes)       |
//! |     destination address (16 bytes)     |
//! ```
//!
//! Contract: [`Ipv6Packet::new_checked`] guarantees version 6 and
//! `40 + payload length <= buffer length`; `payload()` is exactly `payload length` bytes
//! (Ethernet padding excluded). Jumbograms (payload length 0 with a hop-by-hop jumbo option)
//! are not supported: such a packet reads as having an empty payload.
//! [`Ipv6Packet::upper_layer`] walks hop-by-hop, routing, fragment, destination options and
//! AH headers (at most [`MAX_EXT_HEADERS`]) and never reads past the payload.

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

use super::{WireError, arr, be16, byte, need, put_bytes, put8, put16, put32};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;
/// The most extension headers [`Ipv6Packet::upper_layer`] walks before giving up.
pub const MAX_EXT_HEADERS: usize = 16;

/// Next-header values of extension headers.
pub mod ext {
    /// Hop-by-hop options.
    pub const HOP_BY_HOP: u8 = 0;
    /// Routing header.
    pub const ROUTING: u8 = 43;
    /// Fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// No next header.
    pub const NONE: u8 = 59;
    /// Destination options.
    pub const DEST_OPTS: u8 = 60;
}

/// Where the upper-layer header of an IPv6 packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpperLayer {
    /// Its protocol number (59 for "no next header").
    pub protocol: u8,
    /// Its offset from the start of the IPv6 header.
    pub offset: usize,
    /// A fragment header was walked and this is not the first fragment (offset != 0): the
    /// bytes at `offset` are not an upper-layer header.
    pub non_first_fragment: bool,
    /// A fragment header was walked.
    pub fragment: bool,
}

/// A checked view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps without checks (accessors then return zeros past the end, never panic).
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps after checking the version and the payload length against the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        need("ipv6", len, HEADER_LEN)?;
        if p.version() != 6 {
            return Err(WireError::BadField {
                what: "ipv6",
                field: "version",
                value: u32::from(p.version()),
            });
        }
        need(
            "ipv6 payload length",
            len,
            HEADER_LEN + usize::from(p.payload_len()),
        )?;
        Ok(p)
    }

    /// The buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Version (6).
    pub fn version(&self) -> u8 {
        byte(self.b(), 0) >> 4
    }
    /// Traffic class.
    pub fn traffic_class(&self) -> u8 {
        ((be16(self.b(), 0) >> 4) & 0xff) as u8
    }
    /// Flow label.
    pub fn flow_label(&self) -> u32 {
        u32::from_be_bytes(arr(self.b(), 0)) & 0x000f_ffff
    }
    /// Payload length.
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), 4)
    }
    /// Next header.
    pub fn next_header(&self) -> u8 {
        byte(self.b(), 6)
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        byte(self.b(), 7)
    }
    /// Source.
    pub fn src(&self) -> Ipv6Addr {
        Ipv6Addr::from(arr::<16>(self.b(), 8))
    }
    /// Destination.
    pub fn dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(arr::<16>(self.b(), 24))
    }
    /// The payload (extension headers included).
    pub fn payload(&self) -> &[u8] {
        self.b()
            .get(HEADER_LEN..HEADER_LEN + usize::from(self.payload_len()))
            .unwrap_or(&[])
    }
    /// Header plus payload, without link padding.
    pub fn packet(&self) -> &[u8] {
        self.b()
            .get(..HEADER_LEN + usize::from(self.payload_len()))
            .unwrap_or(&[])
    }

    /// Walks the extension headers to the upper-layer protocol.
    pub fn upper_layer(&self) -> Result<UpperLayer, WireError> {
        let end = HEADER_LEN + usize::from(self.payload_len());
        let b = self.b();
        let mut nh = self.next_header();
        let mut off = HEADER_LEN;
        let mut fragment = false;
        let mut non_first = false;
        for _ in 0..MAX_EXT_HEADERS {
            let len = match nh {
                ext::HOP_BY_HOP | ext::ROUTING | ext::DEST_OPTS => {
                    need("ipv6 extension header", end.saturating_sub(off), 2)?;
                    (usize::from(byte(b, off + 1)) + 1) * 8
                }
                ext::AH => {
                    need("ipv6 AH", end.saturating_sub(off), 2)?;
                    (usize::from(byte(b, off + 1)) + 2) * 4
                }
                ext::FRAGMENT => {
                    need("ipv6 fragment header", end.saturating_sub(off), 8)?;
                    fragment = true;
                    if be16(b, off + 2) & 0xfff8 != 0 {
                        non_first = true;
                    }
                    8
                }
                p => {
                    return Ok(UpperLayer {
                        protocol: p,
                        offset: off,
                        non_first_fragment: non_first,
                        fragment,
                    });
                }
            };
            need("ipv6 extension header", end.saturating_sub(off), len)?;
            nh = byte(b, off);
            off += len;
            if non_first {
                // What follows a non-first fragment is the middle of some header.
                return Ok(UpperLayer {
                    protocol: nh,
                    offset: off,
                    non_first_fragment: true,
                    fragment,
                });
            }
        }
        Err(WireError::BadField {
            what: "ipv6",
            field: "extension header count",
            value: MAX_EXT_HEADERS as u32,
        })
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the hop limit (IPv6 has no header checksum).
    pub fn set_hop_limit(&mut self, h: u8) {
        put8(self.buffer.as_mut(), 7, h);
    }
}

/// A fixed IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    /// Source.
    pub src: Ipv6Addr,
    /// Destination.
    pub dst: Ipv6Addr,
    /// Next header.
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Payload length.
    pub payload_len: usize,
}

impl Ipv6Repr {
    /// Parses a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Self {
        Ipv6Repr {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            payload_len: usize::from(p.payload_len()),
        }
    }

    /// Bytes [`Ipv6Repr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        need("ipv6 emit", buf.len(), HEADER_LEN)?;
        if self.payload_len > usize::from(u16::MAX) {
            return Err(WireError::BadField {
                what: "ipv6 emit",
                field: "payload length",
                value: self.payload_len as u32,
            });
        }
        let w = (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0xfffff);
        put32(buf, 0, w);
        put16(buf, 4, self.payload_len as u16);
        put8(buf, 6, self.next_header);
        put8(buf, 7, self.hop_limit);
        put_bytes(buf, 8, &self.src.octets());
        put_bytes(buf, 24, &self.dst.octets());
        Ok(())
    }
}

/// The solicited-node multicast group of an address (RFC 4291 §2.7.1).
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The EUI-64 link-local address for a MAC (RFC 4291 appendix A).
pub fn link_local_from_mac(mac: super::MacAddr) -> Ipv6Addr {
    let m = mac.0;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 0x02,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

/// An IPv6 prefix `address/len`; the address may have host bits set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Cidr {
    /// Address.
    pub addr: Ipv6Addr,
    /// Prefix length, 0..=128.
    pub prefix_len: u8,
}

impl Ipv6Cidr {
    /// A prefix; `None` if `prefix_len > 128`.
    pub fn new(addr: Ipv6Addr, prefix_len: u8) -> Option<Self> {
        (prefix_len <= 128).then_some(Ipv6Cidr { addr, prefix_len })
    }
    /// The mask as an integer.
    pub fn mask(&self) -> u128 {
        if self.prefix_len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(self.prefix_len.min(128)))
        }
    }
    /// The network (host bits cleared).
    pub fn network(&self) -> Ipv6Cidr {
        Ipv6Cidr {
            addr: Ipv6Addr::from(u128::from(self.addr) & self.mask()),
            prefix_len: self.prefix_len,
        }
    }
    /// True if `a` is inside the prefix.
    pub fn contains(&self, a: Ipv6Addr) -> bool {
        u128::from(a) & self.mask() == u128::from(self.addr) & self.mask()
    }
}

impl fmt::Display for Ipv6Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// A prefix string that is not `addr/len`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an IPv6 prefix (want e.g. 2001:2:0:1::2/64)")]
pub struct Cidr6ParseError(pub String);

impl FromStr for Ipv6Cidr {
    type Err = Cidr6ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let e = || Cidr6ParseError(s.into());
        let (a, l) = s.split_once('/').ok_or_else(e)?;
        let addr: Ipv6Addr = a.parse().map_err(|_| e())?;
        let len: u8 = l.parse().map_err(|_| e())?;
        Ipv6Cidr::new(addr, len).ok_or_else(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(nh: u8, payload: &[u8]) -> Vec<u8> {
        let r = Ipv6Repr {
            src: "2001:2:0:1::1".parse().unwrap(),
            dst: "2001:2:0:2::2".parse().unwrap(),
            next_header: nh,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0x12345,
            payload_len: payload.len(),
        };
        let mut b = vec![0u8; 40];
        r.emit(&mut b).unwrap();
        b.extend_from_slice(payload);
        b
    }

    #[test]
    fn fixture_bytes() {
        let b = hdr(17, &[0; 8]);
        assert_eq!(&b[..8], &[0x60, 0x01, 0x23, 0x45, 0, 8, 17, 64]);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.upper_layer().unwrap().protocol, 17);
        assert_eq!(p.upper_layer().unwrap().offset, 40);
        assert!(Ipv6Packet::new_checked(&b[..47]).is_err());
    }

    #[test]
    fn ext_walk() {
        // Hop-by-hop (8 bytes, PadN) -> dest opts (16 bytes) -> fragment (first) -> UDP.
        let mut pl = vec![60, 0, 1, 4, 0, 0, 0, 0];
        pl.extend_from_slice(&[44, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        pl.extend_from_slice(&[17, 0, 0, 1, 0, 0, 0, 1]);
        pl.extend_from_slice(&[0; 8]);
        let b = hdr(0, &pl);
        let u = Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!(u.protocol, 17);
        assert_eq!(u.offset, 40 + 8 + 16 + 8);
        assert!(u.fragment && !u.non_first_fragment);
        // Non-first fragment.
        let b = hdr(44, &[17, 0, 0, 8, 0, 0, 0, 1, 0xaa, 0xbb]);
        let u = Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert!(u.non_first_fragment);
        // Extension header longer than the payload.
        let b = hdr(0, &[17, 5, 0, 0, 0, 0, 0, 0]);
        assert!(
            Ipv6Packet::new_checked(&b[..])
                .unwrap()
                .upper_layer()
                .is_err()
        );
        // A chain of too many headers.
        let mut pl = Vec::new();
        for _ in 0..20 {
            pl.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        let b = hdr(60, &pl);
        assert!(
            Ipv6Packet::new_checked(&b[..])
                .unwrap()
                .upper_layer()
                .is_err()
        );
    }

    #[test]
    fn addresses() {
        let a: Ipv6Addr = "2001:2:0:1::2".parse().unwrap();
        assert_eq!(
            solicited_node(a),
            "ff02::1:ff00:2".parse::<Ipv6Addr>().unwrap()
        );
        let ll = link_local_from_mac(super::super::MacAddr([0x02, 0, 0, 0, 0, 1]));
        assert_eq!(ll, "fe80::ff:fe00:1".parse::<Ipv6Addr>().unwrap());
        let c: Ipv6Cidr = "2001:2:0:1::2/64".parse().unwrap();
        assert!(c.contains("2001:2:0:1::99".parse().unwrap()));
        assert!(!c.contains("2001:2:0:2::1".parse().unwrap()));
    }

    proptest::proptest! {
        #[test]
        fn repr_round_trip(src: [u8; 16], dst: [u8; 16], nh: u8, hl: u8, tc: u8,
                           fl in 0u32..0x100000, n in 0usize..64) {
            let r = Ipv6Repr { src: src.into(), dst: dst.into(), next_header: nh, hop_limit: hl,
                               traffic_class: tc, flow_label: fl, payload_len: n };
            let mut b = vec![0u8; 40 + n];
            r.emit(&mut b).unwrap();
            proptest::prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&b[..]).unwrap()), r);
        }

        #[test]
        fn walk_never_panics(nh: u8, pl: Vec<u8>) {
            let b = hdr(nh, &pl);
            let p = Ipv6Packet::new_checked(&b[..]).unwrap();
            if let Ok(u) = p.upper_layer() {
                proptest::prop_assert!(u.offset <= b.len());
            }
        }
    }
}
