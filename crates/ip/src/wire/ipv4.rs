//! IPv4 headers (RFC 791), options walk, and IPv4 prefixes.
//!
//! ```text
//! 0       4       8              16      19             31
//! | ver | IHL | DSCP/ECN |      total length             |
//! |     identification   | flags |  fragment offset      |
//! |  TTL  |  protocol    |      header checksum          |
//! |                source address                        |
//! |              destination address                     |
//! |           options (IHL > 5) ...                      |
//! ```
//!
//! Contract: [`Ipv4Packet::new_checked`] guarantees version 4, `IHL >= 5`,
//! `IHL*4 <= total length <= buffer length`; so the header, its options and
//! `payload()` (exactly `total length - IHL*4` bytes: Ethernet padding is excluded) are all
//! inside the buffer. It does *not* verify the checksum: call
//! [`Ipv4Packet::verify_checksum`] (the router does, RFC 1812 §5.2.2).
//! [`Ipv4Repr`] describes option-free headers; [`Ipv4Repr::parse`] ignores options.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use super::checksum;
use super::{WireError, arr, be16, byte, need, put_bytes, put8, put16};

/// Length of an option-free header.
pub const HEADER_LEN: usize = 20;
/// Protocol numbers.
pub mod proto {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// ICMPv6 (as an IPv6 next header).
    pub const ICMPV6: u8 = 58;
}

/// A checked view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps without checks (accessors then return zeros past the end, never panic).
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps after checking version and every length field against the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let p = Self::new_unchecked(buffer);
        let len = p.buffer.as_ref().len();
        need("ipv4", len, HEADER_LEN)?;
        if p.version() != 4 {
            return Err(WireError::BadField {
                what: "ipv4",
                field: "version",
                value: u32::from(p.version()),
            });
        }
        let hl = p.header_len();
        if hl < HEADER_LEN {
            return Err(WireError::BadField {
                what: "ipv4",
                field: "IHL",
                value: hl as u32 / 4,
            });
        }
        let tl = usize::from(p.total_len());
        if tl < hl {
            return Err(WireError::BadField {
                what: "ipv4",
                field: "total length",
                value: tl as u32,
            });
        }
        need("ipv4 total length", len, tl)?;
        Ok(p)
    }

    /// The buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Version (4).
    pub fn version(&self) -> u8 {
        byte(self.b(), 0) >> 4
    }
    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        usize::from(byte(self.b(), 0) & 0x0f) * 4
    }
    /// DSCP and ECN.
    pub fn tos(&self) -> u8 {
        byte(self.b(), 1)
    }
    /// Total length.
    pub fn total_len(&self) -> u16 {
        be16(self.b(), 2)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.b(), 4)
    }
    /// Don't Fragment.
    pub fn dont_frag(&self) -> bool {
        byte(self.b(), 6) & 0x40 != 0
    }
    /// More Fragments.
    pub fn more_frags(&self) -> bool {
        byte(self.b(), 6) & 0x20 != 0
    }
    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> usize {
        usize::from(be16(self.b(), 6) & 0x1fff) * 8
    }
    /// True for any fragment (MF set or a non-zero offset).
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        byte(self.b(), 8)
    }
    /// Protocol.
    pub fn protocol(&self) -> u8 {
        byte(self.b(), 9)
    }
    /// Header checksum.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 10)
    }
    /// Source.
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::from(arr::<4>(self.b(), 12))
    }
    /// Destination.
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::from(arr::<4>(self.b(), 16))
    }
    /// The options bytes (empty when IHL is 5).
    pub fn options(&self) -> &[u8] {
        self.b().get(HEADER_LEN..self.header_len()).unwrap_or(&[])
    }
    /// The header (with options).
    pub fn header(&self) -> &[u8] {
        self.b().get(..self.header_len()).unwrap_or(&[])
    }
    /// The payload: `total length - header length` bytes.
    pub fn payload(&self) -> &[u8] {
        self.b()
            .get(self.header_len()..usize::from(self.total_len()))
            .unwrap_or(&[])
    }
    /// True if the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.header()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the TTL (checksum untouched).
    pub fn set_ttl(&mut self, ttl: u8) {
        put8(self.buffer.as_mut(), 8, ttl);
    }

    /// Decrements the TTL and updates the header checksum incrementally (RFC 1624 eqn. 3):
    /// the TTL shares a 16-bit word with the protocol. The caller has checked `ttl() > 0`.
    pub fn decrement_ttl(&mut self) {
        let ttl = self.ttl();
        let p = self.protocol();
        let old = u16::from_be_bytes([ttl, p]);
        let new = u16::from_be_bytes([ttl.wrapping_sub(1), p]);
        let c = checksum::update(self.checksum(), old, new);
        self.set_ttl(ttl.wrapping_sub(1));
        put16(self.buffer.as_mut(), 10, c);
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        put16(self.buffer.as_mut(), 10, 0);
        let c = checksum::finish(checksum::sum(self.header()));
        put16(self.buffer.as_mut(), 10, c);
    }

    /// Sets the flags and fragment offset word (`offset` in bytes, a multiple of 8).
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset: usize) {
        let mut w = ((offset / 8) as u16) & 0x1fff;
        if dont_frag {
            w |= 0x4000;
        }
        if more_frags {
            w |= 0x2000;
        }
        put16(self.buffer.as_mut(), 6, w);
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, len: u16) {
        put16(self.buffer.as_mut(), 2, len);
    }
}

