//! Memory pools: byte accounting shared by one or more domains.
//!
//! Every domain charges a pool (its own by default, limit = its policy's `memory_bytes`; or
//! a pool several domains share, as an EE wants). Two bounds hold:
//! - the **node bound**: the sum over all pools never exceeds [`Pools::node_limit`]; charges
//!   that would are refused;
//! - the **pool limit**: packet-buffer charges over it are refused (the packet is dropped);
//!   soft-state and code charges may take a pool over its limit (the EE has already built the
//!   state), which starts a grace period: the EE is told ([`crate::NodeOsEvent::MemoryPressure`])
//!   and the node terminates the pool's largest member if the pool is still over at the
//!   deadline.
//!
//! Invariant: `node_used == Σ pool.used == Σ domain usage`; terminating a domain returns all
//! of its bytes (tested in `nodeos.rs`).

use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::{DomainId, PoolId};

#[derive(Debug, Clone)]
pub(crate) struct Pool {
    pub limit: u64,
    pub used: u64,
    pub members: Vec<DomainId>,
    pub deadline: Option<Instant>,
    /// A packet was refused because the pool was full; cleared only when soft state or code
    /// is released (dropping packets is no remedy).
    pub starved: bool,
}

/// All pools and the node-wide bound.
#[derive(Debug)]
pub struct Pools {
    pub(crate) pools: FxHashMap<PoolId, Pool>,
    next: u32,
    node_limit: u64,
    node_used: u64,
    node_peak: u64,
    pub(crate) grace: Duration,
}

impl Pools {
    pub(crate) fn new(node_limit: u64, grace: Duration) -> Self {
        Pools {
            pools: FxHashMap::default(),
            next: 0,
            node_limit,
            node_used: 0,
            node_peak: 0,
            grace,
        }
    }

    pub(crate) fn create(&mut self, limit: u64) -> PoolId {
        let id = PoolId(self.next);
        self.next += 1;
        self.pools.insert(
            id,
            Pool {
                limit,
                used: 0,
                members: Vec::new(),
                deadline: None,
                starved: false,
            },
        );
        id
    }

    /// The node-wide bound.
    pub fn node_limit(&self) -> u64 {
        self.node_limit
    }

    /// Bytes charged now, node-wide.
    pub fn node_used(&self) -> u64 {
        self.node_used
    }

    /// The most ever charged at once.
    pub fn node_peak(&self) -> u64 {
        self.node_peak
    }

    /// (used, limit) of a pool.
    pub fn pool(&self, id: PoolId) -> Option<(u64, u64)> {
        self.pools.get(&id).map(|p| (p.used, p.limit))
    }

    /// Number of pools.
    pub fn len(&self) -> usize {
        self.pools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }

    pub(crate) fn node_room(&self, bytes: u64) -> bool {
        self.node_used.saturating_add(bytes) <= self.node_limit
    }

    pub(crate) fn add(&mut self, id: PoolId, bytes: u64) {
        if let Some(p) = self.pools.get_mut(&id) {
            p.used = p.used.saturating_add(bytes);
        }
        self.node_used = self.node_used.saturating_add(bytes);
        self.node_peak = self.node_peak.max(self.node_used);
    }

    pub(crate) fn sub(&mut self, id: PoolId, bytes: u64) {
        if let Some(p) = self.pools.get_mut(&id) {
            p.used = p.used.saturating_sub(bytes);
        }
        self.node_used = self.node_used.saturating_sub(bytes);
    }
}
