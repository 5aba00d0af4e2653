//! The standard binary marshalling of PLAN values and chunks.
//!
//! Format (all integers big-endian or LEB128 varints; varints must be
//! minimal, so every value has exactly one encoding):
//!
//! ```text
//! value  := tag:u8 payload
//!   0 unit    |  1 int    zigzag varint   |  2 char  u8
//!   3 string  varint len, bytes           |  4 bool  u8 (0 or 1)
//!   5 host    u8 family (4|6), 4|16 address bytes, u16 port
//!   6 port    varint                      |  7 key   varint len, bytes
//!   8 blob    varint len, bytes           |  9 exn   varint len, UTF-8 name
//!  10 dev     varint                      | 11 list  varint count, values
//!  12 tuple   varint count (>= 2), values | 13 chunk chunk
//! chunk  := code func args
//! code   := 0                              (no code: the entry is a service)
//!         | 1 varint len, UTF-8 text       (full program text)
//!         | 2 32-byte SHA-256 of the text  (receiver must have it cached)
//! func   := varint len, UTF-8 identifier
//! args   := varint count, values
//! ```
//!
//! Decoding is checked: it never panics and never allocates more than the
//! input justifies; nesting is bounded by [`MAX_VALUE_DEPTH`]; every error
//! is a [`DecodeError`] with a reason. `decode(encode(v)) == v` for every
//! value.

use crate::value::{Chunk, Code, List, MAX_VALUE_DEPTH, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use thiserror::Error;

/// Maximum length of code text, strings and blobs accepted by the decoder.
pub const MAX_DECODE_LEN: usize = 1 << 20;

/// Why a byte string is not a valid marshalled value or chunk.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Input ended early.
    #[error("truncated input: needed {needed} more bytes at offset {at}")]
    Truncated {
        /// Offset.
        at: usize,
        /// Bytes missing.
        needed: usize,
    },
    /// Unknown value tag.
    #[error("unknown value tag {tag} at offset {at}")]
    BadTag {
        /// Tag.
        tag: u8,
        /// Offset.
        at: usize,
    },
    /// Varint longer than 10 bytes, overflowing or not minimal.
    #[error("malformed varint at offset {at}")]
    BadVarint {
        /// Offset.
        at: usize,
    },
    /// A length or count is larger than the input or a limit.
    #[error("length {len} at offset {at} exceeds the input or the limit")]
    TooLong {
        /// Declared length.
        len: u64,
        /// Offset.
        at: usize,
    },
    /// Nesting deeper than the value depth limit.
    #[error("value nested deeper than {MAX_VALUE_DEPTH} levels")]
    TooDeep,
    /// A field that must be UTF-8 is not.
    #[error("{what} at offset {at} is not valid UTF-8")]
    BadUtf8 {
        /// Which field.
        what: &'static str,
        /// Offset.
        at: usize,
    },
    /// A field has an invalid value.
    #[error("invalid {what} at offset {at}")]
    Invalid {
        /// Which field.
        what: &'static str,
        /// Offset.
        at: usize,
    },
    /// Bytes left after the top-level item.
    #[error("{0} trailing bytes after the encoded item")]
    Trailing(usize),
}

