//! What each link has sent, and how fast lately: the device load PLAN's `queueLength` and
//! route scouting read (PLANet §V-B), also shown by `anode links`.
//!
//! Every packet the node queues for a link (data or control; for
//! [`crate::Node::poll_transmit`] or the link's queue discipline) is counted on that link at
//! the time of the call that sent it. The recent rate is estimated from two back-to-back
//! windows of [`WINDOW`]: the packets of the window before the current one and of the current
//! one, over the time they cover. It needs no timer (windows roll when a packet is counted or
//! the load is read) and costs a time comparison and two additions per packet. A link idle
//! for two windows reads 0.

use std::time::{Duration, Instant};

/// Length of one counting window.
pub const WINDOW: Duration = Duration::from_millis(100);

/// A link's transmit load, as [`crate::Node::link_load`] and
/// [`crate::NodeContext::link_load`] report it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkLoad {
    /// Packets queued for the link since the node started.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Packets per second over the last one to two [`WINDOW`]s.
    pub tx_pps: u64,
    /// Packets waiting in the link's queue discipline (0 without one).
    pub queued: usize,
}

/// The counters behind [`LinkLoad`], one per link.
#[derive(Debug, Clone, Default)]
pub(crate) struct LinkTx {
    packets: u64,
    bytes: u64,
    /// Start of the current window (`None` before the first packet).
    start: Option<Instant>,
    cur: u64,
    prev: u64,
}

impl LinkTx {
    /// Moves the windows forward to `now`.
    fn roll(&mut self, now: Instant) {
        let Some(s) = self.start else {
            self.start = Some(now);
            return;
        };
        let el = now.saturating_duration_since(s);
        if el < WINDOW {
            return;
        }
        if el < 2 * WINDOW {
            self.prev = self.cur;
            self.start = Some(s + WINDOW);
        } else {
            self.prev = 0;
            self.start = Some(now);
        }
        self.cur = 0;
    }

    /// Counts one packet of `len` bytes sent at `now`.
    pub(crate) fn record(&mut self, now: Instant, len: usize) {
        self.roll(now);
        self.cur += 1;
        self.packets += 1;
        self.bytes += len as u64;
    }

    /// The load at `now` (`queued` comes from the link's discipline).
    pub(crate) fn load(&self, now: Instant, queued: usize) -> LinkLoad {
        let mut w = self.clone();
        w.roll(now);
        let span = WINDOW
            + w.start
                .map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
        let n = u128::from(w.prev + w.cur);
        let pps = n * 1_000_000_000 / span.as_nanos().max(1);
        LinkLoad {
            tx_packets: self.packets,
            tx_bytes: self.bytes,
            tx_pps: u64::try_from(pps).unwrap_or(u64::MAX),
            queued,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_follows_the_last_windows_and_decays_to_zero() {
        let t0 = Instant::now();
        let mut tx = LinkTx::default();
        assert_eq!(tx.load(t0, 0), LinkLoad::default());
        // 1000 packets per second for half a second.
        for i in 0..500u64 {
            tx.record(t0 + Duration::from_millis(i), 100);
        }
        let l = tx.load(t0 + Duration::from_millis(500), 3);
        assert_eq!((l.tx_packets, l.tx_bytes, l.queued), (500, 50_000, 3));
        assert!((900..=1100).contains(&l.tx_pps), "{l:?}");
        // Idle: the last full window's 100 packets over 150 ms, then nothing.
        let l = tx.load(t0 + Duration::from_millis(550), 0);
        assert!((600..700).contains(&l.tx_pps), "{l:?}");
        assert_eq!(tx.load(t0 + Duration::from_millis(800), 0).tx_pps, 0);
        assert_eq!(tx.load(t0 + Duration::from_secs(60), 0).tx_packets, 500);
    }
}
