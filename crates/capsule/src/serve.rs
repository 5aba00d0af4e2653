//! How much code a node serves to a neighbor's `CodeRequest`s, so a node cannot be used to
//! amplify traffic.
//!
//! A neighbor is *owed* a code object when this node sent it a capsule of that code within
//! [`ServeConfig::owed_for`] (the neighbor will demand-load it from us: PAN's previous hop).
//! Owed code is served as asked, within a per-neighbor byte rate ([`ServeConfig::rate`],
//! [`ServeConfig::burst`]) so that repeated requests for it cannot flood a link. Code not owed
//! (the neighbor saw no capsule of it from us, e.g. it names us as a far code source, or it
//! asks on its own) earns [`ServeConfig::amplification`] bytes of answer per byte of request,
//! so a neighbor gets back at most that multiple of what it sends. What is not served is
//! counted; the requester's loader retries or asks another neighbor.
//!
//! Sans-IO: times are the node's; nothing here sends anything.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::time::{Duration, Instant};

use anode_core::LinkId;
use anode_core::bucket::TokenBucket;

use crate::CodeHash;
use crate::cache::{CodeMap, PrefixHasher};

/// Bounds on serving code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeConfig {
    /// How long after a capsule of a code object went to a neighbor that neighbor is owed
    /// the code.
    pub owed_for: Duration,
    /// Bytes per second of owed code one neighbor may take.
    pub rate: u64,
    /// Bytes of owed code one neighbor may take at once.
    pub burst: u64,
    /// Answer bytes per request byte for code not owed.
    pub amplification: u64,
    /// The most answer credit a neighbor can save up for code not owed.
    pub credit_max: u64,
}

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig {
            owed_for: Duration::from_secs(30),
            rate: 4 << 20,
            burst: 4 << 20,
            amplification: 10,
            credit_max: 64 << 10,
        }
    }
}

/// One neighbor's budgets.
#[derive(Debug, Clone)]
struct Budget {
    /// Owed code (bytes at [`ServeConfig::rate`] up to [`ServeConfig::burst`]).
    owed: TokenBucket,
    /// Answer credit for code not owed (bytes).
    credit: u64,
}

/// Serving state of one node; see the module docs.
#[derive(Debug)]
pub(crate) struct ServeBudget {
    cfg: ServeConfig,
    /// Keyed by the code hash's prefix (`PrefixHasher`): this is written per forwarded
    /// capsule.
    owed: HashMap<(LinkId, CodeHash), Instant, BuildHasherDefault<PrefixHasher>>,
    links: HashMap<LinkId, Budget>,
}

/// The wire size of a `CodeRequest` (control header, hash, offset, max), for the credit.
pub(crate) const REQUEST_BYTES: u64 = 4 + 32 + 4 + 4;

impl ServeBudget {
    pub fn new(cfg: ServeConfig) -> ServeBudget {
        ServeBudget {
            cfg,
            owed: HashMap::default(),
            links: HashMap::new(),
        }
    }

    /// A capsule of `code` went toward the neighbor on `link` at `now`.
    pub fn sent(&mut self, now: Instant, link: LinkId, code: CodeHash) {
        if self.owed.len() >= 65_536 {
            self.owed.retain(|_, t| *t > now);
            if self.owed.len() >= 65_536 {
                // Still full of live entries: forget them all (a neighbor then earns code by
                // the request credit) rather than grow without bound.
                self.owed.clear();
            }
        }
        self.owed.insert((link, code), now + self.cfg.owed_for);
    }

