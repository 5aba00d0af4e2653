//! The four single-producer single-consumer rings of an AF_XDP socket, mapped from the
//! socket at the offsets the kernel gives (`XDP_MMAP_OFFSETS`).
//!
//! - [`ProdRing`]: user space produces, the kernel consumes (fill ring: addresses of free
//!   UMEM chunks; tx ring: descriptors to send).
//! - [`ConsRing`]: the kernel produces, user space consumes (rx ring: received frames;
//!   completion ring: addresses of sent frames).
//!
//! Protocol (the kernel's `xsk_queue.h`): the producer writes entries at `index & mask`,
//! then publishes them with a release store of the producer index; the consumer reads the
//! producer index with an acquire load, reads the entries, and gives the slots back with a
//! release store of the consumer index. Indices are free-running `u32`s (wrapping).
//!
//! Invariants: every offset the kernel reports is checked against the mapping's length and
//! alignment before the ring is used (a bad one fails [`map`]); entries are always accessed
//! at `index & mask` with `mask = size - 1`, inside the descriptor array; an entry count
//! derived from a kernel index is clamped to the ring size, so a corrupt index cannot make
//! us read an entry twice in one batch or outside the array. What the entries *say*
//! (addresses, lengths) is checked by the caller against the UMEM.

use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys::Mmap;

/// Where a ring's parts are in its mapping (from `struct xdp_ring_offset`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offsets {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    /// `None` on kernels before 5.4 (no flags word).
    pub flags: Option<u64>,
}

/// A mapped ring: the shared words and the entry array. `T` is `libc::xdp_desc` (rx, tx) or
/// `u64` (fill, completion).
#[derive(Debug)]
struct Raw<T> {
    /// Unmapped on drop; the pointers below point into it.
    _map: Mmap,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: Option<*const AtomicU32>,
    entries: *mut T,
    size: u32,
}

// SAFETY: the mapping is memory shared with the kernel only; the one user-space owner (the
// forwarder's thread) is the only user-space accessor.
unsafe impl<T> Send for Raw<T> {}

impl<T: Copy> Raw<T> {
    /// Maps `size` entries of `T` of the ring at page offset `pgoff` of the AF_XDP socket
    /// `fd`, checking `off` against the mapping.
    fn new(fd: &OwnedFd, pgoff: u64, off: Offsets, size: u32) -> io::Result<Self> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("ring {what}"));
        if !size.is_power_of_two() {
            return Err(bad("size is not a power of two"));
        }
        let esize = std::mem::size_of::<T>() as u64;
        let len = off
            .desc
            .checked_add(u64::from(size) * esize)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| bad("length overflows"))?;
        let pgoff = libc::off_t::try_from(pgoff).map_err(|_| bad("page offset overflows"))?;
        // The kernel checks that the offset selects a ring it set up and that `len` fits it.
        let map = Mmap::new(
            len,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd.as_raw_fd(),
            pgoff,
        )?;
        // A u32 word at `o` must lie inside the mapping, 4-byte aligned.
        let word = |o: u64, what: &str| -> io::Result<*const AtomicU32> {
            let o = usize::try_from(o).map_err(|_| bad(what))?;
            if o % 4 != 0 || o.checked_add(4).is_none_or(|e| e > len) {
                return Err(bad(what));
            }
            // SAFETY: `o + 4 <= len`: inside the mapping.
            Ok(unsafe { map.ptr.add(o) }.cast::<AtomicU32>().cast_const())
        };
        let producer = word(off.producer, "producer offset")?;
        let consumer = word(off.consumer, "consumer offset")?;
        let flags = match off.flags {
            Some(f) => Some(word(f, "flags offset")?),
            None => None,
        };
        let d = usize::try_from(off.desc).map_err(|_| bad("descriptor offset"))?;
        if d % std::mem::align_of::<T>() != 0 {
            return Err(bad("descriptor offset is misaligned"));
        }
        // SAFETY: `d + size * size_of::<T>() == len`: the array is inside the mapping.
        let entries = unsafe { map.ptr.add(d) }.cast::<T>();
        Ok(Raw {
            _map: map,
            producer,
            consumer,
            flags,
            entries,
            size,
        })
    }

    fn word(&self, w: *const AtomicU32) -> &AtomicU32 {
        // SAFETY: `w` is one of this ring's words, checked inside the mapping and 4-byte
        // aligned by `map`; the mapping lives as long as `self`; the kernel updates it
        // concurrently, so it is only accessed atomically.
        unsafe { &*w }
    }

    fn slot(&self, index: u32) -> *mut T {
        // SAFETY: `index & (size - 1) < size`: inside the entry array.
        unsafe { self.entries.add((index & (self.size - 1)) as usize) }
    }

    fn flag_set(&self, bit: u32) -> bool {
        self.flags
            .is_some_and(|f| self.word(f).load(Ordering::Relaxed) & bit != 0)
    }
}