/// What the options of a header say, as far as a router cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OptionsSummary {
    /// A loose or strict source route option (LSRR 131 / SSRR 137) is present.
    pub source_route: bool,
    /// Bytes of the options that must be copied into every fragment (copied flag set),
    /// rounded up to a multiple of 4 when used.
    pub copied_len: usize,
}

/// Walks the options of a header. `Err(offset)` gives the offset (from the start of the IP
/// header) of the first malformed option, for an ICMP parameter problem pointer.
pub fn check_options(options: &[u8]) -> Result<OptionsSummary, usize> {
    let mut s = OptionsSummary::default();
    let mut i = 0;
    while let Some(&t) = options.get(i) {
        match t {
            0 => break,
            1 => i += 1,
            _ => {
                let Some(&l) = options.get(i + 1) else {
                    return Err(HEADER_LEN + i);
                };
                let l = usize::from(l);
                if l < 2 || i + l > options.len() {
                    return Err(HEADER_LEN + i + 1);
                }
                if t == 131 || t == 137 {
                    s.source_route = true;
                }
                if t & 0x80 != 0 {
                    s.copied_len += l;
                }
                i += l;
            }
        }
    }
    Ok(s)
}

/// Copies the options with the copied flag set into `out` (for fragments after the first),
/// pads with End-of-Options to a multiple of 4, and returns the length written.
pub fn copy_copied_options(options: &[u8], out: &mut [u8]) -> usize {
    let mut i = 0;
    let mut n = 0;
    while let Some(&t) = options.get(i) {
        match t {
            0 => break,
            1 => i += 1,
            _ => {
                let l = usize::from(options.get(i + 1).copied().unwrap_or(0)).max(2);
                if t & 0x80 != 0
                    && let (Some(src), Some(dst)) = (options.get(i..i + l), out.get_mut(n..n + l))
                {
                    dst.copy_from_slice(src);
                    n += l;
                }
                i += l;
            }
        }
    }
    while n % 4 != 0 {
        put8(out, n, 0);
        n += 1;
    }
    n
}

/// An option-free IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source.
    pub src: Ipv4Addr,
    /// Destination.
    pub dst: Ipv4Addr,
    /// Protocol.
    pub protocol: u8,
    /// Time to live.
    pub ttl: u8,
    /// DSCP/ECN.
    pub tos: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
    /// Payload length.
    pub payload_len: usize,
}

