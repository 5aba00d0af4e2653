//! A token bucket in exact integer arithmetic, driven by the caller's `now`.
//!
//! Invariant: over any interval of length `t` the bucket passes at most
//! `burst + rate * t` bytes (tested below). Time going backwards adds nothing.

use std::time::Instant;

const NS: u128 = 1_000_000_000;

/// Bytes-per-second limiter.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: u64,
    burst: u64,
    /// Tokens in byte-nanoseconds (bytes * 1e9), so refills are exact.
    tokens: u128,
    last: Option<Instant>,
}

impl TokenBucket {
    /// `rate` bytes per second, at most `burst` bytes at once; starts full.
    pub fn new(rate: u64, burst: u64) -> Self {
        TokenBucket {
            rate,
            burst,
            tokens: u128::from(burst) * NS,
            last: None,
        }
    }

    /// The configured rate.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Takes `bytes` if available at `now`.
    pub fn take(&mut self, now: Instant, bytes: u64) -> bool {
        if let Some(last) = self.last {
            let dt = now.saturating_duration_since(last).as_nanos();
            self.tokens = self
                .tokens
                .saturating_add(dt.saturating_mul(u128::from(self.rate)))
                .min(u128::from(self.burst) * NS);
        }
        if self.last.is_none_or(|l| now > l) {
            self.last = Some(now);
        }
        let need = u128::from(bytes) * NS;
        if need <= self.tokens {
            self.tokens -= need;
            true
        } else {
            false
        }
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
}
