//! The capsule EE's helper threads: they take groups of a batch (`batch.rs`) beside the node
//! thread.
//!
//! A batch is published as a [`BatchWork`]: its groups in slots, claimed one at a time by
//! whichever thread comes first (the node thread too), so no group waits for a thread that
//! is late. The node thread waits only for groups a helper has claimed and is running, never
//! for a helper to wake up.
//!
//! Between batches a helper spins for [`SPIN`] before it sleeps on a condition variable:
//! under load the next batch comes within microseconds, and waking a sleeping thread costs
//! tens of microseconds, more than a batch of light capsules takes. An idle node's helpers
//! sleep.
//!
//! Invariants: a group is run by exactly one thread; [`Helpers::run`] returns every group
//! it was given, in the order given; dropping [`Helpers`] stops and joins its threads.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::batch::Group;

/// How long a helper spins for the next batch before it sleeps.
pub const SPIN: Duration = Duration::from_micros(200);

/// One batch's groups, claimed one at a time.
pub(super) struct BatchWork {
    slots: Vec<Mutex<Option<Group>>>,
    next: AtomicUsize,
    done: AtomicUsize,
    fuel: u64,
}

impl BatchWork {
    pub fn new(groups: Vec<Group>, fuel: u64) -> BatchWork {
        BatchWork {
            slots: groups.into_iter().map(|g| Mutex::new(Some(g))).collect(),
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            fuel,
        }
    }

    /// Runs groups until none is left to claim.
    fn work(&self) {
        while let Some(slot) = self.slots.get(self.next.fetch_add(1, Ordering::AcqRel)) {
            if let Some(g) = slot.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
                g.run(self.fuel);
            }
            self.done.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn finished(&self) -> bool {
        self.done.load(Ordering::Acquire) >= self.slots.len()
    }
}

/// What the node thread and the helpers share.
struct Shared {
    /// The batch being run.
    work: Mutex<Option<Arc<BatchWork>>>,
    wake: Condvar,
    /// Bumped for every batch published, under the `work` lock (so a helper going to sleep
    /// cannot miss it).
    generation: AtomicU64,
    /// Helpers asleep on `wake` (changed under the `work` lock).
    sleeping: AtomicUsize,
    stop: AtomicBool,
}

/// The helper threads.
pub(super) struct Helpers {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Helpers {
    /// Starts `n` helper threads.
    pub fn start(n: usize) -> std::io::Result<Helpers> {
        let shared = Arc::new(Shared {
            work: Mutex::new(None),
            wake: Condvar::new(),
            generation: AtomicU64::new(0),
            sleeping: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let mut h = Helpers {
            shared,
            threads: Vec::with_capacity(n),
        };
        for i in 0..n {
            let shared = h.shared.clone();
            // On failure `h` drops here, stopping the threads already started.
            let t = std::thread::Builder::new()
                .name(format!("anode-capsule-{i}"))
                .spawn(move || helper(&shared))?;
            h.threads.push(t);
        }
        Ok(h)
    }

    /// Runs `work`'s groups on the node thread and the helpers; returns them, in order.
    pub fn run(&self, work: BatchWork) -> Vec<Group> {
        let work = Arc::new(work);
        let asleep = {
            let mut w = self
                .shared
                .work
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *w = Some(work.clone());
            self.shared.generation.fetch_add(1, Ordering::AcqRel);
            self.shared.sleeping.load(Ordering::Acquire)
        };
        if asleep > 0 {
            self.shared.wake.notify_all();
        }
        work.work();
        // Only groups a helper is running are left: they end within one group's run time.
        while !work.finished() {
            std::hint::spin_loop();
        }
        *self
            .shared
            .work
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        work.slots
            .iter()
            .filter_map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).take())
            .collect()
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        {
            let _g = self
                .shared
                .work
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.shared.wake.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A helper thread: waits for a batch (spinning, then sleeping), takes groups, again.
fn helper(shared: &Shared) {
    let mut seen = shared.generation.load(Ordering::Acquire);
    loop {
        let since = Instant::now();
        loop {
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
            if shared.generation.load(Ordering::Acquire) != seen {
                break;
            }
            if since.elapsed() < SPIN {
                std::hint::spin_loop();
                continue;
            }
            let mut g = shared.work.lock().unwrap_or_else(PoisonError::into_inner);
            shared.sleeping.fetch_add(1, Ordering::AcqRel);
            while shared.generation.load(Ordering::Acquire) == seen
                && !shared.stop.load(Ordering::Acquire)
            {
                g = shared.wake.wait(g).unwrap_or_else(PoisonError::into_inner);
            }
            shared.sleeping.fetch_sub(1, Ordering::AcqRel);
        }
        seen = shared.generation.load(Ordering::Acquire);
        let work = shared
            .work
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(w) = work {
            w.work();
        }
    }
}
