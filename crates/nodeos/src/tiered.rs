//! [`TieredScheduler`]: deficit round robin in two tiers, so that a group of domains shares
//! one weight (the NodeOS's hierarchical domains: a group domain's CPU share bounds what all
//! its members get together, however many they are).
//!
//! The top tier is a [`DomainScheduler`] over the domains that are not members of a group
//! and over the groups themselves; each group has its own [`DomainScheduler`] over its
//! members. A member's item is queued in its group's scheduler, and a token for it in the top
//! tier under the group: when the top tier serves the group, the group's scheduler picks which
//! member's item runs. [`TieredScheduler::complete`] charges the cost to the member in its
//! group and to the group in the top tier.
//!
//! ## Invariants
//! - Between backlogged top-tier entries (ungrouped domains and groups) DRR fairness holds as
//!   in [`DomainScheduler`], a group counting as one entry with its own weight; within a
//!   group, the same holds between its backlogged members.
//! - A group's top-tier queue holds at most [`GROUP_QUEUE_FACTOR`] times the per-domain
//!   queue bound (its members' queues together), each member at most the per-domain bound.
//! - Every item queued is handed back once, by `dequeue` or `remove`; tokens left behind by
//!   removed members are skipped (and charged nothing).

use rustc_hash::FxHashMap;

use crate::DomainId;
use crate::sched::DomainScheduler;

/// A group's top-tier queue bound, in per-domain queue bounds.
pub const GROUP_QUEUE_FACTOR: usize = 16;

/// A top-tier entry: an ungrouped domain's item, or a token for the group's next item.
#[derive(Debug)]
enum Slot<T> {
    Item(T),
    Member,
}

/// Two-tier deficit round robin (see the module docs).
#[derive(Debug)]
pub struct TieredScheduler<T> {
    top: DomainScheduler<Slot<T>>,
    groups: FxHashMap<DomainId, DomainScheduler<T>>,
    group_of: FxHashMap<DomainId, DomainId>,
    quantum: u64,
    max_queue: usize,
    len: usize,
}

impl<T> TieredScheduler<T> {
    /// A scheduler whose entries earn `quantum * weight` per round and queue at most
    /// `max_queue` items each.
    pub fn new(quantum: u64, max_queue: usize) -> Self {
        TieredScheduler {
            top: DomainScheduler::new(quantum, max_queue),
            groups: FxHashMap::default(),
            group_of: FxHashMap::default(),
            quantum,
            max_queue,
            len: 0,
        }
    }

    /// Makes `g` a group (its members are added with [`TieredScheduler::join`]).
    pub fn add_group(&mut self, g: DomainId) {
        self.groups
            .entry(g)
            .or_insert_with(|| DomainScheduler::new(self.quantum, self.max_queue));
        self.top
            .set_max_queue(g, self.max_queue.saturating_mul(GROUP_QUEUE_FACTOR));
    }

    /// Makes `d` a member of group `g` (added with [`TieredScheduler::add_group`]); `false`
    /// if `g` is not a group.
    pub fn join(&mut self, d: DomainId, g: DomainId) -> bool {
        if !self.groups.contains_key(&g) {
            return false;
        }
        self.group_of.insert(d, g);
        true
    }

    /// Sets a domain's (or group's) weight, within its tier.
    pub fn set_weight(&mut self, d: DomainId, weight: u32) {
        match self
            .member_group(d)
            .copied()
            .and_then(|g| self.groups.get_mut(&g))
        {
            Some(s) => s.set_weight(d, weight),
            None => self.top.set_weight(d, weight),
        }
    }

    /// Queues `item` for `d`; gives it back if `d`'s queue (or its group's) is full.
    pub fn enqueue(&mut self, d: DomainId, item: T) -> Result<(), T> {
        let Some(&g) = self.member_group(d) else {
            self.top.enqueue_as(d, item, Slot::Item)?;
            self.len += 1;
            return Ok(());
        };
        let Some(inner) = self.groups.get_mut(&g) else {
            return Err(item);
        };
        if !self.top.has_room(g) {
            return Err(item);
        }
        inner.enqueue(d, item)?;
        // The group's token: there is room (checked above), and a token carries nothing.
        let _ = self.top.enqueue_as(g, (), |()| Slot::Member);
        self.len += 1;
        Ok(())
    }

