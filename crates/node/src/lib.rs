//! # anode-node: the node runtime as a library
//!
//! Everything between a config file and a running node, shared by every program that runs
//! one: `anode node`, `anode router`'s local node, the emulator (virtual time and real
//! time), the benchmark forwarder (`anode-fwd-node`) and the tests.
//!
//! ```text
//!   NodeFile (config/)  ──>  NodeBuilder (builder.rs)  ──>  anode_core::Node
//!   [node] [[link]] ...       links, static routes,            (sans-IO)
//!   [capsule] [nodeos]        EEs under the NodeOS (ees.rs),      │
//!   [modules]                 service modules (modules.rs)        v
//!                                                   RunningNode (run.rs): the UDP driver
//!                                                   (anode-io), the control server
//!                                                   (control/), the metrics endpoint
//! ```
//!
//! ## Contracts
//! - [`NodeBuilder::build`] is the one way a node gets its links, routes, EEs and modules:
//!   a node built from the same [`config::NodeFile`] is the same node whichever program
//!   built it. Errors name the config file (and line, where the file gives one) and the fix.
//! - [`RunningNode`] owns the threads a node needs (data path, control server, metrics) and
//!   [`RunningNode::stop`] ends all of them, removes the control socket and hands the node
//!   back for its final counters.
//! - [`steps::registry`] is the emulator registry with both EEs on every node and the EE
//!   steps; [`realtime::run`] runs a topology file as real nodes over loopback UDP, each a
//!   [`RunningNode`] built by [`NodeBuilder`].
//! - [`router`] is `anode router`: anode as an IPv4/IPv6 router, optionally with a local node
//!   built by the same builder.
//!
//! Nothing here parses command lines or prints reports: the `anode` CLI does that.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod builder;
pub mod config;
pub mod control;
pub mod demo;
pub mod durable;
pub mod ees;
pub mod metrics;
pub mod modules;
pub mod realtime;
pub mod repo;
pub mod router;
pub mod run;
pub mod steps;
pub mod upgrade;

pub use builder::{BuildError, EeOptions, NodeBuilder};
pub use run::{RunError, RunOptions, RunningNode, Stopped};
