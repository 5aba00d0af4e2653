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
//! node's threads leave: forwarding keeps its latency while a large module compiles) unless
//! capsules have waited [`BOOST_AFTER`] for a build ([`Worker::boost`]), and
//! ends when the runtime is dropped (after the task it is on). If it cannot be started, the submit says so.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

/// How long capsules wait for a build before the worker is raised out of `SCHED_IDLE`.
pub(crate) const BOOST_AFTER: std::time::Duration = std::time::Duration::from_millis(250);

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
    boost: Arc<Boost>,
}

/// What [`Worker::boost`] needs: the thread's id, and whether it is raised now.
#[derive(Default)]
struct Boost {
    /// The worker thread's kernel id (0: not started yet).
    tid: AtomicI32,
    /// How many boosts its current task has had (0: in `SCHED_IDLE`).
    step: AtomicU8,
    /// The thread's CPU-time clock (`pthread_getcpuclockid`; valid once `tid` is set).
    cpu_clock: AtomicI32,
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
            boost: Arc::default(),
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
            let boost = self.boost.clone();
            std::thread::Builder::new()
                .name("anode-code".into())
                .spawn(move || run(r, &boost))
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

    /// The CPU time the thread has had so far (`None`: not started, or not on Linux). A
    /// clock read, no I/O: the node thread asks it while builds are pending.
    pub fn cpu_time(&self) -> Option<std::time::Duration> {
        if self.boost.tid.load(Ordering::Acquire) == 0 {
            return None;
        }
        #[cfg(target_os = "linux")]
        {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let clock = self.boost.cpu_clock.load(Ordering::Acquire);
            // SAFETY: `ts` is a valid out-pointer; a clock id that is no longer valid (the
            // thread ended) makes the call fail, which is answered with None.
            if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
                return None;
            }
            Some(std::time::Duration::new(
                u64::try_from(ts.tv_sec).unwrap_or(0),
                u32::try_from(ts.tv_nsec).unwrap_or(0),
            ))
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Capsules have waited long for a build while the worker had little CPU: the thread
    /// leaves `SCHED_IDLE` for the normal class until its current task ends, one step further
    /// at each call: nice 19, then 10, then 0 ([`BOOST_NICE`]). A CPU kept busy by other work
    /// (other processes, a flood on every core) then slows the build down instead of starving
    /// it for as long as it lasts; at nice 19 the build gets ~1.5% of a contended core, at 10
    /// ~10%, at 0 an equal share. Raising a thread's priority needs `CAP_SYS_NICE` (a root
    /// node has it); without, this does nothing and the build waits for idle CPU. Returns the
    /// nice value it set, if it set one.
    pub fn boost(&self) -> Option<i32> {
        let tid = self.boost.tid.load(Ordering::Acquire);
        if tid == 0 {
            return None;
        }
        let step = self
            .boost
            .step
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                Some(s.saturating_add(1))
            })
            .unwrap_or(u8::MAX);
        let nice = *BOOST_NICE.get(usize::from(step))?;
        (set_nice(tid, nice) && set_policy(tid, false)).then_some(nice)
    }
}

/// The worker's nice values while boosted, one step per [`Worker::boost`].
pub(crate) const BOOST_NICE: [i32; 3] = [19, 10, 0];

/// Sets thread `tid`'s nice value (it counts in the normal class only).
fn set_nice(tid: i32, nice: i32) -> bool {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the worker's own thread id; an error is returned, not raised.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (tid, nice);
        false
    }
}

fn run(jobs: Receiver<(Priority, Task)>, boost: &Boost) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions and cannot fail.
        let tid = unsafe { libc::gettid() };
        set_nice(tid, BOOST_NICE[0]);
        let mut clock: libc::clockid_t = 0;
        // SAFETY: pthread_self is this thread; `clock` is a valid out-pointer.
        if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0 {
            boost.cpu_clock.store(clock, Ordering::Release);
        }
        boost.tid.store(tid, Ordering::Release);
    }
    set_policy(0, true);
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
            if boost.step.swap(0, Ordering::AcqRel) > 0 {
                set_policy(0, true);
                let tid = boost.tid.load(Ordering::Acquire);
                set_nice(tid, BOOST_NICE[0]);
            }
        }
    }
}

/// Puts thread `tid` (0: the calling thread) in Linux's `SCHED_IDLE` class (`idle`): it runs
/// only on CPU time no normal thread wants, and a node thread that wakes preempts it at once
/// (a nice value alone still let a compile delay forwarding by milliseconds on a busy core);
/// or in the normal class (at the thread's nice value). The policy is per thread.
/// Best effort: where it fails the thread stays as it was. Returns whether it took effect.
fn set_policy(tid: i32, idle: bool) -> bool {
    #[cfg(target_os = "linux")]
    // SAFETY: `param` is a valid, initialized sched_param that outlives the call; `tid` is 0
    // (the calling thread) or the worker's own id; an error is returned, not raised.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        let policy = if idle {
            libc::SCHED_IDLE
        } else {
            libc::SCHED_OTHER
        };
        libc::sched_setscheduler(tid, policy, &param) == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (tid, idle);
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn policy(tid: i32) -> i32 {
        // SAFETY: a query of a thread's policy; an error is returned as -1.
        unsafe { libc::sched_getscheduler(tid) }
    }

    #[test]
    #[ignore = "leaving SCHED_IDLE needs CAP_SYS_NICE (CI runs the tests as root)"]
    fn a_boost_lasts_for_the_task_it_lands_in() {
        let w = Worker::new();
        assert_eq!(w.boost(), None, "no thread yet");
        let (started_tx, started) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let task: Task = Box::new(move || {
            started_tx.send(()).unwrap();
            let _ = release_rx.recv();
        });
        w.submit(Priority::Urgent, task).unwrap();
        started.recv().unwrap();
        let tid = w.boost.tid.load(Ordering::Acquire);
        assert!(w.cpu_time().is_some(), "its CPU clock reads");
        assert_eq!(policy(tid), libc::SCHED_IDLE);
        assert_eq!(w.boost(), Some(19), "raised");
        assert_eq!(policy(tid), libc::SCHED_OTHER);
        assert_eq!(w.boost(), Some(10), "further");
        assert_eq!(w.boost(), Some(0), "to an equal share");
        assert_eq!(w.boost(), None, "and no further");
        release.send(()).unwrap();
        // The next task finds the thread idle-class again.
        let (done_tx, done) = mpsc::channel();
        let task: Task = Box::new(move || done_tx.send(()).unwrap());
        w.submit(Priority::Urgent, task).unwrap();
        done.recv().unwrap();
        let back = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            policy(tid) == libc::SCHED_IDLE
        });
        assert!(back, "back in SCHED_IDLE");
    }
}
