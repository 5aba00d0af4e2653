//! # anode routing
//!
//! Two sans-IO state machines the node core drives, plus the table the fast path reads:
//!
//! - [`neighbors::NeighborTable`]: hello / dead-interval neighbor discovery per link. A
//!   neighbor is *up* once hellos flow both ways (the peer lists us in its `seen` set) and goes
//!   *down* when no hello arrives within its dead interval.
//! - [`dv::DistanceVector`]: a RIP-like distance-vector service (RFC 2453 semantics): periodic
//!   and triggered updates, split horizon with poisoned reverse, an infinity bound, route
//!   timeout and garbage collection, plus static routes from configuration, which win over
//!   learned ones and are advertised.
//! - [`ls::LinkState`]: a link-state service (OSPF/IS-IS style): each node floods an LSA of
//!   its up links with a sequence number and a lifetime, refreshes it, and computes routes by
//!   Dijkstra over the two-way links of its database, with throttled SPF runs.
//! - [`Routing`]: the one the node runs, chosen by `[routing] protocol = "dv" | "ls"`.
//!
//! ## Contract
//! Nothing here reads a clock, opens a socket or draws a random number: callers pass `now`
//! and poll for messages to send and for the next deadline. Identical inputs give identical
//! outputs, which is what makes the emulator deterministic.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
#![forbid(unsafe_code)]

mod dense;
pub mod dv;
pub mod fib;
pub mod handover;
pub mod ls;
pub mod neighbors;
pub mod pool;
mod service;
mod stats;

pub use fib::{ChangeLog, Fib, FibEntry};

/// Most routing-message bytes a node sends one neighbor per pacing round
/// (`triggered_delay`): the rest of a large table or flood waits for the next round, so a
/// burst never overflows a link queue that holds 64 KiB (the emulator's, a socket buffer).
pub const PACE_BYTES: usize = 24 * 1024;
pub use pool::LsaPool;
pub use service::Routing;
pub use stats::RoutingStats;

/// Which routing protocol a node runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Distance vector (RIP-like), the default.
    #[default]
    Dv,
    /// Link state (LSAs flooded, SPF by Dijkstra).
    Ls,
}

use std::time::Duration;

/// Index of a link of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct LinkId(pub u32);

impl std::fmt::Display for LinkId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "link{}", self.0)
    }
}

/// Where a packet goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    /// The link to send on.
    pub link: LinkId,
    /// The neighbor on that link.
    pub addr: anode_wire::NodeAddr,
}

/// Timers and bounds of the routing protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingConfig {
    /// Interval between hellos on each link.
    #[serde(with = "ms", rename = "hello_interval_ms")]
    pub hello_interval: Duration,
    /// A neighbor not heard for this long is down.
    #[serde(with = "ms", rename = "dead_interval_ms")]
    pub dead_interval: Duration,
    /// Interval between full (periodic) distance-vector updates.
    #[serde(with = "ms", rename = "update_interval_ms")]
    pub update_interval: Duration,
    /// A learned route not refreshed for this long becomes unreachable.
    #[serde(with = "ms", rename = "route_timeout_ms")]
    pub route_timeout: Duration,
    /// An unreachable route is advertised (poisoned) for this long, then deleted.
    #[serde(with = "ms", rename = "gc_interval_ms")]
    pub gc_interval: Duration,
    /// Delay that batches changes into one triggered update.
    #[serde(with = "ms", rename = "triggered_delay_ms")]
    pub triggered_delay: Duration,
    /// The infinity metric: a route at or above it is unreachable (distance vector).
    pub infinity: u16,
    /// The routing protocol: "dv" (default) or "ls".
    pub protocol: Protocol,
    /// Link state: the first SPF run waits this long after a change (batching what floods in
    /// together); while changes keep coming, the wait doubles up to `spf_max_delay_ms`.
    #[serde(with = "ms", rename = "spf_delay_ms")]
    pub spf_delay: Duration,
    /// Link state: the longest wait between SPF runs under churn.
    #[serde(with = "ms", rename = "spf_max_delay_ms")]
    pub spf_max_delay: Duration,
    /// Link state: how often a node re-originates its LSA (before its lifetime runs out).
    #[serde(with = "ms", rename = "lsa_refresh_ms")]
    pub lsa_refresh: Duration,
    /// Link state: how long an LSA stays valid unless refreshed.
    #[serde(with = "ms", rename = "lsa_lifetime_ms")]
    pub lsa_lifetime: Duration,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        RoutingConfig {
            hello_interval: Duration::from_millis(1000),
            dead_interval: Duration::from_millis(3500),
            update_interval: Duration::from_secs(5),
            route_timeout: Duration::from_secs(30),
            gc_interval: Duration::from_secs(20),
            triggered_delay: Duration::from_millis(50),
            infinity: 16,
            protocol: Protocol::Dv,
            spf_delay: Duration::from_millis(50),
            spf_max_delay: Duration::from_millis(2000),
            lsa_refresh: Duration::from_secs(30 * 60),
            lsa_lifetime: Duration::from_secs(60 * 60),
        }
    }
}

impl RoutingConfig {
    /// Checks the timers make sense together; the message says how to fix them.
    pub fn validate(&self) -> Result<(), String> {
        if self.hello_interval.is_zero() || self.update_interval.is_zero() {
            return Err("hello_interval_ms and update_interval_ms must be above 0".into());
        }
        if self.dead_interval <= self.hello_interval {
            return Err(format!(
                "dead_interval_ms ({}) must exceed hello_interval_ms ({}); 3-4 times is usual",
                self.dead_interval.as_millis(),
                self.hello_interval.as_millis()
            ));
        }
        if self.route_timeout <= self.update_interval {
            return Err(format!(
                "route_timeout_ms ({}) must exceed update_interval_ms ({}); 6 times is usual",
                self.route_timeout.as_millis(),
                self.update_interval.as_millis()
            ));
        }
        if self.spf_delay.is_zero() || self.spf_max_delay < self.spf_delay {
            return Err(format!(
                "spf_delay_ms ({}) must be above 0 and spf_max_delay_ms ({}) at least as long",
                self.spf_delay.as_millis(),
                self.spf_max_delay.as_millis()
            ));
        }
        if self.lsa_refresh.is_zero() || self.lsa_lifetime <= self.lsa_refresh {
            return Err(format!(
                "lsa_lifetime_ms ({}) must exceed lsa_refresh_ms ({}) (above 0); twice is usual",
                self.lsa_lifetime.as_millis(),
                self.lsa_refresh.as_millis()
            ));
        }
        if !(2..=1024).contains(&self.infinity) {
            return Err(format!(
                "infinity ({}) must be between 2 and 1024; RIP uses 16",
                self.infinity
            ));
        }
        Ok(())
    }
}

/// Serde helper: durations as integer milliseconds (`*_ms` in config files).
mod ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}
