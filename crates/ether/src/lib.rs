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
//! ## The kernel fast path in front (the default)
//! However well the user-space thread is tuned, on two CPUs it reached only 36-56 % of
//! kernel forwarding (docs/benchmarks.md): the kernel forwards inside the sender's softirq,
//! while a user-space router needs a CPU of its own and a copy into and out of the ring. So
//! `anode router` puts an eBPF program ([`fastpath`], Scout's split of plain and active
//! paths) on the TC ingress hook of every routed interface. It forwards plain IP with the
//! router's own tables, which [`DataPath`] keeps in sync ([`FastPathSync`],
//! `anode_ip::IpRouter::fast_table`), and passes every other frame on unchanged to this
//! crate's rings: ARP/NDP, packets for the router, TTL expiry, options, fragments, packets a
//! filter diverts to the node or the service modules, next hops not yet resolved. The rings
//! are then protocol sockets ([`Receive::Protocols`]), which the kernel feeds after TC
//! ingress (an `ETH_P_ALL` tap sees frames before it and would forward them a second time).
//! Measured on veth (same run): fast path 101 % / 107 % of kernel forwarding at 64 / 1472 B
//! against 42 % / 40 % for the user-space path.
//!
//! Hooks compared: the same rewrite and redirect at **TC ingress** delivered 107 % / 102 %
//! of kernel forwarding in a prototype, at **XDP** (native veth XDP, GRO on at the receiver
//! so the redirect can land) only 55 % / 44 %: veth hands XDP an skb it must first copy
//! into an xdp_buff. TC is therefore the default; `--fast-path xdp` is for NICs whose
//! drivers run XDP natively.
//!
//! ## AF_XDP against TPACKET_V2 (measured)
//! [`xsk`] is the same router over AF_XDP sockets (`anode-xskfwd`, bench mode `xsk`): an
//! XDP program redirects every frame into a UMEM, `IpRouter::handle_frame` rewrites it
//! there, and it leaves from the outgoing socket's tx ring. On veth the kernel grants copy
//! mode only (no zero-copy), and allows one UMEM shared by the sockets of both interfaces
//! (`XDP_SHARED_UMEM` across devices), so user space copies nothing; a UMEM per socket (a
//! copy per forwarded frame) measured the same. Pinned (docs/benchmarks.md, 3 runs each) it
//! delivered **1.9x / 1.8x** the TPACKET_V2 path at 64 / 1472 B (418-492k against
//! 236-257k pps; loss at full load 7-16 % against 44-48 %), unpinned 1.8x / 1.7x, although
//! it copies each frame three times (veth's skb into an XDP buffer, that into the UMEM, the
//! UMEM into a new skb) where TPACKET copies twice. The time is elsewhere: a profile puts
//! the forwarding thread at 1.7-1.9 us per frame against 3.0-3.1 us, the difference being
//! `sendmmsg`'s per-message path (against a tx ring the kernel walks inside one `sendto`)
//! and a costlier inline delivery to a receiver that is woken more often; on the receive
//! side the AF_PACKET tap costs the sender's CPU more (2.2 against 1.8 us per frame: the
//! frame also goes on into the router namespace's IP stack) than veth's XDP hook plus the
//! copy into the UMEM.
//!
//! It is not a link type of `anode router` (yet). That would take a link backend in
//! [`DataPath`] with the loop of `xsk/fwd.rs` (hooks, waker, fast-path sync, counters), one
//! socket per receive
//! queue, 4 KiB chunks or multi-buffer AF_XDP for MTUs above ~1.7 KB, and above all a way
//! to coexist with the kernel fast path: XDP runs before TC, so the program would have to
//! pass what the TC program forwards (or forward it in XDP) and redirect only the rest, and
//! on veth merely attaching a native XDP program cost the TC fast path ~30 % (72 % / 69 %
//! of its throughput with a pass-only program). So for the default split (TC fast path,
//! user space for the rest) TPACKET_V2 stays; for `--fast-path off` AF_XDP is the faster
//! user-space path measured here, and NICs with native zero-copy XDP (not measured) should
//! only widen the gap.
//!
//! ## Traffic generator
//! [`pktgen`] and the `anode-pktgen` binary write one pre-built UDP frame onto an interface
//! through a send-only AF_PACKET socket (`sendmmsg`, or `PACKET_TX_RING` to compare the
//! two), from several threads; `scripts/bench-router.sh` uses it so that the sender's own
//! IP/UDP stack is out of the measurement.
//!
//! ## Contracts
//! - One thread owns the router and all links; nothing is shared but the stop flag (the
//!   kernel fast path reads its own copy of the tables, in eBPF maps).
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
pub mod signals;
mod sys;
/// The kernel (eBPF, TC ingress) fast path for passive ANEP transit of an `anode node` on UDP.
pub mod transit;
pub mod xsk;

pub use datapath::{DataPath, FastPathSync, Hooks, LinkReport, NoHooks, Stopped, Waker};
pub use link::{EtherLink, LinkError, LinkStats, Receive};
pub use ring::{FRAME_SIZE, RingConfig, RingVersion};
