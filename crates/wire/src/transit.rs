//! The transit header: the part of a routed packet that the fast path reads and rewrites.
//!
//! It is the first thing in the ANEP payload of the routed Type IDs (datagram, capsule, PLAN)
//! and has a fixed layout so the fast path touches two fields in place, never the payload:
//!
//! ```text
//!  0       8       16              32
//! +-------+-------+---------------+
//! |version| flags | header length |   header length: bytes (>= 72; later versions append)
//! +-------+-------+---------------+
//! | resource bound|   reserved    |   resource bound: hops left, shared with children
//! +---------------+---------------+
//! |            flow id (64)       |
//! +-------------------------------+
//! |  source (18) | destination (18) | previous hop (18) | pad (2)
//! +-------------------------------+
//! ```
//!
//! Flags: [`FLAG_EVAL_EVERY_HOP`] asks every node on the path to hand the packet to its
//! execution environment (ANTS/PAN capsules); [`FLAG_EE_ROUTE`] asks that the EE's named
//! routing function, not the node's default route, choose the next hop (PLAN's routFun).
//! A packet with neither flag, not addressed to this node, takes the fast path.
//!
//! The resource bound (RB) is a hop budget like an IP TTL and PLAN's RB: every forwarding hop
//! spends one; a packet that arrives with RB 0 and is not for this node dies.

use crate::{NodeAddr, WireError, addr::NODE_ADDR_LEN, util};

/// Transit header version.
pub const VERSION: u8 = 1;
/// Length of a version-1 transit header.
pub const LEN: usize = 72;
/// Flag: evaluate at every hop.
pub const FLAG_EVAL_EVERY_HOP: u8 = 0x01;
/// Flag: the EE's routing function chooses the next hop.
pub const FLAG_EE_ROUTE: u8 = 0x02;

/// Field offsets, for in-place access.
pub mod field {
    /// Version.
    pub const VERSION: usize = 0;
    /// Flags.
    pub const FLAGS: usize = 1;
    /// Header length in bytes.
    pub const HEADER_LEN: usize = 2;
    /// Resource bound.
    pub const RB: usize = 4;
    /// Flow id.
    pub const FLOW: usize = 8;
    /// Source address.
    pub const SRC: usize = 16;
    /// Destination address.
    pub const DST: usize = 34;
    /// Previous hop.
    pub const PREV_HOP: usize = 52;
}

/// A checked view of a transit header at the front of `buf`.
#[derive(Debug)]
pub struct Transit<T: AsRef<[u8]>> {
    buf: T,
    header_len: usize,
}

