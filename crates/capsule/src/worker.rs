//! The code worker: one thread per [`Runtime`](crate::Runtime) that builds code away from the
//! node thread: Cranelift recompiles of code already running on Winch (tier-up, with
//! [`Tiering::Tiered`](crate::Tiering::Tiered)), and, with
//! [`RuntimeConfig::build_off_thread`](crate::RuntimeConfig::build_off_thread), the first build
//! of code fetched from a neighbor or read from the disk cache: hash check, compile, ABI check
//! and the disk cache's writes and reads. The node thread only wraps the finished module.
//!
//! Contract: a task never touches an EE. Each task carries the asking EE's reply channel and
//! sends exactly one reply, also when the build panics; the EE takes replies when it is next
//! called (`handle_packet`, `handle_timeout`), so the EE stays sans-IO and single-threaded, and
//! only the time at which a result arrives depends on the worker. Urgent tasks (capsules wait
//! for them) run before background ones (tier-ups), each kind oldest first, one at a time. The
//! thread is started at the first task, runs in the `SCHED_IDLE` class (only on CPU time the
//! node's threads leave: forwarding keeps its latency while a large module compiles), and
//! ends when the runtime is dropped (after the task it is on). If it cannot be started, the submit says so.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, Sender};

/// Work for the thread.
pub(crate) type Task = Box<dyn FnOnce() + Send>;

/// Which tasks run first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// Capsules are parked until it is done (new code, code read from disk).
    Urgent,
    /// Nothing waits for it (a tier-up).
    Background,
}

/// The worker thread's handle.
pub(crate) struct Worker {
    tx: Mutex<Option<Sender<(Priority, Task)>>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker; no thread runs until the first task.
    pub fn new() -> Self {
        Worker {
            tx: Mutex::new(None),
        }
    }

    /// Queues `task`; an error says why the worker cannot take it (the task is dropped
    /// unrun).
    pub fn submit(&self, priority: Priority, task: Task) -> Result<(), String> {
        let mut tx = self
            .tx
            .lock()
            .map_err(|_| "code worker lock poisoned".to_string())?;
        if tx.is_none() {
            let (t, r) = mpsc::channel();
            std::thread::Builder::new()
                .name("anode-code".into())
                .spawn(move || run(r))
                .map_err(|e| format!("cannot start the code worker thread: {e}"))?;
            *tx = Some(t);
        }
        match tx.as_ref() {
            Some(t) => t
                .send((priority, task))
                .map_err(|_| "code worker thread has stopped".to_string()),
            None => Err("code worker thread not running".into()),
        }
    }
}

fn run(jobs: Receiver<(Priority, Task)>) {
    lower_priority();
    // [urgent, background], each oldest first.
    let mut queues: [VecDeque<Task>; 2] = [VecDeque::new(), VecDeque::new()];
    let queue = |queues: &mut [VecDeque<Task>; 2], (p, t): (Priority, Task)| {
        let [urgent, background] = queues;
        match p {
            Priority::Urgent => urgent.push_back(t),
            Priority::Background => background.push_back(t),
        }
    };
    loop {
        if queues.iter().all(VecDeque::is_empty) {
            match jobs.recv() {
                Ok(j) => queue(&mut queues, j),
                Err(_) => return,
            }
        }
        // Everything queued meanwhile, so an urgent task overtakes background ones.
        while let Ok(j) = jobs.try_recv() {
            queue(&mut queues, j);
        }
        let [urgent, background] = &mut queues;
        if let Some(t) = urgent.pop_front().or_else(|| background.pop_front()) {
            t();
        }
    }
}

/// Puts the calling thread in Linux's `SCHED_IDLE` class: it runs only on CPU time no
/// normal thread wants, and a node thread that wakes preempts it at once (a nice value alone
/// still let a compile delay forwarding by milliseconds on a busy core). The policy is per
/// thread. Best effort: where it fails the thread runs at the node's priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: `param` is a valid, initialized sched_param that outlives the call; pid 0 is
    // the calling thread; an error is returned, not raised.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        let _ = libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
    }
}
