//! A token bucket in exact integer arithmetic, driven by the caller's `now`: the NodeOS's
//! channel bandwidth, the capsule EE's code-serving rate and guest log-line rate.
//!
//! Invariant: over any interval of length `t` the bucket passes at most
//! `burst + rate * t` bytes (tested below). Time going backwards adds nothing.
//! [`TokenBucket::charge`] is the after-the-fact form (for sends an EE already made): it
//! always takes the bytes, running into a debt (at most one second of rate) that refills pay
//! off before any new tokens; [`TokenBucket::in_debt`] tells the caller to hold back.

use std::time::Instant;

const NS: u128 = 1_000_000_000;

/// Bytes-per-second limiter.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: u64,
    burst: u64,
    /// Tokens in byte-nanoseconds (bytes * 1e9), so refills are exact.
    tokens: u128,
    /// Owed byte-nanoseconds (after-the-fact charges beyond the tokens).
    debt: u128,
    last: Option<Instant>,
}

impl TokenBucket {
    /// `rate` bytes per second, at most `burst` bytes at once; starts full.
    pub fn new(rate: u64, burst: u64) -> Self {
        TokenBucket {
            rate,
            burst,
            tokens: u128::from(burst) * NS,
            debt: 0,
            last: None,
        }
    }

    /// The configured rate.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    fn refill(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let mut add = now
                .saturating_duration_since(last)
                .as_nanos()
                .saturating_mul(u128::from(self.rate));
            let pay = add.min(self.debt);
            self.debt -= pay;
            add -= pay;
            self.tokens = self
                .tokens
                .saturating_add(add)
                .min(u128::from(self.burst) * NS);
        }
        if self.last.is_none_or(|l| now > l) {
            self.last = Some(now);
        }
    }

    /// Whole bytes available at `now` (0 while anything is owed), taking nothing: for a
    /// caller that decides by the budget first and charges only some outcomes.
    pub fn available(&mut self, now: Instant) -> u64 {
        self.refill(now);
        if self.debt > 0 {
            return 0;
        }
        u64::try_from(self.tokens / NS).unwrap_or(u64::MAX)
    }

    /// Takes `bytes` if available at `now` (and nothing is owed).
    pub fn take(&mut self, now: Instant, bytes: u64) -> bool {
        self.refill(now);
        let need = u128::from(bytes) * NS;
        if self.debt == 0 && need <= self.tokens {
            self.tokens -= need;
            true
        } else {
            false
        }
    }

    /// Takes as many of `want` as are available at `now` (none while something is owed);
    /// returns how many.
    pub fn take_upto(&mut self, now: Instant, want: u64) -> u64 {
        self.refill(now);
        if self.debt > 0 {
            return 0;
        }
        let got = u64::try_from(self.tokens / NS)
            .unwrap_or(u64::MAX)
            .min(want);
        self.tokens -= u128::from(got) * NS;
        got
    }

    /// Takes `bytes` already sent at `now`, owing what the tokens do not cover.
    pub fn charge(&mut self, now: Instant, bytes: u64) {
        self.refill(now);
        let need = u128::from(bytes) * NS;
        let paid = need.min(self.tokens);
        self.tokens -= paid;
        self.debt = self
            .debt
            .saturating_add(need - paid)
            .min(u128::from(self.rate) * NS);
    }

    /// Whether something is still owed at `now`.
    pub fn in_debt(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.debt > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn passes_burst_then_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, 500);
        let mut passed = 0u64;
        for ms in 0..2000u64 {
            let now = t0 + Duration::from_millis(ms);
            if b.take(now, 100) {
                passed += 100;
            }
        }
        // 2 s at 1000 B/s plus the burst.
        assert!(passed <= 500 + 2000, "{passed}");
        assert!(passed >= 2000, "{passed}");
        // Time going backwards adds nothing.
        let mut c = TokenBucket::new(1000, 100);
        assert!(c.take(t0 + Duration::from_secs(5), 100));
        assert!(!c.take(t0, 1));
    }

    #[test]
    fn take_upto_takes_what_there_is() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, 500);
        assert_eq!(b.take_upto(t0, 300), 300);
        assert_eq!(b.take_upto(t0, 300), 200);
        assert_eq!(b.take_upto(t0, 300), 0);
        // 100 ms later: 100 bytes.
        assert_eq!(b.take_upto(t0 + Duration::from_millis(100), 300), 100);
        // Nothing while a charge is owed.
        b.charge(t0 + Duration::from_millis(100), 50);
        assert_eq!(b.take_upto(t0 + Duration::from_millis(110), 300), 0);
    }

    #[test]
    fn after_the_fact_charges_are_paid_off_first() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, 100);
        // 100 B of tokens, 600 B sent: 500 B owed, half a second at 1000 B/s.
        b.charge(t0, 600);
        assert!(b.in_debt(t0));
        assert!(!b.take(t0, 1));
        assert!(b.in_debt(t0 + Duration::from_millis(499)));
        assert!(!b.in_debt(t0 + Duration::from_millis(500)));
        assert!(b.take(t0 + Duration::from_millis(600), 100));
        // The debt is capped at one second of rate.
        let mut c = TokenBucket::new(1000, 0);
        c.charge(t0, 1_000_000);
        assert!(!c.in_debt(t0 + Duration::from_secs(1)));
    }
}
