//! The control server: a running node's Unix-domain socket for tools and applications, speaking
//! the `anode-ctl` protocol.
//!
//! ## Threads
//! - one I/O thread (`conn.rs`): a mio event loop accepting connections, reading request
//!   lines and writing queued lines for all connections;
//! - a small pool of workers ([`Limits::workers`], 2 by default) answering requests, running
//!   node work through [`Driver`];
//! - one event pump (`pump.rs`) that takes the node's events: deliveries go to the connection
//!   that bound their port, neighbor and route changes are logged and go to subscribers.
//!
//! ## Contracts
//! - The socket file is mode 0600 in a 0700 directory; a stale socket is replaced, a live one
//!   (another node answers on it) is refused (`socket.rs`).
//! - Nothing a client sends can crash the node: bad lines get an `error` reply.
//! - A slow client never blocks the node or other clients: its stream messages are dropped and
//!   counted once its queue is full; replies are never dropped.
//! - A port belongs to at most one connection and is freed when that connection closes;
//!   deliveries to unbound ports are dropped and counted (`unbound_port_drops`).
//! - Connections are bounded ([`Limits`]: 256 by default, more are refused with a message)
//!   and an idle one that waits for nothing is closed; no thread is made per connection.
//! - [`ControlServer::stop`] wakes the I/O thread (it does not need the socket file, which a
//!   tmp cleaner may have deleted), closes every connection and removes the socket file.

mod app;
mod capture;
mod conn;
pub(crate) mod convert;
mod deploy;
mod ees;
mod handlers;
mod modules;
mod pump;
mod remote;
mod socket;
mod state;
mod upgrade;

use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::Instant;

use anode_core::{Event, Node};

pub use conn::Limits;
pub use remote::{
    DEFAULT_MAX_CONNECTIONS as REMOTE_MAX_CONNECTIONS, DEFAULT_MAX_NONCES as REMOTE_MAX_NONCES,
    DEFAULT_MAX_TTL_S as REMOTE_MAX_TTL_S, RemoteConfig, RemoteKey,
};
pub use socket::{SocketError, bind as bind_socket, remove as remove_socket};
use state::Shared;
pub use upgrade::PendingUpgrade;

/// The node's data path is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the node's data path has stopped")]
pub struct NodeGone;

/// A job for the node's thread.
pub type Job = Box<dyn FnOnce(&mut Node, Instant) + Send>;

/// What the control server needs from whatever runs the node (the UDP driver, or a plain
/// mutex in tests).
pub trait Driver: Send + Sync + 'static {
    /// Runs `job` on the node and waits for it to finish.
    fn run(&self, job: Job) -> Result<(), NodeGone>;
    /// The driver's statistics by name.
    fn driver_stats(&self) -> BTreeMap<String, u64>;
    /// The address the node's socket is bound to.
    fn bound_addr(&self) -> String;
    /// Starts capturing the node's datagrams (`anode capture`); drivers without a socket
    /// of their own say why they cannot.
    fn capture(&self, spec: anode_io::CaptureSpec) -> Result<anode_io::Capture, String> {
        let _ = spec;
        Err(
            "this node's driver cannot capture packets; capture on its interface with tcpdump"
                .into(),
        )
    }
}

/// Runs `f` on the node and returns its result.
pub fn call<R: Send + 'static>(
    d: &dyn Driver,
    f: impl FnOnce(&mut Node, Instant) -> R + Send + 'static,
) -> Result<R, NodeGone> {
    let (tx, rx) = mpsc::sync_channel(1);
    d.run(Box::new(move |n, now| {
        let _ = tx.send(f(n, now));
    }))?;
    rx.recv().map_err(|_| NodeGone)
}

/// A running control server.
#[derive(Debug)]
pub struct ControlServer {
    shared: Arc<Shared>,
    path: PathBuf,
    io: Option<JoinHandle<()>>,
    pump: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds the socket at `path` and starts serving `driver`, taking the node's `events`.
    #[cfg(test)]
    pub fn start(
        path: &Path,
        driver: Arc<dyn Driver>,
        events: Receiver<Event>,
    ) -> Result<ControlServer, SocketError> {
        let listener = socket::bind(path)?;
        Self::serve(listener, path, driver, events)
    }

    /// Starts serving `driver` on a listener from [`bind_socket`] (so a program can claim the
    /// socket before it starts the node), with the default [`Limits`].
    pub fn serve(
        listener: UnixListener,
        path: &Path,
        driver: Arc<dyn Driver>,
        events: Receiver<Event>,
    ) -> Result<ControlServer, SocketError> {
        Self::serve_with(listener, path, driver, events, Limits::default())
    }

