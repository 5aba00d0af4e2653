//! Watching an emulation while it runs: a [`Tap`] sees every packet a node hands to a link
//! (packet capture, `anode emulate --pcap`) and, when it asks, a [`NetSnapshot`] of the whole
//! network (the live view, `anode emulate --view`).
//!
//! Contract: the emulator calls [`Tap::step`] after every event with the virtual time and
//! the event count; only when it returns true does it build a snapshot (O(nodes + links +
//! routes)), so a tap that asks a few times per wall-clock second costs the run nothing
//! noticeable. A tap may block in `step` (to pace virtual time against the wall clock); the
//! emulation waits for it and stays deterministic.

use std::time::Duration;

use anode_wire::NodeAddr;
use serde::Serialize;

use crate::link::DirStats;

/// Sees packets and, on request, snapshots of an emulation.
pub trait Tap {
    /// One packet offered to link `link` (its index in the topology) at virtual time `at`,
    /// from node address `src` to `dst`, as a capture on the sending interface would see it
    /// (lost ones too).
    fn packet(&mut self, link: usize, at: Duration, src: NodeAddr, dst: NodeAddr, buf: &[u8]) {
        let _ = (link, at, src, dst, buf);
    }

    /// Called after every event; true asks for a [`Tap::snapshot`] now.
    fn step(&mut self, now: Duration, events: u64) -> bool {
        let _ = (now, events);
        false
    }

    /// The network as it is now (after a `step` that returned true, and once at the end
    /// with `done` set).
    fn snapshot(&mut self, snap: &NetSnapshot) {
        let _ = snap;
    }
}

impl std::fmt::Debug for dyn Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tap")
    }
}

/// The network at one moment of virtual time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetSnapshot {
    /// Virtual time.
    pub now: Duration,
    /// Events processed so far.
    pub events: u64,
    /// The run is over.
    pub done: bool,
    /// In topology order.
    pub nodes: Vec<NodeSnap>,
    /// In topology order.
    pub links: Vec<LinkSnap>,
}

/// One node's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeSnap {
    /// Its name in the topology.
    pub name: String,
    /// Its address.
    pub address: NodeAddr,
    /// Neighbors up.
    pub neighbors: usize,
    /// Reachable destinations in its routing table (itself excluded).
    pub routes: usize,
    /// Packets received from links.
    pub rx_packets: u64,
    /// Packets sent on links.
    pub tx_packets: u64,
    /// Packets handed to an EE.
    pub to_ee: u64,
    /// Packets delivered to local applications.
    pub delivered: u64,
    /// Packets dropped, all reasons.
    pub drops: u64,
    /// Its reachable routes (destination, next hop, metric; node names), when the network
    /// has at most [`ROUTE_TABLES_MAX_NODES`] nodes (empty otherwise: a snapshot stays
    /// O(nodes + links) on large networks).
    pub route_table: Vec<(String, String, u16)>,
}

/// Largest network whose snapshots carry every node's routing table.
pub const ROUTE_TABLES_MAX_NODES: usize = 200;

/// One link's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkSnap {
    /// Index of one end in [`NetSnapshot::nodes`].
    pub a: usize,
    /// Index of the other end.
    pub b: usize,
    /// Up (not failed by a step).
    pub up: bool,
    /// Traffic from a to b.
    pub a_to_b: DirStats,
    /// Traffic from b to a.
    pub b_to_a: DirStats,
}
