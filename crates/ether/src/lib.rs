//! # anode Ethernet links
//!
//! anode owns network interfaces through AF_PACKET and runs the IP router
//! (`anode_ip::IpRouter`) over them on one dedicated data-path thread:
//!
//! - **Receive:** one TPACKET_V3 ring per interface (`ring.rs`): the kernel fills blocks of
//!   frames; the thread walks whole blocks, so one wake-up and no syscall per frame.
//! - **Forward:** each frame is rewritten in place in the ring (`IpRouter::handle_frame`),
//!   then sent with `sendmmsg` whose iovecs point into the ring: one `sendmmsg` per outgoing
//!   link per block, no user-space copy (`link.rs` says why not `PACKET_TX_RING`).
//! - **Everything else:** generated frames (ARP, NDP, ICMP) are batched the same way;
//!   diverted frames (the router's filters: ANEP over UDP to the router, ANEP over
//!   Ethernet under EtherType 0x88B5) go to a [`Hooks`] implementation, which is how the
//!   local `anode_core::Node` is attached by the `anode router` command.
//!
//! AF_XDP is not used: it needs an XDP program loaded on each interface (an eBPF toolchain or
//! hand-assembled bytecode) and, on veth, runs in generic (skb) mode where it copies like
//! AF_PACKET; the TPACKET_V3 + sendmmsg path is the portable one and is what the benchmarks
//! measure.
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
mod link;
mod ring;
mod sys;

pub use datapath::{DataPath, Hooks, NoHooks, Stopped};
pub use link::{EtherLink, LinkError, LinkStats};
pub use ring::RingConfig;
