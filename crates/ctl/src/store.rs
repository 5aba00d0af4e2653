//! `anode store`: the key-value store capsule protocol (`guest/protocols/store`) from the
//! command line: get, put and delete a key at a node, whose files keep it (capsule ABI v2).
//!
//! Payload (big-endian): `op u8 | status u8 | port u16 | key_len u8 | pad u8 | value_len u16 |
//! key | value` (8 header bytes); ops 1 get, 2 put, 3 delete, replies `op | 0x80`.
//! Contract: keys are checked here as the node checks them (1-64 bytes of `A-Z a-z 0-9 . _
//! -`), values bounded by [`MAX_VALUE`]; every wait is bounded; a request without a reply
//! is sent again every [`RESEND`] until the wait ends (get and put are idempotent; a delete
//! whose first reply was lost answers "no key" the second time).

use std::time::{Duration, Instant};

use anode_wire::NodeAddr;

use crate::CapsuleSession;

/// Header bytes before the key.
pub const HDR: usize = 8;
/// The largest value (the protocol's bound).
pub const MAX_VALUE: usize = 1024;
/// The longest key.
pub const MAX_KEY: usize = 64;
const REPLY: u8 = 0x80;
/// How long a request waits for its reply before it is sent again.
pub const RESEND: Duration = Duration::from_secs(1);

/// An operation on a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Read the value.
    Get = 1,
    /// Write the value.
    Put = 2,
    /// Remove the key.
    Delete = 3,
}

/// Why an operation did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The key is not a plain name within the bound.
    #[error(
        "key {0:?}: give 1-{MAX_KEY} characters of A-Z a-z 0-9 . _ - (it names a file at the node)"
    )]
    BadKey(String),
    /// The value is larger than the protocol carries.
    #[error("the value is {0} bytes; the store takes at most {MAX_VALUE}")]
    ValueTooBig(usize),
    /// The node has no such key.
    #[error("no key {0:?} at {1}")]
    NoKey(String, NodeAddr),
    /// The node refused the write (its file quotas for the store's code object).
    #[error("{1} refused key {0:?}: over its file quotas for the store ([capsule] file_quota_*)")]
    Refused(String, NodeAddr),
    /// The node's value is too big for a reply, or the node's bound per file is smaller.
    #[error("key {0:?} at {1}: the value is too big")]
    TooBig(String, NodeAddr),
    /// The node found the request malformed.
    #[error("{0} found the request malformed")]
    Malformed(NodeAddr),
    /// No reply came.
    #[error("no reply from {0} within {1:?} (the request or its reply was lost; try again)")]
    NoReply(NodeAddr, Duration),
    /// The node or the control connection failed.
    #[error("{0}")]
    Session(String),
}

/// Checks a key as the node does.
pub fn check_key(key: &str) -> Result<(), StoreError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if key.is_empty() || key.len() > MAX_KEY || !key.chars().all(plain) || key == "." || key == ".."
    {
        return Err(StoreError::BadKey(key.to_string()));
    }
    Ok(())
}

/// The request payload.
pub fn request(op: Op, port: u16, key: &str, value: &[u8]) -> Result<Vec<u8>, StoreError> {
    check_key(key)?;
    if value.len() > MAX_VALUE {
        return Err(StoreError::ValueTooBig(value.len()));
    }
    let mut p = vec![op as u8, 0];
    p.extend_from_slice(&port.to_be_bytes());
    p.extend_from_slice(&[key.len() as u8, 0]);
    p.extend_from_slice(&(value.len() as u16).to_be_bytes());
    p.extend_from_slice(key.as_bytes());
    p.extend_from_slice(value);
    Ok(p)
}

/// A reply's outcome: the value (for a get; empty otherwise) or why not.
pub fn outcome(reply: &[u8], key: &str, at: NodeAddr) -> Result<Vec<u8>, StoreError> {
    let (Some(&status), Some(&klen)) = (reply.get(1), reply.get(4)) else {
        return Err(StoreError::Malformed(at));
    };
    let vlen = reply
        .get(6..8)
        .map_or(0, |b| usize::from(u16::from_be_bytes([b[0], b[1]])));
    let start = HDR + usize::from(klen);
    let k = || key.to_string();
    match status {
        0 => reply
            .get(start..start + vlen)
            .map(<[u8]>::to_vec)
            .ok_or(StoreError::Malformed(at)),
        1 => Err(StoreError::NoKey(k(), at)),
        2 => Err(StoreError::Refused(k(), at)),
        3 => Err(StoreError::TooBig(k(), at)),
        _ => Err(StoreError::Malformed(at)),
    }
}

/// Does `op` on `key` at `dest` and waits (at most `wait`) for the reply: the value for a
/// get, empty otherwise.
pub fn call(
    s: &mut CapsuleSession,
    dest: NodeAddr,
    (op, key, value): (Op, &str, &[u8]),
    rb: u16,
    wait: Duration,
) -> Result<Vec<u8>, StoreError> {
    let p = request(op, s.port(), key, value)?;
    let deadline = Instant::now() + wait;
    let mine = |r: &[u8]| {
        r.first() == Some(&(op as u8 | REPLY))
            && r.get(4).map(|&l| usize::from(l)) == Some(key.len())
            && r.get(HDR..HDR + key.len()) == Some(key.as_bytes())
    };
    // Sent again every RESEND without a reply (the first may wait for the destination to
    // load the code, or be lost); a get or put done twice is the same as once.
    loop {
        s.inject(dest, rb, 0, &p).map_err(StoreError::Session)?;
        let next = (Instant::now() + RESEND).min(deadline);
        while let Some(r) = s.next(next).map_err(StoreError::Session)? {
            if mine(&r) {
                return outcome(&r, key, dest);
            }
        }
        if Instant::now() >= deadline {
            return Err(StoreError::NoReply(dest, wait));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_laid_out_as_the_protocol_reads_them() {
        let p = request(Op::Put, 0x1234, "k1", b"v").unwrap();
        assert_eq!(p, [2, 0, 0x12, 0x34, 2, 0, 0, 1, b'k', b'1', b'v']);
        for bad in ["", "a/b", "..", "sp ace", &"x".repeat(65)] {
            assert!(
                matches!(check_key(bad), Err(StoreError::BadKey(_))),
                "{bad}"
            );
        }
        assert_eq!(
            request(Op::Put, 1, "k", &[0; 1025]),
            Err(StoreError::ValueTooBig(1025))
        );
    }

    #[test]
    fn replies_give_the_value_or_the_reason() {
        let at: NodeAddr = "198.18.0.1:4000".parse().unwrap();
        let mut r = vec![0x81, 0, 0, 9, 1, 0, 0, 2, b'k', b'h', b'i'];
        assert_eq!(outcome(&r, "k", at).unwrap(), b"hi");
        r[1] = 1;
        assert!(matches!(outcome(&r, "k", at), Err(StoreError::NoKey(..))));
        r[1] = 2;
        assert!(matches!(outcome(&r, "k", at), Err(StoreError::Refused(..))));
        // A value length past the end is malformed, not a panic.
        r[1] = 0;
        r[7] = 200;
        assert_eq!(outcome(&r, "k", at), Err(StoreError::Malformed(at)));
        assert_eq!(outcome(&[0x81], "k", at), Err(StoreError::Malformed(at)));
    }
}
