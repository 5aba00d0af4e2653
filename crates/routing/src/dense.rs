//! Compact tables for per-destination state: [`DenseMap`] keeps its entries in one vector,
//! found through a hash table of 4-byte indices; [`HopTable`] numbers the few distinct next
//! hops a node uses so an entry stores a 4-byte index instead of a 24-byte [`NextHop`].
//!
//! Why: every node of an n-node network keeps an entry per destination in its forwarding
//! table and its distance-vector routes, so an emulated network holds n² of each. A hash
//! map storing the entries in its buckets pays its power-of-two slack at the full entry
//! size (at 3,815 destinations a map grows to 8,192 buckets); here the slack costs 5 bytes a
//! bucket and the entries sit densely.
//!
//! Invariants: `index` holds exactly the positions `0..entries.len()`, each under the hash of
//! its entry's key; a [`HopTable`] slot's count is the number of entries naming it (0: free,
//! to be reused).

use std::hash::{Hash, Hasher};

use hashbrown::HashTable;
use rustc_hash::FxHasher;

use crate::NextHop;

/// An entry that carries its own key.
pub(crate) trait Keyed {
    /// The key type.
    type Key: Hash + Eq + Copy;
    /// The entry's key.
    fn key(&self) -> Self::Key;
}

fn hash_of<K: Hash>(k: &K) -> u64 {
    let mut h = FxHasher::default();
    k.hash(&mut h);
    h.finish()
}

/// See the module docs.
#[derive(Debug, Clone)]
pub(crate) struct DenseMap<E> {
    index: HashTable<u32>,
    entries: Vec<E>,
}

impl<E> Default for DenseMap<E> {
    fn default() -> Self {
        DenseMap {
            index: HashTable::new(),
            entries: Vec::new(),
        }
    }
}

impl<E: Keyed> DenseMap<E> {
    /// The position of `key`'s entry.
    #[inline]
    fn position(&self, key: &E::Key) -> Option<usize> {
        let entries = &self.entries;
        self.index
            .find(hash_of(key), |&i| {
                entries.get(i as usize).is_some_and(|e| e.key() == *key)
            })
            .map(|&i| i as usize)
    }

    /// The entry for `key`.
    #[inline]
    pub(crate) fn get(&self, key: &E::Key) -> Option<&E> {
        self.entries.get(self.position(key)?)
    }

    /// The entry for `key`, to change (not its key).
    #[inline]
    pub(crate) fn get_mut(&mut self, key: &E::Key) -> Option<&mut E> {
        let i = self.position(key)?;
        self.entries.get_mut(i)
    }

    /// Stores `e` under its key; the entry it replaced, if any. False in the second place if
    /// the table is full (2³² entries; not reachable in memory), and then nothing changed.
    pub(crate) fn insert(&mut self, e: E) -> (Option<E>, bool) {
        let key = e.key();
        if let Some(old) = self.get_mut(&key) {
            return (Some(std::mem::replace(old, e)), true);
        }
        let Ok(i) = u32::try_from(self.entries.len()) else {
            return (None, false);
        };
        self.entries.push(e);
        let entries = &self.entries;
        self.index.insert_unique(hash_of(&key), i, |&j| {
            entries.get(j as usize).map_or(0, |e| hash_of(&e.key()))
        });
        (None, true)
    }

    /// Removes `key`'s entry; the last entry moves into its place.
    pub(crate) fn remove(&mut self, key: &E::Key) -> Option<E> {
        let entries = &self.entries;
        let found = self
            .index
            .find_entry(hash_of(key), |&i| {
                entries.get(i as usize).is_some_and(|e| e.key() == *key)
            })
            .ok()?;
        let (i, _) = found.remove();
        let i = i as usize;
        let last = self.entries.len().checked_sub(1)?;
        if i < last
            && let Some(moved) = self.entries.get(last).map(|e| hash_of(&e.key()))
            && let Some(slot) = self.index.find_mut(moved, |&j| j as usize == last)
        {
            *slot = i as u32;
        }
        (i <= last).then(|| self.entries.swap_remove(i))
    }

    /// Every entry (in no particular order, the same for the same history).
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, E> {
        self.entries.iter()
    }

    /// Every entry, to change (not their keys).
    pub(crate) fn iter_mut(&mut self) -> std::slice::IterMut<'_, E> {
        self.entries.iter_mut()
    }

    /// Keeps the entries `keep` accepts, in their order; `gone` sees each removed one. The
    /// index is rebuilt if any went (O(n), as the pass itself).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&E) -> bool, mut gone: impl FnMut(&E)) {
        let before = self.entries.len();
        self.entries.retain(|e| {
            let k = keep(e);
            if !k {
                gone(e);
            }
            k
        });
        if self.entries.len() == before {
            return;
        }
        self.index.clear();
        let entries = &self.entries;
        for (i, e) in entries.iter().enumerate() {
            // Positions fit: there were more entries before.
            let i = i as u32;
            self.index.insert_unique(hash_of(&e.key()), i, |&j| {
                entries.get(j as usize).map_or(0, |e| hash_of(&e.key()))
            });
        }
    }

    /// How many entries.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Value meaning "no next hop" in an entry's hop field.
