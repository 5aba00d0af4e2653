//! [`EmuView`]: the emulator tap behind `anode emulate --view`: a snapshot a few times per
//! wall-clock second, and optional pacing of virtual time against the wall clock (`--speed`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anode_emu::{NetSnapshot, Tap};

use crate::model::RateTracker;
use crate::server::Hub;

/// Wall time between two updates of the page.
pub const UPDATE_EVERY: Duration = Duration::from_millis(250);
/// Events between two looks at the wall clock when not pacing.
const CHECK_EVERY: u64 = 64;

/// Publishes snapshots of an emulation to a [`Hub`].
#[derive(Debug)]
pub struct EmuView {
    hub: Arc<Hub>,
    title: String,
    rates: RateTracker,
    speed: Option<f64>,
    started: Instant,
    next: Instant,
    /// When true, pacing stops (the run finishes at full speed: Ctrl-C).
    hurry: fn() -> bool,
}

impl EmuView {
    /// A view of the emulation named `title`; with `speed`, virtual time runs at most that
    /// many times as fast as the wall clock (1.0: real time).
    pub fn new(hub: Arc<Hub>, title: &str, speed: Option<f64>) -> EmuView {
        let now = Instant::now();
        EmuView {
            hub,
            title: title.to_string(),
            rates: RateTracker::new(),
            speed: speed.filter(|s| s.is_finite() && *s > 0.0),
            started: now,
            next: now,
            hurry: || false,
        }
    }

    /// Stops pacing once `hurry` returns true (e.g. after Ctrl-C: the run then finishes at
    /// full speed and its report is printed).
    pub fn hurry_when(mut self, hurry: fn() -> bool) -> EmuView {
        self.hurry = hurry;
        self
    }
}

impl Tap for EmuView {
    fn step(&mut self, now: Duration, events: u64) -> bool {
        if let Some(speed) = self.speed.filter(|_| !(self.hurry)()) {
            let due = self.started + now.div_f64(speed);
            let wall = Instant::now();
            if due > wall {
                std::thread::sleep(due - wall);
            }
        } else if !events.is_multiple_of(CHECK_EVERY) {
            return false;
        }
        let wall = Instant::now();
        if wall >= self.next {
            self.next = wall + UPDATE_EVERY;
            return true;
        }
        false
    }

    fn snapshot(&mut self, snap: &NetSnapshot) {
        let s = self.rates.from_emulation(&self.title, snap);
        self.hub.publish(&s);
    }
}