    /// The next item to serve and its domain (a member, never a group). Call
    /// [`TieredScheduler::complete`] with its cost after running it.
    pub fn dequeue(&mut self) -> Option<(DomainId, T)> {
        loop {
            let (d, slot) = self.top.dequeue()?;
            match slot {
                Slot::Item(t) => {
                    self.len -= 1;
                    return Some((d, t));
                }
                Slot::Member => {
                    if let Some((m, t)) = self.groups.get_mut(&d).and_then(|s| s.dequeue()) {
                        self.len -= 1;
                        return Some((m, t));
                    }
                    // A token of a member removed since: skipped, free.
                    self.top.complete(d, 0);
                }
            }
        }
    }

    /// `d`'s group, if it is a member of one (no hashing while no domain is).
    fn member_group(&self, d: DomainId) -> Option<&DomainId> {
        if self.group_of.is_empty() {
            return None;
        }
        self.group_of.get(&d)
    }

    /// The group `d` is a member of, if any.
    pub fn group_of(&self, d: DomainId) -> Option<DomainId> {
        self.member_group(d).copied()
    }

    /// Charges `cost` to `d` (and to its group, in the top tier).
    pub fn complete(&mut self, d: DomainId, cost: u64) {
        match self.member_group(d).copied() {
            Some(g) => {
                if let Some(s) = self.groups.get_mut(&g) {
                    s.complete(d, cost);
                }
                self.top.complete(g, cost);
            }
            None => self.top.complete(d, cost),
        }
    }

    /// Removes a domain (a member, an ungrouped domain or a whole group) and returns its
    /// queued items.
    pub fn remove(&mut self, d: DomainId) -> Vec<T> {
        let out: Vec<T> = if let Some(g) = self.group_of.remove(&d) {
            self.groups
                .get_mut(&g)
                .map(|s| s.remove(d))
                .unwrap_or_default()
        } else if let Some(mut s) = self.groups.remove(&d) {
            self.group_of.retain(|_, g| *g != d);
            self.top.remove(d);
            let mut all = Vec::new();
            while let Some((m, t)) = s.dequeue() {
                s.complete(m, 0);
                all.push(t);
            }
            all
        } else {
            self.top
                .remove(d)
                .into_iter()
                .filter_map(|s| match s {
                    Slot::Item(t) => Some(t),
                    Slot::Member => None,
                })
                .collect()
        };
        self.len -= out.len();
        out
    }

    /// Every queued item: the ungrouped domains' in serving order, then each group's.
    pub fn items(&self) -> impl Iterator<Item = &T> {
        self.top
            .items()
            .filter_map(|s| match s {
                Slot::Item(t) => Some(t),
                Slot::Member => None,
            })
            .chain(self.groups.values().flat_map(DomainScheduler::items))
    }

    /// Items queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Cost served per entry while everything stays backlogged: `solo` (ungrouped, weight
    /// `w_solo`) against a group of `members` (weight `w_group`), each member weight 1.
    fn share(members: u32, w_solo: u32, w_group: u32) -> (u64, Vec<u64>) {
        let mut s = TieredScheduler::new(100, 10_000);
        let (solo, group) = (DomainId(1), DomainId(2));
        s.set_weight(solo, w_solo);
        s.add_group(group);
        s.set_weight(group, w_group);
        for m in 0..members {
            assert!(s.join(DomainId(10 + m), group));
        }
        // More than 3,000 each: every entry stays backlogged over the 3,000 served.
        for k in 0..3_500 {
            s.enqueue(solo, k).unwrap();
            for m in 0..members {
                let _ = s.enqueue(DomainId(10 + m), k);
            }
        }
        let (mut a, mut b) = (0u64, vec![0u64; members as usize]);
        for _ in 0..3_000 {
            let (d, _) = s.dequeue().unwrap();
            s.complete(d, 50);
            if d == solo {
                a += 50;
            } else {
                b[(d.0 - 10) as usize] += 50;
            }
        }
        (a, b)
    }

