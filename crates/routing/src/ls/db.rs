//! The link-state database of one node: (origin, fragment) -> stored LSA, ordered (summaries
//! cover key ranges; SPF numbers origins in address order), with its digest kept beside it:
//! the XOR of [`entry_hash`] over every entry, changed with every insert and removal, so a
//! database sync compares 12 bytes.
//!
//! A B-tree rather than a hash table on purpose: every node of a network holds an entry per
//! origin, so this is the emulator's largest table (n² entries), and a B-tree packs ~60
//! bytes an entry where a hash table past its load factor takes twice that.

use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use super::Raw;
use crate::pool::LinkList;

/// A database key: (origin in its wire form, fragment).
pub(super) type Key = (Raw, u8);

/// One stored LSA fragment.
#[derive(Debug, Clone)]
pub(super) struct Stored {
    pub(super) seq: u32,
    /// Whole seconds since the database's epoch, rounded up ([`Db::expiry`]).
    pub(super) expires: u32,
    /// As parsed from the LSA that brought it (shared with the floods that pass it on, and
    /// with other nodes through an `LsaPool`); a thin pointer, 8 bytes.
    pub(super) links: LinkList,
}

/// See the module docs.
#[derive(Debug)]
pub(super) struct Db {
    map: BTreeMap<Key, Stored>,
    digest: u64,
    /// Expiry times count whole seconds from here.
    epoch: Instant,
}

impl Db {
    /// An empty database whose expiry clock starts at `epoch`.
    pub(super) fn new(epoch: Instant) -> Self {
        Db {
            map: BTreeMap::new(),
            digest: 0,
            epoch,
        }
    }

    /// `t` as an entry's expiry: whole seconds since the epoch, rounded up, so an entry
    /// takes 16 bytes instead of 32 and an LSA lives at most a second past its lifetime
    /// (lifetimes are an hour by default).
    pub(super) fn expiry(&self, t: Instant) -> u32 {
        let d = t.saturating_duration_since(self.epoch);
        let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        u32::try_from(s).unwrap_or(u32::MAX)
    }

    /// The instant an expiry stands for.
    pub(super) fn instant(&self, expiry: u32) -> Instant {
        self.epoch + Duration::from_secs(u64::from(expiry))
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn get(&self, key: &Key) -> Option<&Stored> {
        self.map.get(key)
    }

    /// The digest of every (key, seq) (tests; the protocol reads [`Db::summary`]).
    #[cfg(test)]
    pub(super) fn digest(&self) -> u64 {
        self.digest
    }

    /// Stores `st` under `key`, replacing the old copy; the digest follows.
    pub(super) fn put(&mut self, key: Key, st: Stored) {
        self.digest ^= entry_hash(&key, st.seq);
        if let Some(old) = self.map.insert(key, st) {
            self.digest ^= entry_hash(&key, old.seq);
        }
    }

    /// The database in 12 bytes: (LSA count, digest), as an `LsaDigest` carries it.
    pub(super) fn summary(&self) -> (u32, u64) {
        let count = u32::try_from(self.map.len()).unwrap_or(u32::MAX);
        (count, self.digest)
    }

    /// Stores the entry `make` builds under `key` if `seq` is newer than the copy held (or
    /// there is none), in one walk of the tree; `make` runs only then. `None` if it was not
    /// newer (nothing changed), else whether the old copy had the same links (`false` for a
    /// new key) and the stored list.
    pub(super) fn offer(
        &mut self,
        key: Key,
        seq: u32,
        make: impl FnOnce() -> Stored,
    ) -> Option<(bool, LinkList)> {
        use std::collections::btree_map::Entry;
        match self.map.entry(key) {
            Entry::Occupied(mut o) => {
                let old = o.get_mut();
                if old.seq >= seq {
                    return None;
                }
                let st = make();
                let same = old.links == st.links;
                self.digest ^= entry_hash(&key, old.seq) ^ entry_hash(&key, st.seq);
                let links = std::sync::Arc::clone(&st.links);
                *old = st;
                Some((same, links))
            }
            Entry::Vacant(v) => {
                let st = make();
                self.digest ^= entry_hash(&key, st.seq);
                let links = std::sync::Arc::clone(&st.links);
                v.insert(st);
                Some((false, links))
            }
        }
    }

    /// Drops the entries expired at `now`; how many.
    pub(super) fn expire(&mut self, now: Instant) -> usize {
        let before = self.map.len();
        let mut gone = 0;
        let now = now.saturating_duration_since(self.epoch).as_secs();
        self.map.retain(|k, s| {
            let keep = u64::from(s.expires) > now;
            if !keep {
                gone ^= entry_hash(k, s.seq);
            }
            keep
        });
        self.digest ^= gone;
        before - self.map.len()
    }

    /// The earliest expiry, if any entry.
    pub(super) fn earliest_expiry(&self) -> Option<Instant> {
        self.map
            .values()
            .map(|s| s.expires)
            .min()
            .map(|e| self.instant(e))
    }

    /// Every key, in order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &Key> {
        self.map.keys()
    }

    /// Every entry, in key order.
    pub(super) fn ordered(&self) -> impl Iterator<Item = (&Key, &Stored)> {
        self.map.iter()
    }

    /// The keys in [lo, hi), in order.
    pub(super) fn range(&self, lo: &Key, hi: &Key) -> Vec<Key> {
        if lo >= hi {
            return Vec::new();
        }
        self.map.range(*lo..*hi).map(|(k, _)| *k).collect()
    }

