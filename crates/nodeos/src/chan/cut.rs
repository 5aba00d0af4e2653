//! [`CutTable`]: the cut-through table installed in the node core
//! (`Node::set_cut_through`). An EE opens a channel with `NodeContext::open_cut_through`;
//! matching routed packets of its Type ID are then forwarded on the fast path (bandwidth
//! policed by a token bucket) and never reach it.
//!
//! Contract: the Type ID is always part of the match (an EE cannot capture another EE's
//! packets); the number of channels and their rate are capped by the table's policy
//! (`max_channels` per Type ID, `max_per_owner` per domain, `max_rate`); a channel past its
//! expiry matches nothing and is closed (on the next packet it would have matched, on the next
//! open, on a listing); the same domain opening the same keys again refreshes its channel;
//! `classify` does one compiled-classifier lookup (none while no channel is open).
//! A rate-limited channel's bucket is at least 64 KiB deep (smaller bursts would police
//! single jumbo packets).

use std::time::Instant;

use anode_core::{CutError, CutId, CutInfo, CutSpec, CutThrough, CutVerdict};
use rustc_hash::FxHashMap;

use super::{Classifier, DemuxKey, TokenBucket, demux};

#[derive(Debug)]
struct Chan {
    type_id: u16,
    spec: CutSpec,
    /// The keys it was opened with (the Type ID key the table adds left out).
    keys: Vec<DemuxKey>,
    created: Instant,
    bucket: Option<TokenBucket>,
    entry: usize,
    packets: u64,
    bytes: u64,
    policed: u64,
}

impl Chan {
    /// Whether it treats a passive packet differently from the fast path.
    fn diverts(&self) -> bool {
        self.spec.via.is_some() || self.bucket.is_some()
    }
}

/// Counters of one cut-through channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CutStats {
    /// Packets forwarded.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Packets dropped over the bandwidth limit.
    pub policed: u64,
}

/// The cut-through table.
#[derive(Debug)]
pub struct CutTable {
    classifier: Classifier<CutId>,
    chans: FxHashMap<CutId, Chan>,
    next: u64,
    max_channels: usize,
    max_per_owner: usize,
    max_rate: u64,
    /// Open channels with a fixed neighbor or a rate limit (`CutThrough::diverts`, asked by
    /// the data path on every turn of its loop: a count, not a scan).
    diverting: usize,
}

impl CutTable {
    /// A table allowing `max_channels` per Type ID, each at most `max_rate` bytes/s (a
    /// channel asking for no limit gets `max_rate`); one domain may hold all of them.
    pub fn new(max_channels: usize, max_rate: u64) -> Self {
        CutTable::with_owner_limit(max_channels, max_channels, max_rate)
    }

    /// [`CutTable::new`] with at most `max_per_owner` channels per domain.
    pub fn with_owner_limit(max_channels: usize, max_per_owner: usize, max_rate: u64) -> Self {
        CutTable {
            classifier: Classifier::new(),
            chans: FxHashMap::default(),
            next: 0,
            max_channels,
            max_per_owner,
            max_rate,
            diverting: 0,
        }
    }

    /// Open channels.
    pub fn len(&self) -> usize {
        self.chans.len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.chans.is_empty()
    }

    /// A channel's counters.
    pub fn stats(&self, id: CutId) -> Option<CutStats> {
        self.chans.get(&id).map(|c| CutStats {
            packets: c.packets,
            bytes: c.bytes,
            policed: c.policed,
        })
    }

    fn close_where(&mut self, f: impl Fn(&Chan) -> bool) -> usize {
        let ids: Vec<CutId> = self
            .chans
            .iter()
            .filter(|(_, c)| f(c))
            .map(|(id, _)| *id)
            .collect();
        ids.iter().filter(|id| self.close(**id)).count()
    }

    /// Closes the channels past their expiry at `now`.
    fn expire(&mut self, now: Instant) -> usize {
        self.close_where(|c| c.spec.expires.is_some_and(|e| e <= now))
    }
}

impl CutThrough for CutTable {
    fn open(
        &mut self,
        now: Instant,
        type_id: u16,
        mut keys: Vec<DemuxKey>,
        spec: CutSpec,
    ) -> Result<CutId, CutError> {
        demux::check_keys(&keys).map_err(CutError::BadKeys)?;
        self.expire(now);
        // The same domain asking again for the same flow refreshes its channel.
        if let Some((id, c)) = self
            .chans
            .iter_mut()
            .find(|(_, c)| c.type_id == type_id && c.spec.owner == spec.owner && c.keys == keys)
        {
            c.spec.expires = spec.expires;
            return Ok(*id);
        }
        let mine = self
            .chans
            .values()
            .filter(|c| c.spec.owner == spec.owner)
            .count();
        if mine >= self.max_per_owner {
            return Err(CutError::Refused(format!(
                "{} already has {mine} cut-through channels (max {} per domain)",
                spec.owner, self.max_per_owner
            )));
        }
        let n = self.chans.values().filter(|c| c.type_id == type_id).count();
        if n >= self.max_channels {
            return Err(CutError::Refused(format!(
                "Type ID {type_id:#06x} already has {n} cut-through channels (max {})",
                self.max_channels
            )));
        }
        let rate = spec
            .rate_bytes_per_sec
            .unwrap_or(self.max_rate)
            .min(self.max_rate);
        let own = keys.clone();
        keys.push(DemuxKey::exact(2, &type_id.to_be_bytes()));
        let id = CutId(self.next);
        let entry = self
            .classifier
            .insert(keys, 0, id)
            .map_err(CutError::BadKeys)?;
        self.next += 1;
        let bucket =
            (rate < u64::MAX).then(|| TokenBucket::new(rate, spec.burst_bytes.max(64 * 1024)));
        let chan = Chan {
            type_id,
            spec,
            keys: own,
            created: now,
            bucket,
            entry,
            packets: 0,
            bytes: 0,
            policed: 0,
        };
        if chan.diverts() {
            self.diverting += 1;
        }
        self.chans.insert(id, chan);
        Ok(id)
    }

