//! The service routines known to this crate.
//!
//! Pure utilities (lists, strings, conversions) are implemented here;
//! routines that touch the node (`thisHost`, `defaultRoute`, `print`, ...)
//! are dispatched by the evaluator to [`crate::Services`]; packet-context
//! routines (`getRB`, `getSource`, `getSrcDev`, `getImplicitPort`) read the
//! [`crate::EvalContext`]. [`BUILTINS`] gives every routine's name and PLAN
//! type; these are the "core services" that programs may use without a
//! `svc` declaration.

use crate::value::{List, Value};
use std::sync::Arc;

/// Builtin service routines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `thisHost : void -> host list`
    ThisHost,
    /// `thisHostIs : host -> bool`
    ThisHostIs,
    /// `getRB : void -> int`
    GetRb,
    /// `getSource : void -> host`
    GetSource,
    /// `getSrcDev : void -> dev`
    GetSrcDev,
    /// `getImplicitPort : void -> port`
    GetImplicitPort,
    /// `getNeighbors : void -> (host * dev) list`
    GetNeighbors,
    /// `defaultRoute : host -> host * dev`
    DefaultRoute,
    /// `print : 'a -> unit`
    Print,
    /// `deliver : (port, 'a) -> unit`
    Deliver,
    /// `getHostByName : string -> host`
    GetHostByName,
    /// `fragment : ('a chunk, int) -> unit chunk list`
    Fragment,
    /// `fragPiece : (int, int, int, blob) -> unit`
    FragPiece,
    /// `eval : 'a chunk -> 'a`
    Eval,
    /// `abort : 'a chunk -> 'b`: ends the packet; the chunk is evaluated back at the source
    Abort,
    /// `length : 'a list -> int`
    Length,
    /// `member : ('a, 'a list) -> bool`
    Member,
    /// `rev : 'a list -> 'a list`
    Rev,
    /// `nth : ('a list, int) -> 'a`
    Nth,
    /// `append : ('a list, 'a list) -> 'a list`
    Append,
    /// `toString : 'a -> string`
    ToString,
    /// `intToString : int -> string`
    IntToString,
    /// `stringToInt : string -> int`
    StringToInt,
    /// `strlen : string -> int`
    Strlen,
    /// `substr : (string, int, int) -> string`
    Substr,
    /// `hostToString : host -> string`
    HostToString,
    /// `stringToBlob : string -> blob`
    StringToBlob,
    /// `blobToString : blob -> string`
    BlobToString,
    /// `blobLength : blob -> int`
    BlobLength,
    /// `authEval : ('a chunk, key, blob) -> 'a` (auth package): evaluates the chunk if the
    /// blob is a signature of it by a key this node trusts
    AuthEval,
    /// `keyFromHex : string -> key` (auth package)
    KeyFromHex,
    /// `blobFromHex : string -> blob`
    BlobFromHex,
    /// `blobToHex : blob -> string`
    BlobToHex,
    /// `checksum : blob -> int` (csum package): the Internet checksum (RFC 1071)
    Checksum,
    /// `openPort : int -> port` (port package): the PLAN port of that number
    OpenPort,
    /// `retransDeliver : (host, int, 'a chunk) -> unit` (reliable package): acknowledges a
    /// `RetransOnRemote` packet to its sender and evaluates its chunk the first time only
    RetransDeliver,
    /// `retransAck : int -> unit` (reliable package): the acknowledgement, at the sender
    RetransAck,
}

