//! PLAN values for typed PLAN services (`plan_invoke`, `crates/modules/src/runtime.rs`): the
//! call's arguments arrive as the "packet", a varint count then each value in the PLAN
//! marshalling (`crates/plan/src/marshal.rs`); the answer is one marshalled value in the
//! guest's memory. [`Reader`] decodes the scalar, string and list forms a service needs;
//! [`Writer`] encodes an answer into a caller's buffer. Neither allocates nor panics.

/// Value tags of the PLAN marshalling.
pub mod tag {
    /// `()`.
    pub const UNIT: u8 = 0;
    /// `int` (zigzag varint).
    pub const INT: u8 = 1;
    /// `string` (varint length, bytes).
    pub const STRING: u8 = 3;
    /// `bool` (one byte).
    pub const BOOL: u8 = 4;
    /// `'a list` (varint count, values).
    pub const LIST: u8 = 11;
    /// tuple (varint count >= 2, values).
    pub const TUPLE: u8 = 12;
}

/// Reads the call's arguments into `buf`; the bytes read, or `None` if they do not fit.
pub fn args(buf: &mut [u8]) -> Option<&[u8]> {
    let n = crate::packet_len();
    let b = buf.get_mut(..n)?;
    crate::read(0, b).then_some(&*b)
}

/// A cursor over marshalled values.
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

    fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// A LEB128 varint.
    pub fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn expect(&mut self, t: u8) -> Option<()> {
        (self.byte()? == t).then_some(())
    }

    /// An `int`.
    pub fn int(&mut self) -> Option<i64> {
        self.expect(tag::INT)?;
        let z = self.varint()?;
        Some(((z >> 1) as i64) ^ -((z & 1) as i64))
    }

    /// A `string`'s bytes.
    pub fn string(&mut self) -> Option<&'a [u8]> {
        self.expect(tag::STRING)?;
        let n = usize::try_from(self.varint()?).ok()?;
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// A list's element count (the elements follow).
    pub fn list(&mut self) -> Option<usize> {
        self.expect(tag::LIST)?;
        usize::try_from(self.varint()?).ok()
    }
}

/// Encodes one value into a buffer; any overflow makes [`Writer::finish`] fail.
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut [u8],
    len: usize,
    ok: bool,
}

impl<'a> Writer<'a> {
    /// A writer at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Writer {
            buf,
            len: 0,
            ok: true,
        }
    }

    fn put(&mut self, b: u8) {
        match self.buf.get_mut(self.len) {
            Some(slot) => {
                *slot = b;
                self.len += 1;
            }
            None => self.ok = false,
        }
    }

    fn varint(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.put(b);
                return;
            }
            self.put(b | 0x80);
        }
    }

    /// An `int`.
    pub fn int(&mut self, i: i64) {
        self.put(tag::INT);
        self.varint(((i << 1) ^ (i >> 63)) as u64);
    }

    /// A `string` made of `parts`, concatenated.
    pub fn string(&mut self, parts: &[&[u8]]) {
        self.put(tag::STRING);
        self.varint(parts.iter().map(|p| p.len() as u64).sum());
        for p in parts {
            for b in *p {
                self.put(*b);
            }
        }
    }

    /// A `bool`.
    pub fn bool(&mut self, b: bool) {
        self.put(tag::BOOL);
        self.put(u8::from(b));
    }

    /// The head of a tuple of `n` (>= 2) items; write the items next.
    pub fn tuple(&mut self, n: usize) {
        self.put(tag::TUPLE);
        self.varint(n as u64);
    }

    /// The head of a list of `n` elements; write the elements next.
    pub fn list(&mut self, n: usize) {
        self.put(tag::LIST);
        self.varint(n as u64);
    }

    /// The `plan_invoke` answer for what was written (`ptr << 32 | len`), or -1 if it did not
    /// fit the buffer.
    pub fn finish(self) -> i64 {
        if !self.ok {
            crate::log_line("the answer does not fit the module's buffer");
            return -1;
        }
        ((self.buf.as_ptr() as usize as i64) << 32) | self.len as i64
    }
}
