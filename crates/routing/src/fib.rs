//! [`Fib`]: the forwarding table a routing service produces and the node reads: every
//! reachable destination by its 18-byte wire encoding (so the fast path looks up the transit
//! header's bytes with no decoding), with its next hop and metric.
//!
//! A routing service keeps it in an `Arc` and changes it with `Arc::make_mut`, so a reader
//! that wants a snapshot (an EE call that runs with an owned view of the node) takes a
//! reference-count increment, and the table is copied only if it changes while such a
//! snapshot is still held.
//!
//! Invariant: an entry is present exactly when its destination is reachable (metric below
//! the routing service's infinity) and has a next hop (the node itself has none).

use anode_wire::NodeAddr;
use anode_wire::addr::NODE_ADDR_LEN;
use rustc_hash::FxHashMap;

use crate::NextHop;

/// One forwarding entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FibEntry {
    /// Where to send.
    pub hop: NextHop,
    /// The route's cost.
    pub metric: u16,
}

/// The forwarding table; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Fib {
    map: FxHashMap<[u8; NODE_ADDR_LEN], FibEntry>,
}

impl Fib {
    /// The next hop toward the destination in its wire encoding.
    #[inline]
    pub fn lookup_raw(&self, dest: &[u8; NODE_ADDR_LEN]) -> Option<NextHop> {
        self.map.get(dest).map(|e| e.hop)
    }

    /// The entry for `dest`, if reachable.
    #[inline]
    pub fn get(&self, dest: &NodeAddr) -> Option<FibEntry> {
        self.map.get(&dest.to_bytes()).copied()
    }

    /// Reachable destinations.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if no destination is reachable.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Makes `dest` reachable via `hop` at `metric`.
    pub fn insert(&mut self, dest: &NodeAddr, hop: NextHop, metric: u16) {
        self.map.insert(dest.to_bytes(), FibEntry { hop, metric });
    }

    /// Makes `dest` unreachable.
    pub fn remove(&mut self, dest: &NodeAddr) {
        self.map.remove(&dest.to_bytes());
    }
}
