//! The reliable package: `RetransOnRemote(c, h, rb, routFun, retries, timeout)` delivered
//! at most once and retransmitted until acknowledged (tutorial footnotes 7-9).
//!
//! How: the child packet does not carry `c` itself but the service chunk
//! `|retransDeliver|(sender, id, c)`. At the evaluation destination `retransDeliver` answers
//! `|retransAck|(id)` to the sender (resource bound [`super::PlanEeConfig::error_rb`]), and
//! evaluates `c` the first time it sees (sender, id) only (remembered for
//! [`DEDUP_TTL`]). The sender keeps the packet until the acknowledgement arrives and sends it
//! again every `timeout` milliseconds (clamped to [`MIN_INTERVAL`]..[`MAX_INTERVAL`]), at
//! most `retries` more times; then it gives up, logs it (`plan:error`) and counts
//! `retrans_unacked`. A retransmission reuses the resource bound given to the first
//! transmission (the parent paid once).
//!
//! Contract: at most [`MAX_PENDING`] packets wait for acknowledgement per node; beyond that
//! `RetransOnRemote` still sends once but raises no error and keeps nothing (counted as
//! `retrans_untracked`). Timers run in `PlanEe::handle_timeout`; nothing here blocks.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anode_core::wire::NodeAddr;

use super::PlanEe;
use crate::services::RegistryError;

/// Most packets waiting for an acknowledgement.
pub const MAX_PENDING: usize = 1024;
/// Shortest retransmission interval.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Longest retransmission interval.
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
/// How long a destination remembers a (sender, id) it has evaluated.
pub const DEDUP_TTL: Duration = Duration::from_secs(120);

/// A packet waiting for its acknowledgement.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    /// The whole packet, as first sent.
    pub buf: Vec<u8>,
    /// Its evaluation destination.
    pub dest: NodeAddr,
    /// Its routing function.
    pub route_fun: String,
    /// Retransmissions left.
    pub left: u32,
    /// Retransmission interval.
    pub interval: Duration,
    /// When to send it again.
    pub next: Instant,
    /// Transmissions so far.
    pub sent: u32,
}

/// The sender's side: packets waiting for acknowledgement, by id.
#[derive(Debug, Default)]
pub struct Reliable {
    pub(crate) pending: BTreeMap<i64, Pending>,
    pub(crate) next_id: u64,
}

impl Reliable {
    /// A fresh id for a packet from `me` (the address hash, then a counter; positive).
    pub(crate) fn next_id(&mut self, me: NodeAddr) -> i64 {
        self.next_id = self.next_id.wrapping_add(1);
        let h = super::scout::addr_hash(me) & 0xff_ffff;
        i64::try_from((h << 31) | (self.next_id & 0x7fff_ffff)).unwrap_or(i64::MAX)
    }

    /// Records a packet that `retries` retransmissions may follow; false if too many wait.
    pub(crate) fn track(&mut self, id: i64, p: Pending) -> bool {
        if self.pending.len() >= MAX_PENDING {
            return false;
        }
        self.pending.insert(id, p);
        true
    }

    /// The acknowledgement of `id` arrived.
    pub(crate) fn acked(&mut self, id: i64) -> bool {
        self.pending.remove(&id).is_some()
    }

    /// The earliest retransmission due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.next).min()
    }

    /// Packets waiting for an acknowledgement.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Takes what is due at `now`: packets to send again (updated in place) and those that
    /// ran out of retransmissions (removed).
    pub(crate) fn due(&mut self, now: Instant) -> (Vec<Pending>, Vec<Pending>) {
        let (mut again, mut gave_up) = (Vec::new(), Vec::new());
        let ids: Vec<i64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.next <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let Some(p) = self.pending.get_mut(&id) else {
                continue;
            };
            if p.left == 0 {
                if let Some(p) = self.pending.remove(&id) {
                    gave_up.push(p);
                }
                continue;
            }
            p.left -= 1;
            p.sent += 1;
            p.next = now + p.interval;
            again.push(p.clone());
        }
        (again, gave_up)
    }
}

/// The retransmission interval for a program's `timeout` (milliseconds).
pub(crate) fn interval(timeout_ms: i64) -> Duration {
    let ms = u64::try_from(timeout_ms).unwrap_or(0);
    Duration::from_millis(ms).clamp(MIN_INTERVAL, MAX_INTERVAL)
}

/// The reliable package has no extension services: `retransDeliver` and `retransAck` are
/// builtins (the first evaluates a chunk). Kept for symmetry with the other packages.
pub fn install(_ee: &mut PlanEe) -> Result<(), RegistryError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_core::wire::addr::v4;

    #[test]
    fn retransmits_then_gives_up() {
        let now = Instant::now();
        let mut r = Reliable::default();
        let id = r.next_id(v4(10, 0, 0, 1, 1));
        assert!(id > 0);
        let p = Pending {
            buf: vec![1],
            dest: v4(10, 0, 0, 2, 1),
            route_fun: "defaultRoute".into(),
            left: 1,
            interval: interval(100),
            next: now + interval(100),
            sent: 1,
        };
        assert!(r.track(id, p));
        assert_eq!(r.next_deadline(), Some(now + Duration::from_millis(100)));
        assert_eq!(r.due(now).0.len(), 0);
        let (again, gave_up) = r.due(now + Duration::from_millis(100));
        assert_eq!((again.len(), gave_up.len()), (1, 0));
        let (again, gave_up) = r.due(now + Duration::from_millis(200));
        assert_eq!((again.len(), gave_up.len()), (0, 1));
        assert_eq!(r.waiting(), 0);
        assert!(!r.acked(id));
        assert_eq!(interval(-5), MIN_INTERVAL);
        assert_eq!(interval(i64::MAX), MAX_INTERVAL);
    }
}
