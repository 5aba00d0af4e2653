//! UDP headers (RFC 768), enough to recognise ANEP over UDP addressed to the router and to
//! emit the ANEP/UDP datagrams a local node sends.
//!
//! Contract: [`UdpPacket::new_checked`] guarantees 8 bytes and `8 <= length <= buffer`;
//! `payload()` is exactly `length - 8` bytes.

use std::net::IpAddr;

use super::checksum;
use super::{WireError, be16, need, put_bytes, put16};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A checked view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps after checking the header and the length field.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let len = buffer.as_ref().len();
        need("udp", len, HEADER_LEN)?;
        let p = UdpPacket { buffer };
        let l = usize::from(p.len());
        if l < HEADER_LEN {
            return Err(WireError::BadField {
                what: "udp",
                field: "length",
                value: l as u32,
            });
        }
        need("udp length", len, l)?;
        Ok(p)
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    /// Length field (header included).
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }
    /// True if the length field says there is no payload.
    pub fn is_empty(&self) -> bool {
        self.len() as usize <= HEADER_LEN
    }
    /// Checksum field (0: none, IPv4 only).
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
    /// The payload.
    pub fn payload(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(HEADER_LEN..usize::from(self.len()))
            .unwrap_or(&[])
    }
    /// True if the checksum verifies (or is absent over IPv4).
    pub fn verify_checksum(&self, src: IpAddr, dst: IpAddr) -> bool {
        let dgram = self
            .buffer
            .as_ref()
            .get(..usize::from(self.len()))
            .unwrap_or(&[]);
        let ph = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                if self.checksum() == 0 {
                    return true;
                }
                checksum::pseudo_v4(s, d, 17, self.len())
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                if self.checksum() == 0 {
                    return false;
                }
                checksum::pseudo_v6(s, d, 17, u32::from(self.len()))
            }
            _ => return false,
        };
        checksum::combine(&[ph, checksum::sum(dgram)]) == 0xffff
    }
}

/// A UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Parses a checked datagram, verifying the checksum against the pseudo-header.
    pub fn parse<T: AsRef<[u8]>>(
        p: &UdpPacket<T>,
        src: IpAddr,
        dst: IpAddr,
    ) -> Result<Self, WireError> {
        if !p.verify_checksum(src, dst) {
            return Err(WireError::BadChecksum { what: "udp" });
        }
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
        })
    }

    /// Writes header and `payload` into `buf` (at least `8 + payload.len()` bytes), checksum
    /// computed over the pseudo-header of `src`/`dst` (which must be the same family).
    pub fn emit(
        &self,
        buf: &mut [u8],
        src: IpAddr,
        dst: IpAddr,
        payload: &[u8],
    ) -> Result<(), WireError> {
        let n = HEADER_LEN + payload.len();
        need("udp emit", buf.len(), n)?;
        if n > usize::from(u16::MAX) {
            return Err(WireError::BadField {
                what: "udp emit",
                field: "length",
                value: n as u32,
            });
        }
        put16(buf, 0, self.src_port);
        put16(buf, 2, self.dst_port);
        put16(buf, 4, n as u16);
        put16(buf, 6, 0);
        put_bytes(buf, HEADER_LEN, payload);
        let ph = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => checksum::pseudo_v4(s, d, 17, n as u16),
            (IpAddr::V6(s), IpAddr::V6(d)) => checksum::pseudo_v6(s, d, 17, n as u32),
            _ => {
                return Err(WireError::Unsupported {
                    what: "udp emit",
                    field: "address family mix",
                    value: 0,
                });
            }
        };
        let mut c = checksum::finish(checksum::combine(&[
            ph,
            checksum::sum(buf.get(..n).unwrap_or(&[])),
        ]));
        if c == 0 {
            c = 0xffff;
        }
        put16(buf, 6, c);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn round_trip(sp: u16, dp: u16, v6: bool, payload: Vec<u8>) {
            let (s, d): (IpAddr, IpAddr) = if v6 {
                ("2001:2:0:1::1".parse().unwrap(), "2001:2:0:2::1".parse().unwrap())
            } else {
                ("198.18.1.1".parse().unwrap(), "198.18.2.2".parse().unwrap())
            };
            let r = UdpRepr { src_port: sp, dst_port: dp };
            let mut b = vec![0u8; 8 + payload.len()];
            r.emit(&mut b, s, d, &payload).unwrap();
            let p = UdpPacket::new_checked(&b[..]).unwrap();
            proptest::prop_assert_eq!(UdpRepr::parse(&p, s, d).unwrap(), r);
            proptest::prop_assert_eq!(p.payload(), &payload[..]);
            b[0] ^= 0x01;
            let p = UdpPacket::new_checked(&b[..]).unwrap();
            proptest::prop_assert!(UdpRepr::parse(&p, s, d).is_err());
        }
    }

    #[test]
    fn bad_length() {
        assert!(UdpPacket::new_checked(&[0u8, 1, 0, 2, 0, 7, 0, 0][..]).is_err());
        assert!(UdpPacket::new_checked(&[0u8, 1, 0, 2, 0, 9, 0, 0][..]).is_err());
        assert!(UdpPacket::new_checked(&[0u8, 1, 0, 2, 0, 8, 0, 0][..]).is_ok());
    }
}
