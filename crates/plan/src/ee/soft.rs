//! Short-lived node-resident state for PLAN services (PLANet's soft state: scouting marks
//! and the like). Keys are (namespace, marshalled PLAN value); every entry expires; the
//! store is bounded, so hostile programs cannot grow it without limit.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::Value;
use crate::marshal::encode_value;

/// A bounded store of expiring values.
#[derive(Debug)]
pub struct SoftState {
    map: HashMap<(&'static str, Vec<u8>), (Value, Instant)>,
    cap: usize,
}

impl SoftState {
    /// A store holding at most `cap` entries.
    pub fn new(cap: usize) -> Self {
        SoftState {
            map: HashMap::new(),
            cap: cap.max(1),
        }
    }

    /// The live value under `(ns, key)`.
    pub fn get(&self, ns: &'static str, key: &Value, now: Instant) -> Option<&Value> {
        self.map
            .get(&(ns, encode_value(key)))
            .filter(|(_, exp)| *exp > now)
            .map(|(v, _)| v)
    }

    /// Stores `value` under `(ns, key)` for `ttl`. False if full of live entries.
    pub fn set(
        &mut self,
        ns: &'static str,
        key: &Value,
        value: Value,
        ttl: Duration,
        now: Instant,
    ) -> bool {
        let k = (ns, encode_value(key));
        if !self.map.contains_key(&k) && self.map.len() >= self.cap {
            self.map.retain(|_, (_, exp)| *exp > now);
            if self.map.len() >= self.cap {
                return false;
            }
        }
        self.map.insert(k, (value, now + ttl));
        true
    }

    /// Every live entry: (namespace, marshalled key, value, time left), for a handover.
    pub(crate) fn export(&self, now: Instant) -> Vec<(&'static str, Vec<u8>, Value, Duration)> {
        let mut v: Vec<_> = self
            .map
            .iter()
            .filter(|(_, (_, exp))| *exp > now)
            .map(|((ns, k), (v, exp))| (*ns, k.clone(), v.clone(), *exp - now))
            .collect();
        v.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        v
    }

    /// Puts back an entry [`SoftState::export`] gave; false if the store is full.
    pub(crate) fn import(
        &mut self,
        ns: &'static str,
        key: Vec<u8>,
        value: Value,
        ttl: Duration,
        now: Instant,
    ) -> bool {
        if self.map.len() >= self.cap {
            return false;
        }
        self.map.insert((ns, key), (value, now + ttl));
        true
    }

    /// Number of entries (live or not yet purged).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
