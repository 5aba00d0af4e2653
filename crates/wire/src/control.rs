//! Node-to-node control messages, carried under ANEP Type ID [`crate::anep::TYPE_CONTROL`]
//! with no transit header (they travel one link).
//!
//! ```text
//! +-------+-------+---------------+
//! | kind  |version|  body length  |   body length: bytes after this 4-byte header
//! +-------+-------+---------------+
//! | body ...
//! ```
//!
//! Kinds (version 1):
//! - 1 Hello: `sender (18) pad (2) hello ms: u32, dead ms: u32, seq: u32, count: u16, pad: u16,
//!   seen (18 each)`: neighbor discovery; `seen` lists the neighbors the sender hears, so a
//!   receiver knows the link works both ways.
//! - 2 Routes: `sender (18) pad (2) count: u16, pad: u16, (destination (18), metric: u16)*`:
//!   a distance-vector update.
//! - 3 CodeRequest: `hash (32), offset: u32, max bytes: u32`.
//! - 4 CodeChunk: `hash (32), total: u32, offset: u32, length: u16, pad: u16, data`.
//! - 5 CodeUnavailable: `hash (32)`.
//! - 6 Ee: `type id: u16, pad: u16, data`: an EE's own link-local message.
//!
//! A body longer than its kind needs is accepted (later versions append fields); an unknown
//! kind is an error the node counts.

use crate::{NodeAddr, WireError, addr::NODE_ADDR_LEN, capsule::CodeHash, util};

/// Control message version.
pub const VERSION: u8 = 1;
/// Most entries one Routes message may carry (keeps it inside a 1500-byte MTU).
pub const MAX_ROUTES_PER_MESSAGE: usize = 64;
/// Most neighbors one Hello may list.
pub const MAX_SEEN: usize = 64;

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Neighbor discovery.
    Hello(Hello),
    /// Distance-vector routes.
    Routes(Routes),
    /// Ask a neighbor for (part of) a code object.
    CodeRequest {
        /// Code object name.
        hash: CodeHash,
        /// First byte wanted.
        offset: u32,
        /// Most bytes wanted in the answer (the sender splits into MTU-sized chunks).
        max: u32,
    },
    /// One chunk of a code object.
    CodeChunk {
        /// Code object name.
        hash: CodeHash,
        /// Size of the whole object.
        total: u32,
        /// Offset of this chunk.
        offset: u32,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The asked node does not hold the code.
    CodeUnavailable {
        /// Code object name.
        hash: CodeHash,
    },
    /// An execution environment's own link-local message.
    Ee {
        /// The EE's ANEP Type ID.
        type_id: u16,
        /// Its bytes.
        data: Vec<u8>,
    },
}

/// Neighbor hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The sending node's address.
    pub sender: NodeAddr,
    /// Hello interval, milliseconds.
    pub hello_ms: u32,
    /// Dead interval, milliseconds.
    pub dead_ms: u32,
    /// Sequence number.
    pub seq: u32,
    /// Neighbors the sender hears.
    pub seen: Vec<NodeAddr>,
}

/// Distance-vector update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes {
    /// The sending node.
    pub sender: NodeAddr,
    /// (destination, metric) pairs; metric at the infinity bound means unreachable.
    pub entries: Vec<(NodeAddr, u16)>,
}

const KIND_HELLO: u8 = 1;
const KIND_ROUTES: u8 = 2;
const KIND_CODE_REQUEST: u8 = 3;
const KIND_CODE_CHUNK: u8 = 4;
const KIND_CODE_UNAVAILABLE: u8 = 5;
const KIND_EE: u8 = 6;

