//! A topology link's properties as a `tc netem` qdisc and as a node's `[[link]] impair`.
//!
//! Mapping (the same values on both ends of a link, each end shaping what it sends):
//! - `delay_ms` -> `delay <µs>us` (one way; a ping's round trip over the link is twice it);
//! - `bandwidth_mbps` -> `rate <bits>bit` (0, unlimited: no rate);
//! - `loss` -> `loss random <percent>%`;
//! - `queue_bytes` -> `limit <packets>`: netem counts packets, not bytes, and holds the
//!   packets in its delay line too, so the limit is `queue_bytes` in full-size packets
//!   (`mtu` + 28 bytes of IPv4 and UDP headers) plus the smallest packets (64 bytes) that fit
//!   in flight during the delay at the link rate: the queue overflows about where the
//!   emulator's does and the delay line never drops. Unlimited bandwidth has no queue in the
//!   emulator: limit 100000.
//!
//! With `--impair node` the node's UDP driver does the same from its config's
//! `impair = { delay_ms, loss, rate_mbps, queue_bytes }` — the values as the topology gives
//! them, as `anode emulate --realtime` applies them.

use anode_emu::LinkSpec;
use serde::{Deserialize, Serialize};

/// IPv4 and UDP headers around an ANEP packet.
pub const IP_UDP: usize = 28;
/// Packets netem may hold on an unlimited link.
pub const UNLIMITED_LIMIT: u64 = 100_000;
/// The smallest packet counted in flight.
const SMALL_PACKET: u64 = 64;

/// The emulated properties of one link direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Netem {
    /// One-way delay in microseconds.
    pub delay_us: u64,
    /// Rate in bits per second; `None`: unlimited.
    pub rate_bps: Option<u64>,
    /// Loss probability 0..=1.
    pub loss: f64,
    /// The topology's queue in bytes.
    pub queue_bytes: u64,
    /// netem's `limit` in packets.
    pub limit: u64,
}

/// Ceiling of `a / b` (`b` > 0).
fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

/// `v` with at most 6 decimals and no trailing zeros (`5`, `0.5`, `0.000001`).
pub fn decimal(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.to_string()
    }
}

impl Netem {
    /// The properties of `link`.
    pub fn from_link(link: &LinkSpec) -> Netem {
        let delay_us = u64::try_from(link.delay.as_micros()).unwrap_or(u64::MAX);
        let packet = (link.mtu + IP_UDP) as u64;
        let limit = match link.bandwidth_bps {
            Some(rate) => {
                let queued = div_ceil(link.queue_bytes, packet);
                let flight_bytes = u128::from(rate) * u128::from(delay_us) / 8_000_000;
                let flight = u64::try_from(flight_bytes)
                    .unwrap_or(u64::MAX)
                    .div_ceil(SMALL_PACKET);
                queued.saturating_add(flight).clamp(1, UNLIMITED_LIMIT)
            }
            None => UNLIMITED_LIMIT,
        };
        Netem {
            delay_us,
            rate_bps: link.bandwidth_bps,
            loss: link.loss,
            queue_bytes: link.queue_bytes,
            limit,
        }
    }

    /// True if the link is not impaired at all (no delay, loss or rate): no qdisc is added.
    pub fn is_noop(&self) -> bool {
        self.delay_us == 0 && self.loss == 0.0 && self.rate_bps.is_none()
    }

    /// The netem options: `delay 5000us rate 100000000bit loss random 1% limit 86`.
    pub fn tc_options(&self) -> String {
        let mut s = format!("delay {}us", self.delay_us);
        if let Some(r) = self.rate_bps {
            s.push_str(&format!(" rate {r}bit"));
        }
        if self.loss > 0.0 {
            s.push_str(&format!(" loss random {}%", decimal(self.loss * 100.0)));
        }
        s.push_str(&format!(" limit {}", self.limit));
        s
    }

    /// The node config's inline table: `{ delay_ms = 5, loss = 0.01, rate_mbps = 100,
    /// queue_bytes = 65536 }` (no `rate_mbps` when unlimited).
    pub fn impair_toml(&self) -> String {
        let mut parts = vec![
            format!("delay_ms = {}", decimal(self.delay_us as f64 / 1000.0)),
            format!("loss = {}", decimal(self.loss)),
        ];
        if let Some(r) = self.rate_bps {
            parts.push(format!("rate_mbps = {}", decimal(r as f64 / 1e6)));
        }
        parts.push(format!("queue_bytes = {}", self.queue_bytes.max(1)));
        format!("{{ {} }}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn link(delay_ms: u64, mbps: Option<u64>, loss: f64) -> LinkSpec {
        LinkSpec {
            a: 0,
            b: 1,
            delay: Duration::from_millis(delay_ms),
            bandwidth_bps: mbps.map(|m| m * 1_000_000),
            loss,
            mtu: 1472,
            queue_bytes: 65536,
            cost: 1,
        }
    }

    #[test]
    fn decimals() {
        assert_eq!(decimal(5.0), "5");
        assert_eq!(decimal(0.5), "0.5");
        assert_eq!(decimal(0.05 * 100.0), "5");
        assert_eq!(decimal(0.0), "0");
        assert_eq!(decimal(1e-6), "0.000001");
    }

    #[test]
    fn tc_and_impair_text() {
        let n = Netem::from_link(&link(5, Some(100), 0.01));
        // 65536 B / 1500 B = 44 packets queued; 5 ms at 100 Mbit/s = 62500 B = 977 small ones.
        assert_eq!(n.limit, 44 + 977);
        assert_eq!(
            n.tc_options(),
            "delay 5000us rate 100000000bit loss random 1% limit 1021"
        );
        assert_eq!(
            n.impair_toml(),
            "{ delay_ms = 5, loss = 0.01, rate_mbps = 100, queue_bytes = 65536 }"
        );
        let u = Netem::from_link(&link(0, None, 0.0));
        assert!(u.is_noop());
        assert_eq!(u.tc_options(), "delay 0us limit 100000");
        assert_eq!(
            u.impair_toml(),
            "{ delay_ms = 0, loss = 0, queue_bytes = 65536 }"
        );
        let slow = Netem::from_link(&link(10, Some(1), 0.05));
        assert_eq!(slow.limit, 44 + 20);
        assert!(slow.tc_options().contains("loss random 5% "));
        assert!(!slow.is_noop());
    }
}
