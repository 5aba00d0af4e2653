//! Run-time values of PLAN.
//!
//! Invariants:
//! * every composite value records its nesting depth, and no value deeper
//!   than [`MAX_VALUE_DEPTH`] can be built (constructors return
//!   [`DepthError`]), so recursive traversals (equality, printing,
//!   marshalling) are stack-safe;
//! * lists are persistent singly linked lists ([`List`]) whose length is
//!   cached; traversals along the spine are iterative and dropping a long
//!   list does not recurse;
//! * values are immutable and `Send + Sync` (shared with [`Arc`]).

use crate::host::host_to_string;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// Maximum nesting depth of a value (lists/tuples/chunks inside each other).
pub const MAX_VALUE_DEPTH: u16 = 48;

/// A value would exceed [`MAX_VALUE_DEPTH`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("value nested deeper than {MAX_VALUE_DEPTH} levels")]
pub struct DepthError;

/// A network interface identifier (PLAN type `dev`).
pub type Dev = u32;

/// The code of a chunk: the full program text, or only its SHA-256 hash
/// (for receivers that already have the text cached).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Code {
    /// Program text and its SHA-256.
    Text {
        /// SHA-256 of `text`.
        hash: [u8; 32],
        /// PLAN source text.
        text: Arc<str>,
    },
    /// Only the SHA-256 of the program text.
    Hash([u8; 32]),
}

impl Code {
    /// Wraps program text, computing its hash.
    pub fn from_text(text: &str) -> Code {
        Code::Text {
            hash: crate::program::code_hash(text),
            text: Arc::from(text),
        }
    }

    /// The SHA-256 of the program text.
    pub fn hash(&self) -> &[u8; 32] {
        match self {
            Code::Text { hash, .. } | Code::Hash(hash) => hash,
        }
    }
}

/// A chunk: code, the name of the function to run, and its arguments.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// Code (absent for chunks that name a service routine).
    pub code: Option<Code>,
    /// Function (or service) to evaluate.
    pub func: Arc<str>,
    /// Argument values (the "bindings").
    pub args: Vec<Value>,
    depth: u16,
}

impl Chunk {
    /// Builds a chunk, checking the depth bound.
    pub fn new(
        code: Option<Code>,
        func: impl Into<Arc<str>>,
        args: Vec<Value>,
    ) -> Result<Chunk, DepthError> {
        let depth = 1 + args.iter().map(Value::depth).max().unwrap_or(0);
        if depth > MAX_VALUE_DEPTH {
            return Err(DepthError);
        }
        Ok(Chunk {
            code,
            func: func.into(),
            args,
            depth,
        })
    }
}

impl PartialEq for Chunk {
    fn eq(&self, other: &Self) -> bool {
        self.func == other.func
            && self.code.as_ref().map(Code::hash) == other.code.as_ref().map(Code::hash)
            && self.args == other.args
    }
}

/// A tuple of two or more values.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuple {
    items: Box<[Value]>,
    depth: u16,
}

impl Tuple {
    /// The components.
    pub fn items(&self) -> &[Value] {
        &self.items
    }
}

/// A persistent list.
#[derive(Clone, Default)]
pub struct List(Option<Arc<Cons>>);

/// A list cell.
struct Cons {
    head: Value,
    tail: List,
    len: usize,
    depth: u16,
}

impl Drop for Cons {
    fn drop(&mut self) {
        // Unlink iteratively so that dropping a long list cannot overflow
        // the stack.
        let mut next = self.tail.0.take();
        while let Some(rc) = next {
            match Arc::try_unwrap(rc) {
                Ok(mut cell) => next = cell.tail.0.take(),
                Err(_) => break,
            }
        }
    }
}

impl List {
    /// The empty list.
    pub const fn nil() -> List {
        List(None)
    }

    /// `head :: tail`.
    pub fn cons(head: Value, tail: &List) -> Result<List, DepthError> {
        let depth = (head.depth() + 1).max(tail.depth());
        if depth > MAX_VALUE_DEPTH {
            return Err(DepthError);
        }
        Ok(List(Some(Arc::new(Cons {
            head,
            len: tail.len() + 1,
            tail: tail.clone(),
            depth,
        }))))
    }

    /// Builds a list from a vector (first element becomes the head).
    pub fn from_vec(items: Vec<Value>) -> Result<List, DepthError> {
        let mut l = List::nil();
        for v in items.into_iter().rev() {
            l = List::cons(v, &l)?;
        }
        Ok(l)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |c| c.len)
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Nesting depth (an empty list has depth 1).
    pub fn depth(&self) -> u16 {
        self.0.as_ref().map_or(1, |c| c.depth)
    }

    /// Head and tail, if non-empty.
    pub fn uncons(&self) -> Option<(&Value, &List)> {
        self.0.as_ref().map(|c| (&c.head, &c.tail))
    }

    /// Iterates over the elements.
    pub fn iter(&self) -> ListIter<'_> {
        ListIter { cur: self }
    }
}

/// Iterator over a [`List`].
#[derive(Debug)]
pub struct ListIter<'a> {
    cur: &'a List,
}