/// Name, PLAN type and routine of every builtin service.
pub const BUILTINS: &[(&str, &str, Builtin)] = &[
    ("thisHost", "void -> host list", Builtin::ThisHost),
    ("thisHostIs", "host -> bool", Builtin::ThisHostIs),
    ("getRB", "void -> int", Builtin::GetRb),
    ("getSource", "void -> host", Builtin::GetSource),
    ("getSrcDev", "void -> dev", Builtin::GetSrcDev),
    ("getImplicitPort", "void -> port", Builtin::GetImplicitPort),
    (
        "getNeighbors",
        "void -> (host * dev) list",
        Builtin::GetNeighbors,
    ),
    ("defaultRoute", "host -> host * dev", Builtin::DefaultRoute),
    ("print", "'a -> unit", Builtin::Print),
    ("deliver", "(port, 'a) -> unit", Builtin::Deliver),
    ("getHostByName", "string -> host", Builtin::GetHostByName),
    (
        "fragment",
        "('a chunk, int) -> unit chunk list",
        Builtin::Fragment,
    ),
    (
        "fragPiece",
        "(int, int, int, blob) -> unit",
        Builtin::FragPiece,
    ),
    ("eval", "'a chunk -> 'a", Builtin::Eval),
    ("abort", "'a chunk -> 'b", Builtin::Abort),
    ("length", "'a list -> int", Builtin::Length),
    ("member", "('a, 'a list) -> bool", Builtin::Member),
    ("rev", "'a list -> 'a list", Builtin::Rev),
    ("nth", "('a list, int) -> 'a", Builtin::Nth),
    ("append", "('a list, 'a list) -> 'a list", Builtin::Append),
    ("toString", "'a -> string", Builtin::ToString),
    ("intToString", "int -> string", Builtin::IntToString),
    ("stringToInt", "string -> int", Builtin::StringToInt),
    ("strlen", "string -> int", Builtin::Strlen),
    ("substr", "(string, int, int) -> string", Builtin::Substr),
    ("hostToString", "host -> string", Builtin::HostToString),
    ("stringToBlob", "string -> blob", Builtin::StringToBlob),
    ("blobToString", "blob -> string", Builtin::BlobToString),
    ("blobLength", "blob -> int", Builtin::BlobLength),
    ("authEval", "('a chunk, key, blob) -> 'a", Builtin::AuthEval),
    ("keyFromHex", "string -> key", Builtin::KeyFromHex),
    ("blobFromHex", "string -> blob", Builtin::BlobFromHex),
    ("blobToHex", "blob -> string", Builtin::BlobToHex),
    ("checksum", "blob -> int", Builtin::Checksum),
    ("openPort", "int -> port", Builtin::OpenPort),
    (
        "retransDeliver",
        "(host, int, 'a chunk) -> unit",
        Builtin::RetransDeliver,
    ),
    ("retransAck", "int -> unit", Builtin::RetransAck),
];

/// Exceptions raised by the language and the builtin services. Programs may
/// `handle` these without declaring them.
pub const BUILTIN_EXCEPTIONS: &[&str] = &[
    "NotEnoughRB",
    "DivByZero",
    "EmptyList",
    "BadChr",
    "IndexOutOfBounds",
    "NotAnInteger",
    "NoRoute",
    "NotANeighbor",
    "UnknownHost",
    "UnknownService",
    "ServiceError",
    "BadChunk",
    "FragmentError",
    "NotFound",
    "AuthFailed",
    "BadPort",
    "BadHex",
    "RBExhausted",
];

