//! The demux classifier: which channel a packet belongs to, fast with thousands of keys.
//!
//! A channel's key list is a conjunction of [`DemuxKey`]s (offset, value, mask; offsets from
//! the first byte of the ANEP packet). Entries are compiled into groups by *shape*: the
//! sorted list of (offset, length, mask) of their keys. Within a group every entry looks at
//! the same bytes through the same masks, so the masked bytes hash to a bucket of candidates
//! (FxHash over the masked bytes; candidates are verified byte by byte, so hash collisions
//! cannot misclassify). Lookup costs one hash per *shape*, not per entry: thousands of flows
//! keyed the same way cost one probe. Overlapping entries (same shape and masked value, or
//! different shapes that both match) are resolved by priority.
//!
//! ## Match priority
//! 1. higher [`Entry::priority`] wins;
//! 2. then the entry whose keys constrain more bits (more specific);
//! 3. then the older entry (lower insertion sequence).
//!
//! Groups are probed in descending order of their best priority and the probe stops once no
//! remaining group could beat the current match, so a high-priority exact group short-cuts
//! the rest. Worst case (every entry a different shape) is a linear scan over shapes.
//!
//! Invariant (property-tested): `lookup` returns exactly what [`Classifier::lookup_linear`]
//! (a naive scan applying the same priority rule) returns.

use std::hash::Hasher;

use rustc_hash::{FxHashMap, FxHasher};

pub use anode_core::DemuxKey;

/// A compiled entry.
#[derive(Debug, Clone)]
pub struct Entry<V> {
    /// The conjunction of keys.
    pub keys: Vec<DemuxKey>,
    /// Match priority (higher wins).
    pub priority: u32,
    /// What to return.
    pub value: V,
    seq: u64,
    bits: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Shape(Vec<(usize, Vec<u8>)>);

#[derive(Debug)]
struct Group {
    shape: Shape,
    /// Hash of masked bytes -> entry indices, best first.
    buckets: FxHashMap<u64, Vec<usize>>,
    best_priority: u32,
}

/// Validates keys: non-empty, value and mask lengths equal, non-empty, bounded length.
pub fn check_keys(keys: &[DemuxKey]) -> Result<(), String> {
    if keys.is_empty() {
        return Err("a channel needs at least one demux key".into());
    }
    for k in keys {
        if k.value.is_empty() || k.value.len() > 64 {
            return Err(format!("key at offset {} must be 1..=64 bytes", k.offset));
        }
        if k.mask.len() != k.value.len() {
            return Err(format!(
                "key at offset {}: mask is {} bytes, value {}",
                k.offset,
                k.mask.len(),
                k.value.len()
            ));
        }
        if k.offset > u16::MAX as usize {
            return Err(format!("key offset {} beyond any packet", k.offset));
        }
    }
    Ok(())
}

/// A compiled set of channels mapping packets to `V`.
#[derive(Debug)]
pub struct Classifier<V> {
    entries: FxHashMap<usize, Entry<V>>,
    groups: Vec<Group>,
    next: usize,
    seq: u64,
}

impl<V> Default for Classifier<V> {
    fn default() -> Self {
        Classifier {
            entries: FxHashMap::default(),
            groups: Vec::new(),
            next: 0,
            seq: 0,
        }
    }
}

fn shape_of(keys: &[DemuxKey]) -> (Shape, Vec<usize>) {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| {
        let ka = keys.get(a).map(|k| (k.offset, &k.mask));
        let kb = keys.get(b).map(|k| (k.offset, &k.mask));
        ka.cmp(&kb)
    });
    let shape = Shape(
        order
            .iter()
            .filter_map(|&i| keys.get(i))
            .map(|k| (k.offset, k.mask.clone()))
            .collect(),
    );
    (shape, order)
}

/// Hashes the masked bytes of `pkt` under `shape`; `None` if the packet is too short.
#[inline]
fn hash_packet(shape: &Shape, pkt: &[u8]) -> Option<u64> {
    let mut h = FxHasher::default();
    for (off, mask) in &shape.0 {
        let b = pkt.get(*off..off.checked_add(mask.len())?)?;
        for (x, m) in b.iter().zip(mask) {
            h.write_u8(x & m);
        }
    }
    Some(h.finish())
}

fn hash_keys(keys: &[DemuxKey], order: &[usize]) -> u64 {
    let mut h = FxHasher::default();
    for k in order.iter().filter_map(|&i| keys.get(i)) {
        for (v, m) in k.value.iter().zip(&k.mask) {
            h.write_u8(v & m);
        }
    }
    h.finish()
}

impl<V> Entry<V> {
    fn rank(&self) -> (u32, u32, std::cmp::Reverse<u64>) {
        (self.priority, self.bits, std::cmp::Reverse(self.seq))
    }

    fn matches(&self, pkt: &[u8]) -> bool {
        self.keys.iter().all(|k| k.matches(pkt))
    }
}

impl<V> Classifier<V> {
    /// An empty classifier.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds an entry; returns its handle for [`Classifier::remove`].
    pub fn insert(
        &mut self,
        keys: Vec<DemuxKey>,
        priority: u32,
        value: V,
    ) -> Result<usize, String> {
        check_keys(&keys)?;
        let (shape, order) = shape_of(&keys);
        let h = hash_keys(&keys, &order);
        let bits = keys
            .iter()
            .flat_map(|k| k.mask.iter())
            .map(|m| m.count_ones())
            .sum();
        let id = self.next;
        self.next += 1;
        self.seq += 1;
        let e = Entry {
            keys,
            priority,
            value,
            seq: self.seq,
            bits,
        };
        let rank = e.rank();
        self.entries.insert(id, e);
        let gi = match self.groups.iter().position(|g| g.shape == shape) {
            Some(i) => i,
            None => {
                self.groups.push(Group {
                    shape,
                    buckets: FxHashMap::default(),
                    best_priority: 0,
                });
                self.groups.len() - 1
            }
        };
        if let Some(g) = self.groups.get_mut(gi) {
            g.best_priority = g.best_priority.max(priority);
            let bucket = g.buckets.entry(h).or_default();
            let entries = &self.entries;
            let pos = bucket
                .iter()
                .position(|j| entries.get(j).is_none_or(|o| o.rank() < rank))
                .unwrap_or(bucket.len());
            bucket.insert(pos, id);
        }
        self.groups
            .sort_by_key(|g| std::cmp::Reverse(g.best_priority));
        Ok(id)
    }

