//! Module deployment along a path (NetServ signaling, NSIS-style soft state): the request a
//! node sends toward a destination, the per-hop results, and the package transfer from one
//! node of the service to the next. All are routed packets of ANEP Type ID
//! [`crate::anep::TYPE_DEPLOY`]: the ANEP header names the destination in an option and does
//! not ask to be discarded, so nodes without the service forward them; a transit header
//! follows, then the message, which starts `version: u8 (1), kind: u8`.
//!
//! Request (kind 1), 222 bytes then the name and version strings:
//! ```text
//!  0 version | kind | op | hop            op: 1 deploy, 2 undeploy; hop: nodes before this one
//!  4 reply port: u16 | name len: u8 | version len: u8
//!  8 ttl seconds: u32
//! 12 package length: u32
//! 16 expires (unix ms): u64
//! 24 nonce (16)
//! 40 origin (18) | target (18) | package sha-256 (32) | signer key (32) | signature (64)
//! 204 via (18)                           the last node on the way that holds the package
//! 222 name, version
//!     [repository URL length: u16 | URL]  optional: a repository every node may fetch the
//!                                         package from (`GET URL/NAME/VERSION`)
//! ```
//! The signature (ed25519, made and checked by `anode-modules`) covers [`DEPLOY_TAG`] and the
//! message with `hop` and `via` zeroed and the signature field left out
//! ([`Request::signed_bytes`]): `hop` and `via` are the fields nodes change on the way.
//!
//! Result (kind 2), 52 bytes then the reason:
//! ```text
//!  0 version | kind | outcome | hop
//!  4 reason len: u16 | pad: u16
//!  8 elapsed at the hop (us): u32 | flags: u32 (bit 0: the hop is the target)
//! 16 nonce (16)
//! 32 node (18) | pad (2)
//! 52 reason
//! ```
//!
//! Transfer (kind 3), 20 bytes, then a transfer body of 44 bytes and its data:
//! ```text
//!  0 version | kind | pad (2)
//!  4 the request's nonce (16)
//! 20 kind: u8 (1 want, 2 chunk, 3 unavailable) | pad | data len: u16
//!  4 package sha-256 (32)
//! 56 offset: u32 | want: most bytes wanted; chunk: the package's length: u32
//! 64 data (chunk only)
//! ```
//! A node asks the node in the request's `via` for the package; that node serves only a
//! request it forwarded (by nonce), for a bounded number of bytes.

use crate::transit::TransitRepr;
use crate::{NodeAddr, WireError, addr::NODE_ADDR_LEN, util};

/// Message version.
pub const VERSION: u8 = 1;
/// What a request's signature covers first (domain separation from other signatures).
pub const DEPLOY_TAG: &[u8] = b"anode deploy request v1\0";
/// Longest module name or version a request carries.
pub const MAX_NAME: usize = 64;
/// Longest repository URL a request carries.
pub const MAX_REPO: usize = 256;
/// Longest reason a result carries.
pub const MAX_REASON: usize = 512;
/// Most data bytes in one chunk (a chunk stays inside a 1472-byte MTU).
pub const MAX_CHUNK: usize = 1200;
/// Length of a request before its strings.
pub const REQUEST_LEN: usize = 222;
/// Length of a result before its reason.
pub const RESULT_LEN: usize = 52;
/// Length of a transfer body before its data.
pub const TRANSFER_LEN: usize = 44;
/// Length of a transfer message before its body.
pub const TRANSFER_MSG_LEN: usize = 20;

const KIND_REQUEST: u8 = 1;
const KIND_RESULT: u8 = 2;
const KIND_TRANSFER: u8 = 3;
const SIG_AT: usize = 140;
/// Where a request's `via` is.
pub const VIA_AT: usize = 204;
/// Where a request's `hop` is.
pub const HOP_AT: usize = 3;

/// What a request asks of each node on the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Install and start the package (or refresh it if present).
    Deploy,
    /// Remove the module deployed under this name.
    Undeploy,
}

