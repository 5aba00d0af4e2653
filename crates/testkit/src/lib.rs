//! # anode-testkit: one kit for every test
//!
//! Contract: (dev-dependency) a test network runs in virtual time and cannot hang; a namespace
//! or child process a test makes is gone when the test ends, also on panic.
//!
//! A dev-dependency of the crates' tests and benchmarks, so that a network, a node fixture
//! or a namespace is set up one way everywhere:
//! - [`net`]: a network of sans-IO [`anode_core::Node`]s wired by hand, driven in virtual
//!   time (a fixed per-link delay, zero by default; optional taps that change or drop
//!   packets), with every node's events kept for the test;
//! - [`fixtures`]: node addresses, a transit node with two neighbors up and a large routing
//!   table (the benchmarks' node), deterministic test keys;
//! - [`process`]: scratch directories removed on drop, free ports, child processes killed on
//!   drop with every wait bounded, and the `anode` command's node processes;
//! - [`udp`]: real nodes over loopback UDP with fast routing timers, bounded waits for routes
//!   and deliveries;
//! - [`netns`]: the network-namespace harness: the root/tool check for `#[ignore]`d tests,
//!   namespaces and veth lines torn down on drop (also when a test panics), threads inside
//!   a namespace.
//!
//! Tests that need root are `#[ignore = "needs root and netns"]`; `.ci/run` runs them as root
//! with `--include-ignored`, where [`netns::require`] fails loudly if anything is missing:
//! no test passes by skipping.
//!
//! Test traffic stays on loopback or inside the namespaces a test made, with addresses from
//! 198.18.0.0/15 and 2001:2::/48.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod fixtures;
pub mod http;
pub mod net;
pub mod netns;
pub mod process;
pub mod udp;

pub use fixtures::addr;
pub use net::{Net, NetOptions};