    /// [`ControlServer::serve`] with `limits`.
    pub fn serve_with(
        listener: UnixListener,
        path: &Path,
        driver: Arc<dyn Driver>,
        events: Receiver<Event>,
        limits: Limits,
    ) -> Result<ControlServer, SocketError> {
        Self::serve_full(listener, path, driver, events, limits, None)
    }

    /// [`ControlServer::serve_with`], and with `remote` also signed requests from the
    /// network on its TCP listener (bound by the caller to `RemoteConfig::listen`).
    pub fn serve_full(
        listener: UnixListener,
        path: &Path,
        driver: Arc<dyn Driver>,
        events: Receiver<Event>,
        limits: Limits,
        remote: Option<(std::net::TcpListener, RemoteConfig)>,
    ) -> Result<ControlServer, SocketError> {
        let thread = |source| SocketError::Thread { source };
        let poll = mio::Poll::new().map_err(thread)?;
        let waker = mio::Waker::new(poll.registry(), conn::WAKER).map_err(thread)?;
        let (tcp, gate) = match remote {
            Some((l, cfg)) => (Some(l), Some(remote::Gate::new(cfg))),
            None => (None, None),
        };
        let shared = Shared::new(driver, path.to_path_buf(), waker, gate);
        let sh = Arc::clone(&shared);
        let pump = std::thread::Builder::new()
            .name("anode-ctl-pump".into())
            .spawn(move || pump::run(&sh, &events))
            .map_err(thread)?;
        let sh = Arc::clone(&shared);
        let io = std::thread::Builder::new()
            .name("anode-ctl-io".into())
            .spawn(move || conn::io_loop(&sh, poll, listener, tcp, limits))
            .map_err(thread)?;
        Ok(ControlServer {
            shared,
            path: path.to_path_buf(),
            io: Some(io),
            pump: Some(pump),
        })
    }

    /// Records run-time module changes (install, upgrade, start, stop, remove) in `store`,
    /// so they survive a restart (`crate::modules::journal`).
    pub fn set_module_journal(&self, store: crate::modules::journal::Store) {
        let _ = self.shared.journal.set(store);
    }

    /// The control server's statistics, readable from another thread (the metrics
    /// endpoint) without keeping the server alive.
    pub fn stats_source(&self) -> Arc<dyn Fn() -> anode_ctl::ControlStats + Send + Sync> {
        let weak = Arc::downgrade(&self.shared);
        Arc::new(move || weak.upgrade().map(|s| s.stats()).unwrap_or_default())
    }

    /// True once a client asked the node to shut down.
    pub fn shutdown_requested(&self) -> bool {
        self.shared.shutdown.load(Ordering::Acquire)
    }

    /// Whether new connections are accepted (off while the node hands itself over; on
    /// again, what waited in the backlog is accepted).
    pub fn set_accepting(&self, on: bool) {
        self.shared.accepting.store(on, Ordering::Release);
        let _ = self.shared.waker.wake();
    }

    /// Whether upgrade requests can be carried out (someone waits in `RunningNode::wait`
    /// and knows the command line); if not they are refused at once.
    pub fn set_upgradable(&self, on: bool) {
        self.shared.upgradable.store(on, Ordering::Release);
    }

    /// The upgrade a client asked for, if one waits.
    pub fn take_upgrade(&self) -> Option<PendingUpgrade> {
        self.shared
            .upgrade
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// [`ControlServer::stop`] for a process whose successor serves the socket now: the
    /// answers already made go out, the connections close, the socket file stays.
    pub fn retire(mut self) {
        // Give the worker answering the upgrade a moment to hand its answer to the I/O
        // thread, which writes what was answered before it closes anything.
        std::thread::sleep(std::time::Duration::from_millis(100));
        self.shared.stopping.store(true, Ordering::Release);
        let _ = self.shared.waker.wake();
        if let Some(t) = self.io.take() {
            let _ = t.join();
        }
        if let Some(t) = self.pump.take() {
            let _ = t.join();
        }
    }

    /// Closes every connection, stops the threads and removes the socket file.
    pub fn stop(mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        let _ = self.shared.waker.wake();
        if let Some(t) = self.io.take() {
            let _ = t.join();
        }
        if let Some(t) = self.pump.take() {
            let _ = t.join();
        }
        socket::remove(&self.path);
    }
}

#[cfg(test)]
mod app_tests;
#[cfg(test)]
mod tests;
