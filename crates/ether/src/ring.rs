//! The receive rings. Two layouts of the same shared-memory idea, chosen per link
//! ([`RingVersion`]):
//!
//! - **TPACKET_V2** (the default): a ring of fixed-size frame slots. The kernel writes one
//!   frame per slot and flips the slot's status to user at once, and `poll` wakes as soon as
//!   one frame is ready. The data path takes every ready slot in a row (up to a batch) in one
//!   go, so at low rates a packet is handled the moment it arrives and at high rates the
//!   batches grow by themselves: batching without waiting.
//! - **TPACKET_V3**: blocks of variable-size frames. The kernel hands a block over only when
//!   it is full or when the block timer (`retire_blk_tov`, at least 1 ms) expires, and
//!   partially filled blocks cannot be read safely (the kernel is still writing them and
//!   publishes no per-frame status to user space). So a lone packet waits for the timer:
//!   measured, ping through the router took 0.5–0.7 ms with V3 against ~0.1 ms with V2 (see
//!   the crate docs for the numbers), while at full load both hand over large batches.
//!
//! Either way the API is the same: [`RxRing::next_batch`] fills a list of ready frames, the
//! caller uses them in place, then [`RxRing::release`] gives exactly those frames (V2 slots)
//! or that block (V3) back to the kernel.
//!
//! Invariants: the cursor always points at the next slot/block the kernel will fill (the
//! kernel fills in ring order); a slot/block is read only after its status says user
//! (acquire) and given back with a release store after the last access to its frames; every
//! offset read from the ring is checked against the slot/block before use, so a corrupt ring
//! cannot make us read outside the mapping.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys::{self, Mmap, block, pkt, pkt2};

/// Which ring layout a link uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RingVersion {
    /// Per-frame slots, ready as soon as written (low latency, natural batching).
    #[default]
    V2,
    /// Blocks handed over when full or on the retire timer (batching, ≥ 1 ms latency).
    V3,
}

impl std::str::FromStr for RingVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "v2" | "V2" | "2" => Ok(RingVersion::V2),
            "v3" | "V3" | "3" => Ok(RingVersion::V3),
            _ => Err(format!("ring version {s:?}: expected v2 or v3")),
        }
    }
}

/// Ring geometry.
#[derive(Debug, Clone, Copy)]
pub struct RingConfig {
    /// Layout.
    pub version: RingVersion,
    /// Bytes per block (a multiple of the page size and of the frame size).
    pub block_size: u32,
    /// Number of blocks.
    pub block_nr: u32,
    /// V3 only: block retire timeout in milliseconds, the most a lone frame waits in a block.
    pub retire_ms: u32,
    /// V2 only: the most frames taken in one batch.
    pub batch: u32,
}

/// Bytes per frame slot (V2) / the frame size the kernel is told (V3): a 1514-byte frame plus
/// the headers fits.
pub const FRAME_SIZE: u32 = 2048;

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            version: RingVersion::V2,
            block_size: 1 << 16,
            block_nr: 512,
            retire_ms: 1,
            batch: 256,
        }
    }
}

/// One frame inside the ring, handed to user space.
#[derive(Debug)]
pub struct RxFrame {
    /// Pointer to the Ethernet header inside the ring.
    pub ptr: *mut u8,
    /// Captured bytes.
    pub len: usize,
    /// Bytes on the wire (more than `len` if truncated by the ring's frame size).
    pub wire_len: usize,
    /// `tp_status` bits.
    pub status: u32,
}

/// The receive ring of one socket.
#[derive(Debug)]
pub struct RxRing {
    map: Mmap,
    cfg: RingConfig,
    /// V3: the current block; V2: the next slot.
    cur: u32,
    /// V2: slots taken by the last `next_batch`, released by `release`.
    taken: u32,
    /// V2: number of slots.
    slots: u32,
}

impl RxRing {
    /// Sets up the ring on `fd` (before bind) and maps it.
    pub fn new(fd: &OwnedFd, cfg: RingConfig) -> io::Result<RxRing> {
        let frame_nr = cfg.block_size / FRAME_SIZE * cfg.block_nr;
        match cfg.version {
            RingVersion::V3 => {
                sys::setsockopt(fd, libc::SOL_PACKET, sys::PACKET_VERSION, &sys::TPACKET_V3)?;
                let req = sys::TpacketReq3 {
                    block_size: cfg.block_size,
                    block_nr: cfg.block_nr,
                    frame_size: FRAME_SIZE,
                    frame_nr,
                    retire_blk_tov: cfg.retire_ms,
                    sizeof_priv: 0,
                    feature_req_word: 0,
                };
                sys::setsockopt(fd, libc::SOL_PACKET, sys::PACKET_RX_RING, &req)?;
            }
            RingVersion::V2 => {
                sys::setsockopt(fd, libc::SOL_PACKET, sys::PACKET_VERSION, &sys::TPACKET_V2)?;
                let req = sys::TpacketReq {
                    block_size: cfg.block_size,
                    block_nr: cfg.block_nr,
                    frame_size: FRAME_SIZE,
                    frame_nr,
                };
                sys::setsockopt(fd, libc::SOL_PACKET, sys::PACKET_RX_RING, &req)?;
            }
        }
        let len = cfg.block_size as usize * cfg.block_nr as usize;
        let map = Mmap::ring(fd, len)?;
        Ok(RxRing {
            map,
            cfg,
            cur: 0,
            taken: 0,
            slots: frame_nr,
        })
    }

