//! A UMEM: the packet memory AF_XDP sockets receive into and transmit from, cut into
//! equal chunks, and the bookkeeping of who holds each chunk.
//!
//! Every chunk is always in exactly one state ([`Chunk`]): free (in user space's free list),
//! given to the kernel through a fill ring (it comes back on an rx ring holding a received
//! frame), given to the kernel through a tx ring (it comes back on a completion ring once
//! sent), or held by user space for the frame being handled. Addresses coming back from the
//! kernel are checked against that state and against the UMEM's bounds before any byte is
//! touched: a descriptor outside the UMEM, crossing its chunk's end, or naming a chunk the
//! kernel does not hold is refused (and counted by the caller), so user space never reads
//! memory the kernel may be writing and never puts a chunk in two places.
//!
//! Chunks are aligned (`XDP_UMEM_REG` without `XDP_UMEM_UNALIGNED_CHUNK_FLAG`): a
//! chunk's address is any address in it rounded down to the chunk size, a power of two.

use std::io;

use crate::sys::Mmap;

/// Who holds a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// In the free list.
    Free,
    /// Given to the kernel on a fill ring.
    Fill,
    /// Given to the kernel on a tx ring.
    Tx,
    /// Held by user space (a frame being handled).
    User,
}

/// A UMEM area and its chunk bookkeeping.
#[derive(Debug)]
pub struct Umem {
    map: Mmap,
    chunk_size: u32,
    state: Vec<Chunk>,
    /// Addresses of free chunks (a stack: the most recently freed, cache-warm one first).
    free: Vec<u64>,
}

impl Umem {
    /// `chunks` chunks of `chunk_size` bytes (a power of two, 2048..=page size, which
    /// `XDP_UMEM_REG` accepts), all free, in fresh page-aligned anonymous memory.
    pub fn new(chunks: u32, chunk_size: u32) -> io::Result<Umem> {
        let inval = |m: &str| io::Error::new(io::ErrorKind::InvalidInput, m.to_string());
        if !chunk_size.is_power_of_two() || chunk_size < 2048 {
            return Err(inval("chunk size must be a power of two of at least 2048"));
        }
        if chunks == 0 {
            return Err(inval("a UMEM needs at least one chunk"));
        }
        let len = usize::try_from(u64::from(chunks) * u64::from(chunk_size))
            .map_err(|_| inval("UMEM too large"))?;
        let map = Mmap::new(
            len,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )?;
        // Lowest addresses on top of the stack.
        let free = (0..u64::from(chunks))
            .rev()
            .map(|i| i * u64::from(chunk_size))
            .collect();
        Ok(Umem {
            map,
            chunk_size,
            state: vec![Chunk::Free; chunks as usize],
            free,
        })
    }

    /// Start of the area (for `XDP_UMEM_REG`).
    pub(crate) fn addr(&self) -> u64 {
        self.map.ptr as u64
    }

    /// Bytes in the area.
    pub fn len(&self) -> usize {
        self.map.len
    }

    /// Never empty (see [`Umem::new`]).
    pub fn is_empty(&self) -> bool {
        self.map.len == 0
    }

    /// Bytes per chunk.
    pub fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    /// Number of chunks.
    pub fn chunks(&self) -> usize {
        self.state.len()
    }

    /// Chunks in the free list.
    pub fn free_chunks(&self) -> usize {
        self.free.len()
    }

    /// The index of the chunk holding `addr`, if `addr` is inside the UMEM.
    fn index(&self, addr: u64) -> Option<usize> {
        let i = usize::try_from(addr / u64::from(self.chunk_size)).ok()?;
        (i < self.state.len()).then_some(i)
    }

    /// The chunk address of `addr`.
    fn base(&self, addr: u64) -> u64 {
        addr & !(u64::from(self.chunk_size) - 1)
    }

    fn set(&mut self, addr: u64, from: Chunk, to: Chunk) -> bool {
        let Some(i) = self.index(addr) else {
            return false;
        };
        match self.state.get_mut(i) {
            Some(s) if *s == from => {
                *s = to;
                true
            }
            _ => false,
        }
    }

