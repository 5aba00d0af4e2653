//! ICMPv4 (RFC 792, RFC 1191 for "fragmentation needed" with the next-hop MTU).
//!
//! ```text
//! 0      8      16          31
//! | type | code | checksum   |
//! | rest of header (4 bytes) |   echo: ident, seq; unreachable: unused, next-hop MTU;
//! | data ...                 |   parameter problem: pointer
//! ```
//!
//! Contract: [`Icmpv4Packet::new_checked`] guarantees 8 bytes. [`Icmpv4Repr::parse`]
//! verifies the checksum over the whole message. Error messages carry the invoking
//! packet's IP header and leading payload as `data` (the caller bounds it).

use super::checksum;
use super::{WireError, be16, byte, need, put_bytes, put8, put16};

/// Length of the ICMP header.
pub const HEADER_LEN: usize = 8;

/// Message types.
pub mod kind {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 3;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 12;
}

/// Destination-unreachable codes.
pub mod unreach {
    /// Net unreachable.
    pub const NET: u8 = 0;
    /// Host unreachable.
    pub const HOST: u8 = 1;
    /// Protocol unreachable.
    pub const PROTOCOL: u8 = 2;
    /// Port unreachable.
    pub const PORT: u8 = 3;
    /// Fragmentation needed and DF set.
    pub const FRAG_NEEDED: u8 = 4;
    /// Source route failed.
    pub const SOURCE_ROUTE_FAILED: u8 = 5;
    /// Communication administratively prohibited (RFC 1812).
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// A checked view of an ICMPv4 message.
#[derive(Debug, Clone)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps after checking the 8-byte header is present.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        need("icmpv4", buffer.as_ref().len(), HEADER_LEN)?;
        Ok(Icmpv4Packet { buffer })
    }
    /// Type.
    pub fn msg_type(&self) -> u8 {
        byte(self.buffer.as_ref(), 0)
    }
    /// Code.
    pub fn code(&self) -> u8 {
        byte(self.buffer.as_ref(), 1)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    /// True if the checksum over the whole message verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.buffer.as_ref()) == 0xffff
    }
    /// Echo identifier.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }
    /// Echo sequence number.
    pub fn seq(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
    /// Bytes after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[])
    }
}

