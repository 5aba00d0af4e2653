//! [`spawn`] and the [`NodeHandle`]: how other threads reach a node on its data-path thread.
//!
//! Contracts:
//! - The socket is created and bound by `spawn` on the calling thread (so a caller that entered
//!   a network namespace gets its socket there, and bind errors come back at once).
//! - `call` runs its closure on the data-path thread between batches and waits for it. A panic
//!   in the closure is re-raised in the caller; the data path keeps running. Calling `call`
//!   from inside a `call` closure would deadlock and must not be done.
//! - Dropping the handle stops the thread too (the node is then dropped).

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;
use std::{io, thread};

use anode_core::{Event, Node};
use anode_wire::NodeAddr;

use crate::DriverConfig;
use crate::driver::{DataPath, Job, Shared};
use crate::stats::{DriverStats, SharedStats};
use crate::sys::{EventFd, UdpSocket};
use crate::tap::{Capture, CaptureSpec};

/// The data-path thread is gone (shut down, or it panicked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the anode-io driver thread is gone (it was shut down or it panicked)")]
pub struct DriverGone;

/// A running driver: one node on one UDP socket, on its own thread.
#[derive(Debug)]
pub struct NodeHandle {
    shared: Arc<Shared>,
    calls: Sender<Job>,
    events: Mutex<Option<Receiver<Event>>>,
    local: SocketAddr,
    /// A second descriptor of the socket, for [`NodeHandle::socket_fd`].
    handoff: OwnedFd,
    thread: Option<JoinHandle<Node>>,
}

/// Binds the socket and starts the data-path thread for `node`. In UDP mode the node's address
/// should be the bound address (peers send to it and know it by it).
pub fn spawn(node: Node, cfg: DriverConfig) -> io::Result<NodeHandle> {
    spawn_on(node, cfg, None)
}

/// [`spawn`] on a socket another process bound and handed over (`anode upgrade`), bound to
/// `cfg.bind`'s port, instead of binding one; `None` binds as [`spawn`] does.
pub fn spawn_on(node: Node, cfg: DriverConfig, sock: Option<OwnedFd>) -> io::Result<NodeHandle> {
    cfg.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let sock = match sock {
        Some(fd) => UdpSocket::adopt(fd, cfg.bind)?,
        None => UdpSocket::bind(cfg.bind, cfg.socket_buffer)?,
    };
    let handoff = sock.try_clone_fd()?;
    if cfg.udp_offload
        && let Err(e) = sock.enable_gro()
    {
        tracing::debug!(error = %e, "anode-io: no UDP GRO on this socket; datagrams arrive one by one");
    }
    let local = sock.local_addr()?;
    let impaired = cfg
        .impairments
        .iter()
        .map(|i| NodeAddr::from(i.peer))
        .collect();
    let kernel = crate::kernel::start(cfg.kernel_transit, cfg.bind, node.address(), impaired)?;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        paused: AtomicBool::new(false),
        wake_flag: AtomicBool::new(false),
        wake: EventFd::new()?,
        stats: SharedStats::default(),
        new_taps: Mutex::new(Vec::new()),
    });
    let (call_tx, call_rx) = mpsc::channel::<Job>();
    let (ev_tx, ev_rx) = mpsc::sync_channel(cfg.event_capacity);
    let sh = Arc::clone(&shared);
    let thread = thread::Builder::new()
        .name(format!("anode-io {local}"))
        .spawn(move || DataPath::new(node, sock, sh, call_rx, ev_tx, &cfg, kernel).run())?;
    Ok(NodeHandle {
        shared,
        calls: call_tx,
        events: Mutex::new(Some(ev_rx)),
        local,
        handoff,
        thread: Some(thread),
    })
}

impl NodeHandle {
    /// The bound socket address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Runs `f` on the data-path thread between batches with the node and the current time;
    /// waits for the result. Error if the driver thread is gone.
    pub fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Node, Instant) -> R + Send + 'static,
    ) -> Result<R, DriverGone> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |n: &mut Node, now: Instant| {
            let r = catch_unwind(AssertUnwindSafe(|| f(n, now)));
            let _ = tx.send(r);
        });
        self.calls.send(job).map_err(|_| DriverGone)?;
        self.shared.wake();
        match rx.recv() {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => Err(DriverGone),
        }
    }

    /// A descriptor of the node's UDP socket, to hand to the process that takes the node's
    /// place (`anode upgrade`); close-on-exec.
    pub fn socket_fd(&self) -> io::Result<OwnedFd> {
        self.handoff.try_clone()
    }

    /// Pauses the data path: once this returns, it has sent what was queued, detached the
    /// kernel fast path and reads no more packets; it runs only [`NodeHandle::call`]s until
    /// [`NodeHandle::resume`] (or a stop). Packets that arrive meanwhile wait in the socket's
    /// buffer.
    pub fn pause(&self) -> Result<(), DriverGone> {
        self.shared.paused.store(true, Ordering::Release);
        // The data path runs no call once it sees the flag until it has paused (flushed what
        // was queued, stopped reading): this call returns from inside the pause, and so do
        // the caller's next ones (`driver.rs`, `run_calls`).
        self.call(|_, _| ())?;
        // A second one, as before: still inside the pause.
        self.call(|_, _| ())
    }

    /// Ends a [`NodeHandle::pause`]: reading, timers and the kernel fast path resume.
    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::Release);
        self.shared.wake();
    }

    /// The node's events (deliveries, neighbor changes, EE logs). Single consumer; may be
    /// taken once. Bounded: when full, events are dropped and counted, the data path never
    /// blocks.
    pub fn take_events(&self) -> Option<Receiver<Event>> {
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Starts capturing the datagrams the socket receives and sends (see [`crate::tap`]);
    /// the capture ends when the returned [`Capture`] is dropped.
    pub fn capture(&self, spec: CaptureSpec) -> Result<Capture, DriverGone> {
        if !self.is_running() {
            return Err(DriverGone);
        }
        let (cap, tap) = crate::tap::open(spec);
        self.shared
            .new_taps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(tap);
        self.shared.wake();
        Ok(cap)
    }

    /// A snapshot of the driver's counters. The data path publishes them once per loop
    /// iteration (after each batch), so they may trail a `call` that just returned by one
    /// iteration.
    pub fn stats(&self) -> DriverStats {
        self.shared.stats.snapshot()
    }

    /// True while the data-path thread runs.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the thread and returns the node for inspection. If the data-path thread panicked
    /// (a bug), its panic is re-raised here.
    pub fn shutdown(self) -> Node {
        self.shutdown_with_stats().0
    }

    /// [`NodeHandle::shutdown`], with the driver's final counters (read after the data path
    /// published its last ones).
    pub fn shutdown_with_stats(mut self) -> (Node, DriverStats) {
        let Some(t) = self.thread.take() else {
            // Unreachable: only `shutdown` (which consumes self) and Drop take the thread.
            resume_unwind(Box::new("anode-io: driver thread already taken"));
        };
        self.stop();
        match t.join() {
            Ok(node) => (node, self.shared.stats.snapshot()),
            Err(panic) => resume_unwind(panic),
        }
    }

    fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify();
    }
}

impl Drop for NodeHandle {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop();
            let _ = t.join();
        }
    }
}
