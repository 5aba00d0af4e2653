//! State shared by the control server's threads: connections' output queues, port owners,
//! statistics, and the waker of the I/O thread.
//!
//! Lock order: `conns` before `ports` (only `release_conn` holds both); `dirty` is taken
//! alone.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use anode_ctl::{ControlStats, ServerMessage};

use super::Driver;

/// Messages a connection may have waiting before stream messages to it are dropped.
pub(super) const CONN_QUEUE: usize = 4096;

/// Connection id.
pub(super) type ConnId = u64;

/// Lines waiting to be written to one connection (replies are never dropped; stream
/// messages are, past [`CONN_QUEUE`]). Grows only as far as it is used.
#[derive(Debug, Default)]
pub(super) struct OutQueue {
    pub lines: Mutex<VecDeque<Vec<u8>>>,
}

/// The server side of one connection, as the other threads see it.
#[derive(Debug)]
pub(super) struct ConnOut {
    pub out: Arc<OutQueue>,
    pub subscribed: bool,
}

/// Shared by all control threads.
pub(super) struct Shared {
    /// This value's own `Arc` (for threads a request starts, such as a capture's).
    pub me: std::sync::Weak<Shared>,
    pub driver: Arc<dyn Driver>,
    pub path: PathBuf,
    pub started: Instant,
    pub conns: Mutex<HashMap<ConnId, ConnOut>>,
    pub ports: Mutex<HashMap<u16, ConnId>>,
    /// Connections that injected packets asking for EE log events.
    pub log_conns: Mutex<std::collections::HashSet<ConnId>>,
    /// Connections with a capture running (`capture.rs`).
    pub captures: Mutex<std::collections::HashSet<ConnId>>,
    /// Ports registered with the capsule EE (bound under `TYPE_CAPSULE`).
    pub capsule_ports: Mutex<std::collections::HashSet<u16>>,
    pub unbound_port_drops: AtomicU64,
    pub slow_client_drops: AtomicU64,
    pub refused_connections: AtomicU64,
    pub idle_closed: AtomicU64,
    /// Connections with new output for the I/O thread to write.
    pub dirty: Mutex<Vec<ConnId>>,
    /// Wakes the I/O thread (new output, finished requests, stop).
    pub waker: mio::Waker,
    /// The module journal run-time module changes are recorded in (a node with modules).
    pub journal: std::sync::OnceLock<crate::modules::journal::Store>,
    /// A client asked the node to stop.
    pub shutdown: AtomicBool,
    /// The server is stopping.
    pub stopping: AtomicBool,
    /// New connections are accepted (off while the node hands itself over, `anode upgrade`).
    pub accepting: AtomicBool,
    /// The node can be upgraded in place (`RunOptions::upgrade_args`).
    pub upgradable: AtomicBool,
    /// An upgrade a client asked for, waiting for the thread that runs the node
    /// (`RunningNode::wait`).
    pub upgrade: Mutex<Option<super::PendingUpgrade>>,
    /// Remote management's gate (`[remote]`); `None`: off.
    pub remote: Option<super::remote::Gate>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("path", &self.path).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    pub fn new(
        driver: Arc<dyn Driver>,
        path: PathBuf,
        waker: mio::Waker,
        remote: Option<super::remote::Gate>,
    ) -> Arc<Shared> {
        Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            remote,
            captures: Mutex::new(Default::default()),
            refused_connections: AtomicU64::new(0),
            idle_closed: AtomicU64::new(0),
            dirty: Mutex::new(Vec::new()),
            waker,
            journal: std::sync::OnceLock::new(),
            driver,
            path,
            started: Instant::now(),
            conns: Mutex::new(HashMap::new()),
            ports: Mutex::new(HashMap::new()),
            log_conns: Mutex::new(Default::default()),
            capsule_ports: Mutex::new(Default::default()),
            unbound_port_drops: AtomicU64::new(0),
            slow_client_drops: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            accepting: AtomicBool::new(true),
            upgradable: AtomicBool::new(false),
            upgrade: Mutex::new(None),
        })
    }

    /// Registers connection `id` (ids are the I/O thread's).
    pub fn add_conn_with(&self, id: ConnId, out: ConnOut) {
        lock(&self.conns).insert(id, out);
    }

    /// Forgets a connection and frees its ports.
    pub fn release_conn(&self, id: ConnId) {
        let mut conns = lock(&self.conns);
        conns.remove(&id);
        let mut freed = Vec::new();
        lock(&self.ports).retain(|port, owner| {
            if *owner == id {
                freed.push(*port);
            }
            *owner != id
        });
        drop(conns);
        lock(&self.log_conns).remove(&id);
        let capsule: Vec<u16> = {
            let mut cp = lock(&self.capsule_ports);
            freed.into_iter().filter(|p| cp.remove(p)).collect()
        };
        if !capsule.is_empty() {
            // The capsule EE forgets the ports too, so code cannot deliver to a dead
            // application (ignored if the node is gone).
            let _ = super::call(&*self.driver, move |n, _| {
                if let Some(ee) = crate::ees::capsule_ee(n) {
                    for p in capsule {
                        ee.unregister_port(p);
                    }
                }
            });
        }
    }

    /// Remembers that `port` is registered with the capsule EE.
    pub fn note_capsule_port(&self, port: u16) {
        lock(&self.capsule_ports).insert(port);
    }

    /// Asks for EE log events on connection `id`.
    pub fn want_logs(&self, id: ConnId) {
        lock(&self.log_conns).insert(id);
    }

    /// Registers a capture for connection `id`; false if `max` are running.
    pub fn begin_capture(&self, id: ConnId, max: usize) -> bool {
        let mut c = lock(&self.captures);
        if c.len() >= max {
            return false;
        }
        c.insert(id);
        true
    }

    /// Forgets connection `id`'s capture.
    pub fn end_capture(&self, id: ConnId) {
        lock(&self.captures).remove(&id);
    }

    /// True while connection `id` is open.
    pub fn has_conn(&self, id: ConnId) -> bool {
        lock(&self.conns).contains_key(&id)
    }

    /// Queues a stream message for connection `id`; false if it is gone or too far behind
    /// (then the message is dropped and counted).
    pub fn stream_to(&self, id: ConnId, msg: &ServerMessage) -> bool {
        self.send_to(id, msg, true)
    }

    /// Queues `msg` for connection `id` (see [`Shared::queue`]); false if it is gone or the
    /// message was dropped.
    fn send_to(&self, id: ConnId, msg: &ServerMessage, stream: bool) -> bool {
        let out = lock(&self.conns).get(&id).map(|c| Arc::clone(&c.out));
        out.is_some_and(|out| self.queue(id, &out, msg, stream))
    }

    /// Claims `port` for `id`; false if another connection owns it.
    pub fn bind_port(&self, id: ConnId, port: u16) -> bool {
        let mut ports = lock(&self.ports);
        match ports.get(&port) {
            Some(owner) if *owner != id => false,
            _ => {
                ports.insert(port, id);
                true
            }
        }
    }

    /// Frees `port` if `id` owns it.
    pub fn unbind_port(&self, id: ConnId, port: u16) -> bool {
        let mut ports = lock(&self.ports);
        if ports.get(&port) == Some(&id) {
            ports.remove(&port);
            true
        } else {
            false
        }
    }

    pub fn set_subscribed(&self, id: ConnId) {
        if let Some(c) = lock(&self.conns).get_mut(&id) {
            c.subscribed = true;
        }
    }

    /// Queues `msg` for connection `id`: a stream message is dropped (and counted) if the
    /// client is [`CONN_QUEUE`] messages behind; a reply never is. Wakes the I/O thread when
    /// the first connection becomes dirty. False if the message was dropped.
    pub fn queue(&self, id: ConnId, out: &OutQueue, msg: &ServerMessage, stream: bool) -> bool {
        {
            let mut q = lock(&out.lines);
            if stream && q.len() >= CONN_QUEUE {
                self.slow_client_drops.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            q.push_back(msg.to_line().into_bytes());
        }
        let first = {
            let mut d = lock(&self.dirty);
            d.push(id);
            d.len() == 1
        };
        if first {
            let _ = self.waker.wake();
        }
        true
    }

    /// Queues a reply for connection `id` (dropped if the connection is gone).
    pub fn reply(&self, id: ConnId, msg: &ServerMessage) {
        self.send_to(id, msg, false);
    }

    /// Takes the connections with new output.
    pub fn take_dirty(&self) -> Vec<ConnId> {
        std::mem::take(&mut *lock(&self.dirty))
    }

    /// True if connection `id` waits for something by design: it owns a port, subscribed,
    /// asked for logs or captures (an idle timeout does not apply to it).
    pub fn is_listening(&self, id: ConnId) -> bool {
        lock(&self.conns).get(&id).is_some_and(|c| c.subscribed)
            || lock(&self.ports).values().any(|owner| *owner == id)
            || lock(&self.log_conns).contains(&id)
            || lock(&self.captures).contains(&id)
    }

    /// Sends a delivery to the owner of `port`; false if no one owns it.
    pub fn deliver(&self, port: u16, msg: ServerMessage) -> bool {
        let conns = lock(&self.conns);
        let owner = lock(&self.ports).get(&port).copied();
        match owner.and_then(|id| conns.get(&id).map(|c| (id, c))) {
            Some((id, out)) => {
                self.queue(id, &out.out, &msg, true);
                true
            }
            None => {
                self.unbound_port_drops.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Sends an event to every subscriber.
    pub fn broadcast(&self, msg: &ServerMessage) {
        let conns = lock(&self.conns);
        for (id, out) in conns.iter().filter(|(_, c)| c.subscribed) {
            self.queue(*id, &out.out, msg, true);
        }
    }

    /// Sends an EE log event to every subscriber and every connection that asked for logs
    /// when it injected.
    pub fn broadcast_log(&self, msg: &ServerMessage) {
        let conns = lock(&self.conns);
        let logs = lock(&self.log_conns);
        for (id, out) in conns.iter() {
            if out.subscribed || logs.contains(id) {
                self.queue(*id, &out.out, msg, true);
            }
        }
    }

    pub fn stats(&self) -> ControlStats {
        ControlStats {
            connections: lock(&self.conns).len() as u64,
            bound_ports: lock(&self.ports).len() as u64,
            unbound_port_drops: self.unbound_port_drops.load(Ordering::Relaxed),
            slow_client_drops: self.slow_client_drops.load(Ordering::Relaxed),
            refused_connections: self.refused_connections.load(Ordering::Relaxed),
            idle_closed: self.idle_closed.load(Ordering::Relaxed),
            remote: self.remote.as_ref().map(|g| {
                let (accepted, refused) = g.counts();
                anode_ctl::RemoteStats { accepted, refused }
            }),
        }
    }
}