// ------------------------------------------------------------------ encode

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Appends the encoding of `v` to `out`.
pub fn encode_value_into(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Unit => out.push(0),
        Value::Int(i) => {
            out.push(1);
            put_varint(out, ((i << 1) ^ (i >> 63)) as u64);
        }
        Value::Char(c) => out.extend_from_slice(&[2, *c]),
        Value::Str(s) => {
            out.push(3);
            put_bytes(out, s);
        }
        Value::Bool(b) => out.extend_from_slice(&[4, u8::from(*b)]),
        Value::Host(h) => {
            out.push(5);
            match h.ip() {
                IpAddr::V4(a) => {
                    out.push(4);
                    out.extend_from_slice(&a.octets());
                }
                IpAddr::V6(a) => {
                    out.push(6);
                    out.extend_from_slice(&a.octets());
                }
            }
            out.extend_from_slice(&h.port().to_be_bytes());
        }
        Value::Port(p) => {
            out.push(6);
            put_varint(out, u64::from(*p));
        }
        Value::Key(k) => {
            out.push(7);
            put_bytes(out, k);
        }
        Value::Blob(b) => {
            out.push(8);
            put_bytes(out, b);
        }
        Value::Exn(e) => {
            out.push(9);
            put_bytes(out, e.as_bytes());
        }
        Value::Dev(d) => {
            out.push(10);
            put_varint(out, u64::from(*d));
        }
        Value::List(l) => {
            out.push(11);
            put_varint(out, l.len() as u64);
            for x in l.iter() {
                encode_value_into(out, x);
            }
        }
        Value::Tuple(t) => {
            out.push(12);
            put_varint(out, t.items().len() as u64);
            for x in t.items() {
                encode_value_into(out, x);
            }
        }
        Value::Chunk(c) => {
            out.push(13);
            encode_chunk_into(out, c);
        }
    }
}

/// Encodes a value.
pub fn encode_value(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value_into(&mut out, v);
    out
}

/// Encodes an argument list as chunks carry theirs: a varint count, then each value (what
/// typed PLAN-service modules receive).
pub fn encode_args(args: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, args.len() as u64);
    for a in args {
        encode_value_into(&mut out, a);
    }
    out
}

/// Appends the encoding of a chunk.
pub fn encode_chunk_into(out: &mut Vec<u8>, c: &Chunk) {
    match &c.code {
        None => out.push(0),
        Some(Code::Text { text, .. }) => {
            out.push(1);
            put_bytes(out, text.as_bytes());
        }
        Some(Code::Hash(h)) => {
            out.push(2);
            out.extend_from_slice(h);
        }
    }
    put_bytes(out, c.func.as_bytes());
    put_varint(out, c.args.len() as u64);
    for a in &c.args {
        encode_value_into(out, a);
    }
}

/// Encodes a chunk.
pub fn encode_chunk(c: &Chunk) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        64 + c.code.as_ref().map_or(0, |c| match c {
            Code::Text { text, .. } => text.len(),
            Code::Hash(_) => 32,
        }),
    );
    encode_chunk_into(&mut out, c);
    out
}

/// Encodes a chunk sending only the hash of its code (for receivers known
/// to have the program cached).
pub fn encode_chunk_hash_only(c: &Chunk) -> Vec<u8> {
    let mut out = Vec::new();
    match &c.code {
        None => out.push(0),
        Some(code) => {
            out.push(2);
            out.extend_from_slice(code.hash());
        }
    }
    put_bytes(&mut out, c.func.as_bytes());
    put_varint(&mut out, c.args.len() as u64);
    for a in &c.args {
        encode_value_into(&mut out, a);
    }
    out
}

// ------------------------------------------------------------------ decode

/// A cursor over input bytes.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Current offset.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Takes `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or(DecodeError::Truncated {
                at: self.pos,
                needed: n.saturating_sub(self.remaining()),
            })?;
        let s = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated {
            at: self.pos,
            needed: n,
        })?;
        self.pos = end;
        Ok(s)
    }

    /// Takes one byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?.first().copied().unwrap_or(0))
    }

    /// Reads a minimal LEB128 varint.
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let at = self.pos;
        let mut v: u64 = 0;
        for i in 0..10u32 {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7f);
            if i == 9 && bits > 1 {
                return Err(DecodeError::BadVarint { at });
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                if i > 0 && b == 0 {
                    return Err(DecodeError::BadVarint { at });
                }
                return Ok(v);
            }
        }
        Err(DecodeError::BadVarint { at })
    }

    /// Reads a length that must fit in the remaining input and `limit`.
    pub fn len(&mut self, limit: usize) -> Result<usize, DecodeError> {
        let at = self.pos;
        let n = self.varint()?;
        match usize::try_from(n) {
            Ok(n) if n <= limit && n <= self.remaining() => Ok(n),
            _ => Err(DecodeError::TooLong { len: n, at }),
        }
    }

    /// Reads a length-prefixed byte string.
    pub fn bytes(&mut self, limit: usize) -> Result<&'a [u8], DecodeError> {
        let n = self.len(limit)?;
        self.take(n)
    }

    /// Reads a length-prefixed UTF-8 string.
    pub fn string(&mut self, limit: usize, what: &'static str) -> Result<&'a str, DecodeError> {
        let at = self.pos;
        let b = self.bytes(limit)?;
        std::str::from_utf8(b).map_err(|_| DecodeError::BadUtf8 { what, at })
    }

    /// Fails unless the input is exhausted.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

fn valid_func_name(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '\'')
        && s.len() <= 255
}

