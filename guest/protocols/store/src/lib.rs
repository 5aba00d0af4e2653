//! A key-value store kept in the destination node's files (the NodeOS interface's files,
//! capsule ABI v2): what is put stays across capsules, soft-state expiry and node restarts,
//! within the node's file quotas for this code object.
//!
//! Payload (big-endian): `op u8 | status u8 | port u16 | key_len u8 | pad u8 | value_len u16 |
//! key | value` (8 header bytes).
//! - requests (`op` 1 get, 2 put, 3 delete) are forwarded to their destination, which does
//!   the operation and sends a reply capsule back to the source with the rest of the resource
//!   bound: `op | 0x80`, `status`, the same port and key, and for a get the value;
//! - a reply at its destination (the requester's node) is delivered to `port`.
//!
//! Status: 0 done, 1 no such key, 2 refused (a key that is not a plain name, or over the
//! node's file quotas), 3 too big (a value over [`MAX_VALUE`] bytes), 4 malformed request.
//! Keys are 1-64 bytes of `A-Z a-z 0-9 . _ -`; each is the file `kv/<key>`.

#![no_std]

use anode_sdk::{Capsule, Error, Verdict, Why, be16, files};

const HDR: usize = 8;
const GET: u8 = 1;
const PUT: u8 = 2;
const DELETE: u8 = 3;
const REPLY: u8 = 0x80;
/// The largest value: a reply carrying it still fits a 1,280-byte path MTU.
pub const MAX_VALUE: usize = 1024;
const MAX_KEY: usize = 64;

const DONE: u8 = 0;
const NO_KEY: u8 = 1;
const REFUSED: u8 = 2;
const TOO_BIG: u8 = 3;
const MALFORMED: u8 = 4;

/// The file of `key`: `kv/<key>` (the node checks the name).
fn path<'a>(key: &[u8], buf: &'a mut [u8; 3 + MAX_KEY]) -> Option<&'a str> {
    let p = buf.get_mut(..3 + key.len())?;
    p[..3].copy_from_slice(b"kv/");
    p[3..].copy_from_slice(key);
    core::str::from_utf8(p).ok()
}

fn status_of(e: Error) -> u8 {
    match e {
        Error::NotFound => NO_KEY,
        Error::TooBig => TOO_BIG,
        _ => REFUSED,
    }
}

/// Does the operation; the reply's status and value length (the value is in `value`).
fn serve(op: u8, key: &[u8], value: &mut [u8; MAX_VALUE], vlen: usize) -> (u8, usize) {
    let mut pb = [0u8; 3 + MAX_KEY];
    let Some(p) = path(key, &mut pb) else {
        return (REFUSED, 0);
    };
    match op {
        GET => match files::read(p, 0, value) {
            Ok(n) if n > MAX_VALUE => (TOO_BIG, 0),
            Ok(n) => (DONE, n),
            Err(e) => (status_of(e), 0),
        },
        PUT => match files::write(p, &value[..vlen]) {
            Ok(()) => (DONE, 0),
            Err(e) => (status_of(e), 0),
        },
        DELETE => match files::delete(p) {
            Ok(()) => (DONE, 0),
            Err(e) => (status_of(e), 0),
        },
        _ => (MALFORMED, 0),
    }
}

fn accept(cap: &mut Capsule, why: Why) -> Verdict {
    let mut h = [0u8; HDR];
    if cap.read(0, &mut h) != Ok(HDR) {
        return Verdict::Drop;
    }
    let (op, port) = (h[0], be16(&h, 2));
    if why != Why::Destination {
        return Verdict::Forward;
    }
    if op & REPLY != 0 {
        return match cap.deliver(port) {
            Ok(()) => Verdict::Done,
            Err(_) => Verdict::Drop,
        };
    }
    let (klen, vlen) = (usize::from(h[4]), usize::from(be16(&h, 6)));
    let mut key = [0u8; MAX_KEY];
    let mut value = [0u8; MAX_VALUE];
    let (status, out_len) = if klen == 0 || klen > MAX_KEY {
        (MALFORMED, 0)
    } else if vlen > MAX_VALUE {
        (TOO_BIG, 0)
    } else if cap.read(HDR, &mut key[..klen]) != Ok(klen)
        || cap.read(HDR + klen, &mut value[..vlen]) != Ok(vlen)
    {
        (MALFORMED, 0)
    } else {
        serve(op, &key[..klen], &mut value, vlen)
    };
    let Ok(info) = cap.info() else {
        return Verdict::Drop;
    };
    let klen = if status == MALFORMED { 0 } else { klen };
    let mut reply = [0u8; HDR + MAX_KEY + MAX_VALUE];
    reply[0] = op | REPLY;
    reply[1] = status;
    reply[2..4].copy_from_slice(&port.to_be_bytes());
    reply[4] = klen as u8;
    reply[6..8].copy_from_slice(&(out_len as u16).to_be_bytes());
    reply[HDR..HDR + klen].copy_from_slice(&key[..klen]);
    reply[HDR + klen..HDR + klen + out_len].copy_from_slice(&value[..out_len]);
    match cap.send(
        &info.src,
        None,
        info.rb,
        info.flow,
        &reply[..HDR + klen + out_len],
    ) {
        Ok(()) => Verdict::Done,
        Err(_) => Verdict::Drop,
    }
}

anode_sdk::export_accept_v2!(accept);

anode_sdk::protocol_name!(b"store");
