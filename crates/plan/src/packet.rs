//! The PLAN packet body (PLANet paper, Fig. 2) minus the routing prefix.
//!
//! anode's common transit header (crate `anode-wire`, written separately)
//! already carries `evalDest`, `source`, the resource bound `rb`, `flowId`
//! and the previous hop; this module does **not** duplicate them. What
//! follows that header is the PLAN body encoded here:
//!
//! ```text
//! offset size  field
//! 0      1     magic 0xA7
//! 1      1     version (1)
//! 2      4     session   u32 big-endian   (application demultiplexing)
//! 6      1     len(routFun)  then routFun bytes (identifier, 1..=255)
//! .      1     len(handler)  then handler bytes (identifier or empty)
//! .      4     len(chunk) u32 big-endian, then the marshalled chunk
//! ```
//!
//! The header is fixed-size or length-prefixed and comes first, so a router
//! doing passive forwarding reads `routFun` with [`peek_header`] — without
//! allocating and without unmarshalling the chunk, which stays an opaque
//! byte tail. Only the evaluation destination decodes the chunk
//! ([`decode_body`]).

use crate::marshal::{DecodeError, decode_chunk, encode_chunk_into};
use crate::value::Chunk;
use thiserror::Error;

/// First byte of every PLAN body.
pub const MAGIC: u8 = 0xA7;
/// Current body format version.
pub const VERSION: u8 = 1;

/// Errors reading a PLAN body.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PacketError {
    /// The body is shorter than its header says.
    #[error("PLAN body truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// Wrong magic byte.
    #[error("not a PLAN body (magic byte {0:#04x}, expected 0xa7)")]
    BadMagic(u8),
    /// Unknown version.
    #[error("unsupported PLAN body version {0}")]
    BadVersion(u8),
    /// routFun/handler is not an identifier.
    #[error("{0} is not a valid PLAN identifier")]
    BadName(&'static str),
    /// Bytes after the chunk.
    #[error("{0} bytes after the chunk")]
    Trailing(usize),
    /// The chunk does not unmarshal.
    #[error("bad chunk: {0}")]
    Chunk(#[from] DecodeError),
}

/// The PLAN-specific packet header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanHeader {
    /// Session identifier: which application on the source the packet
    /// belongs to.
    pub session: u32,
    /// Name of the routing service used to reach the evaluation
    /// destination (e.g. `defaultRoute`).
    pub route_fun: String,
    /// Name of the error handler on the source (may be empty).
    pub handler: String,
}

/// A borrowed view of the header, as read by [`peek_header`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanHeaderRef<'a> {
    /// Session identifier.
    pub session: u32,
    /// Routing function name.
    pub route_fun: &'a str,
    /// Handler name.
    pub handler: &'a str,
}

impl PlanHeaderRef<'_> {
    /// Owned copy.
    pub fn to_owned(&self) -> PlanHeader {
        PlanHeader {
            session: self.session,
            route_fun: self.route_fun.to_string(),
            handler: self.handler.to_string(),
        }
    }
}

/// Whether `s` is a PLAN identifier (what routFun and handler names must be).
pub fn is_ident(s: &str) -> bool {
    ident_ok(s, false)
}

fn ident_ok(s: &str, allow_empty: bool) -> bool {
    if s.is_empty() {
        return allow_empty;
    }
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '\'')
}

fn push_name(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    let n = b.len().min(255);
    out.push(u8::try_from(n).unwrap_or(255));
    out.extend_from_slice(b.get(..n).unwrap_or(b));
}

/// Encodes a header followed by already-marshalled chunk bytes.
pub fn encode_body_raw(h: &PlanHeader, chunk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + h.route_fun.len() + h.handler.len() + chunk.len());
    out.push(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&h.session.to_be_bytes());
    push_name(&mut out, &h.route_fun);
    push_name(&mut out, &h.handler);
    let n = u32::try_from(chunk.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(chunk);
    out
}

/// Encodes a header and a chunk.
pub fn encode_body(h: &PlanHeader, chunk: &Chunk) -> Vec<u8> {
    let mut c = Vec::new();
    encode_chunk_into(&mut c, chunk);
    encode_body_raw(h, &c)
}

