//! Wire formats of the IP router: Ethernet II (with an 802.1Q tag tolerated), ARP, IPv4,
//! IPv6 (with its extension-header walk), ICMPv4, ICMPv6 (with NDP) and the UDP header.
//!
//! The style is smoltcp's `wire` module:
//! - a *packet view* (`XxxPacket<T: AsRef<[u8]>>`) wraps a buffer; `new_checked` validates
//!   every length the accessors rely on once, so afterwards no accessor can index out of
//!   bounds (accessors on an unchecked view return zeros instead of panicking);
//! - a *representation* (`XxxRepr`) is the parsed, owned meaning of a header, with `parse`
//!   (from a checked view, checksums verified where the protocol has one) and `emit` (into a
//!   buffer of at least `buffer_len()` bytes, checksums filled in);
//! - `parse(emit(x)) == x` for every representation (property tests).
//!
//! All multi-byte fields are big-endian. Nothing here allocates or panics on any input.

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod udp;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddr};
pub use icmpv4::{Icmpv4Packet, Icmpv4Repr};
pub use icmpv6::{Icmpv6Packet, Icmpv6Repr, NdpFlags};
pub use ipv4::{Ipv4Cidr, Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Cidr, Ipv6Packet, Ipv6Repr, UpperLayer};
pub use udp::{UdpPacket, UdpRepr};

/// Why bytes did not parse (or a buffer was too small to emit into).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than the header (or its declared length) needs.
    #[error("{what}: truncated ({len} bytes, need {need})")]
    Truncated {
        /// The header.
        what: &'static str,
        /// Bytes available.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A length field inside the header is impossible (e.g. IPv4 IHL below 5).
    #[error("{what}: bad {field} {value}")]
    BadField {
        /// The header.
        what: &'static str,
        /// The field.
        field: &'static str,
        /// Its value.
        value: u32,
    },
    /// The checksum does not verify.
    #[error("{what}: bad checksum")]
    BadChecksum {
        /// The header.
        what: &'static str,
    },
    /// Well formed but not something this implementation handles (e.g. ARP for a non-IPv4
    /// protocol).
    #[error("{what}: unsupported {field} {value}")]
    Unsupported {
        /// The header.
        what: &'static str,
        /// The field.
        field: &'static str,
        /// Its value.
        value: u32,
    },
}

#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some([x, y]) => u16::from_be_bytes([*x, *y]),
        _ => 0,
    }
}

#[inline]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some([a, c, d, e]) => u32::from_be_bytes([*a, *c, *d, *e]),
        _ => 0,
    }
}

#[inline]
pub(crate) fn byte(b: &[u8], at: usize) -> u8 {
    b.get(at).copied().unwrap_or(0)
}

#[inline]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    if let Some(s) = b.get_mut(at..at + 2) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    if let Some(s) = b.get_mut(at..at + 4) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline]
pub(crate) fn put_bytes(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(s) = b.get_mut(at..at + v.len()) {
        s.copy_from_slice(v);
    }
}

#[inline]
pub(crate) fn put8(b: &mut [u8], at: usize, v: u8) {
    if let Some(s) = b.get_mut(at) {
        *s = v;
    }
}

#[inline]
pub(crate) fn arr<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(s) = b.get(at..at + N) {
        out.copy_from_slice(s);
    }
    out
}

pub(crate) fn need(what: &'static str, len: usize, need: usize) -> Result<(), WireError> {
    if len < need {
        Err(WireError::Truncated { what, len, need })
    } else {
        Ok(())
    }
}
