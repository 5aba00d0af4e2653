//! Pacing: how many packets may go now to hold an average rate (like the C `blast`).
//!
//! Contract: after `t` seconds at rate `r`, at most `floor(t * r)` packets have been allowed
//! (never a burst above one batch), and a sender that keeps up is allowed exactly that.

use std::time::Duration;

/// Paces a sender at `rate` packets per second (0 = unlimited).
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    rate: f64,
    batch: usize,
}

/// What the sender should do now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Send this many packets now.
    Send(usize),
    /// Wait this long first.
    Wait(Duration),
}

impl Pacer {
    /// A pacer at `rate` pps handing out at most `batch` packets at once.
    pub fn new(rate: f64, batch: usize) -> Self {
        Pacer {
            rate,
            batch: batch.max(1),
        }
    }

    /// The step after `elapsed` seconds with `sent` packets sent so far.
    pub fn step(&self, elapsed: f64, sent: u64) -> Step {
        if self.rate <= 0.0 {
            return Step::Send(self.batch);
        }
        let due = elapsed * self.rate - sent as f64;
        // The epsilon keeps a rounding error from asking for a wait of zero nanoseconds.
        if due < 1.0 - 1e-9 {
            Step::Wait(
                Duration::from_secs_f64((1.0 - due) / self.rate).max(Duration::from_nanos(1)),
            )
        } else {
            Step::Send((due.max(1.0) as usize).min(self.batch))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_speed_is_one_batch() {
        assert_eq!(Pacer::new(0.0, 32).step(1.0, 1_000_000), Step::Send(32));
    }

    #[test]
    fn holds_the_rate() {
        let p = Pacer::new(1000.0, 32);
        assert_eq!(p.step(0.0, 0), Step::Wait(Duration::from_millis(1)));
        assert_eq!(p.step(0.0105, 0), Step::Send(10));
        assert_eq!(
            p.step(0.0105, 10),
            Step::Wait(Duration::from_secs_f64(0.0005))
        );
        assert_eq!(p.step(1.0, 0), Step::Send(32));
        // A simulated sender never gets ahead of the schedule.
        let (mut t, mut sent) = (0.0f64, 0u64);
        while t < 2.0 {
            match p.step(t, sent) {
                Step::Send(n) => sent += n as u64,
                Step::Wait(d) => t += d.as_secs_f64(),
            }
            assert!(sent as f64 <= t * 1000.0 + 1e-6);
        }
        assert!((1990..=2000).contains(&sent), "sent {sent}");
    }
}
