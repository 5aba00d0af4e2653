//! Netem-like egress impairments, one per peer: tail drop, random loss, rate, delay.
//!
//! Invariants:
//! - Datagrams to one peer leave in the order the node queued them (release times per peer
//!   never decrease: serialisation ends are monotonic and the delay is constant).
//! - Bytes held per peer never exceed its `queue_bytes`; a datagram that would exceed it is
//!   dropped and counted.
//! - Loss decisions come from a SplitMix64 generator seeded from `DriverConfig::seed` and the
//!   impairment's index, so a run with the same traffic is repeatable.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use anode_core::Transmit;
use anode_wire::NodeAddr;

use crate::Impairment;

/// SplitMix64: tiny, fast, good enough for loss decisions (not cryptographic).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug)]
struct Queue {
    cfg: Impairment,
    rng: SplitMix64,
    /// When the serialiser is free again.
    busy_until: Option<Instant>,
    held: VecDeque<(Instant, Transmit)>,
    held_bytes: usize,
}

/// What [`Impairments::offer`] did with a datagram.
#[derive(Debug)]
pub(crate) enum Offer {
    /// No impairment for this peer: send it now.
    Pass(Transmit),
    /// Held; it comes out of [`Impairments::release`].
    Held,
    /// Lost on purpose; the buffer is given back.
    Lost(Vec<u8>),
    /// Tail-dropped (queue full); the buffer is given back.
    QueueFull(Vec<u8>),
}

/// All impairments of one driver.
#[derive(Debug, Default)]
pub(crate) struct Impairments {
    by_peer: HashMap<NodeAddr, usize>,
    queues: Vec<Queue>,
}

impl Impairments {
    pub(crate) fn new(cfgs: &[Impairment], seed: u64) -> Self {
        let mut by_peer = HashMap::new();
        let mut queues = Vec::new();
        for (i, c) in cfgs.iter().enumerate() {
            by_peer.insert(NodeAddr::from(c.peer), i);
            queues.push(Queue {
                cfg: c.clone(),
                rng: SplitMix64::new(seed ^ (i as u64).wrapping_mul(0xa076_1d64_78bd_642f)),
                busy_until: None,
                held: VecDeque::new(),
                held_bytes: 0,
            });
        }
        Impairments { by_peer, queues }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Passes, holds or drops one datagram the node wants to send at `now`.
    pub(crate) fn offer(&mut self, now: Instant, t: Transmit) -> Offer {
        let Some(q) = self
            .by_peer
            .get(&t.dst)
            .and_then(|&i| self.queues.get_mut(i))
        else {
            return Offer::Pass(t);
        };
        let len = t.buf.len();
        if q.held_bytes + len > q.cfg.queue_bytes {
            return Offer::QueueFull(t.buf);
        }
        if q.cfg.loss > 0.0 && q.rng.next_f64() < q.cfg.loss {
            return Offer::Lost(t.buf);
        }
        let start = q.busy_until.map_or(now, |b| b.max(now));
        let done = match q.cfg.rate_bps {
            Some(r) => {
                let ns = (len as u128 * 8 * 1_000_000_000) / u128::from(r.max(1));
                start + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
            }
            None => start,
        };
        q.busy_until = Some(done);
        q.held_bytes += len;
        q.held.push_back((done + q.cfg.delay, t));
        Offer::Held
    }

    /// Moves every datagram due at `now` to `out`.
    pub(crate) fn release(&mut self, now: Instant, out: &mut VecDeque<Transmit>) {
        for q in &mut self.queues {
            while q.held.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, t)) = q.held.pop_front() {
                    q.held_bytes = q.held_bytes.saturating_sub(t.buf.len());
                    out.push_back(t);
                }
            }
        }
    }

    /// The earliest release time of a held datagram.
    pub(crate) fn next_release(&self) -> Option<Instant> {
        self.queues
            .iter()
            .filter_map(|q| q.held.front().map(|(at, _)| *at))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_core::LinkId;

    fn tx(dst: &str, len: usize) -> Transmit {
        Transmit {
            link: LinkId(0),
            dst: dst.parse().unwrap(),
            buf: vec![0; len],
        }
    }

    #[test]
    fn rng_is_uniform_enough_and_seeded() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let xs: Vec<f64> = (0..10_000).map(|_| a.next_f64()).collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
        assert_eq!(b.next_f64(), xs[0]);
    }

    #[test]
    fn unimpaired_peer_passes() {
        let mut im = Impairments::new(&[Impairment::new("10.0.0.1:1".parse().unwrap())], 1);
        assert!(matches!(
            im.offer(Instant::now(), tx("10.0.0.2:1", 10)),
            Offer::Pass(_)
        ));
    }

    #[test]
    fn loss_one_drops_everything_and_half_about_half() {
        let mut c = Impairment::new("10.0.0.1:1".parse().unwrap());
        c.loss = 1.0;
        let mut im = Impairments::new(&[c.clone()], 1);
        let now = Instant::now();
        for _ in 0..100 {
            assert!(matches!(
                im.offer(now, tx("10.0.0.1:1", 10)),
                Offer::Lost(_)
            ));
        }
        c.loss = 0.5;
        let mut im = Impairments::new(&[c], 3);
        let mut out = VecDeque::new();
        let lost = (0..2000)
            .filter(|_| matches!(im.offer(now, tx("10.0.0.1:1", 10)), Offer::Lost(_)))
            .count();
        im.release(now, &mut out);
        assert!((900..1100).contains(&lost), "lost {lost}");
        assert_eq!(out.len(), 2000 - lost);
    }

    #[test]
    fn delay_rate_and_queue_limit() {
        let mut c = Impairment::new("[2001:2::1]:1".parse().unwrap());
        c.delay = Duration::from_millis(10);
        c.rate_bps = Some(8_000_000); // 1 byte per microsecond
        c.queue_bytes = 2500;
        let mut im = Impairments::new(&[c], 0);
        let now = Instant::now();
        let mut out = VecDeque::new();
        assert!(matches!(
            im.offer(now, tx("[2001:2::1]:1", 1000)),
            Offer::Held
        ));
        assert!(matches!(
            im.offer(now, tx("[2001:2::1]:1", 1000)),
            Offer::Held
        ));
        assert!(matches!(
            im.offer(now, tx("[2001:2::1]:1", 1000)),
            Offer::QueueFull(_)
        ));
        im.release(now + Duration::from_millis(10), &mut out);
        assert!(out.is_empty());
        assert_eq!(im.next_release(), Some(now + Duration::from_millis(11)));
        im.release(now + Duration::from_millis(11), &mut out);
        assert_eq!(out.len(), 1);
        im.release(now + Duration::from_millis(12), &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(im.next_release(), None);
    }
}