/// An ICMPv4 message the router sends or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Echo request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq: u16,
        /// Data echoed back.
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
    /// Destination unreachable; `mtu` is the next-hop MTU for code 4 (else 0).
    DstUnreachable {
        /// Code.
        code: u8,
        /// Next-hop MTU (RFC 1191).
        mtu: u16,
        /// The invoking packet's header and leading payload.
        data: &'a [u8],
    },
    /// Time exceeded (code 0: TTL in transit, 1: reassembly).
    TimeExceeded {
        /// Code.
        code: u8,
        /// The invoking packet's header and leading payload.
        data: &'a [u8],
    },
    /// Parameter problem with a pointer into the invoking header.
    ParamProblem {
        /// Offset of the offending byte.
        pointer: u8,
        /// The invoking packet's header and leading payload.
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Parses a checked message, verifying the checksum.
    pub fn parse(p: &Icmpv4Packet<&'a [u8]>) -> Result<Self, WireError> {
        if !p.verify_checksum() {
            return Err(WireError::BadChecksum { what: "icmpv4" });
        }
        let b: &'a [u8] = p.buffer;
        let data = b.get(HEADER_LEN..).unwrap_or(&[]);
        Ok(match (p.msg_type(), p.code()) {
            (kind::ECHO_REQUEST, 0) => Icmpv4Repr::EchoRequest {
                ident: p.ident(),
                seq: p.seq(),
                data,
            },
            (kind::ECHO_REPLY, 0) => Icmpv4Repr::EchoReply {
                ident: p.ident(),
                seq: p.seq(),
                data,
            },
            (kind::DST_UNREACHABLE, code) => Icmpv4Repr::DstUnreachable {
                code,
                mtu: be16(b, 6),
                data,
            },
            (kind::TIME_EXCEEDED, code) => Icmpv4Repr::TimeExceeded { code, data },
            (kind::PARAM_PROBLEM, 0) => Icmpv4Repr::ParamProblem {
                pointer: byte(b, 4),
                data,
            },
            (t, _) => {
                return Err(WireError::Unsupported {
                    what: "icmpv4",
                    field: "type",
                    value: u32::from(t),
                });
            }
        })
    }

    fn data(&self) -> &'a [u8] {
        match *self {
            Icmpv4Repr::EchoRequest { data, .. }
            | Icmpv4Repr::EchoReply { data, .. }
            | Icmpv4Repr::DstUnreachable { data, .. }
            | Icmpv4Repr::TimeExceeded { data, .. }
            | Icmpv4Repr::ParamProblem { data, .. } => data,
        }
    }

    /// Bytes [`Icmpv4Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data().len()
    }

    /// Writes the message (checksum filled) at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), WireError> {
        need("icmpv4 emit", buf.len(), self.buffer_len())?;
        put32z(buf);
        match *self {
            Icmpv4Repr::EchoRequest { ident, seq, .. }
            | Icmpv4Repr::EchoReply { ident, seq, .. } => {
                let t = if matches!(self, Icmpv4Repr::EchoRequest { .. }) {
                    kind::ECHO_REQUEST
                } else {
                    kind::ECHO_REPLY
                };
                put8(buf, 0, t);
                put16(buf, 4, ident);
                put16(buf, 6, seq);
            }
            Icmpv4Repr::DstUnreachable { code, mtu, .. } => {
                put8(buf, 0, kind::DST_UNREACHABLE);
                put8(buf, 1, code);
                put16(buf, 6, mtu);
            }
            Icmpv4Repr::TimeExceeded { code, .. } => {
                put8(buf, 0, kind::TIME_EXCEEDED);
                put8(buf, 1, code);
            }
            Icmpv4Repr::ParamProblem { pointer, .. } => {
                put8(buf, 0, kind::PARAM_PROBLEM);
                put8(buf, 4, pointer);
            }
        }
        let data = self.data();
        put_bytes(buf, HEADER_LEN, data);
        let n = self.buffer_len();
        let c = checksum::finish(checksum::sum(buf.get(..n).unwrap_or(&[])));
        put16(buf, 2, c);
        Ok(())
    }
}

fn put32z(buf: &mut [u8]) {
    if let Some(h) = buf.get_mut(..HEADER_LEN) {
        h.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // `ping -c1 -p 61` style echo request: type 8, ident 0x1c46, seq 1, 4 data bytes.
    const ECHO: [u8; 12] = [8, 0, 0x18, 0xf6, 0x1c, 0x46, 0, 1, 0x61, 0x61, 0x61, 0x61];

    #[test]
    fn parses_fixture() {
        let p = Icmpv4Packet::new_checked(&ECHO[..]).unwrap();
        assert!(p.verify_checksum(), "fixture checksum");
        let r = Icmpv4Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Icmpv4Repr::EchoRequest {
                ident: 0x1c46,
                seq: 1,
                data: b"aaaa"
            }
        );
        let mut out = [0u8; 12];
        r.emit(&mut out).unwrap();
        assert_eq!(out, ECHO);
    }

    #[test]
    fn bad_checksum_and_truncation() {
        let mut b = ECHO;
        b[8] = 0;
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert!(Icmpv4Repr::parse(&p).is_err());
        assert!(Icmpv4Packet::new_checked(&ECHO[..7]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn round_trip(which in 0u8..5, a: u16, b: u16, code: u8, data: Vec<u8>) {
            let r = match which {
                0 => Icmpv4Repr::EchoRequest { ident: a, seq: b, data: &data },
                1 => Icmpv4Repr::EchoReply { ident: a, seq: b, data: &data },
                2 => Icmpv4Repr::DstUnreachable { code, mtu: b, data: &data },
                3 => Icmpv4Repr::TimeExceeded { code, data: &data },
                _ => Icmpv4Repr::ParamProblem { pointer: code, data: &data },
            };
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf).unwrap();
            let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
            proptest::prop_assert_eq!(Icmpv4Repr::parse(&p).unwrap(), r);
        }
    }
}