/// Decodes one value from the reader.
pub fn read_value(r: &mut Reader<'_>, depth: u16) -> Result<Value, DecodeError> {
    let at = r.pos();
    let tag = r.u8()?;
    Ok(match tag {
        0 => Value::Unit,
        1 => {
            let z = r.varint()?;
            Value::Int(((z >> 1) as i64) ^ -((z & 1) as i64))
        }
        2 => Value::Char(r.u8()?),
        3 => Value::Str(Arc::from(r.bytes(MAX_DECODE_LEN)?)),
        4 => match r.u8()? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            _ => return Err(DecodeError::Invalid { what: "bool", at }),
        },
        5 => {
            let fam = r.u8()?;
            let ip = match fam {
                4 => {
                    let b = r.take(4)?;
                    let mut a = [0u8; 4];
                    a.copy_from_slice(b);
                    IpAddr::V4(Ipv4Addr::from(a))
                }
                6 => {
                    let b = r.take(16)?;
                    let mut a = [0u8; 16];
                    a.copy_from_slice(b);
                    IpAddr::V6(Ipv6Addr::from(a))
                }
                _ => {
                    return Err(DecodeError::Invalid {
                        what: "host address family",
                        at,
                    });
                }
            };
            let p = r.take(2)?;
            let port = u16::from_be_bytes([
                p.first().copied().unwrap_or(0),
                p.get(1).copied().unwrap_or(0),
            ]);
            Value::Host(SocketAddr::new(ip, port))
        }
        6 => Value::Port(
            u32::try_from(r.varint()?).map_err(|_| DecodeError::Invalid { what: "port", at })?,
        ),
        7 => Value::Key(Arc::from(r.bytes(MAX_DECODE_LEN)?)),
        8 => Value::Blob(Arc::from(r.bytes(MAX_DECODE_LEN)?)),
        9 => {
            let name = r.string(255, "exception name")?;
            if !valid_func_name(name) {
                return Err(DecodeError::Invalid {
                    what: "exception name",
                    at,
                });
            }
            Value::Exn(Arc::from(name))
        }
        10 => Value::Dev(
            u32::try_from(r.varint()?).map_err(|_| DecodeError::Invalid { what: "dev", at })?,
        ),
        11 | 12 => {
            if depth >= MAX_VALUE_DEPTH {
                return Err(DecodeError::TooDeep);
            }
            // Every element takes at least one byte.
            let n = r.len(usize::MAX)?;
            if tag == 12 && n < 2 {
                return Err(DecodeError::Invalid {
                    what: "tuple arity",
                    at,
                });
            }
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(read_value(r, depth + 1)?);
            }
            let v = if tag == 11 {
                List::from_vec(items).map(Value::List)
            } else {
                Value::tuple(items)
            };
            v.map_err(|_| DecodeError::TooDeep)?
        }
        13 => {
            if depth >= MAX_VALUE_DEPTH {
                return Err(DecodeError::TooDeep);
            }
            Value::Chunk(Arc::new(read_chunk(r, depth + 1)?))
        }
        _ => return Err(DecodeError::BadTag { tag, at }),
    })
}

