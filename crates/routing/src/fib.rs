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

use crate::NextHop;
use crate::dense::HopTable;
use crate::dense::{DenseMap, Keyed};

/// One forwarding entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FibEntry {
    /// Where to send.
    pub hop: NextHop,
    /// The route's cost.
    pub metric: u16,
}

/// The forwarding table; see the module docs.
///
/// Compact: a destination's entry is 24 bytes (its 18-byte key, the metric and the index of
/// its next hop in a small table of distinct next hops: a node has few neighbors, and many
/// destinations share each), kept densely behind a hash table of 4-byte indices
/// ([`DenseMap`]). A hash map holding the entries themselves paid for its power-of-two
/// slack at 25 bytes a slot: 205 KB for 3,815 destinations, 780 MB over an emulated network
/// of that size, against 139 KB here.
#[derive(Debug, Clone, Default)]
pub struct Fib {
    map: DenseMap<Slot>,
    /// Distinct next hops and how many entries use each.
    hops: HopTable,
    /// Changes so far (see [`Fib::version`]).
    version: u64,
}

/// One destination's entry.
#[derive(Debug, Clone, Copy)]
struct Slot {
    key: [u8; NODE_ADDR_LEN],
    metric: u16,
    hop: u32,
}

impl Keyed for Slot {
    type Key = [u8; NODE_ADDR_LEN];
    #[inline]
    fn key(&self) -> [u8; NODE_ADDR_LEN] {
        self.key
    }
}

impl Fib {
    /// The next hop toward the destination in its wire encoding.
    #[inline]
    pub fn lookup_raw(&self, dest: &[u8; NODE_ADDR_LEN]) -> Option<NextHop> {
        self.hops.get(self.map.get(dest)?.hop)
    }

    /// The entry for `dest`, if reachable.
    #[inline]
    pub fn get(&self, dest: &NodeAddr) -> Option<FibEntry> {
        self.get_raw(&dest.to_bytes())
    }

    /// The entry for the destination in its wire encoding, if reachable.
    #[inline]
    pub fn get_raw(&self, dest: &[u8; NODE_ADDR_LEN]) -> Option<FibEntry> {
        let e = self.map.get(dest)?;
        Some(FibEntry {
            hop: self.hops.get(e.hop)?,
            metric: e.metric,
        })
    }

