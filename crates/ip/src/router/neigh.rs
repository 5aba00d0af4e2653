//! The neighbor cache shared by ARP (IPv4) and neighbor discovery (IPv6).
//!
//! An entry is keyed by (interface, next-hop address) and is either
//! - *incomplete*: a solicitation is outstanding; packets for the next hop wait in a bounded
//!   queue (per entry and in total); after `max_retries` unanswered solicitations the entry
//!   and its queue are dropped (the router then sends host-unreachable errors), or
//! - *resolved*: the MAC is known. After `reachable_time` without confirmation the entry is
//!   still used (RFC 4861's STALE/PROBE) but a unicast probe goes out; after `max_retries`
//!   unanswered probes the entry is deleted.
//!
//! Invariants: `queued_total` equals the packets in all incomplete entries' queues; the map
//! never holds more than `max_entries`; `poll_timeout` is never later than the earliest
//! pending solicitation. The fast path only calls [`NeighCache::lookup`] (one hash probe, no
//! allocation).

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Instant;

use rustc_hash::FxHashMap;

use super::{IfaceId, NeighConfig};
use crate::wire::MacAddr;

/// A cache key.
pub type NeighKey = (IfaceId, IpAddr);

#[derive(Debug)]
enum State {
    Incomplete {
        sent: u32,
        next_at: Instant,
        queue: VecDeque<Vec<u8>>,
    },
    Resolved {
        mac: MacAddr,
        confirmed: Instant,
        /// Unicast probes sent since the entry went stale, and when the next is due.
        probe: Option<(u32, Instant)>,
    },
}

/// What the router must do after [`NeighCache::handle_timeout`].
#[derive(Debug)]
pub enum NeighAction {
    /// Send a solicitation (multicast/broadcast, or unicast to `unicast` when probing).
    Solicit {
        /// Key.
        key: NeighKey,
        /// The MAC to probe, for a stale entry.
        unicast: Option<MacAddr>,
    },
    /// Resolution failed: these queued frames are dropped.
    Failed {
        /// Frames that were waiting.
        queue: VecDeque<Vec<u8>>,
    },
}

/// Result of queueing a packet for an unresolved next hop.
#[derive(Debug, PartialEq, Eq)]
pub enum QueueResult {
    /// A new entry: send the first solicitation now.
    Started,
    /// Queued behind an outstanding solicitation.
    Queued,
    /// Dropped: the queue is full.
    QueueFull,
    /// Dropped: the cache is full.
    TableFull,
}

/// The cache.
#[derive(Debug)]
pub struct NeighCache {
    cfg: NeighConfig,
    map: FxHashMap<NeighKey, State>,
    queued_total: usize,
    next_deadline: Option<Instant>,
    /// Bumped whenever the set of resolved entries or one of their MACs changes (what a
    /// kernel fast path mirrors).
    pub(crate) generation: u64,
}

impl NeighCache {
    /// An empty cache.
    pub fn new(cfg: NeighConfig) -> Self {
        NeighCache {
            cfg,
            map: FxHashMap::default(),
            queued_total: 0,
            next_deadline: None,
            generation: 0,
        }
    }

    fn wake(&mut self, t: Instant) {
        self.next_deadline = Some(self.next_deadline.map_or(t, |d| d.min(t)));
    }

    /// The MAC of a resolved next hop. A stale entry is still returned and a probe is
    /// scheduled.
    #[inline]
    pub fn lookup(&mut self, now: Instant, key: NeighKey) -> Option<MacAddr> {
        let reachable = self.cfg.reachable_time;
        match self.map.get_mut(&key) {
            Some(State::Resolved {
                mac,
                confirmed,
                probe,
            }) => {
                let mac = *mac;
                if probe.is_none() && now.saturating_duration_since(*confirmed) > reachable {
                    *probe = Some((0, now));
                    self.wake(now);
                }
                Some(mac)
            }
            _ => None,
        }
    }