impl Op {
    fn code(self) -> u8 {
        match self {
            Op::Deploy => 1,
            Op::Undeploy => 2,
        }
    }

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Op::Deploy => "deploy",
            Op::Undeploy => "undeploy",
        }
    }
}

/// A deploy or undeploy request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// What to do.
    pub op: Op,
    /// Nodes that handled the request before this one (0 at the origin).
    pub hop: u8,
    /// The origin's application port results are delivered to (0: kept by the origin's EE).
    pub reply_port: u16,
    /// Soft-state lifetime: the module goes unless refreshed within this many seconds.
    pub ttl_s: u32,
    /// Package length in bytes (0 for undeploy).
    pub pkg_len: u32,
    /// When the request stops being valid, in ms since the Unix epoch.
    pub expires_unix_ms: u64,
    /// Fresh per request (replay protection).
    pub nonce: [u8; 16],
    /// The node that sent it, which receives the results.
    pub origin: NodeAddr,
    /// The last node of the path.
    pub target: NodeAddr,
    /// SHA-256 of the package file (zero for undeploy).
    pub pkg_hash: [u8; 32],
    /// The requester's ed25519 public key.
    pub signer: [u8; 32],
    /// The last node on the way that holds the package (the one the next node fetches it
    /// from); the origin at first.
    pub via: NodeAddr,
    /// The signature over [`Request::signed_bytes`].
    pub signature: [u8; 64],
    /// The module's name.
    pub name: String,
    /// The module's version (empty for undeploy).
    pub version: String,
    /// A module repository each node may fetch the package from instead of the previous
    /// node of the path (empty: none). Signed like the rest: a node fetches only from where
    /// the requester said, and checks the package's hash all the same.
    pub repo: String,
}

/// How a node on the path answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Installed and started here.
    Installed,
    /// Already here (the same package): its lifetime was extended.
    Present,
    /// Not done: the request or the policy said no (the reason says which).
    Refused,
    /// Tried and failed (fetch, verification or install; the reason says which).
    Failed,
    /// Undeploy: removed here.
    Removed,
    /// Undeploy: not deployed here.
    Absent,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 6] = [
        Outcome::Installed,
        Outcome::Present,
        Outcome::Refused,
        Outcome::Failed,
        Outcome::Removed,
        Outcome::Absent,
    ];

    fn code(self) -> u8 {
        match self {
            Outcome::Installed => 1,
            Outcome::Present => 2,
            Outcome::Refused => 3,
            Outcome::Failed => 4,
            Outcome::Removed => 5,
            Outcome::Absent => 6,
        }
    }

    fn from_code(c: u8) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.code() == c)
    }

    /// The name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Installed => "installed",
            Outcome::Present => "present",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
            Outcome::Removed => "removed",
            Outcome::Absent => "absent",
        }
    }

    /// Whether the hop did what was asked (installed or present; removed or absent).
    pub fn ok(self) -> bool {
        !matches!(self, Outcome::Refused | Outcome::Failed)
    }
}

/// One node's answer to a request, sent to the request's origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopResult {
    /// What it did.
    pub outcome: Outcome,
    /// Its position on the path (0: the origin).
    pub hop: u8,
    /// Time it spent on the request, from arrival to outcome, in microseconds.
    pub elapsed_us: u32,
    /// Whether it is the request's target (the last result of the path).
    pub last: bool,
    /// The request's nonce.
    pub nonce: [u8; 16],
    /// The node.
    pub node: NodeAddr,
    /// Why (empty when installed, present, removed or absent).
    pub reason: String,
}

/// A message under [`crate::anep::TYPE_DEPLOY`] after the transit header.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "one message at a time, parsed and handled at once; boxing the request would add an allocation per hop"
)]
pub enum Message {
    /// A request on its way along the path.
    Request(Request),
    /// A hop's answer on its way to the origin.
    Result(HopResult),
    /// Package transfer for the request with this nonce.
    Transfer([u8; 16], Transfer),
}

