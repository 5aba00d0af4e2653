//! ARP for IPv4 over Ethernet (RFC 826).
//!
//! ```text
//! 0     2     4    5    6    8     14    18    24    28
//! | htype | ptype | hl | pl | op | sha | spa | tha | tpa |
//! ```
//!
//! Contract: [`ArpPacket::new_checked`] guarantees 28 bytes; [`ArpRepr::parse`] accepts only
//! htype 1 (Ethernet), ptype 0x0800, hlen 6, plen 4 and operations 1 and 2, and returns
//! [`WireError::Unsupported`] for anything else.

use std::net::Ipv4Addr;

use super::{MacAddr, WireError, arr, be16, byte, need, put_bytes, put8, put16};

/// Length of an Ethernet/IPv4 ARP packet.
pub const LEN: usize = 28;

/// ARP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpOperation {
    /// Who has `tpa`?
    Request,
    /// `spa` is at `sha`.
    Reply,
}

/// A checked view of an ARP packet.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps after checking there are 28 bytes.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        need("arp", buffer.as_ref().len(), LEN)?;
        Ok(ArpPacket { buffer })
    }

    /// Hardware type.
    pub fn htype(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    /// Protocol type.
    pub fn ptype(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    /// Hardware address length.
    pub fn hlen(&self) -> u8 {
        byte(self.buffer.as_ref(), 4)
    }
    /// Protocol address length.
    pub fn plen(&self) -> u8 {
        byte(self.buffer.as_ref(), 5)
    }
    /// Operation code.
    pub fn op(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
}

/// An Ethernet/IPv4 ARP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpRepr {
    /// Request or reply.
    pub op: ArpOperation,
    /// Sender hardware address.
    pub sha: MacAddr,
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target hardware address.
    pub tha: MacAddr,
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

impl ArpRepr {
    /// Parses a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> Result<Self, WireError> {
        let bad = |field, value| WireError::Unsupported {
            what: "arp",
            field,
            value,
        };
        if p.htype() != 1 {
            return Err(bad("htype", u32::from(p.htype())));
        }
        if p.ptype() != 0x0800 {
            return Err(bad("ptype", u32::from(p.ptype())));
        }
        if p.hlen() != 6 || p.plen() != 4 {
            return Err(bad("address length", u32::from(p.hlen())));
        }
        let op = match p.op() {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            o => return Err(bad("operation", u32::from(o))),
        };
        let b = p.buffer.as_ref();
        Ok(ArpRepr {
            op,
            sha: MacAddr(arr(b, 8)),
            spa: Ipv4Addr::from(arr::<4>(b, 14)),
            tha: MacAddr(arr(b, 18)),
            tpa: Ipv4Addr::from(arr::<4>(b, 24)),
        })
    }

    /// Bytes [`ArpRepr::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the packet at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        need("arp emit", buf.len(), LEN)?;
        put16(buf, 0, 1);
        put16(buf, 2, 0x0800);
        put8(buf, 4, 6);
        put8(buf, 5, 4);
        put16(
            buf,
            6,
            match self.op {
                ArpOperation::Request => 1,
                ArpOperation::Reply => 2,
            },
        );
        put_bytes(buf, 8, &self.sha.0);
        put_bytes(buf, 14, &self.spa.octets());
        put_bytes(buf, 18, &self.tha.0);
        put_bytes(buf, 24, &self.tpa.octets());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A request from 198.18.1.1 (02:00:00:00:01:01) for 198.18.1.2.
    const REQ: [u8; 28] = [
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 1, 1, 198, 18, 1, 1, 0, 0, 0, 0, 0, 0, 198, 18, 1, 2,
    ];

    #[test]
    fn parses_fixture() {
        let r = ArpRepr::parse(&ArpPacket::new_checked(&REQ[..]).unwrap()).unwrap();
        assert_eq!(r.op, ArpOperation::Request);
        assert_eq!(r.spa, Ipv4Addr::new(198, 18, 1, 1));
        assert_eq!(r.tpa, Ipv4Addr::new(198, 18, 1, 2));
        assert_eq!(r.sha, MacAddr([2, 0, 0, 0, 1, 1]));
        let mut out = [0u8; 28];
        r.emit(&mut out).unwrap();
        assert_eq!(out, REQ);
    }

    #[test]
    fn rejects_other_protocols() {
        let mut b = REQ;
        b[3] = 0x06;
        assert!(ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()).is_err());
        let mut b = REQ;
        b[7] = 3;
        assert!(ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()).is_err());
        assert!(ArpPacket::new_checked(&REQ[..27]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn round_trip(req: bool, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) {
            let r = ArpRepr {
                op: if req { ArpOperation::Request } else { ArpOperation::Reply },
                sha: MacAddr(sha), spa: spa.into(), tha: MacAddr(tha), tpa: tpa.into(),
            };
            let mut b = [0u8; 28];
            r.emit(&mut b).unwrap();
            proptest::prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }
    }
}
