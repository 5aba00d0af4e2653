//! Plain datagrams: routed by the fast path, delivered to an application port at the
//! destination. This is anode's passive service (PAN's "passive forwarding").
//!
//! After the transit header: `port: u16, reserved: u16`, then the payload.

use crate::{WireError, transit::TransitRepr, util};

/// Length of the datagram header after the transit header.
pub const LEN: usize = 4;

/// A parsed datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// Routing fields.
    pub transit: TransitRepr,
    /// Destination application port.
    pub port: u16,
    /// Payload.
    pub payload: Vec<u8>,
}

impl Datagram {
    /// Builds the full ANEP packet.
    pub fn to_packet(&self) -> Result<Vec<u8>, WireError> {
        let h = self.header()?;
        crate::routed_packet(crate::anep::TYPE_DATAGRAM, &self.transit, &h, &self.payload)
    }

    /// Builds the full ANEP packet under another Type ID (an EE module's, which may not run
    /// on every node): [`crate::passable_packet`], so nodes without the EE forward it toward
    /// its destination.
    pub fn to_packet_as(&self, type_id: u16) -> Result<Vec<u8>, WireError> {
        let h = self.header()?;
        crate::passable_packet(type_id, &self.transit, &h, &self.payload)
    }

    /// The datagram header: the port, then zeros.
    fn header(&self) -> Result<[u8; LEN], WireError> {
        let mut h = [0u8; LEN];
        util::put(&mut h, 0, &self.port.to_be_bytes())?;
        Ok(h)
    }

    /// Parses an ANEP payload (transit header onward).
    pub fn parse(anep_payload: &[u8]) -> Result<Self, WireError> {
        let (transit, tl) = TransitRepr::parse(anep_payload)?;
        let (port, payload) = parse_body(anep_payload.get(tl..).unwrap_or(&[]))?;
        Ok(Datagram {
            transit,
            port,
            payload: payload.to_vec(),
        })
    }
}

/// Splits the bytes after the transit header into port and payload.
pub fn parse_body(rest: &[u8]) -> Result<(u16, &[u8]), WireError> {
    let port = util::u16_at(rest, 0, "datagram header")?;
    util::get(rest, 0, LEN, "datagram header")?;
    Ok((port, rest.get(LEN..).unwrap_or(&[])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::v4;
    use proptest::prelude::*;

    #[test]
    fn fixture() {
        let d = Datagram {
            transit: TransitRepr {
                rb: 8,
                src: v4(198, 18, 0, 1, 3322),
                dst: v4(198, 18, 0, 3, 3322),
                ..Default::default()
            },
            port: 7,
            payload: b"hi".to_vec(),
        };
        let pkt = d.to_packet().unwrap();
        // 8 basic + 72 transit + 4 datagram + 2 payload
        assert_eq!(pkt.len(), 86);
        assert_eq!(&pkt[..8], &[1, 0x80, 0x0a, 0x02, 0, 2, 0, 86]);
        assert_eq!(&pkt[80..], &[0, 7, 0, 0, b'h', b'i']);
        let p = crate::anep::AnepPacket::new_checked(&pkt[..]).unwrap();
        assert_eq!(Datagram::parse(p.payload()).unwrap(), d);
        assert!(parse_body(&[0, 7, 0]).is_err());
        // Under an EE module's Type ID: passable where unknown, destination in an option.
        let pkt = d.to_packet_as(0x0A10).unwrap();
        let p = crate::anep::AnepPacket::new_checked(&pkt[..]).unwrap();
        assert_eq!(p.type_id(), 0x0A10);
        assert!(!p.discard_if_unknown());
        assert_eq!(p.destination(), Some(d.transit.dst));
        assert_eq!(Datagram::parse(p.payload()).unwrap(), d);
    }

    proptest! {
        #[test]
        fn roundtrip(port in any::<u16>(), payload in proptest::collection::vec(any::<u8>(), 0..1400)) {
            let d = Datagram { transit: TransitRepr::default(), port, payload };
            let pkt = d.to_packet().unwrap();
            let p = crate::anep::AnepPacket::new_checked(&pkt[..]).unwrap();
            prop_assert_eq!(Datagram::parse(p.payload()).unwrap(), d);
        }
    }
}