fn string(buf: &[u8], at: usize, len: usize, what: &'static str) -> Result<String, WireError> {
    let b = util::get(buf, at, len, what)?;
    String::from_utf8(b.to_vec()).map_err(|_| WireError::BadField {
        what,
        detail: "not UTF-8",
    })
}

fn arr<const N: usize>(buf: &[u8], at: usize, what: &'static str) -> Result<[u8; N], WireError> {
    let mut a = [0u8; N];
    a.copy_from_slice(util::get(buf, at, N, what)?);
    Ok(a)
}

fn short(s: &str, max: usize, what: &'static str) -> Result<u8, WireError> {
    if s.len() > max {
        return Err(WireError::TooLarge {
            what,
            len: s.len(),
            max,
        });
    }
    Ok(s.len() as u8)
}

impl Message {
    /// Parses the bytes after the transit header.
    pub fn parse(buf: &[u8]) -> Result<Message, WireError> {
        let v = util::u8_at(buf, 0, "deploy message")?;
        if v != VERSION {
            return Err(WireError::UnsupportedVersion {
                what: "deploy message",
                found: v,
                supported: VERSION,
            });
        }
        match util::u8_at(buf, 1, "deploy message")? {
            KIND_REQUEST => Request::parse(buf).map(Message::Request),
            KIND_RESULT => HopResult::parse(buf).map(Message::Result),
            KIND_TRANSFER => {
                util::get(buf, 0, TRANSFER_MSG_LEN, "deploy transfer")?;
                let nonce = arr(buf, 4, "deploy transfer")?;
                let t = Transfer::parse(buf.get(TRANSFER_MSG_LEN..).unwrap_or(&[]))?;
                Ok(Message::Transfer(nonce, t))
            }
            _ => Err(WireError::BadField {
                what: "deploy message kind",
                detail: "not 1 (request), 2 (result) or 3 (transfer)",
            }),
        }
    }

    /// The message's bytes (what follows the transit header).
    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        match self {
            Message::Request(r) => r.to_bytes(),
            Message::Result(r) => r.to_bytes(),
            Message::Transfer(nonce, t) => {
                let mut b = vec![VERSION, KIND_TRANSFER, 0, 0];
                b.extend_from_slice(nonce);
                b.extend_from_slice(&t.to_bytes()?);
                Ok(b)
            }
        }
    }

    /// The whole ANEP packet with `transit` in front. Unlike other routed types the packet
    /// does not ask to be discarded by nodes that do not know the type, and it names its
    /// destination in an ANEP option: a node without the deployment service forwards it
    /// toward its destination (as NSIS signaling passes routers that do not speak it).
    pub fn to_packet(&self, transit: &TransitRepr) -> Result<Vec<u8>, WireError> {
        crate::passable_packet(crate::anep::TYPE_DEPLOY, transit, &self.to_bytes()?, &[])
    }
}

