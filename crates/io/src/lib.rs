//! # anode-io: the UDP driver
//!
//! Runs one sans-IO [`anode_core::Node`] on one UDP socket, on a dedicated thread, with no
//! async runtime and no task switch per packet. In UDP mode a node address *is* its UDP socket
//! address, so a datagram's source address names its link (`Node::link_by_peer`, cached) and a
//! transmit's `dst` is where it goes.
//!
//! ```no_run
//! # use anode_core::{Node, NodeConfig, LinkConfig};
//! # use std::time::Instant;
//! let addr = "127.0.0.1:3322".parse().unwrap();
//! let mut node = Node::new(NodeConfig::new(addr), Instant::now()).unwrap();
//! node.add_link(LinkConfig::new("127.0.0.1:3323".parse().unwrap()), Instant::now());
//! let h = anode_io::spawn(node, anode_io::DriverConfig::new(addr.socket_addr())).unwrap();
//! let events = h.take_events().unwrap();
//! h.call(|n, now| n.send_datagram(now, "127.0.0.1:3324".parse().unwrap(), 7, 0, None, b"hi"))
//!     .unwrap()
//!     .ok();
//! let node = h.shutdown();
//! # let _ = (events, node);
//! ```
//!
//! ## Data path (see `driver.rs`)
//! `ppoll` on the socket and an eventfd (for `call`/shutdown) with the node's next deadline as
//! timeout; `recvmmsg` a batch into pooled buffers; hand each to the node; drain
//! `poll_transmit` into `sendmmsg` batches to many destinations, recycling the buffers; timers;
//! events to a bounded channel; pending calls. Under load a full batch skips `ppoll`.
//!
//! ## Kernel fast path
//! With [`DriverConfig::kernel_transit`] on, packets that only pass through the node are
//! forwarded by an eBPF program at TC ingress (`anode_ether::transit`), with the node's own
//! forwarding table kept in its maps by the data-path thread (`kernel.rs`); the rest reach
//! the socket as before. Its counters are the `kernel_*` fields of [`DriverStats`].
//!
//! ## Capture
//! [`NodeHandle::capture`] copies received and sent datagrams to a bounded channel for
//! another thread (`anode capture`); see [`tap`].
//!
//! ## Contracts
//! - Datagrams from sources that are no link's peer are counted and dropped.
//! - IPv4 and IPv6; an IPv6 socket is dual-stack, v4-mapped sources normalise through
//!   `NodeAddr::from`, IPv4 destinations are sent v4-mapped.
//! - EINTR, EAGAIN, ECONNREFUSED and ENOBUFS never stop the loop; they are counted in
//!   [`DriverStats`].
//! - Optional per-peer [`Impairment`]s (delay, loss, rate, queue) apply to egress only.
//!
//! GSO/GRO are not used: forwarded datagrams are rewritten one by one and leave to different
//! next hops with different sizes, and on the veth testbed the per-batch syscall cost is
//! already amortised by `sendmmsg` (see the netbench report).

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

mod config;
mod driver;
mod handle;
mod impair;
mod kernel;
mod stats;
mod sys;
pub mod tap;

pub use config::{ConfigError, DriverConfig, Impairment, MAX_BATCH, MAX_BUSY_POLL};
pub use handle::{DriverGone, NodeHandle, spawn, spawn_on};
pub use kernel::KernelTransit;
pub use stats::DriverStats;
pub use tap::{Capture, CaptureSpec, Captured, Direction};
