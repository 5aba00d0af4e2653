//! Ethernet II frames, with one 802.1Q (or 802.1ad) tag tolerated.
//!
//! ```text
//! 0      6      12        14 (untagged)        18 (tagged: TPID 0x8100, TCI, EtherType)
//! | dst  | src  | type    | payload ...        | payload ...
//! ```
//!
//! Contract: [`EthernetFrame::new_checked`] guarantees 14 bytes, and 18 when the outer type
//! is a VLAN TPID, so [`EthernetFrame::ethertype`] and [`EthernetFrame::payload_offset`]
//! always describe bytes inside the buffer. The frame check sequence is not part of the
//! buffer (AF_PACKET strips it).

use std::fmt;
use std::str::FromStr;

use super::{WireError, arr, be16, need, put_bytes, put16};

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = 14;
/// Length of an 802.1Q tag.
pub const VLAN_TAG_LEN: usize = 4;

/// EtherType values this crate knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtherType;

impl EtherType {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// 802.1Q VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service tag (QinQ outer).
    pub const QINQ: u16 = 0x88a8;
    /// ANEP directly over Ethernet (IEEE 802 local experimental EtherType 1).
    pub const ANEP: u16 = 0x88b5;
}

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// 00:00:00:00:00:00.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// True for ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True for group addresses (broadcast included).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }

    /// True for an individual (unicast) address other than all-zero.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast() && *self != Self::ZERO
    }

    /// The IPv6 multicast MAC 33:33:xx:xx:xx:xx for a multicast group (RFC 2464 §7).
    pub fn ipv6_multicast(group: std::net::Ipv6Addr) -> MacAddr {
        let o = group.octets();
        MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A MAC address string that is not six colon-separated hex bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a MAC address (want six hex bytes like 02:00:00:00:00:01)")]
pub struct MacParseError(pub String);

impl FromStr for MacAddr {
    type Err = MacParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut n = 0;
        for (i, part) in s.split([':', '-']).enumerate() {
            let slot = out.get_mut(i).ok_or_else(|| MacParseError(s.into()))?;
            if part.len() != 2 {
                return Err(MacParseError(s.into()));
            }
            *slot = u8::from_str_radix(part, 16).map_err(|_| MacParseError(s.into()))?;
            n = i + 1;
        }
        if n != 6 {
            return Err(MacParseError(s.into()));
        }
        Ok(MacAddr(out))
    }
}

/// A checked view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps without checks (accessors then return zeros past the end, never panic).
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps after checking the header (and the VLAN tag, if any) is present.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let f = Self::new_unchecked(buffer);
        let len = f.buffer.as_ref().len();
        need("ethernet", len, HEADER_LEN)?;
        if f.is_tagged() {
            need("ethernet 802.1Q", len, HEADER_LEN + VLAN_TAG_LEN)?;
        }
        Ok(f)
    }

    /// The buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC.
    pub fn dst(&self) -> MacAddr {
        MacAddr(arr(self.buffer.as_ref(), 0))
    }

    /// Source MAC.
    pub fn src(&self) -> MacAddr {
        MacAddr(arr(self.buffer.as_ref(), 6))
    }

    /// The outer EtherType / TPID.
    pub fn outer_type(&self) -> u16 {
        be16(self.buffer.as_ref(), 12)
    }

    /// True if the frame carries one 802.1Q/802.1ad tag.
    pub fn is_tagged(&self) -> bool {
        matches!(self.outer_type(), EtherType::VLAN | EtherType::QINQ)
    }

    /// The VLAN id of a tagged frame.
    pub fn vlan_id(&self) -> Option<u16> {
        self.is_tagged()
            .then(|| be16(self.buffer.as_ref(), 14) & 0x0fff)
    }

    /// The EtherType of the payload (behind the tag, if any).
    pub fn ethertype(&self) -> u16 {
        if self.is_tagged() {
            be16(self.buffer.as_ref(), 16)
        } else {
            self.outer_type()
        }
    }

    /// Where the payload starts: 14, or 18 behind a tag.
    pub fn payload_offset(&self) -> usize {
        if self.is_tagged() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(self.payload_offset()..)
            .unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC.
    pub fn set_dst(&mut self, m: MacAddr) {
        put_bytes(self.buffer.as_mut(), 0, &m.0);
    }

    /// Sets the source MAC.
    pub fn set_src(&mut self, m: MacAddr) {
        put_bytes(self.buffer.as_mut(), 6, &m.0);
    }

    /// Sets the (outer) EtherType.
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buffer.as_mut(), 12, t);
    }
}

/// An untagged Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Source.
    pub src: MacAddr,
    /// Destination.
    pub dst: MacAddr,
    /// Payload EtherType (behind the tag, for a tagged frame).
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Parses a checked frame (a tag, if any, is skipped).
    pub fn parse<T: AsRef<[u8]>>(f: &EthernetFrame<T>) -> Self {
        EthernetRepr {
            src: f.src(),
            dst: f.dst(),
            ethertype: f.ethertype(),
        }
    }

    /// Bytes [`EthernetRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes an untagged header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        need("ethernet emit", buf.len(), HEADER_LEN)?;
        put_bytes(buf, 0, &self.dst.0);
        put_bytes(buf, 6, &self.src.0);
        put16(buf, 12, self.ethertype);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 18] = [
        0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0, 20,
    ];

    #[test]
    fn parses_fixture() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst(), "02:00:00:00:00:02".parse().unwrap());
        assert_eq!(f.src(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(f.ethertype(), EtherType::IPV4);
        assert_eq!(f.payload(), &[0x45, 0, 0, 20]);
        assert_eq!(f.vlan_id(), None);
    }

    #[test]
    fn vlan_tag_is_skipped() {
        let mut b = FRAME[..12].to_vec();
        b.extend_from_slice(&[0x81, 0x00, 0x00, 0x2a, 0x86, 0xdd, 0x60]);
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(f.vlan_id(), Some(42));
        assert_eq!(f.ethertype(), EtherType::IPV6);
        assert_eq!(f.payload_offset(), 18);
        assert!(EthernetFrame::new_checked(&b[..16]).is_err());
    }

    #[test]
    fn truncated_is_error() {
        assert!(EthernetFrame::new_checked(&FRAME[..13]).is_err());
    }

    #[test]
    fn mac_parse_and_kinds() {
        assert!(
            "ff:ff:ff:ff:ff:ff"
                .parse::<MacAddr>()
                .unwrap()
                .is_broadcast()
        );
        assert!(
            "33:33:00:00:00:01"
                .parse::<MacAddr>()
                .unwrap()
                .is_multicast()
        );
        assert!("02:00:00:00:00".parse::<MacAddr>().is_err());
        assert!("02:00:00:00:00:00:01".parse::<MacAddr>().is_err());
        assert!("zz:00:00:00:00:00".parse::<MacAddr>().is_err());
    }

    proptest::proptest! {
        #[test]
        fn repr_round_trip(src: [u8; 6], dst: [u8; 6], t: u16) {
            proptest::prop_assume!(t != EtherType::VLAN && t != EtherType::QINQ);
            let r = EthernetRepr { src: MacAddr(src), dst: MacAddr(dst), ethertype: t };
            let mut b = [0u8; 14];
            r.emit(&mut b).unwrap();
            let f = EthernetFrame::new_checked(&b[..]).unwrap();
            proptest::prop_assert_eq!(EthernetRepr::parse(&f), r);
        }
    }
}
