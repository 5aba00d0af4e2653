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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Layout.
    pub version: RingVersion,
    /// Bytes per block (a multiple of the page size and of the frame size).
    pub block_size: u32,
    /// Number of blocks.
    pub block_nr: u32,
    /// Bytes per frame slot (V2) / the frame size the kernel is told (V3): a power of two,
    /// at least [`FRAME_SIZE`]; [`RingConfig::for_mtu`] sizes it for an interface.
    pub frame_size: u32,
    /// V3 only: block retire timeout in milliseconds, the most a lone frame waits in a block.
    pub retire_ms: u32,
    /// V2 only: the most frames taken in one batch.
    pub batch: u32,
}

/// The smallest frame slot: a 1514-byte frame (MTU 1500), two VLAN tags and the ring's own
/// headers fit.
pub const FRAME_SIZE: u32 = 2048;

/// Room in a slot besides the frame: the tpacket2/3 header and `sockaddr_ll` before the
/// frame (at most 96 bytes: the kernel puts the MAC header at `TPACKET_ALIGN(hdrlen + 16) -
/// 14`), rounded up.
const SLOT_OVERHEAD: usize = 128;

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            version: RingVersion::V2,
            block_size: 1 << 16,
            block_nr: 512,
            frame_size: FRAME_SIZE,
            retire_ms: 1,
            batch: 256,
        }
    }
}

impl RingConfig {
    /// This geometry with slots that hold a whole frame of an interface with MTU `mtu`
    /// (Ethernet header and two VLAN tags included), so jumbo frames reach the router
    /// whole instead of truncated: the slot size is the next power of two of what the
    /// frame needs, at least [`FRAME_SIZE`] and at least the configured one; blocks grow to
    /// hold at least one slot, and the number of blocks shrinks to keep the ring's bytes
    /// (its memory) the same, down to 2 blocks.
    pub fn for_mtu(self, mtu: usize) -> RingConfig {
        let need = mtu.saturating_add(14 + 8 + SLOT_OVERHEAD);
        let frame = u32::try_from(need.next_power_of_two())
            .unwrap_or(1 << 31)
            .max(FRAME_SIZE)
            .max(self.frame_size);
        let bytes = u64::from(self.block_size) * u64::from(self.block_nr);
        let block_size = self.block_size.max(frame);
        let block_nr = u32::try_from(bytes / u64::from(block_size.max(1)))
            .unwrap_or(u32::MAX)
            .max(2);
        RingConfig {
            frame_size: frame,
            block_size,
            block_nr,
            ..self
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
        let frame_nr = cfg.block_size / cfg.frame_size.max(1) * cfg.block_nr;
        match cfg.version {
            RingVersion::V3 => {
                sys::setsockopt(fd, libc::SOL_PACKET, sys::PACKET_VERSION, &sys::TPACKET_V3)?;
                let req = sys::TpacketReq3 {
                    block_size: cfg.block_size,
                    block_nr: cfg.block_nr,
                    frame_size: cfg.frame_size,
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
                    frame_size: cfg.frame_size,
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
        // The kernel puts block_size / frame_size slots at the start of each block.
        let per_block = (self.cfg.block_size / self.cfg.frame_size.max(1)).max(1);
        let off = (i / per_block) as usize * self.cfg.block_size as usize
            + (i % per_block) as usize * self.cfg.frame_size as usize;
        // SAFETY: `i < slots = block_nr * per_block` (the kernel accepted that frame_nr), so
        // `i / per_block < block_nr` and the slot's frame_size bytes end within its block,
        // inside the mapping of block_size * block_nr bytes.
        unsafe { self.map.ptr.add(off) }
    }

    fn word(&self, p: *mut u8) -> &AtomicU32 {
        // SAFETY: callers pass a 4-byte aligned status word of a block or slot inside the
        // mapping (blocks are page-aligned, slots at multiples of frame_size, which the kernel
        // requires to be a multiple of 16), shared with the kernel, so
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
        let fs = self.cfg.frame_size as usize;
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
                    // SAFETY: `mac + snap <= frame_size`: the frame is inside the slot.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_fit_the_mtu_and_the_ring_keeps_its_size() {
        let d = RingConfig::default();
        assert_eq!(
            d.for_mtu(1500),
            d,
            "MTU 1500 fits the default 2048-byte slots"
        );
        let j = d.for_mtu(9000);
        assert_eq!(j.frame_size, 16384);
        assert_eq!(j.block_size, 1 << 16);
        assert_eq!(j.block_nr, 512, "blocks already hold four 16 KiB slots");
        // 9000 + Ethernet + two tags + the ring's headers fits the slot.
        assert!(9000 + 14 + 8 + SLOT_OVERHEAD <= j.frame_size as usize);
        // A slot larger than a block: the block grows, the ring's bytes stay the same.
        let big = d.for_mtu(65535);
        assert_eq!(big.frame_size, 131072);
        assert_eq!(big.block_size, 131072);
        assert_eq!(big.block_nr, 256);
        assert_eq!(
            u64::from(big.block_size) * u64::from(big.block_nr),
            u64::from(d.block_size) * u64::from(d.block_nr)
        );
        // Never fewer than two blocks.
        let tiny = RingConfig { block_nr: 1, ..d }.for_mtu(65535);
        assert_eq!(tiny.block_nr, 2);
    }
}