    /// Removes one entry as if it had never arrived (tests: a lost LSA).
    #[cfg(test)]
    pub(super) fn forget(&mut self, key: &Key) -> Option<Stored> {
        let old = self.map.remove(key)?;
        self.digest ^= entry_hash(key, old.seq);
        Some(old)
    }
}

/// The 64-bit hash of one database entry that the digest XORs together: FNV-1a over the
/// origin's wire bytes, the fragment and the big-endian sequence number, then the
/// SplitMix64 finalizer (so nearby keys spread over all bits). Part of the protocol:
/// neighbors compare digests, so every node must compute the same function.
pub(super) fn entry_hash(key: &Key, seq: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key
        .0
        .iter()
        .chain([key.1].iter())
        .chain(seq.to_be_bytes().iter())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_wire::addr::NODE_ADDR_LEN;
    use std::time::Duration;

    fn st(seq: u32, expires: u32) -> Stored {
        Stored {
            seq,
            expires,
            links: std::sync::Arc::new(Vec::new()),
        }
    }

    #[test]
    fn the_digest_follows_every_change_whatever_the_order() {
        let now = Instant::now();
        let k = |i: u8, f: u8| ([i; NODE_ADDR_LEN], f);
        let mut a = Db::new(now);
        let mut b = Db::new(now);
        // Same entries, other order: same digest.
        for (i, f, s) in [(3, 0, 1), (1, 0, 4), (1, 1, 2)] {
            a.put(k(i, f), st(s, u32::from(i)));
        }
        for (i, f, s) in [(1, 1, 2), (3, 0, 1), (1, 0, 4)] {
            b.put(k(i, f), st(s, u32::from(i)));
        }
        assert_eq!(a.digest(), b.digest());
        let keys: Vec<Key> = a.keys().copied().collect();
        assert_eq!(keys, vec![k(1, 0), k(1, 1), k(3, 0)]);
        assert_eq!(a.range(&k(1, 1), &k(3, 0)), vec![k(1, 1)]);
        assert!(a.range(&k(3, 0), &k(1, 0)).is_empty(), "an empty range");
        // A newer sequence number changes the digest.
        a.put(k(3, 0), st(2, 3));
        assert_ne!(a.digest(), b.digest());
        b.put(k(3, 0), st(2, 3));
        assert_eq!(a.digest(), b.digest());
        // Expiry drops the entries due (expiry 1 s: gone at 1 s, not before), in the
        // digest and the keys too.
        assert_eq!(a.expire(now + Duration::from_millis(999)), 0);
        assert_eq!(a.expire(now + Duration::from_secs(2)), 2);
        assert_eq!(a.keys().copied().collect::<Vec<_>>(), vec![k(3, 0)]);
        assert_eq!(a.digest(), entry_hash(&k(3, 0), 2));
        assert_eq!(a.earliest_expiry(), Some(now + Duration::from_secs(3)));
    }

    #[test]
    fn expiries_round_up_to_whole_seconds() {
        let now = Instant::now();
        let db = Db::new(now);
        assert_eq!(db.expiry(now), 0);
        assert_eq!(db.expiry(now + Duration::from_millis(1)), 1);
        assert_eq!(db.expiry(now + Duration::from_secs(3600)), 3600);
        assert_eq!(db.instant(7), now + Duration::from_secs(7));
    }

    #[test]
    fn offer_keeps_only_newer_copies_and_says_whether_the_links_changed() {
        let now = Instant::now();
        let k = ([7u8; NODE_ADDR_LEN], 0);
        let links = |i: u8| -> LinkList {
            std::sync::Arc::new(vec![(anode_wire::addr::v4(198, 18, 0, i, 1), 1)])
        };
        let with = |seq, l| Stored {
            seq,
            expires: 60,
            links: l,
        };
        let mut db = Db::new(now);
        let mut made = 0;
        let mut offer = |db: &mut Db, seq: u32, l: LinkList| {
            db.offer(k, seq, || {
                made += 1;
                with(seq, l)
            })
            .map(|(same, _)| same)
        };
        assert_eq!(offer(&mut db, 5, links(1)), Some(false), "a new key");
        assert_eq!(offer(&mut db, 5, links(2)), None, "not newer");
        assert_eq!(offer(&mut db, 4, links(2)), None, "older");
        assert_eq!(offer(&mut db, 6, links(1)), Some(true), "newer, same links");
        assert_eq!(
            offer(&mut db, 7, links(2)),
            Some(false),
            "newer, other links"
        );
        assert_eq!(made, 3, "the entry is built only when it is stored");
        assert_eq!(db.get(&k).map(|s| s.seq), Some(7));
        assert_eq!(db.digest(), entry_hash(&k, 7));
    }

    #[test]
    fn the_entry_hash_is_fixed() {
        let a = ([1u8; NODE_ADDR_LEN], 0);
        let b = ([2u8; NODE_ADDR_LEN], 1);
        assert_ne!(entry_hash(&a, 1), entry_hash(&a, 2));
        assert_ne!(entry_hash(&a, 1), entry_hash(&b, 1));
        // Values computed by an independent Python transcription of the function: the hash
        // is part of the protocol.
        assert_eq!(
            entry_hash(&([0u8; NODE_ADDR_LEN], 0), 0),
            0x5dd6_44e5_4302_4ce4
        );
        let mut k = [0u8; NODE_ADDR_LEN];
        k[0] = 198;
        assert_eq!(entry_hash(&(k, 1), 7), 0x38e7_6ea7_d608_48e9);
    }
}