fn take<'a>(b: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], PacketError> {
    let end = at.checked_add(n).unwrap_or(usize::MAX);
    let s = b.get(*at..end).ok_or(PacketError::Truncated {
        need: end,
        have: b.len(),
    })?;
    *at = end;
    Ok(s)
}

fn name<'a>(
    b: &'a [u8],
    at: &mut usize,
    what: &'static str,
    allow_empty: bool,
) -> Result<&'a str, PacketError> {
    let n = take(b, at, 1)?.first().copied().unwrap_or(0);
    let s = std::str::from_utf8(take(b, at, usize::from(n))?)
        .map_err(|_| PacketError::BadName(what))?;
    if !ident_ok(s, allow_empty) {
        return Err(PacketError::BadName(what));
    }
    Ok(s)
}

/// Reads the header and returns it with the (still marshalled) chunk bytes.
/// Allocation-free; the chunk is not decoded.
pub fn peek_header(b: &[u8]) -> Result<(PlanHeaderRef<'_>, &[u8]), PacketError> {
    let mut at = 0;
    let hd = take(b, &mut at, 6)?;
    let (Some(&magic), Some(&version)) = (hd.first(), hd.get(1)) else {
        return Err(PacketError::Truncated {
            need: 6,
            have: b.len(),
        });
    };
    if magic != MAGIC {
        return Err(PacketError::BadMagic(magic));
    }
    if version != VERSION {
        return Err(PacketError::BadVersion(version));
    }
    let mut s = [0u8; 4];
    s.copy_from_slice(hd.get(2..6).unwrap_or(&[0; 4]));
    let session = u32::from_be_bytes(s);
    let route_fun = name(b, &mut at, "routFun", false)?;
    let handler = name(b, &mut at, "handler", true)?;
    let mut l = [0u8; 4];
    l.copy_from_slice(take(b, &mut at, 4)?);
    let len = usize::try_from(u32::from_be_bytes(l)).unwrap_or(usize::MAX);
    let chunk = take(b, &mut at, len)?;
    if at != b.len() {
        return Err(PacketError::Trailing(b.len() - at));
    }
    Ok((
        PlanHeaderRef {
            session,
            route_fun,
            handler,
        },
        chunk,
    ))
}

/// Decodes the whole body: header and chunk.
pub fn decode_body(b: &[u8]) -> Result<(PlanHeader, Chunk), PacketError> {
    let (h, c) = peek_header(b)?;
    Ok((h.to_owned(), decode_chunk(c)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    #[test]
    fn fixture_and_roundtrip() {
        let h = PlanHeader {
            session: 7,
            route_fun: "defaultRoute".into(),
            handler: "".into(),
        };
        let c = Chunk::new(None, "print", vec![Value::Unit]).unwrap();
        let b = encode_body(&h, &c);
        let mut want = vec![0xA7, 1, 0, 0, 0, 7, 12];
        want.extend_from_slice(b"defaultRoute");
        want.extend_from_slice(&[0, 0, 0, 0, 9, 0, 5]);
        want.extend_from_slice(b"print");
        want.extend_from_slice(&[1, 0]);
        assert_eq!(b, want);
        let (hr, tail) = peek_header(&b).unwrap();
        assert_eq!(hr.route_fun, "defaultRoute");
        assert_eq!(tail.len(), 9);
        assert_eq!(decode_body(&b).unwrap(), (h, c));
    }

    #[test]
    fn rejects() {
        assert!(matches!(
            peek_header(&[]),
            Err(PacketError::Truncated { .. })
        ));
        assert!(matches!(
            peek_header(&[0, 1, 0, 0, 0, 0]),
            Err(PacketError::BadMagic(0))
        ));
        assert!(matches!(
            peek_header(&[0xA7, 9, 0, 0, 0, 0]),
            Err(PacketError::BadVersion(9))
        ));
        assert!(matches!(
            peek_header(&[0xA7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(PacketError::BadName("routFun"))
        ));
        assert!(matches!(
            peek_header(&[0xA7, 1, 0, 0, 0, 0, 1, b'r', 0, 0, 0, 0, 5, 1]),
            Err(PacketError::Truncated { .. })
        ));
        assert!(matches!(
            peek_header(&[0xA7, 1, 0, 0, 0, 0, 1, b'r', 0, 0, 0, 0, 0, 1]),
            Err(PacketError::Trailing(1))
        ));
    }
}