    /// How many of the `want` bytes of `code` asked for on `link` at `now` may be served.
    pub fn allow(&mut self, now: Instant, link: LinkId, code: &CodeHash, want: u64) -> u64 {
        let owed = self.owed.get(&(link, *code)).is_some_and(|t| *t > now);
        let cfg = self.cfg;
        if self.links.len() >= 4096 && !self.links.contains_key(&link) {
            self.links.clear();
        }
        let b = self.links.entry(link).or_insert_with(|| Budget {
            owed: TokenBucket::new(cfg.rate, cfg.burst),
            credit: 0,
        });
        if owed {
            b.owed.take_upto(now, want)
        } else {
            b.credit = (b.credit + REQUEST_BYTES * cfg.amplification).min(cfg.credit_max);
            let g = want.min(b.credit);
            b.credit -= g;
            g
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_not_owed_is_served_at_most_ten_times_the_requests() {
        let t0 = Instant::now();
        let mut s = ServeBudget::new(ServeConfig::default());
        let code = [7; 32];
        let mut served = 0;
        for i in 0..5000u32 {
            served += s.allow(
                t0 + Duration::from_millis(u64::from(i)),
                LinkId(0),
                &code,
                65_536,
            );
        }
        assert!(served <= 10 * 5000 * REQUEST_BYTES, "{served}");
    }

    #[test]
    fn log_lines_pass_a_burst_then_the_rate_with_one_notice_a_second() {
        let t0 = Instant::now();
        let mut l = LogLimit::default();
        let code = [1; 32];
        let passed = (0..100).filter(|_| l.allow(t0, &code).is_ok()).count();
        assert_eq!(passed as u64, LogLimit::BURST);
        // The first refusal carries a notice of one line dropped; the rest wait a second.
        let mut l2 = LogLimit::default();
        for _ in 0..LogLimit::BURST {
            assert!(l2.allow(t0, &code).is_ok());
        }
        assert_eq!(l2.allow(t0, &code), Err(Some(1)));
        assert_eq!(l2.allow(t0, &code), Err(None));
        // A second later: RATE more lines, then a notice of what was dropped meanwhile.
        let t1 = t0 + Duration::from_secs(1);
        let passed = (0..100).filter(|_| l2.allow(t1, &code).is_ok()).count();
        assert_eq!(passed as u64, LogLimit::RATE);
        // Another code object has its own bucket.
        assert!(l2.allow(t1, &[2; 32]).is_ok());
    }

    #[test]
    fn owed_code_is_served_within_the_rate() {
        let t0 = Instant::now();
        let cfg = ServeConfig::default();
        let mut s = ServeBudget::new(cfg);
        let code = [7; 32];
        s.sent(t0, LinkId(1), code);
        // A demand load of 48 KB is served whole.
        assert_eq!(s.allow(t0, LinkId(1), &code, 48_000), 48_000);
        // Asked again and again in 5 s, it gets at most burst + 5 s of rate.
        let mut served = 0;
        for i in 0..5000u64 {
            served += s.allow(t0 + Duration::from_millis(i), LinkId(1), &code, 48_000);
        }
        assert!(served <= cfg.burst + 5 * cfg.rate, "{served}");
        // Another neighbor is not owed it.
        assert!(s.allow(t0, LinkId(2), &code, 48_000) <= REQUEST_BYTES * 10);
        // And the debt expires.
        let later = t0 + cfg.owed_for + Duration::from_secs(1);
        assert!(s.allow(later, LinkId(1), &code, 48_000) < 48_000);
    }
}

/// Guest log lines per code object: a token bucket of [`LogLimit::RATE`] lines per second
/// up to [`LogLimit::BURST`]; what is over is dropped and counted, with one line a second
/// saying how many.
#[derive(Debug, Default)]
pub(crate) struct LogLimit {
    /// Per code object: its line bucket, lines dropped since the last notice, the notice.
    codes: CodeMap<(TokenBucket, u64, Option<Instant>)>,
}

impl LogLimit {
    /// Lines per second one code object may log.
    pub const RATE: u64 = 20;
    /// Lines one code object may log at once.
    pub const BURST: u64 = 50;

    /// Whether `code` may log a line at `now`; `Err(Some(n))` when not, with `n` lines
    /// dropped since the last notice if a notice is due now, `Err(None)` otherwise.
    pub fn allow(&mut self, now: Instant, code: &CodeHash) -> Result<(), Option<u64>> {
        if self.codes.len() >= 4096 && !self.codes.contains_key(code) {
            self.codes.clear();
        }
        let (bucket, dropped, notice) = self
            .codes
            .entry(*code)
            .or_insert_with(|| (TokenBucket::new(Self::RATE, Self::BURST), 0, None));
        if bucket.take(now, 1) {
            return Ok(());
        }
        *dropped += 1;
        let due = notice.is_none_or(|t| now.saturating_duration_since(t) >= Duration::from_secs(1));
        if due {
            *notice = Some(now);
            Err(Some(std::mem::take(dropped)))
        } else {
            Err(None)
        }
    }
}