impl<'a> Iterator for ListIter<'a> {
    type Item = &'a Value;
    fn next(&mut self) -> Option<&'a Value> {
        let (h, t) = self.cur.uncons()?;
        self.cur = t;
        Some(h)
    }
}

impl PartialEq for List {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A PLAN value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `()`
    Unit,
    /// `int` (64-bit, wrapping arithmetic)
    Int(i64),
    /// `bool`
    Bool(bool),
    /// `char` (8-bit)
    Char(u8),
    /// `string` (byte string)
    Str(Arc<[u8]>),
    /// `host`
    Host(SocketAddr),
    /// `port`: a handle on a connection to a host application.
    Port(u32),
    /// `key`: opaque key material.
    Key(Arc<[u8]>),
    /// `blob`: opaque bytes.
    Blob(Arc<[u8]>),
    /// `exn`: an exception name.
    Exn(Arc<str>),
    /// `dev`: a network interface.
    Dev(Dev),
    /// `t list`
    List(List),
    /// `t1 * t2 * ...`
    Tuple(Arc<Tuple>),
    /// `t chunk`
    Chunk(Arc<Chunk>),
}

impl Value {
    /// A string value.
    pub fn str(s: &str) -> Value {
        Value::Str(Arc::from(s.as_bytes()))
    }

    /// A tuple value (two or more components), depth-checked.
    pub fn tuple(items: Vec<Value>) -> Result<Value, DepthError> {
        let depth = 1 + items.iter().map(Value::depth).max().unwrap_or(0);
        if depth > MAX_VALUE_DEPTH {
            return Err(DepthError);
        }
        Ok(Value::Tuple(Arc::new(Tuple {
            items: items.into_boxed_slice(),
            depth,
        })))
    }

    /// A list value, depth-checked.
    pub fn list(items: Vec<Value>) -> Result<Value, DepthError> {
        List::from_vec(items).map(Value::List)
    }

    /// Nesting depth (scalars have depth 0).
    pub fn depth(&self) -> u16 {
        match self {
            Value::List(l) => l.depth(),
            Value::Tuple(t) => t.depth,
            Value::Chunk(c) => c.depth,
            _ => 0,
        }
    }

    /// Textual form used by `print` and `toString`: strings and chars are
    /// written raw at top level, quoted when nested.
    pub fn to_display_string(&self) -> String {
        let mut s = String::new();
        write_value(&mut s, self, true);
        s
    }
}

fn write_bytes_lossy(out: &mut String, b: &[u8]) {
    out.push_str(&String::from_utf8_lossy(b));
}

fn write_value(out: &mut String, v: &Value, top: bool) {
    use std::fmt::Write;
    match v {
        Value::Unit => out.push_str("()"),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Char(c) => {
            if top {
                out.push(char::from(*c));
            } else {
                let _ = write!(out, "'{}'", char::from(*c).escape_default());
            }
        }
        Value::Str(s) => {
            if top {
                write_bytes_lossy(out, s);
            } else {
                out.push('"');
                out.push_str(&String::from_utf8_lossy(s).escape_default().to_string());
                out.push('"');
            }
        }
        Value::Host(h) => out.push_str(&host_to_string(h)),
        Value::Port(p) => {
            let _ = write!(out, "<port {p}>");
        }
        Value::Key(k) => {
            let _ = write!(out, "<key {}>", hex::encode(k));
        }
        Value::Blob(b) => {
            let _ = write!(out, "<blob {} bytes>", b.len());
        }
        Value::Exn(e) => out.push_str(e),
        Value::Dev(d) => {
            let _ = write!(out, "<dev {d}>");
        }
        Value::List(l) => {
            out.push('[');
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push(';');
                }
                write_value(out, x, false);
            }
            out.push(']');
        }
        Value::Tuple(t) => {
            out.push('(');
            for (i, x) in t.items().iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, x, false);
            }
            out.push(')');
        }
        Value::Chunk(c) => {
            let _ = write!(out, "<chunk:{}[", c.func);
            for (i, x) in c.args.iter().enumerate() {
                if i > 0 {
                    out.push(';');
                }
                write_value(out, x, false);
            }
            out.push_str("]>");
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_display_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_list_drop_and_eq() {
        let mut l = List::nil();
        for i in 0..200_000 {
            l = List::cons(Value::Int(i), &l).unwrap();
        }
        let l2 = l.clone();
        assert_eq!(Value::List(l.clone()), Value::List(l2));
        assert_eq!(l.len(), 200_000);
        drop(l);
    }

    #[test]
    fn depth_is_bounded() {
        let mut v = Value::Unit;
        let mut err = false;
        for _ in 0..100 {
            match Value::list(vec![v.clone()]) {
                Ok(x) => v = x,
                Err(DepthError) => {
                    err = true;
                    break;
                }
            }
        }
        assert!(err);
        assert!(v.depth() <= MAX_VALUE_DEPTH);
    }

    #[test]
    fn display() {
        let v = Value::list(vec![
            Value::tuple(vec![Value::Int(1), Value::str("a")]).unwrap(),
            Value::Host("1.2.3.4:5".parse().unwrap()),
        ])
        .unwrap();
        assert_eq!(v.to_string(), "[(1,\"a\");(1.2.3.4,5)]");
        assert_eq!(Value::str("hi").to_string(), "hi");
    }
}