    /// Removes an entry, giving back its value.
    pub fn remove(&mut self, id: usize) -> Option<V> {
        let e = self.entries.remove(&id)?;
        let (shape, order) = shape_of(&e.keys);
        let h = hash_keys(&e.keys, &order);
        if let Some(gi) = self.groups.iter().position(|g| g.shape == shape) {
            let mut empty = false;
            if let Some(g) = self.groups.get_mut(gi) {
                if let Some(b) = g.buckets.get_mut(&h) {
                    b.retain(|j| *j != id);
                    if b.is_empty() {
                        g.buckets.remove(&h);
                    }
                }
                let entries = &self.entries;
                g.best_priority = g
                    .buckets
                    .values()
                    .flatten()
                    .filter_map(|j| entries.get(j))
                    .map(|e| e.priority)
                    .max()
                    .unwrap_or(0);
                empty = g.buckets.is_empty();
            }
            if empty {
                self.groups.remove(gi);
            }
            self.groups
                .sort_by_key(|g| std::cmp::Reverse(g.best_priority));
        }
        Some(e.value)
    }

    /// The best matching entry for `pkt` (see the module docs for the priority rule).
    #[inline]
    pub fn lookup(&self, pkt: &[u8]) -> Option<(usize, &V)> {
        let mut best: Option<(usize, &Entry<V>)> = None;
        for g in &self.groups {
            if let Some((_, b)) = best
                && g.best_priority < b.priority
            {
                break;
            }
            let Some(h) = hash_packet(&g.shape, pkt) else {
                continue;
            };
            let Some(bucket) = g.buckets.get(&h) else {
                continue;
            };
            for id in bucket {
                let Some(e) = self.entries.get(id) else {
                    continue;
                };
                if e.matches(pkt) {
                    if best.is_none_or(|(_, b)| e.rank() > b.rank()) {
                        best = Some((*id, e));
                    }
                    // The bucket is sorted best first.
                    break;
                }
            }
        }
        best.map(|(id, e)| (id, &e.value))
    }

    /// The naive reference: scan every entry (for tests and the benchmark's baseline).
    pub fn lookup_linear(&self, pkt: &[u8]) -> Option<(usize, &V)> {
        self.entries
            .iter()
            .filter(|(_, e)| e.matches(pkt))
            .max_by_key(|(_, e)| e.rank())
            .map(|(id, e)| (*id, &e.value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn priority_specificity_then_age() {
        let mut c = Classifier::new();
        let a = c.insert(vec![DemuxKey::exact(0, &[1])], 0, "a").unwrap();
        let b = c
            .insert(
                vec![DemuxKey::exact(0, &[1]), DemuxKey::exact(1, &[2])],
                0,
                "b",
            )
            .unwrap();
        let _a2 = c.insert(vec![DemuxKey::exact(0, &[1])], 0, "a2").unwrap();
        assert_eq!(c.lookup(&[1, 2]).map(|x| *x.1), Some("b"));
        assert_eq!(c.lookup(&[1, 3]).map(|x| *x.1), Some("a"));
        let hi = c.insert(vec![DemuxKey::exact(1, &[2])], 9, "hi").unwrap();
        assert_eq!(c.lookup(&[1, 2]).map(|x| *x.1), Some("hi"));
        assert_eq!(c.remove(hi), Some("hi"));
        assert_eq!(c.remove(b), Some("b"));
        assert_eq!(c.remove(a), Some("a"));
        assert_eq!(c.lookup(&[1, 2]).map(|x| *x.1), Some("a2"));
        assert_eq!(c.lookup(&[]), None);
        assert!(c.insert(vec![], 0, "x").is_err());
        assert!(
            c.insert(
                vec![DemuxKey {
                    offset: 0,
                    value: vec![1],
                    mask: vec![]
                }],
                0,
                "x"
            )
            .is_err()
        );
    }

    fn key() -> impl Strategy<Value = DemuxKey> {
        (
            0usize..6,
            proptest::collection::vec(
                (
                    any::<u8>(),
                    prop_oneof![Just(0xffu8), Just(0xf0), any::<u8>()],
                ),
                1..3,
            ),
        )
            .prop_map(|(offset, vm)| DemuxKey {
                offset,
                value: vm.iter().map(|x| x.0).collect(),
                mask: vm.iter().map(|x| x.1).collect(),
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn compiled_lookup_equals_linear_scan(
            entries in proptest::collection::vec((proptest::collection::vec(key(), 1..3), 0u32..3), 0..40),
            pkts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..10), 1..40),
            remove in proptest::collection::vec(any::<bool>(), 40),
        ) {
            let mut c = Classifier::new();
            let mut ids = vec![];
            for (i, (keys, p)) in entries.into_iter().enumerate() {
                ids.push(c.insert(keys, p, i).unwrap());
            }
            for (id, r) in ids.iter().zip(&remove) {
                if *r { c.remove(*id); }
            }
            for p in &pkts {
                prop_assert_eq!(c.lookup(p), c.lookup_linear(p));
            }
        }
    }
}
