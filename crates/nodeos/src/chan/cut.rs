//! [`CutTable`]: the cut-through table installed in the node core
//! (`Node::set_cut_through`). An EE opens a channel with `NodeContext::open_cut_through`;
//! matching routed packets of its Type ID are then forwarded on the fast path (bandwidth
//! policed by a token bucket) and never reach it.
//!
//! Contract: the Type ID is always part of the match (an EE cannot capture another EE's
//! packets); the number of channels and their rate are capped by the table's policy
//! (`max_channels` per Type ID, `max_rate`); `classify` does one compiled-classifier lookup.
//! A rate-limited channel's bucket is at least 64 KiB deep (smaller bursts would police
//! single jumbo packets).

use std::time::Instant;

use anode_core::{CutError, CutId, CutSpec, CutThrough, CutVerdict};
use rustc_hash::FxHashMap;

use super::{Classifier, DemuxKey, TokenBucket, demux};

#[derive(Debug)]
struct Chan {
    type_id: u16,
    spec: CutSpec,
    bucket: Option<TokenBucket>,
    entry: usize,
    packets: u64,
    bytes: u64,
    policed: u64,
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
    max_rate: u64,
}

impl CutTable {
    /// A table allowing `max_channels` per Type ID, each at most `max_rate` bytes/s (a
    /// channel asking for no limit gets `max_rate`).
    pub fn new(max_channels: usize, max_rate: u64) -> Self {
        CutTable {
            classifier: Classifier::new(),
            chans: FxHashMap::default(),
            next: 0,
            max_channels,
            max_rate,
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

    /// Closes every channel of `type_id` (its EE or domain ended); returns how many.
    pub fn close_type(&mut self, type_id: u16) -> usize {
        let ids: Vec<CutId> = self
            .chans
            .iter()
            .filter(|(_, c)| c.type_id == type_id)
            .map(|(id, _)| *id)
            .collect();
        ids.iter().filter(|id| self.close(**id)).count()
    }
}

impl CutThrough for CutTable {
    fn open(
        &mut self,
        type_id: u16,
        mut keys: Vec<DemuxKey>,
        spec: CutSpec,
    ) -> Result<CutId, CutError> {
        demux::check_keys(&keys).map_err(CutError::BadKeys)?;
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
        keys.push(DemuxKey::exact(2, &type_id.to_be_bytes()));
        let id = CutId(self.next);
        let entry = self
            .classifier
            .insert(keys, 0, id)
            .map_err(CutError::BadKeys)?;
        self.next += 1;
        let bucket =
            (rate < u64::MAX).then(|| TokenBucket::new(rate, spec.burst_bytes.max(64 * 1024)));
        self.chans.insert(
            id,
            Chan {
                type_id,
                spec,
                bucket,
                entry,
                packets: 0,
                bytes: 0,
                policed: 0,
            },
        );
        Ok(id)
    }

    fn close(&mut self, id: CutId) -> bool {
        match self.chans.remove(&id) {
            Some(c) => {
                self.classifier.remove(c.entry);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn classify(&mut self, now: Instant, _type_id: u16, pkt: &[u8]) -> Option<CutVerdict> {
        let (_, id) = self.classifier.lookup(pkt)?;
        let c = self.chans.get_mut(id)?;
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
        };
        let id = t
            .open(0x0a03, vec![DemuxKey::exact(4, &[9])], spec)
            .unwrap();
        assert!(matches!(
            t.open(0x0a03, vec![DemuxKey::exact(4, &[8])], spec),
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
        assert_eq!(t.close_type(0x0a03), 1);
        assert!(t.is_empty());
    }
}
