//! # anode Ethernet links
//!
//! anode owns network interfaces through AF_PACKET and runs the IP router
//! (`anode_ip::IpRouter`) over them on one dedicated data-path thread:
//!
//! - **Receive:** one TPACKET_V2 ring per interface (`ring.rs`; TPACKET_V3 on request): the
//!   kernel writes each frame into a slot and marks it ready at once; the thread takes every
//!   ready slot in a row (up to 256) per wake-up, so no syscall per frame at high rates and no
//!   waiting at low rates.
//! - **Forward:** each frame is rewritten in place in the ring (`IpRouter::handle_frame`),
//!   then sent with `sendmmsg` whose iovecs point into the ring: one `sendmmsg` per outgoing
//!   link per block, no user-space copy (`link.rs` says why not `PACKET_TX_RING`).
//! - **Everything else:** generated frames (ARP, NDP, ICMP) are batched the same way;
//!   diverted frames (the router's filters: ANEP over UDP to the router, ANEP over
//!   Ethernet under EtherType 0x88B5) go to a [`Hooks`] implementation, which is how the
//!   local `anode_core::Node` is attached by the `anode router` command.
//!
//! ## Why TPACKET_V2 and not V3 (measured)
//! TPACKET_V3 hands a block to user space only when it is full or when its retire timer
//! fires (at least 1 ms), and a partially filled block cannot be read (the kernel publishes
//! no per-frame status in V3 and may still be writing it). So at low rates every packet
//! waits up to 1 ms in the router. TPACKET_V2 publishes every frame as it is written and
//! `poll` wakes per frame; at high rates the ready slots pile up while a batch is being
//! forwarded, so the next batch is large anyway. `scripts/bench-router.sh` with
//! `MODES="kernel anode:ring=v3 anode"` compares them in one run (`--ring v3` keeps V3
//! available). One run on the loaded two-CPU test machine (`MODES="kernel anode:ring=v3
//! anode" BISECT_STEPS=3 scripts/bench-router.sh 2`): ping RTT through the router avg 0.112
//! ms (min 0.078) with V2 against 3.085 ms (min 1.030) with V3 and 0.059 ms through the
//! kernel; full-load throughput was within the noise of each other.
//!
//! ## Where loss happens, and what was tuned
//! Each link reads `PACKET_STATISTICS` (`tp_packets`, `tp_drops`: frames the kernel dropped
//! because the ring was full) into [`LinkStats`]; `anode router` prints them on exit and the
//! bench script adds veth backlog drops and the receiver's UDP receive-buffer overflows.
//! `SO_RCVBUF` does not apply to a mapped ring (`tpacket_rcv` fills slots regardless of
//! it), so the ring size (`--block-size`, `--block-nr`) is the receive buffer. Measured: at
//! full load the loss was almost all ring-full drops while the data-path thread was
//! descheduled (the machine is shared), none at the veth backlogs; a 4 MiB ring dropped
//! 123k of 774k frames in one run, a 32 MiB ring (512 blocks, now the default) 12.7k of
//! 751k in the same run, and 1472-byte delivery rose from 107k to 129k pps (kernel
//! forwarding in that run: 93k pps, its sender being slower). Busy polling (`SO_BUSY_POLL`) needs a NAPI context, which veth has
//! only with GRO/XDP, and it would spin a core the two-CPU test machine does not have to
//! spare. `PACKET_TX_RING` would add a user-space copy from the receive ring into the
//! transmit ring (see `link.rs`) for the same one syscall per batch, so transmit stays
//! `sendmmsg` straight from the receive ring.
//!
//! Under overload with a fast generator (`anode-pktgen`, two sender threads on the two
//! CPUs) the sender threads' softirq work (veth receive into the ring) starved the data-path
//! thread and about half the frames were ring-full drops; [`DataPath::set_realtime`]
//! (`anode router --rt-priority N`, SCHED_FIFO) removed those drops entirely in the same
//! benchmark (figures in docs/benchmarks.md). It is opt-in: on a shared machine a real-time
//! thread takes CPU from everything else.
//!
//! AF_XDP is not used: it needs an XDP program loaded on each interface (an eBPF toolchain or
//! hand-assembled bytecode) and, on veth, runs in generic (skb) mode where it copies like
//! AF_PACKET; the TPACKET_V3 + sendmmsg path is the portable one and is what the benchmarks
//! measure.
//!
//! ## Traffic generator
//! [`pktgen`] and the `anode-pktgen` binary write one pre-built UDP frame onto an interface
//! through a send-only AF_PACKET socket (`sendmmsg`, or `PACKET_TX_RING` to compare the
//! two), from several threads; `scripts/bench-router.sh` uses it so that the sender's own
//! IP/UDP stack is out of the measurement.
//!
//! ## Contracts
//! - One thread owns the router and all links; nothing is shared but the stop flag.
//! - Every `unsafe` block has a `// SAFETY:` comment; ring offsets from the kernel are
//!   bounds-checked before use.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

mod datapath;
/// The kernel (eBPF, TC ingress or XDP) fast path in front of the user-space router.
pub mod fastpath;
mod link;
pub mod pktgen;
mod ring;
mod sys;

pub use datapath::{DataPath, FastPathSync, Hooks, NoHooks, Stopped};
pub use link::{EtherLink, LinkError, LinkStats, Receive};
pub use ring::{FRAME_SIZE, RingConfig, RingVersion};