impl Ipv4Repr {
    /// Parses a checked packet, verifying the header checksum. Options are skipped;
    /// fragments are refused.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Self, WireError> {
        if !p.verify_checksum() {
            return Err(WireError::BadChecksum { what: "ipv4" });
        }
        if p.is_fragment() {
            return Err(WireError::Unsupported {
                what: "ipv4",
                field: "fragment offset",
                value: p.frag_offset() as u32,
            });
        }
        Ok(Ipv4Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            ttl: p.ttl(),
            tos: p.tos(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            payload_len: p.payload().len(),
        })
    }

    /// Bytes [`Ipv4Repr::emit`] writes (the header only).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header (checksum filled) at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        need("ipv4 emit", buf.len(), HEADER_LEN)?;
        let total = HEADER_LEN + self.payload_len;
        if total > usize::from(u16::MAX) {
            return Err(WireError::BadField {
                what: "ipv4 emit",
                field: "total length",
                value: total as u32,
            });
        }
        put8(buf, 0, 0x45);
        put8(buf, 1, self.tos);
        put16(buf, 2, total as u16);
        put16(buf, 4, self.ident);
        put16(buf, 6, if self.dont_frag { 0x4000 } else { 0 });
        put8(buf, 8, self.ttl);
        put8(buf, 9, self.protocol);
        put16(buf, 10, 0);
        put_bytes(buf, 12, &self.src.octets());
        put_bytes(buf, 16, &self.dst.octets());
        let c = checksum::finish(checksum::sum(buf.get(..HEADER_LEN).unwrap_or(&[])));
        put16(buf, 10, c);
        Ok(())
    }
}

/// An IPv4 prefix `address/len`; the address may have host bits set (an interface address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    /// Address.
    pub addr: Ipv4Addr,
    /// Prefix length, 0..=32.
    pub prefix_len: u8,
}

impl Ipv4Cidr {
    /// A prefix; `None` if `prefix_len > 32`.
    pub fn new(addr: Ipv4Addr, prefix_len: u8) -> Option<Self> {
        (prefix_len <= 32).then_some(Ipv4Cidr { addr, prefix_len })
    }
    /// The netmask as an integer.
    pub fn mask(&self) -> u32 {
        if self.prefix_len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix_len.min(32)))
        }
    }
    /// The network (host bits cleared).
    pub fn network(&self) -> Ipv4Cidr {
        Ipv4Cidr {
            addr: Ipv4Addr::from(u32::from(self.addr) & self.mask()),
            prefix_len: self.prefix_len,
        }
    }
    /// True if `a` is inside the prefix.
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        u32::from(a) & self.mask() == u32::from(self.addr) & self.mask()
    }
    /// The directed broadcast address of the prefix.
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) | !self.mask())
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// A prefix string that is not `a.b.c.d/len`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an IPv4 prefix (want e.g. 198.18.1.2/24)")]
pub struct CidrParseError(pub String);

impl FromStr for Ipv4Cidr {
    type Err = CidrParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let e = || CidrParseError(s.into());
        let (a, l) = s.split_once('/').ok_or_else(e)?;
        let addr: Ipv4Addr = a.parse().map_err(|_| e())?;
        let len: u8 = l.parse().map_err(|_| e())?;
        Ipv4Cidr::new(addr, len).ok_or_else(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 198.18.1.1 -> 198.18.2.2, UDP, TTL 64, DF, 28 bytes total; checksum 0x9975 computed
    // independently (RFC 1071 by hand).
    fn fixture() -> Vec<u8> {
        let r = Ipv4Repr {
            src: Ipv4Addr::new(198, 18, 1, 1),
            dst: Ipv4Addr::new(198, 18, 2, 2),
            protocol: proto::UDP,
            ttl: 64,
            tos: 0,
            ident: 0x1234,
            dont_frag: true,
            payload_len: 8,
        };
        let mut b = vec![0u8; 28];
        r.emit(&mut b).unwrap();
        b
    }

    #[test]
    fn emits_known_bytes() {
        let b = fixture();
        assert_eq!(
            &b[..20],
            &[
                0x45, 0, 0, 28, 0x12, 0x34, 0x40, 0, 64, 17, 0x99, 0x75, 198, 18, 1, 1, 198, 18, 2,
                2
            ]
        );
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 8);
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut b = fixture();
        for _ in 0..64 {
            let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
            p.decrement_ttl();
            assert!(p.verify_checksum());
        }
        assert_eq!(b[8], 0);
    }