    /// Every entry, by destination in its wire encoding (in no particular order).
    pub fn entries(&self) -> impl Iterator<Item = ([u8; NODE_ADDR_LEN], FibEntry)> + '_ {
        self.map.iter().filter_map(|e| {
            let hop = self.hops.get(e.hop)?;
            Some((
                e.key,
                FibEntry {
                    hop,
                    metric: e.metric,
                },
            ))
        })
    }

    /// A number that changes whenever an entry is inserted or removed, so a reader that
    /// mirrors the table elsewhere (the kernel fast path's map) knows when to look again.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Reachable destinations.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if no destination is reachable.
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// Makes `dest` reachable via `hop` at `metric`.
    pub fn insert(&mut self, dest: &NodeAddr, hop: NextHop, metric: u16) {
        self.version += 1;
        let slot = Slot {
            key: dest.to_bytes(),
            metric,
            hop: self.hops.acquire(hop),
        };
        match self.map.insert(slot) {
            (Some(old), _) => self.hops.release(old.hop),
            (None, true) => {}
            (None, false) => self.hops.release(slot.hop),
        }
    }

    /// Makes `dest` unreachable.
    pub fn remove(&mut self, dest: &NodeAddr) {
        if let Some(old) = self.map.remove(&dest.to_bytes()) {
            self.version += 1;
            self.hops.release(old.hop);
        }
    }

    /// Distinct next hops in use (for tests and reports).
    pub fn next_hops_in_use(&self) -> usize {
        self.hops.in_use()
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
    ///
    /// The log hands its buffer over when `out` is empty, so it keeps no capacity between
    /// drains: an emulator drains thousands of logs into one buffer, and each log holding on
    /// to its largest burst (up to a table's worth) cost 260 MB on a 3,815-node network.
    pub fn drain(&mut self, out: &mut Vec<NodeAddr>) -> bool {
        if out.is_empty() {
            *out = std::mem::take(&mut self.dests);
        } else {
            out.append(&mut self.dests);
        }
        std::mem::take(&mut self.overflow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_wire::addr::v4;

    fn hop(link: u32) -> NextHop {
        NextHop {
            link: crate::LinkId(link),
            addr: v4(198, 18, 0, 100, link as u16),
        }
    }

    #[test]
    fn next_hop_slots_are_shared_and_reused() {
        let mut f = Fib::default();
        let d = |i: u8| v4(198, 18, 1, i, 1);
        for i in 0..10 {
            f.insert(&d(i), hop(u32::from(i % 2)), u16::from(i));
        }
        assert_eq!((f.len(), f.next_hops_in_use(), f.hops.slots()), (10, 2, 2));
        assert_eq!(
            f.get(&d(3)),
            Some(FibEntry {
                hop: hop(1),
                metric: 3
            })
        );
        assert_eq!(f.lookup_raw(&d(4).to_bytes()), Some(hop(0)));
        // Every user of hop 1 moves to hop 2 (a third slot, while hop 1 still has users),
        // which frees hop 1's slot.
        for i in (1..10).step_by(2) {
            f.insert(&d(i), hop(2), 1);
        }
        assert_eq!((f.next_hops_in_use(), f.hops.slots()), (2, 3));
        for i in (0..10).step_by(2) {
            f.remove(&d(i));
        }
        assert_eq!((f.len(), f.next_hops_in_use()), (5, 1));
        f.insert(&d(0), hop(7), 9);
        f.insert(&d(2), hop(8), 9);
        f.remove(&d(2));
        assert_eq!(
            f.hops.slots(),
            3,
            "freed slots are reused, the table does not grow"
        );
        let mut e: Vec<_> = f.entries().map(|(_, e)| e.hop.link.0).collect();
        e.sort_unstable();
        assert_eq!(e, vec![2, 2, 2, 2, 2, 7]);
        assert_eq!(f.get(&d(2)), None);
        // Every insert and every removal that found an entry changed the version.
        let v = f.version();
        f.remove(&d(2));
        assert_eq!(f.version(), v, "removing nothing changes nothing");
        f.insert(&d(2), hop(8), 9);
        f.remove(&d(2));
        assert_eq!(f.version(), v + 2);
    }

    proptest::proptest! {
        /// Any sequence of inserts and removals leaves the table agreeing with a plain map:
        /// same entries, same lookups, and next-hop slots counted right (the swap on
        /// removal keeps every index pointing at its own entry).
        #[test]
        fn agrees_with_a_map(ops in proptest::collection::vec((0u8..40, 0u32..4, proptest::bool::ANY), 0..300)) {
            let mut f = Fib::default();
            let mut m = std::collections::BTreeMap::new();
            let d = |i: u8| v4(198, 18, 2, i, 1);
            for (k, h, ins) in ops {
                if ins {
                    f.insert(&d(k), hop(h), u16::from(k) + 1);
                    m.insert(k, (h, u16::from(k) + 1));
                } else {
                    f.remove(&d(k));
                    m.remove(&k);
                }
                proptest::prop_assert_eq!(f.len(), m.len());
            }
            for k in 0..40u8 {
                let want = m.get(&k).map(|&(h, metric)| FibEntry { hop: hop(h), metric });
                proptest::prop_assert_eq!(f.get(&d(k)), want);
                proptest::prop_assert_eq!(f.lookup_raw(&d(k).to_bytes()), want.map(|e| e.hop));
            }
            let mut hops: Vec<u32> = m.values().map(|v| v.0).collect();
            hops.sort_unstable();
            hops.dedup();
            proptest::prop_assert_eq!(f.next_hops_in_use(), hops.len());
            proptest::prop_assert_eq!(f.entries().count(), m.len());
        }
    }

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