impl Control {
    /// Parses a control message (the ANEP payload).
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let kind = util::u8_at(buf, 0, "control header")?;
        let version = util::u8_at(buf, 1, "control header")?;
        if version != VERSION {
            return Err(WireError::UnsupportedVersion {
                what: "control message",
                found: version,
                supported: VERSION,
            });
        }
        let len = usize::from(util::u16_at(buf, 2, "control header")?);
        let body = util::get(buf, 4, len, "control body")?;
        match kind {
            KIND_HELLO => {
                let sender = NodeAddr::read(body, 0)?;
                let hello_ms = util::u32_at(body, 20, "hello")?;
                let dead_ms = util::u32_at(body, 24, "hello")?;
                let seq = util::u32_at(body, 28, "hello")?;
                let n = usize::from(util::u16_at(body, 32, "hello")?);
                if n > MAX_SEEN {
                    return Err(WireError::BadField {
                        what: "hello neighbor count",
                        detail: "more than 64 neighbors",
                    });
                }
                let seen = (0..n)
                    .map(|i| NodeAddr::read(body, 36 + i * NODE_ADDR_LEN))
                    .collect::<Result<_, _>>()?;
                Ok(Control::Hello(Hello {
                    sender,
                    hello_ms,
                    dead_ms,
                    seq,
                    seen,
                }))
            }
            KIND_ROUTES => {
                let sender = NodeAddr::read(body, 0)?;
                let n = usize::from(util::u16_at(body, 20, "routes")?);
                if n > MAX_ROUTES_PER_MESSAGE {
                    return Err(WireError::BadField {
                        what: "routes entry count",
                        detail: "more than 64 entries",
                    });
                }
                let entries = (0..n)
                    .map(|i| {
                        let at = 24 + i * 20;
                        Ok((
                            NodeAddr::read(body, at)?,
                            util::u16_at(body, at + 18, "route entry")?,
                        ))
                    })
                    .collect::<Result<_, WireError>>()?;
                Ok(Control::Routes(Routes { sender, entries }))
            }
            KIND_CODE_REQUEST => Ok(Control::CodeRequest {
                hash: hash_at(body)?,
                offset: util::u32_at(body, 32, "code request")?,
                max: util::u32_at(body, 36, "code request")?,
            }),
            KIND_CODE_CHUNK => {
                let hash = hash_at(body)?;
                let total = util::u32_at(body, 32, "code chunk")?;
                let offset = util::u32_at(body, 36, "code chunk")?;
                let dl = usize::from(util::u16_at(body, 40, "code chunk")?);
                let data = util::get(body, 44, dl, "code chunk data")?.to_vec();
                if u64::from(offset) + dl as u64 > u64::from(total) {
                    return Err(WireError::BadField {
                        what: "code chunk",
                        detail: "chunk extends past the object's total size",
                    });
                }
                Ok(Control::CodeChunk {
                    hash,
                    total,
                    offset,
                    data,
                })
            }
            KIND_CODE_UNAVAILABLE => Ok(Control::CodeUnavailable {
                hash: hash_at(body)?,
            }),
            KIND_EE => Ok(Control::Ee {
                type_id: util::u16_at(body, 0, "ee control")?,
                data: util::get(body, 4, body.len().saturating_sub(4), "ee control")?.to_vec(),
            }),
            other => Err(WireError::UnknownControlKind(other)),
        }
    }

    /// Encodes the message body (the ANEP payload).
    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut b = vec![0u8; 4];
        let kind = match self {
            Control::Hello(h) => {
                if h.seen.len() > MAX_SEEN {
                    return Err(WireError::TooLarge {
                        what: "hello neighbor list",
                        len: h.seen.len(),
                        max: MAX_SEEN,
                    });
                }
                b.extend_from_slice(&h.sender.to_bytes());
                b.extend_from_slice(&[0, 0]);
                b.extend_from_slice(&h.hello_ms.to_be_bytes());
                b.extend_from_slice(&h.dead_ms.to_be_bytes());
                b.extend_from_slice(&h.seq.to_be_bytes());
                b.extend_from_slice(&(h.seen.len() as u16).to_be_bytes());
                b.extend_from_slice(&[0, 0]);
                for a in &h.seen {
                    b.extend_from_slice(&a.to_bytes());
                }
                KIND_HELLO
            }
            Control::Routes(r) => {
                if r.entries.len() > MAX_ROUTES_PER_MESSAGE {
                    return Err(WireError::TooLarge {
                        what: "routes message",
                        len: r.entries.len(),
                        max: MAX_ROUTES_PER_MESSAGE,
                    });
                }
                b.extend_from_slice(&r.sender.to_bytes());
                b.extend_from_slice(&[0, 0]);
                b.extend_from_slice(&(r.entries.len() as u16).to_be_bytes());
                b.extend_from_slice(&[0, 0]);
                for (d, m) in &r.entries {
                    b.extend_from_slice(&d.to_bytes());
                    b.extend_from_slice(&m.to_be_bytes());
                }
                KIND_ROUTES
            }
            Control::CodeRequest { hash, offset, max } => {
                b.extend_from_slice(hash);
                b.extend_from_slice(&offset.to_be_bytes());
                b.extend_from_slice(&max.to_be_bytes());
                KIND_CODE_REQUEST
            }
            Control::CodeChunk {
                hash,
                total,
                offset,
                data,
            } => {
                let dl = u16::try_from(data.len()).map_err(|_| WireError::TooLarge {
                    what: "code chunk",
                    len: data.len(),
                    max: usize::from(u16::MAX),
                })?;
                b.extend_from_slice(hash);
                b.extend_from_slice(&total.to_be_bytes());
                b.extend_from_slice(&offset.to_be_bytes());
                b.extend_from_slice(&dl.to_be_bytes());
                b.extend_from_slice(&[0, 0]);
                b.extend_from_slice(data);
                KIND_CODE_CHUNK
            }
            Control::CodeUnavailable { hash } => {
                b.extend_from_slice(hash);
                KIND_CODE_UNAVAILABLE
            }
            Control::Ee { type_id, data } => {
                b.extend_from_slice(&type_id.to_be_bytes());
                b.extend_from_slice(&[0, 0]);
                b.extend_from_slice(data);
                KIND_EE
            }
        };
        let len = b.len() - 4;
        let len16 = u16::try_from(len).map_err(|_| WireError::TooLarge {
            what: "control message",
            len,
            max: usize::from(u16::MAX),
        })?;
        util::put(&mut b, 0, &[kind, VERSION])?;
        util::put(&mut b, 2, &len16.to_be_bytes())?;
        Ok(b)
    }

    /// The whole ANEP packet.
    pub fn to_packet(&self) -> Result<Vec<u8>, WireError> {
        crate::anep::AnepRepr::new(crate::anep::TYPE_CONTROL).emit_packet(&self.to_bytes()?)
    }
}