    fn block_ptr(&self, i: u32) -> *mut u8 {
        // SAFETY: `i < block_nr`, so the offset is inside the mapping of
        // block_size * block_nr bytes.
        unsafe { self.map.ptr.add(i as usize * self.cfg.block_size as usize) }
    }

    fn slot_ptr(&self, i: u32) -> *mut u8 {
        // SAFETY: `i < slots = block_nr * (block_size / FRAME_SIZE)`; slots are laid out
        // back to back (block_size is a multiple of FRAME_SIZE), so the slot's
        // FRAME_SIZE bytes are inside the mapping.
        unsafe { self.map.ptr.add(i as usize * FRAME_SIZE as usize) }
    }

    fn word(&self, p: *mut u8) -> &AtomicU32 {
        // SAFETY: callers pass a 4-byte aligned status word of a block or slot inside the
        // mapping (blocks are page-aligned, slots 2048-aligned), shared with the kernel, so
        // it is accessed atomically.
        unsafe { &*(p as *const AtomicU32) }
    }

    /// The next frames the kernel has handed over, if any (V2: up to `batch` ready slots in
    /// a row; V3: the next block). Each call must be followed by [`RxRing::release`] when it
    /// returns true.
    pub fn next_batch(&mut self, out: &mut Vec<RxFrame>) -> bool {
        out.clear();
        match self.cfg.version {
            RingVersion::V3 => self.next_block(out),
            RingVersion::V2 => self.next_slots(out),
        }
    }

    fn next_slots(&mut self, out: &mut Vec<RxFrame>) -> bool {
        let fs = FRAME_SIZE as usize;
        let max = self.cfg.batch.clamp(1, self.slots);
        let mut i = self.cur;
        let mut n = 0u32;
        while n < max {
            let h = self.slot_ptr(i);
            let status = self.word(h).load(Ordering::Acquire);
            if status & sys::TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the slot is ours (status user, acquire above); the tpacket2_hdr fields
            // read lie in its first 32 bytes.
            let (wire, snap, mac) = unsafe {
                (
                    (h.add(pkt2::LEN) as *const u32).read() as usize,
                    (h.add(pkt2::SNAPLEN) as *const u32).read() as usize,
                    (h.add(pkt2::MAC) as *const u16).read() as usize,
                )
            };
            if mac + snap <= fs {
                out.push(RxFrame {
                    // SAFETY: `mac + snap <= FRAME_SIZE`: the frame is inside the slot.
                    ptr: unsafe { h.add(mac) },
                    len: snap,
                    wire_len: wire,
                    status,
                });
            }
            n += 1;
            i = (i + 1) % self.slots;
        }
        self.taken = n;
        n > 0
    }

    fn next_block(&mut self, out: &mut Vec<RxFrame>) -> bool {
        let b = self.block_ptr(self.cur);
        // SAFETY: offset 8 of a page-aligned block is inside it.
        if self
            .word(unsafe { b.add(block::STATUS) })
            .load(Ordering::Acquire)
            & sys::TP_STATUS_USER
            == 0
        {
            return false;
        }
        let bs = self.cfg.block_size as usize;
        // SAFETY: the block is ours (status user, acquire above); the header words read are
        // inside the first 48 bytes of the block.
        let (num, first) = unsafe {
            (
                (b.add(block::NUM_PKTS) as *const u32).read(),
                (b.add(block::FIRST) as *const u32).read() as usize,
            )
        };
        let mut off = first;
        for _ in 0..num {
            if off + pkt::HDR > bs {
                break;
            }
            // SAFETY: `off + 48 <= block_size`, so the tpacket3_hdr fields read lie inside
            // the block, which is ours until released.
            let (next, snap, wire, status, mac) = unsafe {
                let h = b.add(off);
                (
                    (h.add(pkt::NEXT) as *const u32).read_unaligned() as usize,
                    (h.add(pkt::SNAPLEN) as *const u32).read_unaligned() as usize,
                    (h.add(pkt::LEN) as *const u32).read_unaligned() as usize,
                    (h.add(pkt::STATUS) as *const u32).read_unaligned(),
                    (h.add(pkt::MAC) as *const u16).read_unaligned() as usize,
                )
            };
            if off + mac + snap <= bs {
                out.push(RxFrame {
                    // SAFETY: `off + mac + snap <= block_size`: the frame is inside the block.
                    ptr: unsafe { b.add(off + mac) },
                    len: snap,
                    wire_len: wire,
                    status,
                });
            }
            if next == 0 {
                break;
            }
            off += next;
        }
        true
    }

    /// Gives what the last [`RxRing::next_batch`] returned back to the kernel and moves on.
    pub fn release(&mut self) {
        match self.cfg.version {
            RingVersion::V3 => {
                let b = self.block_ptr(self.cur);
                // SAFETY: offset 8 of a page-aligned block is inside it.
                self.word(unsafe { b.add(block::STATUS) })
                    .store(sys::TP_STATUS_KERNEL, Ordering::Release);
                self.cur = (self.cur + 1) % self.cfg.block_nr;
            }
            RingVersion::V2 => {
                for _ in 0..self.taken {
                    let h = self.slot_ptr(self.cur);
                    self.word(h).store(sys::TP_STATUS_KERNEL, Ordering::Release);
                    self.cur = (self.cur + 1) % self.slots;
                }
                self.taken = 0;
            }
        }
    }
}
