//! A token bucket for ICMP error messages (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)).
//!
//! Invariant: tokens never exceed the burst; `rate` tokens are added per second of `now`
//! passed in (fractions kept in nanoseconds so slow rates still refill).

use std::time::Instant;

/// A token bucket.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: u32,
    burst: u32,
    tokens: u32,
    last: Option<Instant>,
    carry_ns: u128,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens refilled at `rate` per second.
    pub fn new(rate: u32, burst: u32) -> Self {
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            last: None,
            carry_ns: 0,
        }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last
            && now > last
        {
            let ns = now.duration_since(last).as_nanos() + self.carry_ns;
            let add = ns * u128::from(self.rate) / 1_000_000_000;
            self.carry_ns = if self.rate == 0 {
                0
            } else {
                ns - add * 1_000_000_000 / u128::from(self.rate)
            };
            self.tokens = (u128::from(self.tokens) + add).min(u128::from(self.burst)) as u32;
        }
        if self.last.is_none_or(|l| now > l) {
            self.last = Some(now);
        }
        if self.tokens > 0 {
            self.tokens -= 1;
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
    fn burst_then_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10, 5);
        assert_eq!((0..20).filter(|_| b.take(t0)).count(), 5);
        // 1 s later: 10 tokens, capped at the burst of 5.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!((0..20).filter(|_| b.take(t1)).count(), 5);
        // 10 steps of 50 ms: 5 tokens in total.
        let mut n = 0;
        for i in 1..=10 {
            if b.take(t1 + Duration::from_millis(50 * i)) {
                n += 1;
            }
        }
        assert_eq!(n, 5);
    }
}