    fn close(&mut self, id: CutId) -> bool {
        match self.chans.remove(&id) {
            Some(c) => {
                self.classifier.remove(c.entry);
                if c.diverts() {
                    self.diverting -= 1;
                }
                true
            }
            None => false,
        }
    }

    #[inline]
    fn classify(&mut self, now: Instant, _type_id: u16, pkt: &[u8]) -> Option<CutVerdict> {
        if self.chans.is_empty() {
            return None;
        }
        let (_, id) = self.classifier.lookup(pkt)?;
        let id = *id;
        let c = self.chans.get_mut(&id)?;
        if c.spec.expires.is_some_and(|e| e <= now) {
            // Expired: the packet goes to the EE, which may open the channel again.
            self.close(id);
            return None;
        }
        let len = pkt.len() as u64;
        if let Some(b) = c.bucket.as_mut()
            && !b.take(now, len)
        {
            c.policed += 1;
            return Some(CutVerdict::Police);
        }
        c.packets += 1;
        c.bytes += len;
        Some(CutVerdict::Forward(c.spec.via))
    }

    fn channels(&mut self, now: Instant) -> Vec<CutInfo> {
        self.expire(now);
        let mut v: Vec<CutInfo> = self
            .chans
            .iter()
            .map(|(id, c)| CutInfo {
                id: *id,
                type_id: c.type_id,
                owner: c.spec.owner.clone(),
                keys: c.keys.clone(),
                via: c.spec.via,
                packets: c.packets,
                bytes: c.bytes,
                policed: c.policed,
                created: c.created,
                expires: c.spec.expires,
            })
            .collect();
        v.sort_by_key(|i| i.id);
        v
    }

    fn close_owner(&mut self, owner: &str) -> usize {
        self.close_where(|c| c.spec.owner == owner)
    }

    fn close_type(&mut self, type_id: u16) -> usize {
        self.close_where(|c| c.type_id == type_id)
    }

    fn diverts(&self) -> bool {
        self.diverting > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_id_is_always_matched_and_limits_hold() {
        let mut t = CutTable::new(1, 1000);
        let spec = CutSpec {
            via: None,
            rate_bytes_per_sec: None,
            burst_bytes: 0,
            expires: None,
            owner: "test".into(),
        };
        let id = t
            .open(
                Instant::now(),
                0x0a03,
                vec![DemuxKey::exact(4, &[9])],
                spec.clone(),
            )
            .unwrap();
        assert!(matches!(
            t.open(Instant::now(), 0x0a03, vec![DemuxKey::exact(4, &[8])], spec),
            Err(CutError::Refused(_))
        ));
        let now = Instant::now();
        let mut pkt = vec![0u8, 0, 0x0a, 0x03, 9, 0];
        assert_eq!(
            t.classify(now, 0x0a03, &pkt),
            Some(CutVerdict::Forward(None))
        );
        pkt[3] = 0x04; // another EE's packet with the same bytes
        assert_eq!(t.classify(now, 0x0a04, &pkt), None);
        assert_eq!(t.stats(id).unwrap().packets, 1);
        assert!(t.diverts(), "a rate-limited channel is not the fast path");
        assert_eq!(t.close_type(0x0a03), 1);
        assert!(!t.diverts(), "closing it counts it out");
        assert!(t.is_empty());
    }

    #[test]
    fn channels_expire_refresh_and_are_limited_per_domain() {
        let now = Instant::now();
        let mut t = CutTable::with_owner_limit(10, 2, u64::MAX);
        let spec = |owner: &str, secs| CutSpec {
            via: None,
            rate_bytes_per_sec: None,
            burst_bytes: 0,
            expires: Some(now + std::time::Duration::from_secs(secs)),
            owner: owner.into(),
        };
        let k = |b| vec![DemuxKey::exact(4, &[b])];
        let a = t.open(now, 0x0a03, k(1), spec("capsule/aa", 1)).unwrap();
        // Asking again refreshes the same channel.
        assert_eq!(t.open(now, 0x0a03, k(1), spec("capsule/aa", 5)).unwrap(), a);
        t.open(now, 0x0a03, k(2), spec("capsule/aa", 5)).unwrap();
        let e = t
            .open(now, 0x0a03, k(3), spec("capsule/aa", 5))
            .unwrap_err();
        assert!(e.to_string().contains("per domain"), "{e}");
        t.open(now, 0x0a03, k(3), spec("capsule/bb", 5)).unwrap();
        let l = t.channels(now);
        assert_eq!(l.len(), 3);
        assert!(
            !t.diverts(),
            "default route, no limit: what the fast path does"
        );
        assert_eq!(l[0].keys, k(1), "the Type ID key is not listed");
        assert_eq!(l[0].owner, "capsule/aa");
        let pkt = [0u8, 0, 0x0a, 0x03, 1, 0];
        assert!(t.classify(now, 0x0a03, &pkt).is_some());
        // Past its (refreshed) expiry it matches nothing and is gone.
        let later = now + std::time::Duration::from_secs(6);
        assert_eq!(t.classify(later, 0x0a03, &pkt), None);
        assert_eq!(t.close_owner("capsule/bb"), 1);
        assert!(t.channels(later).is_empty());
    }
}