/// Decodes one chunk from the reader.
pub fn read_chunk(r: &mut Reader<'_>, depth: u16) -> Result<Chunk, DecodeError> {
    let at = r.pos();
    let code = match r.u8()? {
        0 => None,
        1 => {
            let text = r.string(MAX_DECODE_LEN, "code text")?;
            Some(Code::from_text(text))
        }
        2 => {
            let h = r.take(32)?;
            let mut a = [0u8; 32];
            a.copy_from_slice(h);
            Some(Code::Hash(a))
        }
        _ => {
            return Err(DecodeError::Invalid {
                what: "code tag",
                at,
            });
        }
    };
    let fat = r.pos();
    let func = r.string(255, "function name")?;
    if !valid_func_name(func) {
        return Err(DecodeError::Invalid {
            what: "function name",
            at: fat,
        });
    }
    let n = r.len(usize::MAX)?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        args.push(read_value(r, depth)?);
    }
    Chunk::new(code, func, args).map_err(|_| DecodeError::TooDeep)
}

/// Decodes a value occupying all of `bytes`.
pub fn decode_value(bytes: &[u8]) -> Result<Value, DecodeError> {
    let mut r = Reader::new(bytes);
    let v = read_value(&mut r, 0)?;
    r.finish()?;
    Ok(v)
}

/// Decodes a chunk occupying all of `bytes`.
pub fn decode_chunk(bytes: &[u8]) -> Result<Chunk, DecodeError> {
    let mut r = Reader::new(bytes);
    let c = read_chunk(&mut r, 0)?;
    r.finish()?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixtures() {
        assert_eq!(encode_value(&Value::Unit), [0]);
        assert_eq!(encode_value(&Value::Int(-1)), [1, 1]);
        assert_eq!(encode_value(&Value::Int(300)), [1, 0xd8, 0x04]);
        assert_eq!(encode_value(&Value::str("hi")), [3, 2, b'h', b'i']);
        assert_eq!(
            encode_value(&Value::Host("1.2.3.4:3322".parse().unwrap())),
            [5, 4, 1, 2, 3, 4, 0x0c, 0xfa]
        );
        let l = Value::list(vec![Value::Bool(true), Value::Bool(false)]).unwrap();
        assert_eq!(encode_value(&l), [11, 2, 4, 1, 4, 0]);
        let t = Value::tuple(vec![Value::Char(b'a'), Value::Dev(3)]).unwrap();
        assert_eq!(encode_value(&t), [12, 2, 2, b'a', 10, 3]);
        let c = Chunk::new(None, "print", vec![Value::Int(2)]).unwrap();
        assert_eq!(
            encode_chunk(&c),
            [0, 5, b'p', b'r', b'i', b'n', b't', 1, 1, 4]
        );
        assert_eq!(decode_chunk(&encode_chunk(&c)).unwrap(), c);
    }

    #[test]
    fn rejects() {
        assert!(matches!(
            decode_value(&[]),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            decode_value(&[99]),
            Err(DecodeError::BadTag { tag: 99, .. })
        ));
        assert!(matches!(
            decode_value(&[1, 0x80, 0x00]),
            Err(DecodeError::BadVarint { .. })
        ));
        assert!(matches!(
            decode_value(&[4, 2]),
            Err(DecodeError::Invalid { .. })
        ));
        assert!(matches!(
            decode_value(&[3, 5, b'a']),
            Err(DecodeError::TooLong { .. })
        ));
        assert!(matches!(
            decode_value(&[0, 0]),
            Err(DecodeError::Trailing(1))
        ));
        assert!(matches!(
            decode_value(&[12, 1, 0]),
            Err(DecodeError::Invalid { .. })
        ));
        assert!(matches!(
            decode_value(&[11, 0xff, 0xff, 0xff, 0xff, 0x0f]),
            Err(DecodeError::TooLong { .. })
        ));
        let mut deep = [11u8, 1].repeat(200);
        deep.push(0);
        assert!(matches!(decode_value(&deep), Err(DecodeError::TooDeep)));
        assert!(matches!(
            decode_chunk(&[0, 2, b'1', b'x', 0]),
            Err(DecodeError::Invalid {
                what: "function name",
                ..
            })
        ));
    }
}
