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

    /// Every entry, by destination in its wire encoding (in no particular order).
    pub fn entries(&self) -> impl Iterator<Item = ([u8; NODE_ADDR_LEN], FibEntry)> + '_ {
        self.map.iter().map(|(k, e)| (*k, *e))
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

/// Most destinations a [`ChangeLog`] holds before it gives up listing them and says
/// "everything may have changed".
pub const CHANGE_LOG_MAX: usize = 1 << 16;

/// The destinations whose forwarding entry appeared, disappeared or changed next hop, for a
/// consumer that asked for them (the emulator's reachability tracker drains it after every
/// input to the node). Off by default, so a node nobody drains keeps nothing; bounded: past
/// [`CHANGE_LOG_MAX`] entries it keeps only an overflow flag.
#[derive(Debug, Clone, Default)]
pub struct ChangeLog {
    on: bool,
    dests: Vec<NodeAddr>,
    overflow: bool,
}

impl ChangeLog {
    /// Starts (or stops, dropping what it holds) recording changes.
    pub fn set_enabled(&mut self, on: bool) {
        self.on = on;
        self.dests.clear();
        self.overflow = false;
    }

    /// Records that `dest`'s entry changed.
    #[inline]
    pub fn note(&mut self, dest: NodeAddr) {
        if !self.on || self.overflow {
            return;
        }
        if self.dests.len() >= CHANGE_LOG_MAX {
            self.overflow = true;
            self.dests.clear();
        } else {
            self.dests.push(dest);
        }
    }

    /// Moves the recorded destinations (possibly repeated) into `out`; true if the log
    /// overflowed since the last drain (then any destination may have changed).
    pub fn drain(&mut self, out: &mut Vec<NodeAddr>) -> bool {
        out.append(&mut self.dests);
        std::mem::take(&mut self.overflow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_wire::addr::v4;

    #[test]
    fn change_log_is_off_by_default_and_bounded() {
        let mut l = ChangeLog::default();
        l.note(v4(198, 18, 0, 1, 1));
        let mut out = Vec::new();
        assert!(!l.drain(&mut out));
        assert!(out.is_empty(), "off: nothing kept");
        l.set_enabled(true);
        l.note(v4(198, 18, 0, 1, 1));
        assert!(!l.drain(&mut out));
        assert_eq!(out.len(), 1);
        for _ in 0..=CHANGE_LOG_MAX {
            l.note(v4(198, 18, 0, 2, 1));
        }
        out.clear();
        assert!(l.drain(&mut out), "overflow reported");
        assert!(out.is_empty());
        assert!(!l.drain(&mut out), "and cleared by the drain");
    }
}