/// Outcome of a pure builtin: a value, or an exception (name, message).
pub type PureResult = Result<Value, (&'static str, String)>;

/// Work done by a pure builtin, in evaluation steps (charged by the caller
/// before running it), so that list and string utilities cost in
/// proportion to their input.
pub fn cost(b: Builtin, args: &[Value]) -> u64 {
    let size = |v: &Value| -> u64 {
        match v {
            Value::List(l) => l.len() as u64,
            Value::Str(s) | Value::Blob(s) | Value::Key(s) => (s.len() as u64) / 16,
            _ => 0,
        }
    };
    match b {
        Builtin::Length
        | Builtin::Member
        | Builtin::Rev
        | Builtin::Nth
        | Builtin::Append
        | Builtin::Substr
        | Builtin::StringToBlob
        | Builtin::BlobToString
        | Builtin::ToString
        | Builtin::Print
        | Builtin::Fragment
        | Builtin::AuthEval
        | Builtin::KeyFromHex
        | Builtin::BlobFromHex
        | Builtin::BlobToHex
        | Builtin::Checksum => 1 + args.iter().map(size).sum::<u64>(),
        _ => 1,
    }
}

fn bad_args(name: &str) -> (&'static str, String) {
    (
        "ServiceError",
        format!("internal: ill-typed arguments to {name}"),
    )
}

/// Runs a pure builtin. Returns `None` for routines that are not pure (the
/// evaluator handles those).
pub fn call_pure(b: Builtin, args: &[Value]) -> Option<PureResult> {
    Some(match (b, args) {
        (Builtin::Length, [Value::List(l)]) => Ok(Value::Int(l.len() as i64)),
        (Builtin::Member, [x, Value::List(l)]) => Ok(Value::Bool(l.iter().any(|y| y == x))),
        (Builtin::Rev, [Value::List(l)]) => {
            let mut out = List::nil();
            for x in l.iter() {
                match List::cons(x.clone(), &out) {
                    Ok(n) => out = n,
                    Err(e) => return Some(Err(("ServiceError", e.to_string()))),
                }
            }
            Ok(Value::List(out))
        }
        (Builtin::Nth, [Value::List(l), Value::Int(i)]) => usize::try_from(*i)
            .ok()
            .and_then(|i| l.iter().nth(i))
            .cloned()
            .ok_or((
                "IndexOutOfBounds",
                format!(
                    "nth: index {i} out of bounds for a list of length {}",
                    l.len()
                ),
            )),
        (Builtin::Append, [Value::List(a), Value::List(b)]) => {
            let mut items: Vec<Value> = a.iter().cloned().collect();
            let mut out = b.clone();
            while let Some(x) = items.pop() {
                match List::cons(x, &out) {
                    Ok(n) => out = n,
                    Err(e) => return Some(Err(("ServiceError", e.to_string()))),
                }
            }
            Ok(Value::List(out))
        }
        (Builtin::ToString, [v]) => Ok(Value::str(&v.to_display_string())),
        (Builtin::IntToString, [Value::Int(i)]) => Ok(Value::str(&i.to_string())),
        (Builtin::StringToInt, [Value::Str(s)]) => std::str::from_utf8(s)
            .ok()
            .and_then(|t| t.trim().parse::<i64>().ok())
            .map(Value::Int)
            .ok_or((
                "NotAnInteger",
                format!(
                    "stringToInt: {:?} is not an integer",
                    String::from_utf8_lossy(s)
                ),
            )),
        (Builtin::Strlen, [Value::Str(s)]) => Ok(Value::Int(s.len() as i64)),
        (Builtin::Substr, [Value::Str(s), Value::Int(start), Value::Int(len)]) => {
            let range = usize::try_from(*start).ok().and_then(|st| {
                let l = usize::try_from(*len).ok()?;
                let end = st.checked_add(l)?;
                s.get(st..end)
            });
            match range {
                Some(sub) => Ok(Value::Str(Arc::from(sub))),
                None => Err((
                    "IndexOutOfBounds",
                    format!(
                        "substr: range {start}+{len} outside a string of length {}",
                        s.len()
                    ),
                )),
            }
        }
        (Builtin::HostToString, [Value::Host(h)]) => Ok(Value::str(&h.to_string())),
        (Builtin::StringToBlob, [Value::Str(s)]) => Ok(Value::Blob(s.clone())),
        (Builtin::BlobToString, [Value::Blob(b)]) => Ok(Value::Str(b.clone())),
        (Builtin::BlobLength, [Value::Blob(b)]) => Ok(Value::Int(b.len() as i64)),
        (Builtin::KeyFromHex, [Value::Str(s)]) => from_hex(s).map(|b| Value::Key(Arc::from(b))),
        (Builtin::BlobFromHex, [Value::Str(s)]) => from_hex(s).map(|b| Value::Blob(Arc::from(b))),
        (Builtin::BlobToHex, [Value::Blob(b)]) => Ok(Value::str(&hex::encode(b))),
        (Builtin::Checksum, [Value::Blob(b)]) => Ok(Value::Int(i64::from(internet_checksum(b)))),
        (Builtin::OpenPort, [Value::Int(n)]) => match u16::try_from(*n) {
            Ok(p) => Ok(Value::Port(u32::from(p))),
            Err(_) => Err(("BadPort", format!("openPort: {n} is not a port (0..65535)"))),
        },
        (
            Builtin::Length
            | Builtin::Member
            | Builtin::Rev
            | Builtin::Nth
            | Builtin::Append
            | Builtin::ToString
            | Builtin::IntToString
            | Builtin::StringToInt
            | Builtin::Strlen
            | Builtin::Substr
            | Builtin::HostToString
            | Builtin::StringToBlob
            | Builtin::BlobToString
            | Builtin::BlobLength
            | Builtin::KeyFromHex
            | Builtin::BlobFromHex
            | Builtin::BlobToHex
            | Builtin::Checksum
            | Builtin::OpenPort,
            _,
        ) => Err(bad_args("a list/string utility")),
        _ => return None,
    })
}

/// Hex text (either case, even length) as bytes.
fn from_hex(s: &[u8]) -> Result<Vec<u8>, (&'static str, String)> {
    hex::decode(s).map_err(|e| {
        (
            "BadHex",
            format!("{:?} is not hex: {e}", String::from_utf8_lossy(s)),
        )
    })
}

/// The Internet checksum (RFC 1071): the ones' complement of the ones' complement sum of the
/// bytes taken as big-endian 16-bit words (an odd last byte padded with zero).
pub fn internet_checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for w in b.chunks(2) {
        let hi = u32::from(w.first().copied().unwrap_or(0));
        let lo = u32::from(w.get(1).copied().unwrap_or(0));
        sum += (hi << 8) | lo;
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(u16::try_from(sum & 0xffff).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: &[i64]) -> Value {
        Value::list(v.iter().map(|i| Value::Int(*i)).collect()).unwrap()
    }

    #[test]
    fn list_utils() {
        assert_eq!(
            call_pure(Builtin::Rev, &[ints(&[1, 2, 3])]).unwrap(),
            Ok(ints(&[3, 2, 1]))
        );
        assert_eq!(
            call_pure(Builtin::Append, &[ints(&[1]), ints(&[2, 3])]).unwrap(),
            Ok(ints(&[1, 2, 3]))
        );
        assert_eq!(
            call_pure(Builtin::Nth, &[ints(&[5, 6]), Value::Int(1)]).unwrap(),
            Ok(Value::Int(6))
        );
        assert_eq!(
            call_pure(Builtin::Nth, &[ints(&[5, 6]), Value::Int(2)])
                .unwrap()
                .unwrap_err()
                .0,
            "IndexOutOfBounds"
        );
        assert_eq!(
            call_pure(Builtin::Member, &[Value::Int(6), ints(&[5, 6])]).unwrap(),
            Ok(Value::Bool(true))
        );
        assert!(call_pure(Builtin::Print, &[]).is_none());
    }

    #[test]
    fn checksum_is_rfc1071() {
        // RFC 1071 §3's example words 0001 f203 f4f5 f6f7 sum to ddf2 (checksum 220d).
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(internet_checksum(&b), 0x220d);
        assert_eq!(internet_checksum(&[]), 0xffff);
        assert_eq!(
            call_pure(Builtin::OpenPort, &[Value::Int(70_000)])
                .unwrap()
                .unwrap_err()
                .0,
            "BadPort"
        );
    }

    #[test]
    fn string_utils() {
        assert_eq!(
            call_pure(
                Builtin::Substr,
                &[Value::str("hello"), Value::Int(1), Value::Int(3)]
            )
            .unwrap(),
            Ok(Value::str("ell"))
        );
        assert_eq!(
            call_pure(Builtin::StringToInt, &[Value::str("42")]).unwrap(),
            Ok(Value::Int(42))
        );
        assert_eq!(
            call_pure(Builtin::StringToInt, &[Value::str("x")])
                .unwrap()
                .unwrap_err()
                .0,
            "NotAnInteger"
        );
    }
}
