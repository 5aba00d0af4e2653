//! Soft state: small keyed values that capsules leave at a node for later capsules, one
//! namespace per code object (PAN: no global soft-state cache; a code object is the guardian of
//! its own state).
//!
//! Invariants:
//! - An entry lives at most its TTL; an expired entry is never returned.
//! - The bytes held (keys + values + a fixed per-entry overhead) never exceed the per-code
//!   budget for any code object nor the node-wide budget: a put that would exceed a budget first
//!   evicts expired entries, then least-recently-used ones (of that code object for its own
//!   budget; of the code object holding the globally oldest entry for the node budget). State
//!   is *soft*: capsules must expect any entry to vanish.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::CodeHash;
use crate::abi;

/// Bytes charged per entry on top of key and value.
pub const ENTRY_OVERHEAD: usize = 48;

/// Why a put failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PutError {
    /// The key or value is longer than the ABI allows, or the entry alone exceeds a budget.
    #[error("soft-state entry too big")]
    TooBig,
    /// Nothing could be evicted to make room.
    #[error("soft-state budget exhausted")]
    Budget,
}

/// One soft-state entry as [`SoftState::entries`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoftEntry {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Time until it expires.
    pub ttl_left: Duration,
}

#[derive(Debug)]
struct Entry {
    value: Vec<u8>,
    expires: Instant,
    used: u64,
}

#[derive(Debug, Default)]
struct Space {
    map: HashMap<Vec<u8>, Entry>,
    lru: BTreeMap<u64, Vec<u8>>,
    bytes: usize,
}

impl Space {
    fn remove(&mut self, key: &[u8]) -> Option<usize> {
        let e = self.map.remove(key)?;
        self.lru.remove(&e.used);
        let size = key.len() + e.value.len() + ENTRY_OVERHEAD;
        self.bytes -= size;
        Some(size)
    }

    fn sweep(&mut self, now: Instant) -> usize {
        let dead: Vec<Vec<u8>> = self
            .map
            .iter()
            .filter(|(_, e)| e.expires <= now)
            .map(|(k, _)| k.clone())
            .collect();
        dead.iter().filter_map(|k| self.remove(k)).sum()
    }

    fn evict_lru(&mut self) -> Option<usize> {
        let key = self.lru.first_key_value().map(|(_, k)| k.clone())?;
        self.remove(&key)
    }
}

/// The soft state of one EE.
#[derive(Debug)]
pub struct SoftState {
    spaces: HashMap<CodeHash, Space>,
    bytes: usize,
    budget: usize,
    per_code: usize,
    tick: u64,
    evictions: u64,
}