    /// Queues a frame for an unresolved next hop.
    pub fn queue(&mut self, now: Instant, key: NeighKey, frame: Vec<u8>) -> QueueResult {
        if self.queued_total >= self.cfg.queue_total {
            return QueueResult::QueueFull;
        }
        let retrans = self.cfg.retrans_interval;
        match self.map.get_mut(&key) {
            Some(State::Incomplete { queue, .. }) => {
                if queue.len() >= self.cfg.queue_per_entry {
                    return QueueResult::QueueFull;
                }
                queue.push_back(frame);
                self.queued_total += 1;
                QueueResult::Queued
            }
            Some(State::Resolved { .. }) => QueueResult::QueueFull,
            None => {
                if self.map.len() >= self.cfg.max_entries {
                    return QueueResult::TableFull;
                }
                let mut queue = VecDeque::with_capacity(self.cfg.queue_per_entry.min(4));
                let next_at = now + retrans;
                if self.cfg.queue_per_entry > 0 {
                    queue.push_back(frame);
                    self.queued_total += 1;
                }
                self.map.insert(
                    key,
                    State::Incomplete {
                        sent: 1,
                        next_at,
                        queue,
                    },
                );
                self.wake(next_at);
                QueueResult::Started
            }
        }
    }

    /// A solicitation or advertisement told us `key` is at `mac`. Updates an existing entry
    /// (or creates one if `create`), and returns the frames that were waiting for it.
    pub fn confirm(
        &mut self,
        now: Instant,
        key: NeighKey,
        mac: MacAddr,
        create: bool,
    ) -> Option<VecDeque<Vec<u8>>> {
        if !mac.is_unicast() {
            return None;
        }
        let resolved = State::Resolved {
            mac,
            confirmed: now,
            probe: None,
        };
        match self.map.get_mut(&key) {
            Some(s) => {
                let old = std::mem::replace(s, resolved);
                match old {
                    State::Incomplete { queue, .. } => {
                        self.generation += 1;
                        self.queued_total = self.queued_total.saturating_sub(queue.len());
                        Some(queue)
                    }
                    State::Resolved { mac: old, .. } => {
                        if old != mac {
                            self.generation += 1;
                        }
                        None
                    }
                }
            }
            None => {
                if create && self.map.len() < self.cfg.max_entries {
                    self.map.insert(key, resolved);
                    self.generation += 1;
                }
                None
            }
        }
    }