    /// Takes a free chunk for user space; its address.
    pub(crate) fn alloc(&mut self) -> Option<u64> {
        let a = self.free.pop()?;
        let ok = self.set(a, Chunk::Free, Chunk::User);
        debug_assert!(ok, "free list and chunk states agree");
        Some(a)
    }

    /// Gives a chunk user space holds back to the free list.
    pub(crate) fn release(&mut self, addr: u64) {
        let a = self.base(addr);
        if self.set(a, Chunk::User, Chunk::Free) {
            self.free.push(a);
        }
    }

    /// Marks a chunk user space holds as given to the kernel on a fill ring.
    pub(crate) fn give_fill(&mut self, addr: u64) -> bool {
        self.set(self.base(addr), Chunk::User, Chunk::Fill)
    }

    /// Marks a chunk user space holds as given to the kernel on a tx ring.
    pub(crate) fn give_tx(&mut self, addr: u64) -> bool {
        self.set(self.base(addr), Chunk::User, Chunk::Tx)
    }

    /// A received frame (an rx descriptor): checks that `[addr, addr + len)` lies in one
    /// chunk of the UMEM that the kernel held from a fill ring, and takes that chunk for user
    /// space. False: refused, nothing changed.
    pub(crate) fn take_rx(&mut self, addr: u64, len: u32) -> bool {
        self.fits(addr, len) && self.set(self.base(addr), Chunk::Fill, Chunk::User)
    }

    /// A completion: the chunk of `addr` comes back from a tx ring to the free list. False:
    /// the address is outside the UMEM or its chunk was not on a tx ring (refused).
    pub(crate) fn complete(&mut self, addr: u64) -> bool {
        let a = self.base(addr);
        if self.set(a, Chunk::Tx, Chunk::Free) {
            self.free.push(a);
            true
        } else {
            false
        }
    }

    /// `[addr, addr + len)` lies inside one chunk of the UMEM.
    pub(crate) fn fits(&self, addr: u64, len: u32) -> bool {
        let off = addr - self.base(addr);
        self.index(addr).is_some() && off + u64::from(len) <= u64::from(self.chunk_size)
    }

    /// The bytes `[addr, addr + len)` of a chunk user space holds, if they lie in it.
    pub(crate) fn frame_mut(&mut self, addr: u64, len: u32) -> Option<&mut [u8]> {
        let i = self.index(addr)?;
        if !self.fits(addr, len) || self.state.get(i) != Some(&Chunk::User) {
            return None;
        }
        let off = usize::try_from(addr).ok()?;
        // SAFETY: `[addr, addr + len)` is inside one chunk of the mapping (`fits`), which user
        // space holds (state `User`): the kernel neither reads nor writes it until it is
        // given back, and the `&mut self` borrow keeps any other slice of this UMEM from
        // existing meanwhile.
        Some(unsafe { std::slice::from_raw_parts_mut(self.map.ptr.add(off), len as usize) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_move_only_along_their_states() {
        let mut u = Umem::new(4, 2048).unwrap();
        assert_eq!((u.chunks(), u.free_chunks(), u.len()), (4, 4, 8192));
        let a = u.alloc().unwrap();
        assert_eq!(a, 0, "lowest chunk first");
        assert!(u.frame_mut(a + 256, 1000).is_some());
        assert!(u.frame_mut(a + 256, 1900).is_none(), "past the chunk's end");
        assert!(u.give_fill(a));
        assert!(u.frame_mut(a, 64).is_none(), "the kernel holds it");
        assert!(!u.complete(a), "not on a tx ring");
        assert!(!u.take_rx(a + 256, 1800), "crosses the chunk's end");
        assert!(!u.take_rx(4 * 2048, 64), "outside the UMEM");
        assert!(u.take_rx(a + 256, 1500));
        assert!(!u.take_rx(a + 256, 64), "taken twice");
        assert!(u.give_tx(a + 256 + 14));
        assert!(u.complete(a + 256 + 14));
        assert!(!u.complete(a), "completed twice");
        assert_eq!(u.free_chunks(), 4);
        let b = u.alloc().unwrap();
        u.release(b);
        u.release(b);
        assert_eq!(u.free_chunks(), 4, "released twice: once in the free list");
    }
}
