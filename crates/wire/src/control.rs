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
//! - 2 Routes: `sender (18) seq: u16, count: u16, flags: u16, (destination (18), metric:
//!   u16)*`: a distance-vector update. `seq` numbers the Routes messages a sender sends one
//!   neighbor (wrapping), so the receiver sees a gap; `flags` ([`Routes::FULL_FIRST`],
//!   [`Routes::FULL_LAST`], [`Routes::DIGEST`], [`Routes::REQUEST`]) mark the first and last
//!   message of a full table, a periodic digest (no entries: "nothing changed since message
//!   `seq`") and a request for the full table. Unknown flag bits are ignored. (Before these
//!   two fields both were zero padding; a sender that writes zeros is never in step, so its
//!   receivers keep asking for and getting its full tables, as before.)
//! - 3 CodeRequest: `hash (32), offset: u32, max bytes: u32`.
//! - 4 CodeChunk: `hash (32), total: u32, offset: u32, length: u16, pad: u16, data`.
//! - 5 CodeUnavailable: `hash (32)`.
//! - 6 Ee: `type id: u16, pad: u16, data`: an EE's own link-local message.
//! - 7 Lsas: `sender (18) pad (2) count: u16, pad: u16, lsa*` with each lsa
//!   `origin (18) fragment: u8, pad: u8, seq: u32, lifetime ms: u32, links: u16, pad: u16,
//!   (neighbor (18), cost: u16)*`: link-state advertisements being flooded.
//! - 8 LsaSummary: `sender (18) pad (2) lo origin (18) lo fragment: u8, pad: u8, hi origin
//!   (18) hi fragment: u8, pad: u8, count: u16, pad: u16, (origin (18), fragment: u8, pad:
//!   u8, seq: u32)*`: the (origin, fragment, seq) of every LSA the sender holds with a key
//!   in [lo, hi) (the last range of a sync reaches the largest key), so the receiver can send
//!   what the sender lacks (database sync).
//! - 9 LsaDigest: `sender (18) pad (2) count: u32, digest: u64`: how many LSAs the sender
//!   holds and an order-independent digest of their (origin, fragment, seq) keys; a
//!   receiver whose own database differs answers with its [`LsaSummary`] messages (the
//!   periodic sync costs one small message per link while databases agree).
//!
//! A body longer than its kind needs is accepted (later versions append fields); an unknown
//! kind is an error the node counts.

use std::sync::Arc;

use crate::{NodeAddr, WireError, addr::NODE_ADDR_LEN, capsule::CodeHash, util};

/// Control message version.
pub const VERSION: u8 = 1;
/// Most entries one Routes message may carry (keeps it inside a 1500-byte MTU).
pub const MAX_ROUTES_PER_MESSAGE: usize = 64;
/// Most neighbors one Hello may list.
pub const MAX_SEEN: usize = 64;
/// Most links one LSA (fragment) may list; a node with more neighbors splits its
/// advertisement into fragments.
pub const MAX_LSA_LINKS: usize = 64;
/// Most entries one LsaSummary carries.
pub const MAX_SUMMARY_ENTRIES: usize = 56;
/// Largest body of an Lsas message a sender builds (keeps it inside a 1472-byte MTU with
/// the ANEP and control headers).
pub const MAX_LSAS_BODY: usize = 1400;

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
    /// Link-state advertisements.
    Lsas(Lsas),
    /// A link-state database summary (one key range).
    LsaSummary(LsaSummary),
    /// A digest of a whole link-state database.
    LsaDigest(LsaDigest),
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
    /// Number of this message in the sender's stream to this neighbor (wrapping); a digest
    /// carries the number of the last message before it.
    pub seq: u16,
    /// [`Routes::FULL_FIRST`], [`Routes::FULL_LAST`], [`Routes::DIGEST`],
    /// [`Routes::REQUEST`]; other bits are ignored.
    pub flags: u16,
    /// (destination, metric) pairs; metric at the infinity bound means unreachable.
    pub entries: Vec<(NodeAddr, u16)>,
}

impl Routes {
    /// The first message of a full table.
    pub const FULL_FIRST: u16 = 1;
    /// The last message of a full table (a one-message table carries both).
    pub const FULL_LAST: u16 = 2;
    /// A periodic digest: the sender's table toward this neighbor is what its messages up
    /// to `seq` said; carries no entries.
    pub const DIGEST: u16 = 4;
    /// The sender asks for the receiver's full table.
    pub const REQUEST: u16 = 8;

