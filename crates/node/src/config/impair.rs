//! `[[link]] impair`: an emulated link in the node's own UDP driver — delay, loss, rate and
//! queue on the datagrams this node sends to that link's peer (the egress
//! [`anode_io::Impairment`] `anode emulate --realtime` uses). For labs on kernels without
//! `sch_netem` (`anode lab up --impair node`); both ends of a link carry one, each for its own
//! direction.
//!
//! ```toml
//! [[link]]
//! peer = "198.18.0.2:3322"
//! impair = { delay_ms = 5, loss = 0.01, rate_mbps = 100, queue_bytes = 65536 }
//! # every key optional: delay 0, loss 0, unlimited rate, a 1 MiB queue
//! ```
//!
//! Contract: [`check`] returns one [`LinkImpairment`] per link that has `impair`, with the
//! delay within 0..=60 s, the loss a probability, the rate above 0 and the queue at least
//! 1 byte; otherwise a [`Problem`] at the offending value that says what to write instead.

use std::time::Duration;

use anode_wire::NodeAddr;
use serde::Deserialize;
use toml::Spanned;

use super::check::{Problem, at};
use super::raw::RawLink;

/// Longest emulated delay.
const MAX_DELAY_MS: f64 = 60_000.0;

/// `impair = { ... }` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawImpair {
    pub delay_ms: Option<Spanned<f64>>,
    pub loss: Option<Spanned<f64>>,
    pub rate_mbps: Option<Spanned<f64>>,
    pub queue_bytes: Option<Spanned<u64>>,
}

/// The emulated egress of one link (loss in parts per billion, so the file stays `Eq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkImpairment {
    /// The link's peer: datagrams to it are impaired.
    pub peer: NodeAddr,
    /// One-way delay added to every datagram.
    pub delay: Duration,
    /// Loss probability in parts per billion (0..=1_000_000_000).
    pub loss_ppb: u32,
    /// Serialisation rate in bits per second; `None`: unlimited.
    pub rate_bps: Option<u64>,
    /// Most bytes held waiting for the rate or the delay; more are tail-dropped.
    pub queue_bytes: usize,
}

impl LinkImpairment {
    /// The loss probability as a fraction (0.0..=1.0).
    pub fn loss(&self) -> f64 {
        f64::from(self.loss_ppb) / 1e9
    }

    /// The UDP driver's form.
    pub fn to_driver(&self) -> anode_io::Impairment {
        anode_io::Impairment {
            peer: self.peer.socket_addr(),
            delay: self.delay,
            loss: self.loss(),
            rate_bps: self.rate_bps,
            queue_bytes: self.queue_bytes,
        }
    }
}

/// Checks every link's `impair` table.
pub(super) fn check(text: &str, links: &[RawLink]) -> Result<Vec<LinkImpairment>, Problem> {
    let mut out = Vec::new();
    for l in links {
        let Some(raw) = &l.impair else { continue };
        let raw = raw.get_ref();
        let mut imp = LinkImpairment {
            peer: *l.peer.get_ref(),
            delay: Duration::ZERO,
            loss_ppb: 0,
            rate_bps: None,
            queue_bytes: 1 << 20,
        };
        if let Some(d) = &raw.delay_ms {
            let v = *d.get_ref();
            if !(0.0..=MAX_DELAY_MS).contains(&v) {
                return Err(at(
                    text,
                    d,
                    format!("impair delay_ms = {v} is outside 0..=60000"),
                    "give the one-way delay in milliseconds, e.g. 5",
                ));
            }
            imp.delay = Duration::from_secs_f64(v / 1000.0);
        }
        if let Some(p) = &raw.loss {
            let v = *p.get_ref();
            if !(0.0..=1.0).contains(&v) {
                return Err(at(
                    text,
                    p,
                    format!("impair loss = {v} is not a probability"),
                    "give 0.0 to 1.0, e.g. 0.01 for 1%",
                ));
            }
            imp.loss_ppb = (v * 1e9).round() as u32;
        }
        if let Some(r) = &raw.rate_mbps {
            let v = *r.get_ref();
            if !(v > 0.0 && v <= 1e6) {
                return Err(at(
                    text,
                    r,
                    format!("impair rate_mbps = {v} is outside (0, 1000000]"),
                    "give megabits per second, e.g. 100, or leave rate_mbps out for unlimited",
                ));
            }
            imp.rate_bps = Some(((v * 1e6).round() as u64).max(1));
        }
        if let Some(q) = &raw.queue_bytes {
            let v = *q.get_ref();
            if v == 0 || v > 1 << 30 {
                return Err(at(
                    text,
                    q,
                    format!("impair queue_bytes = {v} is outside 1..=1073741824"),
                    "give the bytes a link may hold, e.g. 65536",
                ));
            }
            imp.queue_bytes = v as usize;
        }
        out.push(imp);
    }
    Ok(out)
}