fn hash_at(body: &[u8]) -> Result<CodeHash, WireError> {
    let mut h = [0u8; 32];
    h.copy_from_slice(util::get(body, 0, 32, "code hash")?);
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{arb_addr, v4};
    use proptest::prelude::*;

    #[test]
    fn hello_fixture() {
        let h = Control::Hello(Hello {
            sender: v4(198, 18, 0, 1, 3322),
            hello_ms: 1000,
            dead_ms: 4000,
            seq: 7,
            seen: vec![v4(198, 18, 0, 2, 3322)],
        });
        let b = h.to_bytes().unwrap();
        assert_eq!(&b[..4], &[1, 1, 0, 54]);
        assert_eq!(&b[24..36], &[0, 0, 3, 0xe8, 0, 0, 0x0f, 0xa0, 0, 0, 0, 7]);
        assert_eq!(&b[36..38], &[0, 1]);
        assert_eq!(Control::parse(&b).unwrap(), h);
    }

    #[test]
    fn malformed() {
        assert!(matches!(
            Control::parse(&[9, 1, 0, 0]),
            Err(WireError::UnknownControlKind(9))
        ));
        assert!(matches!(
            Control::parse(&[1, 2, 0, 0]),
            Err(WireError::UnsupportedVersion { .. })
        ));
        assert!(Control::parse(&[1, 1, 0, 50]).is_err());
        // Hello claiming 3 seen neighbors but carrying none.
        let mut b = Control::Hello(Hello {
            sender: NodeAddr::UNSPECIFIED,
            hello_ms: 1,
            dead_ms: 1,
            seq: 1,
            seen: vec![],
        })
        .to_bytes()
        .unwrap();
        b[37] = 3;
        assert!(matches!(
            Control::parse(&b),
            Err(WireError::Truncated { .. })
        ));
        // A code chunk that claims to extend past the object.
        let mut c = Control::CodeChunk {
            hash: [1; 32],
            total: 4,
            offset: 0,
            data: vec![1, 2, 3, 4],
        }
        .to_bytes()
        .unwrap();
        c[4 + 35] = 2; // total = 2
        assert!(matches!(
            Control::parse(&c),
            Err(WireError::BadField { .. })
        ));
    }

    fn arb_control() -> impl Strategy<Value = Control> {
        prop_oneof![
            (
                arb_addr(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                proptest::collection::vec(arb_addr(), 0..10)
            )
                .prop_map(|(sender, hello_ms, dead_ms, seq, seen)| Control::Hello(
                    Hello {
                        sender,
                        hello_ms,
                        dead_ms,
                        seq,
                        seen
                    }
                )),
            (
                arb_addr(),
                proptest::collection::vec((arb_addr(), any::<u16>()), 0..64)
            )
                .prop_map(|(sender, entries)| Control::Routes(Routes { sender, entries })),
            (any::<[u8; 32]>(), any::<u32>(), any::<u32>())
                .prop_map(|(hash, offset, max)| Control::CodeRequest { hash, offset, max }),
            (
                any::<[u8; 32]>(),
                proptest::collection::vec(any::<u8>(), 0..1200),
                0u32..1000
            )
                .prop_map(|(hash, data, offset)| {
                    let total = offset + data.len() as u32 + 5;
                    Control::CodeChunk {
                        hash,
                        total,
                        offset,
                        data,
                    }
                }),
            any::<[u8; 32]>().prop_map(|hash| Control::CodeUnavailable { hash }),
            (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..100))
                .prop_map(|(type_id, data)| Control::Ee { type_id, data }),
        ]
    }

    proptest! {
        #[test]
        fn roundtrip(c in arb_control()) {
            let pkt = c.to_packet().unwrap();
            let p = crate::anep::AnepPacket::new_checked(&pkt[..]).unwrap();
            prop_assert_eq!(p.type_id(), crate::anep::TYPE_CONTROL);
            prop_assert_eq!(Control::parse(p.payload()).unwrap(), c);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Control::parse(&bytes);
        }
    }
}
