//! # anode emulator
//!
//! Contract: Topology files and the deterministic virtual-time simulator: the same file and
//! seed give a byte-identical report; a bad file is refused with file:line:column and the fix.
//!
//! Runs the N nodes of a topology file in one process, either
//! - in **deterministic virtual time** ([`run`]): a discrete-event simulator drives the
//!   sans-IO [`anode_core::Node`]s over emulated links (delay, bandwidth, queue, loss, MTU);
//!   the same file and seed give a byte-identical report; or
//! - in **real time** over loopback UDP: every node a real `anode-node` runtime (UDP driver,
//!   control socket) on 127.0.0.1; that runner lives in `anode_node::realtime` and drives the
//!   same steps through [`driver`]; not reproducible (the report says so).
//!
//! The file (see [`topology`]) lists nodes, links and scenario steps: send datagrams, fail
//! and restore links, and `expect` checks that state the expected results, so a topology file
//! is also a test. The [`Report`] says when routing converged, what every step did (delivery,
//! one-way latency, paths), how long each link failure took to repair, every check's verdict,
//! and each node's counters and routing table; as text for people and JSON for tools.
//!
//! ## Layout
//! - `topology.rs`: the file format, parsing and validation (errors name file:line:column and
//!   the fix);
//! - `scenario.rs`: the step framework: [`Action`], [`Registry`] (how EE crates add steps),
//!   [`StepCtx`] and [`Net`];
//! - `actions.rs`: the built-in steps;
//! - `link.rs`: the link model; `sim.rs`: the discrete-event simulator;
//! - `track.rs`: per-datagram tracking; `report.rs`: the report.
//!
//! ## Example
//! ```
//! let src = r#"
//! [network]
//! seed = 1
//! duration_ms = 5000
//! [[node]]
//! name = "a"
//! [[node]]
//! name = "b"
//! [[link]]
//! a = "a"
//! b = "b"
//! [[step]]
//! at_ms = 4000
//! action = "expect"
//! check = "reachable"
//! from = "a"
//! to = "b"
//! "#;
//! let topo = anode_emu::Topology::parse(src, "two.toml").unwrap();
//! let report = anode_emu::run(topo).unwrap();
//! assert!(report.passed());
//! ```

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
#![forbid(unsafe_code)]

mod actions;
pub mod driver;
mod error;
mod link;
mod reach;
mod report;
mod scenario;
mod sim;
pub mod topology;
mod track;
pub mod watch;

pub use error::{EmuError, SpanError, line_col};
pub use link::DirStats;
pub use report::{
    Checks, FailureReport, LinkReport, NodeReport, ReachChange, Report, RouteReport, StepReport,
    TrafficImpact, fmt_ms, fmt_span, fmt_time,
};
pub use scenario::{
    Action, Check, EeEvent, MAX_EE_EVENTS, Net, Next, NodeFn, NodeHook, Registry, ReportCtx, Step,
    StepArgs, StepCtx, StepOutcome, StepParser, Target,
};
pub use sim::Sim;
pub use topology::{LinkSpec, NodeSpec, Topology};
pub use track::{Arrival, FlowRec, Tracker};
pub use watch::{LinkSnap, NetSnapshot, NodeSnap, Tap};

/// Runs a topology in virtual time with the built-in actions.
pub fn run(topo: Topology) -> Result<Report, EmuError> {
    sim::run(topo, &Registry::builtin())
}

/// Runs a topology in virtual time; `registry` supplies node hooks (it must be the registry
/// the topology was parsed with, so its actions are known).
pub fn run_with(topo: Topology, registry: &Registry) -> Result<Report, EmuError> {
    sim::run(topo, registry)
}

/// [`run_with`], watched by `taps`: every packet a node hands to a link (packet capture)
/// and snapshots of the network when a tap asks (the live view); see [`watch`].
pub fn run_tapped(
    topo: Topology,
    registry: &Registry,
    taps: Vec<Box<dyn Tap>>,
) -> Result<Report, EmuError> {
    sim::run_tapped(topo, registry, taps)
}