impl<T: AsRef<[u8]>> Transit<T> {
    /// Validates version and length.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        let version = util::u8_at(b, field::VERSION, "transit header")?;
        if version != VERSION {
            return Err(WireError::UnsupportedVersion {
                what: "transit header",
                found: version,
                supported: VERSION,
            });
        }
        let header_len = usize::from(util::u16_at(b, field::HEADER_LEN, "transit header")?);
        if header_len < LEN {
            return Err(WireError::BadLength {
                what: "transit header length",
                detail: "shorter than the 72-byte version-1 header",
            });
        }
        if b.len() < header_len {
            return Err(WireError::Truncated {
                what: "transit header",
                need: header_len,
                have: b.len(),
            });
        }
        Ok(Transit { buf, header_len })
    }

    /// A view of a header already validated by [`Transit::new_checked`] (whose
    /// `header_len` it was): no check is repeated. The accessors stay bounds-checked, so a
    /// wrong `header_len` gives wrong values, never a panic.
    pub fn new_unchecked(buf: T, header_len: usize) -> Self {
        Transit { buf, header_len }
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Flags.
    pub fn flags(&self) -> u8 {
        util::u8_at(self.b(), field::FLAGS, "").unwrap_or(0)
    }

    /// Header length in bytes; the EE header starts here.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Resource bound.
    pub fn rb(&self) -> u16 {
        util::u16_at(self.b(), field::RB, "").unwrap_or(0)
    }

    /// Flow id.
    pub fn flow(&self) -> u64 {
        util::u64_at(self.b(), field::FLOW, "").unwrap_or(0)
    }

    /// Source.
    pub fn src(&self) -> NodeAddr {
        NodeAddr::read(self.b(), field::SRC).unwrap_or_default()
    }

    /// Destination (PLAN: the evaluation destination).
    pub fn dst(&self) -> NodeAddr {
        NodeAddr::read(self.b(), field::DST).unwrap_or_default()
    }

    /// Previous hop.
    pub fn prev_hop(&self) -> NodeAddr {
        NodeAddr::read(self.b(), field::PREV_HOP).unwrap_or_default()
    }

    /// The bytes after the transit header.
    pub fn rest(&self) -> &[u8] {
        self.b().get(self.header_len..).unwrap_or(&[])
    }

    /// The destination's 18-byte encoding, for lookups without decoding.
    #[inline]
    pub fn dst_raw(&self) -> [u8; NODE_ADDR_LEN] {
        let mut a = [0u8; NODE_ADDR_LEN];
        if let Some(b) = self.b().get(field::DST..field::DST + NODE_ADDR_LEN) {
            a.copy_from_slice(b);
        }
        a
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Transit<T> {
    /// Sets the resource bound in place.
    pub fn set_rb(&mut self, rb: u16) {
        let _ = util::put(self.buf.as_mut(), field::RB, &rb.to_be_bytes());
    }

    /// Sets the previous hop in place.
    pub fn set_prev_hop(&mut self, a: NodeAddr) {
        let _ = a.write(self.buf.as_mut(), field::PREV_HOP);
    }

    /// Sets the previous hop in place from its 18-byte encoding.
    #[inline]
    pub fn set_prev_hop_raw(&mut self, a: &[u8; NODE_ADDR_LEN]) {
        let _ = util::put(self.buf.as_mut(), field::PREV_HOP, a);
    }

    /// Sets the destination in place.
    pub fn set_dst(&mut self, a: NodeAddr) {
        let _ = a.write(self.buf.as_mut(), field::DST);
    }

    /// Sets the flags in place.
    pub fn set_flags(&mut self, f: u8) {
        let _ = util::put(self.buf.as_mut(), field::FLAGS, &[f]);
    }
}

/// The parsed transit header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TransitRepr {
    /// Flags.
    pub flags: u8,
    /// Resource bound (hops left).
    pub rb: u16,
    /// Flow id.
    pub flow: u64,
    /// Source node.
    pub src: NodeAddr,
    /// Destination node.
    pub dst: NodeAddr,
    /// Previous hop (rewritten at every hop).
    pub prev_hop: NodeAddr,
}

impl TransitRepr {
    /// Parses the header at the front of `buf`; returns it and its length.
    pub fn parse(buf: &[u8]) -> Result<(Self, usize), WireError> {
        let t = Transit::new_checked(buf)?;
        Ok((
            TransitRepr {
                flags: t.flags(),
                rb: t.rb(),
                flow: t.flow(),
                src: t.src(),
                dst: t.dst(),
                prev_hop: t.prev_hop(),
            },
            t.header_len(),
        ))
    }

    /// Writes the 72-byte header at the front of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        util::put(buf, 0, &[0u8; LEN])?;
        util::put(buf, field::VERSION, &[VERSION, self.flags])?;
        util::put(buf, field::HEADER_LEN, &(LEN as u16).to_be_bytes())?;
        util::put(buf, field::RB, &self.rb.to_be_bytes())?;
        util::put(buf, field::FLOW, &self.flow.to_be_bytes())?;
        self.src.write(buf, field::SRC)?;
        self.dst.write(buf, field::DST)?;
        self.prev_hop.write(buf, field::PREV_HOP)
    }

    /// The header as a fresh 72-byte vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; LEN];
        // Cannot fail: `v` is exactly LEN bytes.
        let _ = self.emit(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{arb_addr, v4};
    use proptest::prelude::*;

    #[test]
    fn fixture() {
        let r = TransitRepr {
            flags: FLAG_EVAL_EVERY_HOP,
            rb: 16,
            flow: 0x0102030405060708,
            src: v4(198, 18, 0, 1, 3322),
            dst: v4(198, 18, 0, 2, 3322),
            prev_hop: v4(198, 18, 0, 1, 3322),
        };
        let b = r.to_vec();
        assert_eq!(&b[..8], &[1, 1, 0, 72, 0, 16, 0, 0]);
        assert_eq!(&b[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[28..34], &[198, 18, 0, 1, 0x0c, 0xfa]);
        assert_eq!(&b[46..52], &[198, 18, 0, 2, 0x0c, 0xfa]);
        assert_eq!(TransitRepr::parse(&b).unwrap(), (r, LEN));
    }

    #[test]
    fn in_place_updates() {
        let mut b = TransitRepr {
            rb: 3,
            ..Default::default()
        }
        .to_vec();
        b.extend_from_slice(b"payload");
        let mut t = Transit::new_checked(&mut b[..]).unwrap();
        t.set_rb(2);
        t.set_prev_hop(v4(198, 18, 9, 9, 1));
        assert_eq!(t.rb(), 2);
        assert_eq!(t.rest(), b"payload");
        assert_eq!(t.prev_hop(), v4(198, 18, 9, 9, 1));
    }

    #[test]
    fn longer_header_of_same_version_is_accepted() {
        let mut b = TransitRepr::default().to_vec();
        b[3] = 76;
        b.extend_from_slice(&[0xaa; 4]);
        b.extend_from_slice(b"x");
        let t = Transit::new_checked(&b[..]).unwrap();
        assert_eq!(t.rest(), b"x");
    }

    #[test]
    fn malformed() {
        let b = TransitRepr::default().to_vec();
        assert!(matches!(
            Transit::new_checked(&b[..71]),
            Err(WireError::Truncated { .. })
        ));
        let mut c = b.clone();
        c[0] = 9;
        assert!(matches!(
            Transit::new_checked(&c[..]),
            Err(WireError::UnsupportedVersion { .. })
        ));
        let mut c = b;
        c[3] = 8;
        assert!(matches!(
            Transit::new_checked(&c[..]),
            Err(WireError::BadLength { .. })
        ));
    }

    proptest! {
        #[test]
        fn roundtrip(flags in any::<u8>(), rb in any::<u16>(), flow in any::<u64>(),
                     src in arb_addr(), dst in arb_addr(), prev_hop in arb_addr()) {
            let r = TransitRepr { flags, rb, flow, src, dst, prev_hop };
            prop_assert_eq!(TransitRepr::parse(&r.to_vec()).unwrap(), (r, LEN));
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            if let Ok(t) = Transit::new_checked(&bytes[..]) {
                let _ = (t.rb(), t.src(), t.dst(), t.prev_hop(), t.rest());
            }
        }
    }
}