pub(crate) const NO_HOP: u32 = u32::MAX;

/// The distinct next hops in use, each with the number of entries using it.
#[derive(Debug, Clone, Default)]
pub(crate) struct HopTable {
    hops: Vec<(NextHop, u32)>,
}

impl HopTable {
    /// The slot of `hop` with one more user: its own, else a free one, else a new one.
    pub(crate) fn acquire(&mut self, hop: NextHop) -> u32 {
        let i = match self.hops.iter().position(|e| e.0 == hop && e.1 > 0) {
            Some(i) => i,
            None => match self.hops.iter().position(|e| e.1 == 0) {
                Some(i) => {
                    if let Some(e) = self.hops.get_mut(i) {
                        e.0 = hop;
                    }
                    i
                }
                None => {
                    self.hops.push((hop, 0));
                    self.hops.len() - 1
                }
            },
        };
        if let Some(e) = self.hops.get_mut(i) {
            e.1 += 1;
        }
        u32::try_from(i).unwrap_or(NO_HOP)
    }

    /// [`HopTable::acquire`] for an optional hop ([`NO_HOP`] for none).
    pub(crate) fn acquire_opt(&mut self, hop: Option<NextHop>) -> u32 {
        hop.map_or(NO_HOP, |h| self.acquire(h))
    }

    /// One user fewer for slot `h` (nothing for [`NO_HOP`]).
    pub(crate) fn release(&mut self, h: u32) {
        if let Some(e) = self.hops.get_mut(h as usize) {
            e.1 = e.1.saturating_sub(1);
        }
    }

    /// The slot holding `hop` (with users), if any.
    pub(crate) fn find(&self, hop: NextHop) -> Option<u32> {
        let i = self.hops.iter().position(|e| e.0 == hop && e.1 > 0)?;
        u32::try_from(i).ok()
    }

    /// The hop in slot `h`.
    #[inline]
    pub(crate) fn get(&self, h: u32) -> Option<NextHop> {
        self.hops.get(h as usize).map(|e| e.0)
    }

    /// Slots with users.
    pub(crate) fn in_use(&self) -> usize {
        self.hops.iter().filter(|e| e.1 > 0).count()
    }

    /// Slots allocated, used or free (tests).
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.hops.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    struct E(u16, u32);

    impl Keyed for E {
        type Key = u16;
        fn key(&self) -> u16 {
            self.0
        }
    }

    proptest::proptest! {
        /// Any sequence of inserts, removals and changes leaves the map agreeing with a
        /// plain map (the swap on removal keeps every index pointing at its own entry).
        #[test]
        fn agrees_with_a_map(ops in proptest::collection::vec((0u16..40, 0u32..1000, 0u8..8), 0..300)) {
            let mut d: DenseMap<E> = DenseMap::default();
            let mut m = std::collections::BTreeMap::new();
            for (k, v, op) in ops {
                match op {
                    0..=3 => {
                        let (old, ok) = d.insert(E(k, v));
                        proptest::prop_assert!(ok);
                        proptest::prop_assert_eq!(old.map(|e| e.1), m.insert(k, v));
                    }
                    4..=5 => {
                        proptest::prop_assert_eq!(d.remove(&k).map(|e| e.1), m.remove(&k));
                    }
                    6 => {
                        let mut gone = 0;
                        d.retain(|e| e.1 % 7 != v % 7, |_| gone += 1);
                        let before = m.len();
                        m.retain(|_, x| *x % 7 != v % 7);
                        proptest::prop_assert_eq!(gone, before - m.len());
                    }
                    _ => {
                        if let Some(e) = d.get_mut(&k) {
                            e.1 += 1;
                        }
                        if let Some(v) = m.get_mut(&k) {
                            *v += 1;
                        }
                    }
                }
                proptest::prop_assert_eq!(d.len(), m.len());
            }
            for k in 0..40u16 {
                proptest::prop_assert_eq!(d.get(&k).map(|e| e.1), m.get(&k).copied());
            }
            for e in d.iter_mut() {
                e.1 += 1;
            }
            for k in 0..40u16 {
                proptest::prop_assert_eq!(d.get(&k).map(|e| e.1), m.get(&k).map(|v| v + 1));
            }
            let mut all: Vec<(u16, u32)> = d.iter().map(|e| (e.0, e.1 - 1)).collect();
            all.sort_unstable();
            proptest::prop_assert_eq!(all, m.into_iter().collect::<Vec<_>>());
        }
    }
}
