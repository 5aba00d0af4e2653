//! What a node's routing hands to the process that takes its place (`anode upgrade`): the
//! neighbors it hears, the routes it learned (distance vector) or the database it holds (link
//! state). Without them the new process would drop every packet with `no_route` until its
//! neighbors taught it again (a hello interval, then an update interval).
//!
//! Contract:
//! - Export is read-only: the exporting node keeps running unchanged (an upgrade that fails
//!   resumes it).
//! - Times travel as durations relative to the export (`*_ms` fields), never as instants: an
//!   `Instant` means nothing in another process. Import rebases them on its own `now`.
//! - Import trusts nothing it cannot check against its own configuration: a neighbor is
//!   restored only on an enabled link of the same index that has no pinned neighbor, a route
//!   only through a restored neighbor and below infinity, an LSA only with at most
//!   [`anode_wire::control::MAX_LSA_LINKS`] links. What does not fit is skipped and counted
//!   ([`Restored`]); the protocol then repairs it as it would after any loss.
//! - Import makes no routing message of its own: the neighbors already hold everything the
//!   exporting process told them (its sequence numbers continue where they were).

use std::time::{Duration, Instant};

use anode_wire::NodeAddr;

use crate::Protocol;

/// One up neighbor.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NeighborRecord {
    /// The link's index (links follow the config file's order).
    pub link: u32,
    /// The neighbor's address.
    pub addr: NodeAddr,
    /// Milliseconds since it was last heard.
    pub heard_ms_ago: u64,
    /// Its dead interval in milliseconds.
    pub dead_ms: u64,
}

/// One learned, reachable distance-vector route.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RouteRecord {
    /// The destination.
    pub dest: NodeAddr,
    /// The neighbor it goes through.
    pub via: NodeAddr,
    /// Its metric.
    pub metric: u16,
    /// Milliseconds until it times out unless refreshed (`None`: kept alive by the
    /// neighbor's hellos, the route to a neighbor itself).
    pub expires_in_ms: Option<u64>,
}

/// One link-state database entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LsaRecord {
    /// The node that originated it.
    pub origin: NodeAddr,
    /// Which of its fragments.
    pub fragment: u8,
    /// Its sequence number.
    pub seq: u32,
    /// Milliseconds until it expires unless refreshed.
    pub expires_in_ms: u64,
    /// (neighbor, cost) per link.
    pub links: Vec<(NodeAddr, u16)>,
}

/// A node's routing state, as handed over.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RoutingHandover {
    /// The protocol that exported it: a successor configured for the other one keeps only
    /// the neighbors.
    pub protocol: Protocol,
    /// The up neighbors (pinned ones come from the configuration and are not listed).
    pub neighbors: Vec<NeighborRecord>,
    /// Distance vector: the learned routes.
    pub routes: Vec<RouteRecord>,
    /// Link state: the database, the node's own LSA among it.
    pub lsas: Vec<LsaRecord>,
    /// Link state: the sequence number of the node's own LSA.
    pub own_seq: u32,
    /// The static routes, those added at run time among them: (destination, via, metric).
    pub statics: Vec<(NodeAddr, NodeAddr, u16)>,
}

/// What an import restored and what it skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Restored {
    /// Neighbors restored.
    pub neighbors: usize,
    /// Routes restored (distance vector).
    pub routes: usize,
    /// Database entries restored (link state).
    pub lsas: usize,
    /// Records that did not fit this node (another link list, another protocol, over a
    /// bound): the protocol relearns them.
    pub skipped: usize,
}

/// Milliseconds from `now` until `t` (0 if past).
pub(crate) fn ms_until(now: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX)
}

/// `now` plus `ms`, saturating at a day (no deadline handed over is longer).
pub(crate) fn after_ms(now: Instant, ms: u64) -> Instant {
    now + Duration::from_millis(ms.min(86_400_000))
}