impl Request {
    fn parse(buf: &[u8]) -> Result<Request, WireError> {
        const W: &str = "deploy request";
        util::get(buf, 0, REQUEST_LEN, W)?;
        let op = match util::u8_at(buf, 2, W)? {
            1 => Op::Deploy,
            2 => Op::Undeploy,
            _ => {
                return Err(WireError::BadField {
                    what: "deploy request op",
                    detail: "not 1 (deploy) or 2 (undeploy)",
                });
            }
        };
        let name_len = usize::from(util::u8_at(buf, 6, W)?);
        let version_len = usize::from(util::u8_at(buf, 7, W)?);
        if name_len == 0 || name_len > MAX_NAME || version_len > MAX_NAME {
            return Err(WireError::BadLength {
                what: W,
                detail: "module name empty or name or version longer than 64 bytes",
            });
        }
        let repo_at = REQUEST_LEN + name_len + version_len;
        let repo = match buf.len().checked_sub(repo_at) {
            None | Some(0) => String::new(),
            Some(rest) => {
                let len = usize::from(util::u16_at(buf, repo_at, W)?);
                if len > MAX_REPO || rest != 2 + len {
                    return Err(WireError::BadLength {
                        what: W,
                        detail: "the repository URL's length is not what follows, or over 256 bytes",
                    });
                }
                string(buf, repo_at + 2, len, "deploy request repository URL")?
            }
        };
        Ok(Request {
            repo,
            op,
            hop: util::u8_at(buf, 3, W)?,
            reply_port: util::u16_at(buf, 4, W)?,
            ttl_s: util::u32_at(buf, 8, W)?,
            pkg_len: util::u32_at(buf, 12, W)?,
            expires_unix_ms: util::u64_at(buf, 16, W)?,
            nonce: arr(buf, 24, W)?,
            origin: NodeAddr::read(buf, 40)?,
            target: NodeAddr::read(buf, 40 + NODE_ADDR_LEN)?,
            pkg_hash: arr(buf, 76, W)?,
            signer: arr(buf, 108, W)?,
            signature: arr(buf, SIG_AT, W)?,
            via: NodeAddr::read(buf, VIA_AT)?,
            name: string(buf, REQUEST_LEN, name_len, "deploy request module name")?,
            version: string(
                buf,
                REQUEST_LEN + name_len,
                version_len,
                "deploy request module version",
            )?,
        })
    }

    /// The request's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        let nl = short(&self.name, MAX_NAME, "module name")?;
        let vl = short(&self.version, MAX_NAME, "module version")?;
        let mut b = vec![0u8; REQUEST_LEN];
        util::put(
            &mut b,
            0,
            &[VERSION, KIND_REQUEST, self.op.code(), self.hop],
        )?;
        util::put(&mut b, 4, &self.reply_port.to_be_bytes())?;
        util::put(&mut b, 6, &[nl, vl])?;
        util::put(&mut b, 8, &self.ttl_s.to_be_bytes())?;
        util::put(&mut b, 12, &self.pkg_len.to_be_bytes())?;
        util::put(&mut b, 16, &self.expires_unix_ms.to_be_bytes())?;
        util::put(&mut b, 24, &self.nonce)?;
        self.origin.write(&mut b, 40)?;
        self.target.write(&mut b, 40 + NODE_ADDR_LEN)?;
        util::put(&mut b, 76, &self.pkg_hash)?;
        util::put(&mut b, 108, &self.signer)?;
        util::put(&mut b, SIG_AT, &self.signature)?;
        self.via.write(&mut b, VIA_AT)?;
        b.extend_from_slice(self.name.as_bytes());
        b.extend_from_slice(self.version.as_bytes());
        if !self.repo.is_empty() {
            if self.repo.len() > MAX_REPO {
                return Err(WireError::TooLarge {
                    what: "repository URL",
                    len: self.repo.len(),
                    max: MAX_REPO,
                });
            }
            b.extend_from_slice(&(self.repo.len() as u16).to_be_bytes());
            b.extend_from_slice(self.repo.as_bytes());
        }
        Ok(b)
    }

    /// What the signature covers: [`DEPLOY_TAG`], then the request's bytes with `hop` and
    /// `via` zeroed and without the signature field.
    pub fn signed_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut b = self.to_bytes()?;
        if let Some(h) = b.get_mut(HOP_AT) {
            *h = 0;
        }
        util::put(&mut b, VIA_AT, &[0; NODE_ADDR_LEN])?;
        b.drain(SIG_AT..SIG_AT + 64);
        let mut out = DEPLOY_TAG.to_vec();
        out.extend_from_slice(&b);
        Ok(out)
    }
}