    #[test]
    fn bad_lengths() {
        let b = fixture();
        assert!(Ipv4Packet::new_checked(&b[..19]).is_err());
        assert!(Ipv4Packet::new_checked(&b[..27]).is_err()); // total length 28
        let mut x = b.clone();
        x[0] = 0x44;
        assert!(Ipv4Packet::new_checked(&x[..]).is_err());
        let mut x = b.clone();
        x[0] = 0x65;
        assert!(Ipv4Packet::new_checked(&x[..]).is_err());
        let mut x = b.clone();
        x[3] = 16;
        assert!(Ipv4Packet::new_checked(&x[..]).is_err());
        let mut x = b;
        x[10] ^= 1;
        let p = Ipv4Packet::new_checked(&x[..]).unwrap();
        assert_eq!(
            Ipv4Repr::parse(&p),
            Err(WireError::BadChecksum { what: "ipv4" })
        );
    }

    #[test]
    fn padding_excluded_from_payload() {
        let mut b = fixture();
        b.extend_from_slice(&[0xee; 18]);
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload().len(), 8);
    }

    #[test]
    fn options_walk() {
        assert_eq!(check_options(&[1, 1, 1, 0]), Ok(OptionsSummary::default()));
        // Record route (7), len 7, pointer 4, then EOL.
        let rr = [7, 7, 4, 0, 0, 0, 0, 0];
        assert!(!check_options(&rr).unwrap().source_route);
        // LSRR.
        let lsrr = [131, 7, 4, 1, 2, 3, 4, 0];
        let s = check_options(&lsrr).unwrap();
        assert!(s.source_route);
        assert_eq!(s.copied_len, 7);
        let mut out = [0u8; 40];
        assert_eq!(copy_copied_options(&lsrr, &mut out), 8);
        assert_eq!(&out[..7], &lsrr[..7]);
        // Length running past the end, and length < 2.
        assert_eq!(check_options(&[7, 9, 4, 0]), Err(21));
        assert_eq!(check_options(&[1, 7, 1, 0]), Err(22));
        assert_eq!(check_options(&[1, 1, 1, 7]), Err(23));
    }

    #[test]
    fn cidr() {
        let c: Ipv4Cidr = "198.18.1.2/24".parse().unwrap();
        assert!(c.contains(Ipv4Addr::new(198, 18, 1, 200)));
        assert!(!c.contains(Ipv4Addr::new(198, 18, 2, 1)));
        assert_eq!(c.network().addr, Ipv4Addr::new(198, 18, 1, 0));
        assert_eq!(c.broadcast(), Ipv4Addr::new(198, 18, 1, 255));
        assert!(
            "0.0.0.0/0"
                .parse::<Ipv4Cidr>()
                .unwrap()
                .contains(Ipv4Addr::BROADCAST)
        );
        assert!("1.2.3.4/33".parse::<Ipv4Cidr>().is_err());
    }

    proptest::proptest! {
        #[test]
        fn repr_round_trip(src: [u8; 4], dst: [u8; 4], protocol: u8, ttl: u8, tos: u8,
                           ident: u16, df: bool, payload_len in 0usize..100) {
            let r = Ipv4Repr { src: src.into(), dst: dst.into(), protocol, ttl, tos, ident,
                               dont_frag: df, payload_len };
            let mut b = vec![0u8; 20 + payload_len];
            r.emit(&mut b).unwrap();
            let p = Ipv4Packet::new_checked(&b[..]).unwrap();
            proptest::prop_assert_eq!(Ipv4Repr::parse(&p).unwrap(), r);
        }

        #[test]
        fn never_panics(b: Vec<u8>) {
            if let Ok(p) = Ipv4Packet::new_checked(&b[..]) {
                let _ = Ipv4Repr::parse(&p);
                let _ = check_options(p.options());
                let _ = p.payload();
            }
        }
    }
}
