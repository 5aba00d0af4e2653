//! Per-link transmit queues with a pluggable queue discipline (PLANet §V-A).
//!
//! By default a node has no transmit queues of its own: every packet it sends goes straight to
//! the driver's queue ([`crate::Node::poll_transmit`]) and the link (or the emulator's link
//! model) queues it first come, first served. [`crate::Node::set_link_qdisc`] puts a
//! [`QueueDiscipline`] and a rate on one link: packets for that link then wait in the
//! discipline and the node releases them to the driver at the rate (its switching capacity on
//! that link), choosing the next one by the discipline; the release times are node timers
//! ([`crate::Node::poll_timeout`]). Replacing a discipline moves the packets waiting in the
//! old one into the new one in the order the old one would have sent them: nothing is lost.
//! Removing it hands them to the driver at once.
//!
//! With no discipline installed anywhere the transmit path costs one `Option` test.
//!
//! Contract: a discipline must not panic and must return promptly; `enqueue` gives the packet
//! back when it refuses it (full), and the node counts it as `qdisc_dropped`.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use anode_routing::LinkId;

use crate::Transmit;

/// A queue discipline on one link.
pub trait QueueDiscipline: Send + Debug {
    /// A short name ("fcfs", "rr", ...).
    fn name(&self) -> &str;
    /// Queues a packet that arrived on `input` (`None`: originated here); gives it back if
    /// the discipline refuses it.
    fn enqueue(&mut self, input: Option<LinkId>, t: Transmit) -> Result<(), Transmit>;
    /// The next packet to send, if any.
    fn dequeue(&mut self) -> Option<Transmit>;
    /// Packets waiting.
    fn len(&self) -> usize;
    /// Whether no packet waits.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One link's queue: a discipline and a rate.
#[derive(Debug)]
pub(crate) struct LinkQueue {
    pub qdisc: Box<dyn QueueDiscipline>,
    pub rate_bps: u64,
    /// When the link is free to take the next packet.
    pub next_free: Option<Instant>,
}

/// The node's link queues, by link index.
#[derive(Debug, Default)]
pub(crate) struct TxQueues {
    pub links: Vec<Option<LinkQueue>>,
}

impl TxQueues {
    pub fn get_mut(&mut self, link: LinkId) -> Option<&mut LinkQueue> {
        self.links.get_mut(link.0 as usize).and_then(Option::as_mut)
    }

    /// Moves every packet whose time has come to `out`, in discipline order.
    pub fn release(&mut self, now: Instant, mut out: impl FnMut(Transmit)) {
        for q in self.links.iter_mut().flatten() {
            loop {
                if q.next_free.is_some_and(|t| t > now) || q.qdisc.is_empty() {
                    break;
                }
                let Some(t) = q.qdisc.dequeue() else {
                    break;
                };
                let start = match q.next_free {
                    Some(f) if f + Duration::from_millis(1) >= now => f,
                    _ => now,
                };
                let bits = (t.buf.len() as u64).saturating_mul(8);
                let ns = bits
                    .saturating_mul(1_000_000_000)
                    .checked_div(q.rate_bps.max(1))
                    .unwrap_or(0);
                q.next_free = Some(start + Duration::from_nanos(ns));
                out(t);
            }
        }
    }

    /// The earliest time a queued packet may be released.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.links
            .iter()
            .flatten()
            .filter(|q| !q.qdisc.is_empty())
            .filter_map(|q| q.next_free)
            .min()
    }
}

/// First come, first served with a packet limit: the discipline a node uses when asked for
/// one without saying which (and the reference the module disciplines are tested against).
#[derive(Debug)]
pub struct Fcfs {
    q: std::collections::VecDeque<Transmit>,
    limit: usize,
}

impl Fcfs {
    /// A FCFS queue of at most `limit` packets.
    pub fn new(limit: usize) -> Self {
        Fcfs {
            q: std::collections::VecDeque::new(),
            limit,
        }
    }
}

impl QueueDiscipline for Fcfs {
    fn name(&self) -> &str {
        "fcfs"
    }

    fn enqueue(&mut self, _input: Option<LinkId>, t: Transmit) -> Result<(), Transmit> {
        if self.q.len() >= self.limit {
            return Err(t);
        }
        self.q.push_back(t);
        Ok(())
    }

    fn dequeue(&mut self) -> Option<Transmit> {
        self.q.pop_front()
    }

    fn len(&self) -> usize {
        self.q.len()
    }
}