impl HopResult {
    fn parse(buf: &[u8]) -> Result<HopResult, WireError> {
        const W: &str = "deploy result";
        util::get(buf, 0, RESULT_LEN, W)?;
        let outcome = Outcome::from_code(util::u8_at(buf, 2, W)?).ok_or(WireError::BadField {
            what: "deploy result outcome",
            detail: "not one of 1..=6",
        })?;
        let reason_len = usize::from(util::u16_at(buf, 4, W)?);
        if reason_len > MAX_REASON {
            return Err(WireError::BadLength {
                what: W,
                detail: "reason longer than 512 bytes",
            });
        }
        Ok(HopResult {
            outcome,
            hop: util::u8_at(buf, 3, W)?,
            elapsed_us: util::u32_at(buf, 8, W)?,
            last: util::u32_at(buf, 12, W)? & 1 == 1,
            nonce: arr(buf, 16, W)?,
            node: NodeAddr::read(buf, 32)?,
            reason: string(buf, RESULT_LEN, reason_len, "deploy result reason")?,
        })
    }

    /// The result's bytes (a reason longer than [`MAX_REASON`] is cut at a character
    /// boundary).
    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut end = self.reason.len().min(MAX_REASON);
        while !self.reason.is_char_boundary(end) {
            end -= 1;
        }
        let reason = self.reason.get(..end).unwrap_or_default();
        let mut b = vec![0u8; RESULT_LEN];
        util::put(
            &mut b,
            0,
            &[VERSION, KIND_RESULT, self.outcome.code(), self.hop],
        )?;
        util::put(&mut b, 4, &(reason.len() as u16).to_be_bytes())?;
        util::put(&mut b, 8, &self.elapsed_us.to_be_bytes())?;
        util::put(&mut b, 12, &u32::from(self.last).to_be_bytes())?;
        util::put(&mut b, 16, &self.nonce)?;
        self.node.write(&mut b, 32)?;
        b.extend_from_slice(reason.as_bytes());
        Ok(b)
    }
}

/// Package transfer between two nodes of the service (inside [`Message::Transfer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transfer {
    /// Send me the package's bytes from `offset`, at most `max` of them.
    Want {
        /// The package's SHA-256.
        hash: [u8; 32],
        /// First byte wanted.
        offset: u32,
        /// Most bytes wanted in answer (the sender splits them into chunks).
        max: u32,
    },
    /// Part of a package.
    Chunk {
        /// The package's SHA-256.
        hash: [u8; 32],
        /// The package's length.
        total: u32,
        /// Where `data` starts.
        offset: u32,
        /// The bytes (at most [`MAX_CHUNK`]).
        data: Vec<u8>,
    },
    /// The sender does not hold the package.
    Unavailable {
        /// The package's SHA-256.
        hash: [u8; 32],
    },
}

impl Transfer {
    /// Parses a transfer message.
    pub fn parse(buf: &[u8]) -> Result<Transfer, WireError> {
        const W: &str = "package transfer";
        util::get(buf, 0, TRANSFER_LEN, W)?;
        let hash = arr(buf, 4, W)?;
        let offset = util::u32_at(buf, 36, W)?;
        let n = util::u32_at(buf, 40, W)?;
        match util::u8_at(buf, 0, W)? {
            1 => Ok(Transfer::Want {
                hash,
                offset,
                max: n,
            }),
            2 => {
                let len = usize::from(util::u16_at(buf, 2, W)?);
                if len > MAX_CHUNK || u64::from(offset) + len as u64 > u64::from(n) {
                    return Err(WireError::BadLength {
                        what: W,
                        detail: "chunk longer than 1200 bytes or past the package's end",
                    });
                }
                Ok(Transfer::Chunk {
                    hash,
                    total: n,
                    offset,
                    data: util::get(buf, TRANSFER_LEN, len, W)?.to_vec(),
                })
            }
            3 => Ok(Transfer::Unavailable { hash }),
            _ => Err(WireError::BadField {
                what: "package transfer kind",
                detail: "not 1 (want), 2 (chunk) or 3 (unavailable)",
            }),
        }
    }