    /// An update with no flags and sequence number 0 (what a sender before sequence numbers
    /// sent).
    pub fn plain(sender: NodeAddr, entries: Vec<(NodeAddr, u16)>) -> Routes {
        Routes {
            sender,
            seq: 0,
            flags: 0,
            entries,
        }
    }

    /// Whether `flag` is set.
    #[inline]
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// One link-state advertisement: what `origin` says about its links (one fragment of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lsa {
    /// The node that originated it.
    pub origin: NodeAddr,
    /// Which fragment of the origin's advertisement (0 for most nodes).
    pub fragment: u8,
    /// Sequence number: a higher one replaces a lower one.
    pub seq: u32,
    /// Milliseconds it stays valid unless refreshed.
    pub lifetime_ms: u32,
    /// (neighbor, cost) for each up link; at most [`MAX_LSA_LINKS`]. Shared, so a node that
    /// stores and re-floods an LSA keeps and sends the list it parsed, copying nothing.
    pub links: Arc<Vec<(NodeAddr, u16)>>,
}

impl Lsa {
    /// Bytes it takes in an Lsas message.
    pub fn wire_len(&self) -> usize {
        LSA_HEAD + self.links.len() * 20
    }
}

const LSA_HEAD: usize = 32;

/// A batch of LSAs from one neighbor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lsas {
    /// The sending node (one hop away).
    pub sender: NodeAddr,
    /// The advertisements.
    pub lsas: Vec<Lsa>,
}

/// What a node's link-state database holds in one key range: (origin, fragment, seq).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LsaSummary {
    /// The sending node (one hop away).
    pub sender: NodeAddr,
    /// The first key of the range (inclusive).
    pub lo: (NodeAddr, u8),
    /// The end of the range (exclusive).
    pub hi: (NodeAddr, u8),
    /// Every LSA the sender holds in the range; at most [`MAX_SUMMARY_ENTRIES`].
    pub entries: Vec<(NodeAddr, u8, u32)>,
}

const KIND_HELLO: u8 = 1;
const KIND_ROUTES: u8 = 2;
const KIND_CODE_REQUEST: u8 = 3;
const KIND_CODE_CHUNK: u8 = 4;
const KIND_CODE_UNAVAILABLE: u8 = 5;
const KIND_EE: u8 = 6;
const KIND_LSAS: u8 = 7;
const KIND_LSA_SUMMARY: u8 = 8;
const KIND_LSA_DIGEST: u8 = 9;