/// A ring user space produces into (fill, tx).
#[derive(Debug)]
pub(crate) struct ProdRing<T> {
    raw: Raw<T>,
    /// Our producer index (entries up to it are written; published by `submit`).
    prod: u32,
    /// The kernel's consumer index as last read.
    cons: u32,
    _t: PhantomData<T>,
}

impl<T: Copy> ProdRing<T> {
    pub(crate) fn new(fd: &OwnedFd, pgoff: u64, off: Offsets, size: u32) -> io::Result<Self> {
        let raw = Raw::new(fd, pgoff, off, size)?;
        // The kernel starts both indices at 0; read them anyway.
        let prod = raw.word(raw.producer).load(Ordering::Relaxed);
        let cons = raw.word(raw.consumer).load(Ordering::Acquire);
        Ok(ProdRing {
            raw,
            prod,
            cons,
            _t: PhantomData,
        })
    }

    /// Entries that can be written now (re-reads the kernel's consumer index).
    pub(crate) fn free(&mut self) -> u32 {
        self.cons = self.raw.word(self.raw.consumer).load(Ordering::Acquire);
        let used = self.prod.wrapping_sub(self.cons).min(self.raw.size);
        self.raw.size - used
    }

    /// Entries written and not yet taken by the kernel (as of the last [`ProdRing::free`]).
    pub(crate) fn outstanding(&self) -> u32 {
        self.prod.wrapping_sub(self.cons).min(self.raw.size)
    }

    /// Writes one entry; the caller checked [`ProdRing::free`] (returns false when full).
    pub(crate) fn push(&mut self, v: T) -> bool {
        if self.prod.wrapping_sub(self.cons) >= self.raw.size {
            return false;
        }
        // SAFETY: the slot is inside the array (`slot`) and not owned by the kernel: it is
        // past the kernel's consumer index by less than the ring size.
        unsafe { self.raw.slot(self.prod).write(v) };
        self.prod = self.prod.wrapping_add(1);
        true
    }

    /// Publishes every entry written since the last call.
    pub(crate) fn submit(&mut self) {
        self.raw
            .word(self.raw.producer)
            .store(self.prod, Ordering::Release);
    }

    /// The kernel asks to be woken (`XDP_RING_NEED_WAKEUP`; false on kernels without flags).
    pub(crate) fn needs_wakeup(&self) -> bool {
        self.raw.flag_set(libc::XDP_RING_NEED_WAKEUP)
    }
}

/// A ring user space consumes from (rx, completion).
#[derive(Debug)]
pub(crate) struct ConsRing<T> {
    raw: Raw<T>,
    /// Our consumer index (entries before it are given back by `release`).
    cons: u32,
    _t: PhantomData<T>,
}

impl<T: Copy> ConsRing<T> {
    pub(crate) fn new(fd: &OwnedFd, pgoff: u64, off: Offsets, size: u32) -> io::Result<Self> {
        let raw = Raw::new(fd, pgoff, off, size)?;
        let cons = raw.word(raw.consumer).load(Ordering::Relaxed);
        Ok(ConsRing {
            raw,
            cons,
            _t: PhantomData,
        })
    }

    /// Entries ready to read, at most `max` (acquire: the entries are visible afterwards).
    pub(crate) fn available(&self, max: u32) -> u32 {
        let prod = self.raw.word(self.raw.producer).load(Ordering::Acquire);
        prod.wrapping_sub(self.cons).min(self.raw.size).min(max)
    }

    /// Entry `i` of the ready ones (`i < available(..)`, which the caller checked).
    pub(crate) fn get(&self, i: u32) -> T {
        // SAFETY: the slot is inside the array (`slot`) and published by the kernel (its
        // index is below the producer index read with acquire in `available`).
        unsafe { self.raw.slot(self.cons.wrapping_add(i)).read() }
    }

    /// Gives the first `n` ready entries back to the kernel.
    pub(crate) fn release(&mut self, n: u32) {
        self.cons = self.cons.wrapping_add(n);
        self.raw
            .word(self.raw.consumer)
            .store(self.cons, Ordering::Release);
    }
}