    /// Runs due retransmissions, probes and expiries.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut Vec<NeighAction>) {
        let cfg = self.cfg;
        let mut next: Option<Instant> = None;
        let mut dead = Vec::new();
        for (key, st) in self.map.iter_mut() {
            match st {
                State::Incomplete { sent, next_at, .. } => {
                    if *next_at <= now {
                        if *sent >= cfg.max_retries {
                            dead.push(*key);
                            continue;
                        }
                        *sent += 1;
                        *next_at = now + cfg.retrans_interval;
                        out.push(NeighAction::Solicit {
                            key: *key,
                            unicast: None,
                        });
                    }
                    next = Some(next.map_or(*next_at, |n| n.min(*next_at)));
                }
                State::Resolved { mac, probe, .. } => {
                    if let Some((sent, at)) = probe {
                        if *at <= now {
                            if *sent >= cfg.max_retries {
                                dead.push(*key);
                                continue;
                            }
                            *sent += 1;
                            *at = now + cfg.retrans_interval;
                            out.push(NeighAction::Solicit {
                                key: *key,
                                unicast: Some(*mac),
                            });
                        }
                        next = Some(next.map_or(*at, |n| n.min(*at)));
                    }
                }
            }
        }
        for key in dead {
            if let Some(st) = self.map.remove(&key) {
                let queue = match st {
                    State::Incomplete { queue, .. } => queue,
                    State::Resolved { .. } => {
                        self.generation += 1;
                        VecDeque::new()
                    }
                };
                self.queued_total = self.queued_total.saturating_sub(queue.len());
                out.push(NeighAction::Failed { queue });
            }
        }
        self.next_deadline = next;
    }

    /// When [`NeighCache::handle_timeout`] next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_deadline
    }

    /// The resolved entries (stale ones included: they are still used).
    pub(crate) fn resolved(&self) -> impl Iterator<Item = (NeighKey, MacAddr)> + '_ {
        self.map.iter().filter_map(|(k, s)| match s {
            State::Resolved { mac, .. } => Some((*k, *mac)),
            State::Incomplete { .. } => None,
        })
    }

    /// Entries as (key, MAC if resolved).
    pub fn entries(&self) -> Vec<(NeighKey, Option<MacAddr>)> {
        let mut v: Vec<_> = self
            .map
            .iter()
            .map(|(k, s)| {
                (
                    *k,
                    match s {
                        State::Resolved { mac, .. } => Some(*mac),
                        State::Incomplete { .. } => None,
                    },
                )
            })
            .collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    /// Packets waiting for resolution.
    pub fn queued(&self) -> usize {
        self.queued_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(a: &str) -> NeighKey {
        (IfaceId(0), a.parse().unwrap())
    }

    #[test]
    fn resolve_releases_queue() {
        let t0 = Instant::now();
        let mut c = NeighCache::new(NeighConfig::default());
        let k = key("198.18.1.1");
        assert_eq!(c.lookup(t0, k), None);
        assert_eq!(c.queue(t0, k, vec![1]), QueueResult::Started);
        assert_eq!(c.queue(t0, k, vec![2]), QueueResult::Queued);
        assert_eq!(c.queued(), 2);
        let mac = MacAddr([2, 0, 0, 0, 0, 9]);
        let q = c.confirm(t0, k, mac, false).unwrap();
        assert_eq!(q.into_iter().collect::<Vec<_>>(), vec![vec![1], vec![2]]);
        assert_eq!(c.queued(), 0);
        assert_eq!(c.lookup(t0, k), Some(mac));
    }

    #[test]
    fn bounded_queue_and_failure() {
        let t0 = Instant::now();
        let cfg = NeighConfig::default();
        let mut c = NeighCache::new(cfg);
        let k = key("2001:2:0:1::1");
        for i in 0..20 {
            let r = c.queue(t0, k, vec![i]);
            if i >= cfg.queue_per_entry as u8 {
                assert_eq!(r, QueueResult::QueueFull);
            }
        }
        assert_eq!(c.queued(), cfg.queue_per_entry);
        let mut t = t0;
        let mut solicits = 1;
        let mut failed = None;
        for _ in 0..10 {
            t = c.poll_timeout().unwrap();
            let mut out = Vec::new();
            c.handle_timeout(t, &mut out);
            for a in out {
                match a {
                    NeighAction::Solicit { .. } => solicits += 1,
                    NeighAction::Failed { queue } => failed = Some(queue.len()),
                }
            }
            if failed.is_some() {
                break;
            }
        }
        assert_eq!(solicits, cfg.max_retries);
        assert_eq!(failed, Some(cfg.queue_per_entry));
        assert_eq!(c.queued(), 0);
        assert!(t >= t0 + cfg.retrans_interval * cfg.max_retries);
        assert!(c.entries().is_empty());
    }

    #[test]
    fn stale_entry_probed_then_expired() {
        let t0 = Instant::now();
        let cfg = NeighConfig::default();
        let mut c = NeighCache::new(cfg);
        let k = key("198.18.1.1");
        let mac = MacAddr([2, 0, 0, 0, 0, 9]);
        c.confirm(t0, k, mac, true);
        let t1 = t0 + cfg.reachable_time + Duration::from_secs(1);
        assert_eq!(c.lookup(t1, k), Some(mac));
        assert_eq!(c.poll_timeout(), Some(t1));
        let mut out = Vec::new();
        c.handle_timeout(t1, &mut out);
        assert!(matches!(out[0], NeighAction::Solicit { unicast: Some(m), .. } if m == mac));
        // Confirmation clears the probe.
        c.confirm(t1, k, mac, false);
        assert_eq!(c.entries().len(), 1);
        // No answer to probes: deleted.
        let t2 = t1 + cfg.reachable_time + Duration::from_secs(1);
        c.lookup(t2, k);
        let mut t = t2;
        for _ in 0..10 {
            let mut out = Vec::new();
            c.handle_timeout(t, &mut out);
            match c.poll_timeout() {
                Some(n) => t = n,
                None => break,
            }
        }
        assert!(c.entries().is_empty());
    }
}
