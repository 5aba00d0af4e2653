//! `anode capsule send`: capsules of any code object, yours included, sent from a running
//! node toward a destination, with what the code delivers back to the session's port.
//!
//! The code is put into the source node's cache (or must be there already, named by its
//! SHA-256); every node on the path demand-loads it from its previous hop, as for the
//! built-in protocols. Capsules go at `interval` (0: as fast as the node takes them, pacing
//! itself when the node holds it back), then the session waits `wait` for deliveries.
//! Contract: every wait is bounded; a capsule the node drops is reported with the node's
//! reason and not retried.

use std::time::{Duration, Instant};

use anode_wire::NodeAddr;
use serde::Serialize;

use crate::CapsuleSession;

/// What to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapsuleSend {
    /// The destination node.
    pub dest: NodeAddr,
    /// The capsule payload (the protocol decides its meaning).
    pub payload: Vec<u8>,
    /// Capsules to send.
    pub count: u64,
    /// Time between two capsules (zero: back to back).
    pub interval: Duration,
    /// Resource bound of each.
    pub rb: u16,
    /// Flow id of each.
    pub flow: u64,
    /// How long to wait for deliveries after the last capsule.
    pub wait: Duration,
}

/// Something that happened while sending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum SendEvent {
    /// The node dropped capsule `seq` (0-based): its reason.
    Dropped {
        /// Which capsule.
        seq: u64,
        /// Why (the node's drop, e.g. "capsule+nodeos/bandwidth").
        drop: String,
    },
    /// The code delivered bytes to the session's port.
    Delivery {
        /// Milliseconds since the first capsule was sent.
        at_ms: u64,
        /// What it delivered.
        payload: Vec<u8>,
    },
}

/// How a send went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SendSummary {
    /// The node the capsules left from.
    pub node: NodeAddr,
    /// The code object (SHA-256, hex).
    pub code: String,
    /// Whether the node had the code before.
    pub code_was_cached: bool,
    /// The application port deliveries come to.
    pub port: u16,
    /// Capsules the node took.
    pub sent: u64,
    /// Capsules the node dropped.
    pub dropped: u64,
    /// Deliveries to the port.
    pub deliveries: u64,
    /// Stopped early by the caller (Ctrl-C).
    pub interrupted: bool,
}

/// Sends `o.count` capsules of the session's code; `on` sees drops and deliveries.
pub fn send_capsules(
    s: &mut CapsuleSession,
    o: &CapsuleSend,
    stop: &dyn Fn() -> bool,
    on: &mut dyn FnMut(&SendEvent),
) -> Result<SendSummary, String> {
    let t0 = Instant::now();
    let mut sum = SendSummary {
        node: s.node(),
        code: s.code().iter().map(|b| format!("{b:02x}")).collect(),
        code_was_cached: s.code_was_cached(),
        port: s.port(),
        sent: 0,
        dropped: 0,
        deliveries: 0,
        interrupted: false,
    };
    let deliver = |sum: &mut SendSummary, on: &mut dyn FnMut(&SendEvent), p: Vec<u8>| {
        sum.deliveries += 1;
        let at_ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
        on(&SendEvent::Delivery { at_ms, payload: p });
    };
    let mut seq = 0;
    while seq < o.count {
        if stop() {
            sum.interrupted = true;
            return Ok(sum);
        }
        let batch = if o.interval.is_zero() {
            u32::try_from((o.count - seq).min(256)).unwrap_or(256)
        } else {
            1
        };
        let (went, drop) = s.inject_upto(o.dest, (o.rb, o.flow), &o.payload, batch)?;
        sum.sent += u64::from(went);
        seq += u64::from(went);
        if let Some((name, _reason)) = drop {
            on(&SendEvent::Dropped { seq, drop: name });
            sum.dropped += 1;
            seq += 1;
            // Held back by the node: give it a moment before the next one.
            std::thread::sleep(Duration::from_millis(10));
        }
        while let Some(p) = s.poll()? {
            deliver(&mut sum, on, p);
        }
        if !o.interval.is_zero() && seq < o.count {
            let until = t0
                + o.interval
                    .saturating_mul(u32::try_from(seq).unwrap_or(u32::MAX));
            while let Some(left) = until.checked_duration_since(Instant::now()) {
                if stop() {
                    break;
                }
                if let Some(p) = s.next(Instant::now() + left.min(Duration::from_millis(100)))? {
                    deliver(&mut sum, on, p);
                }
            }
        }
    }
    let end = Instant::now() + o.wait;
    while Instant::now() < end && !stop() {
        let step = end.min(Instant::now() + Duration::from_millis(100));
        if let Some(p) = s.next(step)? {
            deliver(&mut sum, on, p);
        }
    }
    sum.interrupted = stop();
    Ok(sum)
}