/// A whole link-state database in 12 bytes: its LSA count and digest (see
/// `anode_routing`'s link state for how the digest is formed; equal databases give equal
/// digests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LsaDigest {
    /// The sending node (one hop away).
    pub sender: NodeAddr,
    /// LSAs (fragments) the sender holds.
    pub count: u32,
    /// Digest of their keys and sequence numbers.
    pub digest: u64,
}

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
                let seq = util::u16_at(body, 18, "routes")?;
                let n = usize::from(util::u16_at(body, 20, "routes")?);
                let flags = util::u16_at(body, 22, "routes")?;
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
                Ok(Control::Routes(Routes {
                    sender,
                    seq,
                    flags,
                    entries,
                }))
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
            KIND_LSAS => parse_lsas(body).map(Control::Lsas),
            KIND_LSA_SUMMARY => parse_summary(body).map(Control::LsaSummary),
            KIND_LSA_DIGEST => Ok(Control::LsaDigest(LsaDigest {
                sender: NodeAddr::read(body, 0)?,
                count: util::u32_at(body, 20, "lsa digest")?,
                digest: util::u64_at(body, 24, "lsa digest")?,
            })),
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
                b.extend_from_slice(&r.seq.to_be_bytes());
                b.extend_from_slice(&(r.entries.len() as u16).to_be_bytes());
                b.extend_from_slice(&r.flags.to_be_bytes());
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
            Control::Lsas(l) => {
                emit_lsas(l, &mut b)?;
                KIND_LSAS
            }
            Control::LsaSummary(m) => {
                if m.entries.len() > MAX_SUMMARY_ENTRIES {
                    return Err(WireError::TooLarge {
                        what: "lsa summary",
                        len: m.entries.len(),
                        max: MAX_SUMMARY_ENTRIES,
                    });
                }
                b.extend_from_slice(&m.sender.to_bytes());
                b.extend_from_slice(&[0, 0]);
                for (a, f) in [m.lo, m.hi] {
                    b.extend_from_slice(&a.to_bytes());
                    b.extend_from_slice(&[f, 0]);
                }
                b.extend_from_slice(&(m.entries.len() as u16).to_be_bytes());
                b.extend_from_slice(&[0, 0]);
                for (a, f, seq) in &m.entries {
                    b.extend_from_slice(&a.to_bytes());
                    b.extend_from_slice(&[*f, 0]);
                    b.extend_from_slice(&seq.to_be_bytes());
                }
                KIND_LSA_SUMMARY
            }
            Control::LsaDigest(d) => {
                b.extend_from_slice(&d.sender.to_bytes());
                b.extend_from_slice(&[0, 0]);
                b.extend_from_slice(&d.count.to_be_bytes());
                b.extend_from_slice(&d.digest.to_be_bytes());
                KIND_LSA_DIGEST
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

fn parse_lsas(body: &[u8]) -> Result<Lsas, WireError> {
    let sender = NodeAddr::read(body, 0)?;
    let n = usize::from(util::u16_at(body, 20, "lsas")?);
    let mut at = 24;
    let mut lsas = Vec::with_capacity(n.min(body.len() / LSA_HEAD));
    for _ in 0..n {
        let origin = NodeAddr::read(body, at)?;
        let fragment = util::u8_at(body, at + 18, "lsa")?;
        let seq = util::u32_at(body, at + 20, "lsa")?;
        let lifetime_ms = util::u32_at(body, at + 24, "lsa")?;
        let k = usize::from(util::u16_at(body, at + 28, "lsa")?);
        if k > MAX_LSA_LINKS {
            return Err(WireError::BadField {
                what: "lsa link count",
                detail: "more than 64 links in one fragment",
            });
        }
        at += LSA_HEAD;
        let links = (0..k)
            .map(|i| {
                let p = at + i * 20;
                Ok((
                    NodeAddr::read(body, p)?,
                    util::u16_at(body, p + 18, "lsa link")?,
                ))
            })
            .collect::<Result<Vec<_>, WireError>>()
            .map(Arc::new)?;
        at += k * 20;
        lsas.push(Lsa {
            origin,
            fragment,
            seq,
            lifetime_ms,
            links,
        });
    }
    Ok(Lsas { sender, lsas })
}

fn parse_summary(body: &[u8]) -> Result<LsaSummary, WireError> {
    let sender = NodeAddr::read(body, 0)?;
    let lo = (
        NodeAddr::read(body, 20)?,
        util::u8_at(body, 38, "lsa summary")?,
    );
    let hi = (
        NodeAddr::read(body, 40)?,
        util::u8_at(body, 58, "lsa summary")?,
    );
    let n = usize::from(util::u16_at(body, 60, "lsa summary")?);
    if n > MAX_SUMMARY_ENTRIES {
        return Err(WireError::BadField {
            what: "lsa summary entry count",
            detail: "more than 56 entries",
        });
    }
    let entries = (0..n)
        .map(|i| {
            let at = 64 + i * 24;
            Ok((
                NodeAddr::read(body, at)?,
                util::u8_at(body, at + 18, "lsa summary entry")?,
                util::u32_at(body, at + 20, "lsa summary entry")?,
            ))
        })
        .collect::<Result<Vec<_>, WireError>>()?;
    Ok(LsaSummary {
        sender,
        lo,
        hi,
        entries,
    })
}

fn emit_lsas(l: &Lsas, b: &mut Vec<u8>) -> Result<(), WireError> {
    let n = u16::try_from(l.lsas.len()).map_err(|_| WireError::TooLarge {
        what: "lsas message",
        len: l.lsas.len(),
        max: usize::from(u16::MAX),
    })?;
    b.extend_from_slice(&l.sender.to_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&n.to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    for a in &l.lsas {
        if a.links.len() > MAX_LSA_LINKS {
            return Err(WireError::TooLarge {
                what: "lsa links",
                len: a.links.len(),
                max: MAX_LSA_LINKS,
            });
        }
        b.extend_from_slice(&a.origin.to_bytes());
        b.extend_from_slice(&[a.fragment, 0]);
        b.extend_from_slice(&a.seq.to_be_bytes());
        b.extend_from_slice(&a.lifetime_ms.to_be_bytes());
        b.extend_from_slice(&(a.links.len() as u16).to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        for (nb, c) in a.links.iter() {
            b.extend_from_slice(&nb.to_bytes());
            b.extend_from_slice(&c.to_be_bytes());
        }
    }
    Ok(())
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
    fn lsas_fixture() {
        let m = Control::Lsas(Lsas {
            sender: v4(198, 18, 0, 1, 3322),
            lsas: vec![Lsa {
                origin: v4(198, 18, 0, 2, 3322),
                fragment: 1,
                seq: 9,
                lifetime_ms: 120_000,
                links: vec![(v4(198, 18, 0, 3, 3322), 5)].into(),
            }],
        });
        let b = m.to_bytes().unwrap();
        assert_eq!(&b[..4], &[7, 1, 0, 76]);
        assert_eq!(&b[24..26], &[0, 1], "one lsa");
        assert_eq!(&b[46..48], &[1, 0], "fragment");
        assert_eq!(&b[48..56], &[0, 0, 0, 9, 0, 1, 0xd4, 0xc0]);
        assert_eq!(&b[78..80], &[0, 5], "cost");
        assert_eq!(Control::parse(&b).unwrap(), m);
        // A count of lsas the body does not hold.
        let mut t = b.clone();
        t[25] = 2;
        assert!(Control::parse(&t).is_err());
    }

    #[test]
    fn lsa_summary_fixture() {
        let m = Control::LsaSummary(LsaSummary {
            sender: v4(198, 18, 0, 1, 3322),
            lo: (NodeAddr::UNSPECIFIED, 0),
            hi: (v4(198, 18, 0, 9, 3322), 255),
            entries: vec![(v4(198, 18, 0, 2, 3322), 0, 7)],
        });
        let b = m.to_bytes().unwrap();
        assert_eq!(&b[..4], &[8, 1, 0, 88]);
        assert_eq!(b[4 + 58], 255, "hi fragment");
        assert_eq!(&b[4 + 60..4 + 62], &[0, 1]);
        assert_eq!(&b[4 + 84..4 + 88], &[0, 0, 0, 7]);
        assert_eq!(Control::parse(&b).unwrap(), m);
    }

    #[test]
    fn lsa_digest_fixture() {
        let m = Control::LsaDigest(LsaDigest {
            sender: v4(198, 18, 0, 1, 3322),
            count: 3815,
            digest: 0x0123_4567_89ab_cdef,
        });
        let b = m.to_bytes().unwrap();
        assert_eq!(&b[..4], &[9, 1, 0, 32]);
        assert_eq!(&b[4 + 20..4 + 24], &[0, 0, 0x0e, 0xe7], "count");
        assert_eq!(
            &b[4 + 24..4 + 32],
            &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]
        );
        assert_eq!(Control::parse(&b).unwrap(), m);
        assert!(Control::parse(&b[..b.len() - 1]).is_err(), "truncated");
    }

    #[test]
    fn malformed() {
        assert!(matches!(
            Control::parse(&[10, 1, 0, 0]),
            Err(WireError::UnknownControlKind(10))
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
                any::<u16>(),
                any::<u16>(),
                proptest::collection::vec((arb_addr(), any::<u16>()), 0..64)
            )
                .prop_map(|(sender, seq, flags, entries)| Control::Routes(Routes {
                    sender,
                    seq,
                    flags,
                    entries
                })),
            (
                arb_addr(),
                proptest::collection::vec(
                    (
                        arb_addr(),
                        any::<u8>(),
                        any::<u32>(),
                        any::<u32>(),
                        proptest::collection::vec((arb_addr(), any::<u16>()), 0..8)
                    ),
                    0..4
                )
            )
                .prop_map(|(sender, v)| Control::Lsas(Lsas {
                    sender,
                    lsas: v
                        .into_iter()
                        .map(|(origin, fragment, seq, lifetime_ms, links)| Lsa {
                            origin,
                            fragment,
                            seq,
                            lifetime_ms,
                            links: links.into()
                        })
                        .collect()
                })),
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
            (arb_addr(), any::<u32>(), any::<u64>()).prop_map(|(sender, count, digest)| {
                Control::LsaDigest(LsaDigest {
                    sender,
                    count,
                    digest,
                })
            }),
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