impl SoftState {
    /// Soft state bounded by `budget` bytes in all and `per_code` bytes per code object.
    pub fn new(budget: usize, per_code: usize) -> Self {
        SoftState {
            spaces: HashMap::new(),
            bytes: 0,
            budget,
            per_code: per_code.min(budget),
            tick: 0,
            evictions: 0,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes held for `code`.
    pub fn bytes_of(&self, code: &CodeHash) -> usize {
        self.spaces.get(code).map_or(0, |s| s.bytes)
    }

    /// Entries evicted (expired or LRU) to make room so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Entries held for `code`.
    pub fn len(&self, code: &CodeHash) -> usize {
        self.spaces.get(code).map_or(0, |s| s.map.len())
    }

    /// The value of `key` in `code`'s namespace, if present and not expired.
    pub fn get(&mut self, code: &CodeHash, key: &[u8], now: Instant) -> Option<&[u8]> {
        let space = self.spaces.get_mut(code)?;
        let expired = space.map.get(key)?.expires <= now;
        if expired {
            if let Some(n) = space.remove(key) {
                self.bytes -= n;
            }
            return None;
        }
        self.tick += 1;
        let tick = self.tick;
        let e = space.map.get_mut(key)?;
        if let Some(k) = space.lru.remove(&e.used) {
            space.lru.insert(tick, k);
        }
        e.used = tick;
        Some(&e.value)
    }

    /// Stores `value` under `key` in `code`'s namespace for `ttl`.
    pub fn put(
        &mut self,
        code: CodeHash,
        key: &[u8],
        value: &[u8],
        now: Instant,
        ttl: Duration,
    ) -> Result<(), PutError> {
        let size = key.len() + value.len() + ENTRY_OVERHEAD;
        if key.len() > abi::MAX_KEY || value.len() > abi::MAX_VALUE || size > self.per_code {
            return Err(PutError::TooBig);
        }
        let space = self.spaces.entry(code).or_default();
        if let Some(n) = space.remove(key) {
            self.bytes -= n;
        }
        // The code object's own budget: expired first, then its LRU entries.
        if space.bytes + size > self.per_code {
            let n = space.sweep(now);
            self.bytes -= n;
        }
        while space.bytes + size > self.per_code {
            let Some(n) = space.evict_lru() else {
                return Err(PutError::Budget);
            };
            self.bytes -= n;
            self.evictions += 1;
        }
        // The node budget: expired everywhere, then the globally oldest entries.
        if self.bytes + size > self.budget {
            for s in self.spaces.values_mut() {
                let n = s.sweep(now);
                self.bytes -= n;
            }
        }
        while self.bytes + size > self.budget {
            let oldest = self
                .spaces
                .iter()
                .filter_map(|(c, s)| s.lru.first_key_value().map(|(t, _)| (*t, *c)))
                .min();
            let Some((_, c)) = oldest else {
                return Err(PutError::Budget);
            };
            let n = self
                .spaces
                .get_mut(&c)
                .and_then(Space::evict_lru)
                .unwrap_or(0);
            if n == 0 {
                return Err(PutError::Budget);
            }
            self.bytes -= n;
            self.evictions += 1;
        }
        self.tick += 1;
        let space = self.spaces.entry(code).or_default();
        space.map.insert(
            key.to_vec(),
            Entry {
                value: value.to_vec(),
                expires: now + ttl,
                used: self.tick,
            },
        );
        space.lru.insert(self.tick, key.to_vec());
        space.bytes += size;
        self.bytes += size;
        Ok(())
    }

    /// Deletes `key`; true if it was there.
    pub fn delete(&mut self, code: &CodeHash, key: &[u8]) -> bool {
        match self.spaces.get_mut(code).and_then(|s| s.remove(key)) {
            Some(n) => {
                self.bytes -= n;
                true
            }
            None => false,
        }
    }

    /// Every live entry of every code object, least recently used first within each (so
    /// putting them back in this order keeps the eviction order): for a node's handover.
    pub fn export(&self, now: Instant) -> Vec<(CodeHash, Vec<SoftEntry>)> {
        let mut codes: Vec<&CodeHash> = self.spaces.keys().collect();
        codes.sort_unstable();
        codes
            .into_iter()
            .filter_map(|c| {
                let space = self.spaces.get(c)?;
                let v: Vec<SoftEntry> = space
                    .lru
                    .values()
                    .filter_map(|k| {
                        let e = space.map.get(k).filter(|e| e.expires > now)?;
                        Some(SoftEntry {
                            key: k.clone(),
                            value: e.value.clone(),
                            ttl_left: e.expires - now,
                        })
                    })
                    .collect();
                (!v.is_empty()).then_some((*c, v))
            })
            .collect()
    }

    /// `code`'s live entries at `now`, sorted by key, with the time each has left; for
    /// inspection (`anode code state`): reading does not refresh an entry's LRU position.
    pub fn entries(&self, code: &CodeHash, now: Instant) -> Vec<SoftEntry> {
        let Some(space) = self.spaces.get(code) else {
            return Vec::new();
        };
        let mut v: Vec<SoftEntry> = space
            .map
            .iter()
            .filter(|(_, e)| e.expires > now)
            .map(|(k, e)| SoftEntry {
                key: k.clone(),
                value: e.value.clone(),
                ttl_left: e.expires - now,
            })
            .collect();
        v.sort_by(|a, b| a.key.cmp(&b.key));
        v
    }

    /// Drops all of `code`'s state (its code object was evicted).
    pub fn clear(&mut self, code: &CodeHash) {
        if let Some(s) = self.spaces.remove(code) {
            self.bytes -= s.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_live_sorted_and_leave_the_lru_alone() {
        let t0 = Instant::now();
        let a = [1u8; 32];
        let mut s = SoftState::new(1 << 20, 1 << 16);
        s.put(a, b"z", b"1", t0, Duration::from_secs(10)).unwrap();
        s.put(a, b"a", b"2", t0, Duration::from_secs(1)).unwrap();
        let e = s.entries(&a, t0 + Duration::from_millis(500));
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].key, b"a");
        assert_eq!(e[0].ttl_left, Duration::from_millis(500));
        let e = s.entries(&a, t0 + Duration::from_secs(2));
        assert_eq!(e.len(), 1, "the expired entry is not shown");
        assert_eq!(e[0].value, b"1");
        assert!(s.entries(&[9u8; 32], t0).is_empty());
    }

    #[test]
    fn ttl_budget_and_lru() {
        let t0 = Instant::now();
        let a = [1u8; 32];
        let b = [2u8; 32];
        let mut s = SoftState::new(400, 250);
        s.put(a, b"k1", &[0; 50], t0, Duration::from_secs(1))
            .unwrap();
        assert_eq!(s.get(&a, b"k1", t0).unwrap().len(), 50);
        assert!(s.get(&b, b"k1", t0).is_none(), "namespaces are per code");
        assert!(
            s.get(&a, b"k1", t0 + Duration::from_secs(2)).is_none(),
            "expired"
        );
        assert_eq!(s.bytes(), 0);
        // Per-code budget 250: three 100-byte entries do not fit; the LRU one goes.
        for k in [b"x1", b"x2"] {
            s.put(a, k, &[0; 50], t0, Duration::from_secs(9)).unwrap();
        }
        s.get(&a, b"x1", t0).unwrap();
        s.put(a, b"x3", &[0; 50], t0, Duration::from_secs(9))
            .unwrap();
        assert!(s.get(&a, b"x2", t0).is_none());
        assert!(s.get(&a, b"x1", t0).is_some());
        // Node budget 400: b's puts evict a's oldest.
        for k in [b"y1", b"y2"] {
            s.put(b, k, &[0; 50], t0, Duration::from_secs(9)).unwrap();
        }
        assert!(s.bytes() <= 400);
        assert_eq!(s.len(&a) + s.len(&b), 4);
        assert_eq!(
            s.put(a, b"big", &[0; 300], t0, Duration::ZERO),
            Err(PutError::TooBig)
        );
        assert!(s.delete(&b, b"y1"));
        assert!(!s.delete(&b, b"y1"));
    }
}