    #[test]
    fn a_group_weighs_as_one_entry_however_many_members() {
        for members in [1, 10, 100] {
            let (solo, group) = share(members, 1, 1);
            let total: u64 = group.iter().sum();
            assert!(solo.abs_diff(total) <= 200, "{members}: {solo} vs {total}");
            // Fair inside the group too.
            let (lo, hi) = (group.iter().min().unwrap(), group.iter().max().unwrap());
            assert!(hi - lo <= 150, "{members}: {group:?}");
        }
        // Weights between the tiers: 4 to 1.
        let (solo, group) = share(50, 4, 1);
        let total: u64 = group.iter().sum();
        assert!(
            (solo as f64 / total as f64 - 4.0).abs() < 0.2,
            "{solo} vs {total}"
        );
    }

    #[test]
    fn bounds_removal_and_items() {
        let mut s = TieredScheduler::new(100, 2);
        let (solo, g, m1, m2) = (DomainId(1), DomainId(2), DomainId(3), DomainId(4));
        s.add_group(g);
        assert!(s.join(m1, g) && s.join(m2, g));
        assert!(!s.join(DomainId(9), solo), "not a group");
        s.enqueue(solo, 1).unwrap();
        s.enqueue(solo, 2).unwrap();
        assert_eq!(s.enqueue(solo, 3), Err(3), "per-domain bound");
        s.enqueue(m1, 10).unwrap();
        s.enqueue(m1, 11).unwrap();
        assert_eq!(s.enqueue(m1, 12), Err(12), "per-member bound");
        s.enqueue(m2, 20).unwrap();
        assert_eq!(s.len(), 5);
        let mut all: Vec<i32> = s.items().copied().collect();
        all.sort_unstable();
        assert_eq!(all, [1, 2, 10, 11, 20]);
        // A member removed: its items back, its tokens skipped later.
        let mut back = s.remove(m1);
        back.sort_unstable();
        assert_eq!(back, [10, 11]);
        assert_eq!(s.len(), 3);
        let mut out = Vec::new();
        while let Some((d, x)) = s.dequeue() {
            s.complete(d, 10);
            out.push((d, x));
        }
        out.sort_unstable();
        assert_eq!(out, [(solo, 1), (solo, 2), (m2, 20)]);
        assert!(s.is_empty());
        // A whole group removed gives back every member's items.
        s.enqueue(m2, 21).unwrap();
        assert_eq!(s.remove(g), [21]);
        assert_eq!(s.len(), 0);
        assert!(s.dequeue().is_none());
        // The group's own bound: 16 per-domain bounds for all its members together.
        let mut s = TieredScheduler::new(100, 2);
        s.add_group(g);
        let mut taken = 0;
        for m in 0..40 {
            s.join(DomainId(100 + m), g);
            for k in 0..2 {
                taken += usize::from(s.enqueue(DomainId(100 + m), k).is_ok());
            }
        }
        assert_eq!(taken, 2 * GROUP_QUEUE_FACTOR);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever is enqueued comes back exactly once, by dequeue or remove, and `len`
        /// counts what is queued.
        #[test]
        fn every_item_comes_back_once(ops in proptest::collection::vec((0u8..4, 0u32..8), 1..400)) {
            let mut s = TieredScheduler::new(50, 8);
            let g = DomainId(100);
            s.add_group(g);
            for d in 4..8 {
                s.join(DomainId(d), g);
            }
            let (mut next, mut queued, mut back) = (0u32, 0usize, Vec::new());
            let mut put = Vec::new();
            for (op, d) in ops {
                let d = DomainId(d);
                match op {
                    0 | 1 => {
                        if s.enqueue(d, next).is_ok() {
                            put.push(next);
                            queued += 1;
                        }
                        next += 1;
                    }
                    2 => {
                        if let Some((m, x)) = s.dequeue() {
                            prop_assert!(m != g, "a group is never served as itself");
                            s.complete(m, 30);
                            back.push(x);
                            queued -= 1;
                        }
                    }
                    _ => {
                        let r = s.remove(d);
                        queued -= r.len();
                        back.extend(r);
                        if d.0 >= 4 {
                            s.join(d, g);
                        }
                    }
                }
                prop_assert_eq!(s.len(), queued);
                prop_assert_eq!(s.items().count(), queued);
            }
            while let Some((m, x)) = s.dequeue() {
                s.complete(m, 30);
                back.push(x);
            }
            back.sort_unstable();
            prop_assert_eq!(back, put);
        }
    }
}
