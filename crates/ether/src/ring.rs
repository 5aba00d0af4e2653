//! The TPACKET_V3 receive ring: a set of blocks shared with the kernel. The kernel fills a
//! block with frames and hands it over (block status `TP_STATUS_USER`) when it is full or
//! when the block timer (`retire_blk_tov`, milliseconds) expires; user space walks the
//! frames and gives the block back (`TP_STATUS_KERNEL`). Blocks are handed over in ring
//! order, so one cursor suffices.
//!
//! Invariants: the cursor always points at the next block the kernel will hand over; a
//! block is read only after its status says user (acquire) and given back with a release
//! store after the last access to its frames; every offset read from the ring is checked
//! against the block before use, so a corrupt ring cannot make us read outside the mapping.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys::{self, Mmap, block, pkt};

/// Ring geometry.
#[derive(Debug, Clone, Copy)]
pub struct RingConfig {
    /// Bytes per block (a multiple of the page size).
    pub block_size: u32,
    /// Number of blocks.
    pub block_nr: u32,
    /// Block retire timeout in milliseconds: the most a lone frame waits in a block.
    pub retire_ms: u32,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            block_size: 1 << 16,
            block_nr: 64,
            retire_ms: 1,
        }
    }
}

/// One frame inside a block handed to user space.
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
    cur: u32,
}

impl RxRing {
    /// Sets up TPACKET_V3 and the ring on `fd` (before bind) and maps it.
    pub fn new(fd: &OwnedFd, cfg: RingConfig) -> io::Result<RxRing> {
        sys::setsockopt(fd, libc::SOL_PACKET, sys::PACKET_VERSION, &sys::TPACKET_V3)?;
        let frame_size = 2048u32;
        let req = sys::TpacketReq3 {
            block_size: cfg.block_size,
            block_nr: cfg.block_nr,
            frame_size,
            frame_nr: cfg.block_size / frame_size * cfg.block_nr,
            retire_blk_tov: cfg.retire_ms,
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        sys::setsockopt(fd, libc::SOL_PACKET, sys::PACKET_RX_RING, &req)?;
        let len = cfg.block_size as usize * cfg.block_nr as usize;
        let map = Mmap::ring(fd, len)?;
        Ok(RxRing { map, cfg, cur: 0 })
    }

    fn block_ptr(&self, i: u32) -> *mut u8 {
        // SAFETY: `i < block_nr`, so the offset is inside the mapping of
        // block_size * block_nr bytes.
        unsafe { self.map.ptr.add(i as usize * self.cfg.block_size as usize) }
    }

    fn status(&self, b: *mut u8) -> &AtomicU32 {
        // SAFETY: the status word is a 4-byte aligned u32 at offset 8 of a page-aligned
        // block inside the mapping, shared with the kernel, so it is accessed atomically.
        unsafe { &*(b.add(block::STATUS) as *const AtomicU32) }
    }

    /// The next block the kernel has handed over, if any, as its frames.
    pub fn next_block(&mut self, out: &mut Vec<RxFrame>) -> bool {
        out.clear();
        let b = self.block_ptr(self.cur);
        if self.status(b).load(Ordering::Acquire) & sys::TP_STATUS_USER == 0 {
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

    /// Gives the current block back to the kernel and moves to the next.
    pub fn release(&mut self) {
        let b = self.block_ptr(self.cur);
        self.status(b)
            .store(sys::TP_STATUS_KERNEL, Ordering::Release);
        self.cur = (self.cur + 1) % self.cfg.block_nr;
    }
}
