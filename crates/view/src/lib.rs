//! # anode-view: a live picture of an emulation or a running node
//!
//! `anode emulate FILE --view` and `anode view --node-port N` serve a local web page
//! (loopback only) with the topology as a graph (link rates on the edges, down links
//! dashed), every node's counters, routing tables, and, for a running node, its NodeOS
//! domains and capsule code cache. The page gets every update over a WebSocket (`/ws`);
//! `/state.json` answers the latest state for scripts.
//!
//! - [`model`]: what the page shows ([`ViewState`]) and how rates are derived.
//! - [`server`]: the HTTP/WebSocket server and the [`Hub`] states are published to.
//! - [`emu`]: the emulator tap ([`EmuView`]), a few snapshots per wall-clock second.
//! - [`node`]: polling a running node over its control socket ([`follow_node`]).
//!
//! Contract: watching never stalls what is watched: the emulator builds a snapshot only
//! when a tap asks (at most every [`emu::UPDATE_EVERY`] of wall time), publishing only
//! swaps the latest state, and browsers that fall behind skip states.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod emu;
pub mod model;
pub mod node;
pub mod server;

pub use emu::EmuView;
pub use model::{RateTracker, ViewLink, ViewNode, ViewState};
pub use node::follow_node;
pub use server::{Hub, ViewError, ViewServer};