    /// The message's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        let (kind, hash, offset, n, data): (u8, &[u8; 32], u32, u32, &[u8]) = match self {
            Transfer::Want { hash, offset, max } => (1, hash, *offset, *max, &[]),
            Transfer::Chunk {
                hash,
                total,
                offset,
                data,
            } => (2, hash, *offset, *total, data),
            Transfer::Unavailable { hash } => (3, hash, 0, 0, &[]),
        };
        if data.len() > MAX_CHUNK {
            return Err(WireError::TooLarge {
                what: "package chunk",
                len: data.len(),
                max: MAX_CHUNK,
            });
        }
        let mut b = vec![0u8; TRANSFER_LEN];
        util::put(&mut b, 0, &[kind, 0])?;
        util::put(&mut b, 2, &(data.len() as u16).to_be_bytes())?;
        util::put(&mut b, 4, hash)?;
        util::put(&mut b, 36, &offset.to_be_bytes())?;
        util::put(&mut b, 40, &n.to_be_bytes())?;
        b.extend_from_slice(data);
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::v4;
    use proptest::prelude::*;

    fn request() -> Request {
        Request {
            op: Op::Deploy,
            hop: 2,
            reply_port: 40000,
            ttl_s: 30,
            pkg_len: 5000,
            expires_unix_ms: 1_800_000_000_000,
            nonce: [7; 16],
            origin: v4(198, 18, 0, 1, 3322),
            target: v4(198, 18, 0, 6, 3322),
            pkg_hash: [0xab; 32],
            signer: [0x11; 32],
            signature: [0x22; 64],
            via: v4(198, 18, 0, 2, 3322),
            name: "counter".into(),
            version: "1.0.0".into(),
            repo: String::new(),
        }
    }

    #[test]
    fn request_fixture() {
        let r = request();
        let b = r.to_bytes().unwrap();
        assert_eq!(b.len(), REQUEST_LEN + 7 + 5);
        assert_eq!(&b[..8], &[1, 1, 1, 2, 0x9c, 0x40, 7, 5]);
        assert_eq!(&b[8..12], &30u32.to_be_bytes());
        assert_eq!(&b[SIG_AT..SIG_AT + 2], &[0x22, 0x22]);
        assert_eq!(&b[REQUEST_LEN..], b"counter1.0.0");
        assert_eq!(Message::parse(&b).unwrap(), Message::Request(r.clone()));
        // The signed bytes do not depend on the hop or the signature.
        let mut other = r.clone();
        other.hop = 9;
        other.via = v4(198, 18, 0, 5, 3322);
        other.signature = [0; 64];
        assert_eq!(r.signed_bytes().unwrap(), other.signed_bytes().unwrap());
        let s = r.signed_bytes().unwrap();
        assert!(s.starts_with(DEPLOY_TAG));
        assert_eq!(s.len(), DEPLOY_TAG.len() + b.len() - 64);
        // ...but do on everything else.
        other.ttl_s = 31;
        assert_ne!(r.signed_bytes().unwrap(), other.signed_bytes().unwrap());
        // A repository URL follows the strings, its length first, and is signed too.
        let with = Request {
            repo: "http://198.18.0.9:8700".into(),
            ..r.clone()
        };
        let wb = with.to_bytes().unwrap();
        assert_eq!(&wb[..b.len()], &b[..]);
        assert_eq!(&wb[b.len()..b.len() + 2], &[0, 22]);
        assert_eq!(&wb[b.len() + 2..], b"http://198.18.0.9:8700");
        assert_eq!(Message::parse(&wb).unwrap(), Message::Request(with.clone()));
        assert_ne!(r.signed_bytes().unwrap(), with.signed_bytes().unwrap());
        // A length that does not match what follows is refused.
        assert!(Message::parse(&wb[..wb.len() - 1]).is_err());
        let mut longer = wb.clone();
        longer.push(b'x');
        assert!(Message::parse(&longer).is_err());
    }

    #[test]
    fn result_fixture() {
        let r = HopResult {
            outcome: Outcome::Refused,
            hop: 3,
            elapsed_us: 1234,
            last: true,
            nonce: [9; 16],
            node: v4(198, 18, 0, 4, 3322),
            reason: "unknown_key: not a deploy key here".into(),
        };
        let b = r.to_bytes().unwrap();
        assert_eq!(&b[..6], &[1, 2, 3, 3, 0, 34]);
        assert_eq!(&b[12..16], &[0, 0, 0, 1]);
        assert_eq!(Message::parse(&b).unwrap(), Message::Result(r));
    }

    #[test]
    fn transfer_fixture() {
        let c = Transfer::Chunk {
            hash: [1; 32],
            total: 10,
            offset: 8,
            data: vec![5, 6],
        };
        let b = c.to_bytes().unwrap();
        assert_eq!(&b[..4], &[2, 0, 0, 2]);
        assert_eq!(&b[36..44], &[0, 0, 0, 8, 0, 0, 0, 10]);
        assert_eq!(Transfer::parse(&b).unwrap(), c);
        // A chunk past the end of the package is refused.
        let mut bad = b.clone();
        bad[43] = 9;
        assert!(Transfer::parse(&bad).is_err());
        let w = Transfer::Want {
            hash: [2; 32],
            offset: 0,
            max: 65536,
        };
        assert_eq!(Transfer::parse(&w.to_bytes().unwrap()).unwrap(), w);
        let m = Message::Transfer([3; 16], c);
        let b = m.to_bytes().unwrap();
        assert_eq!(&b[..4], &[1, 3, 0, 0]);
        assert_eq!(&b[4..20], &[3; 16]);
        assert_eq!(b.len(), TRANSFER_MSG_LEN + TRANSFER_LEN + 2);
        assert_eq!(Message::parse(&b).unwrap(), m);
    }

    #[test]
    fn bad_input_is_an_error() {
        let b = request().to_bytes().unwrap();
        for n in 0..b.len() {
            assert!(Message::parse(&b[..n]).is_err(), "prefix {n}");
        }
        let mut v = b.clone();
        v[0] = 2;
        assert!(matches!(
            Message::parse(&v),
            Err(WireError::UnsupportedVersion { .. })
        ));
        let mut k = b.clone();
        k[1] = 7;
        assert!(Message::parse(&k).is_err());
        let mut n = b;
        n[6] = 0;
        assert!(Message::parse(&n).is_err());
        assert!(Transfer::parse(&[9; 44]).is_err());
    }

    #[test]
    fn packet_is_not_discarded_by_nodes_without_the_type() {
        let t = TransitRepr {
            rb: 8,
            ..Default::default()
        };
        let p = Message::Request(request()).to_packet(&t).unwrap();
        let a = crate::anep::AnepPacket::new_checked(&p[..]).unwrap();
        assert_eq!(a.type_id(), crate::anep::TYPE_DEPLOY);
        assert!(!a.discard_if_unknown());
        assert_eq!(a.destination(), Some(t.dst), "passive nodes route by it");
        let (_, tl) = TransitRepr::parse(a.payload()).unwrap();
        assert_eq!(
            Message::parse(&a.payload()[tl..]).unwrap(),
            Message::Request(request())
        );
    }

    proptest! {
        #[test]
        fn parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(m) = Message::parse(&b) {
                prop_assert_eq!(Message::parse(&m.to_bytes().unwrap()).unwrap(), m);
            }
            if let Ok(t) = Transfer::parse(&b) {
                prop_assert_eq!(Transfer::parse(&t.to_bytes().unwrap()).unwrap(), t);
            }
        }

        #[test]
        fn request_roundtrip(ttl in any::<u32>(), hop in any::<u8>(), name in "[a-z]{1,64}", version in "[0-9.]{0,64}", nonce in any::<[u8; 16]>(), repo in "(http://[a-z0-9.:/]{1,200})?") {
            let r = Request { ttl_s: ttl, hop, name, version, nonce, repo, ..request() };
            prop_assert_eq!(Message::parse(&r.to_bytes().unwrap()).unwrap(), Message::Request(r));
        }
    }
}
