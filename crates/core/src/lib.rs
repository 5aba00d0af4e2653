//! # anode node core
//!
//! [`Node`] is one anode node as a sans-IO state machine, in the style of quinn-proto and
//! smoltcp: it is fed `(now, link, bytes)` with [`Node::handle_packet`] and timer expiries with
//! [`Node::handle_timeout`], and polled for packets to send ([`Node::poll_transmit`]), things
//! that happened ([`Node::poll_event`], including local deliveries) and its next deadline
//! ([`Node::poll_timeout`]). It never touches a socket, a clock or a global RNG, so the
//! emulator can run whole networks of nodes in virtual time, deterministically, and the UDP
//! driver (`anode-io`) is only a loop around these calls.
//!
//! ## The path of one packet (see `fastpath.rs`)
//! 1. `handle_packet` checks the ANEP header (`AnepPacket::new_checked`); a malformed packet is
//!    dropped and counted with its [`DropReason`].
//! 2. Control messages (hello, routes, code transfer) go to the routing state machines or to
//!    the execution environments (`control.rs`).
//! 3. Routed Type IDs (datagram and every registered EE) have a transit header. A packet for
//!    this node, or one that asks for evaluation at every hop or for its EE's routing
//!    function, is handed to the EE registered for its Type ID (or delivered, for datagrams).
//! 4. Anything else takes the **fast path**: one hash lookup of the destination, the resource
//!    bound decremented and the previous hop rewritten in place, and the same buffer queued for
//!    transmission. No EE runs and no payload byte is copied.
//! 5. Unknown Type IDs are discarded or forwarded (by their ANEP destination option) as the
//!    ANEP discard flag says, and counted either way.
//!
//! ## Invariants
//! - Every packet handed in ends in exactly one of: a transmit, a delivery, an EE, or a drop
//!   counter. `Counters::rx_packets` equals the sum of those outcomes (tested).
//! - No input bytes make the node panic (fuzz target `node_input`, garbled-corpus tests).

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
#![forbid(unsafe_code)]

pub mod bucket;
mod config;
mod control;
mod counters;
mod cut;
mod ee;
mod event;
mod fastpath;
pub mod handover;
mod hooks;
mod ledger;
pub mod load;
mod module_ee;
mod node;
mod report;
mod txq;
mod view;

pub use anode_routing::{Fib, FibEntry};
pub use anode_routing::{
    LinkId, NextHop, Protocol as RoutingProtocol, RoutingConfig, dv::Route, dv::RouteKind,
};
pub use anode_wire as wire;
pub use config::{ConfigError, LinkConfig, NodeConfig};
pub use counters::{Counters, DropReason, Outcomes};
pub use cut::{CutError, CutId, CutInfo, CutSpec, CutThrough, CutVerdict, DemuxKey};
pub use ee::{Dispatch, EeHeader, EePacket, ExecutionEnvironment, NodeContext};
pub use event::{Delivery, Event, Transmit};
pub use hooks::{EeCall, HookInfo, HookPoint, HookVerdict, PacketHooks};
pub use ledger::Resumed;
pub use load::LinkLoad;
pub use node::{EeInfo, NeighborInfo, Node, TransitView};
pub use report::{DomainReport, DomainStat};
pub use txq::{Fcfs, QueueDiscipline};
pub use view::{NodeFacts, NodeView};
