//! State shared by the control server's threads: connections, port owners, statistics.
//!
//! Lock order: `conns` before `ports` (only `release_conn` holds both).

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use anode_ctl::{ControlStats, ServerMessage};

use super::Driver;

/// Messages a connection may have waiting before stream messages to it are dropped.
pub(super) const CONN_QUEUE: usize = 4096;

/// Connection id.
pub(super) type ConnId = u64;

/// The server side of one connection.
#[derive(Debug)]
pub(super) struct ConnOut {
    pub tx: SyncSender<ServerMessage>,
    pub stream: UnixStream,
    pub subscribed: bool,
}

/// Shared by all control threads.
pub(super) struct Shared {
    pub driver: Arc<dyn Driver>,
    pub path: PathBuf,
    pub started: Instant,
    pub conns: Mutex<HashMap<ConnId, ConnOut>>,
    pub ports: Mutex<HashMap<u16, ConnId>>,
    /// Connections that injected packets asking for EE log events.
    pub log_conns: Mutex<std::collections::HashSet<ConnId>>,
    /// Ports registered with the capsule EE (bound under `TYPE_CAPSULE`).
    pub capsule_ports: Mutex<std::collections::HashSet<u16>>,
    pub next_conn: AtomicU64,
    pub unbound_port_drops: AtomicU64,
    pub slow_client_drops: AtomicU64,
    /// A client asked the node to stop.
    pub shutdown: AtomicBool,
    /// The server is stopping.
    pub stopping: AtomicBool,
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
    pub fn new(driver: Arc<dyn Driver>, path: PathBuf) -> Arc<Shared> {
        Arc::new(Shared {
            driver,
            path,
            started: Instant::now(),
            conns: Mutex::new(HashMap::new()),
            ports: Mutex::new(HashMap::new()),
            log_conns: Mutex::new(Default::default()),
            capsule_ports: Mutex::new(Default::default()),
            next_conn: AtomicU64::new(1),
            unbound_port_drops: AtomicU64::new(0),
            slow_client_drops: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
        })
    }

    pub fn add_conn(&self, out: ConnOut) -> ConnId {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        lock(&self.conns).insert(id, out);
        id
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

    /// Queues a stream message for `id`, dropping it if the client is slow.
    fn push(&self, out: &ConnOut, msg: ServerMessage) {
        if let Err(TrySendError::Full(_)) = out.tx.try_send(msg) {
            self.slow_client_drops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends a delivery to the owner of `port`; false if no one owns it.
    pub fn deliver(&self, port: u16, msg: ServerMessage) -> bool {
        let conns = lock(&self.conns);
        let owner = lock(&self.ports).get(&port).copied();
        match owner.and_then(|id| conns.get(&id)) {
            Some(out) => {
                self.push(out, msg);
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
        for out in conns.values().filter(|c| c.subscribed) {
            self.push(out, msg.clone());
        }
    }

    /// Sends an EE log event to every subscriber and every connection that asked for logs
    /// when it injected.
    pub fn broadcast_log(&self, msg: &ServerMessage) {
        let conns = lock(&self.conns);
        let logs = lock(&self.log_conns);
        for (id, out) in conns.iter() {
            if out.subscribed || logs.contains(id) {
                self.push(out, msg.clone());
            }
        }
    }

    /// Shuts every connection's socket down (their threads then end).
    pub fn close_all(&self) {
        for out in lock(&self.conns).values() {
            let _ = out.stream.shutdown(std::net::Shutdown::Both);
        }
    }

    pub fn stats(&self) -> ControlStats {
        ControlStats {
            connections: lock(&self.conns).len() as u64,
            bound_ports: lock(&self.ports).len() as u64,
            unbound_port_drops: self.unbound_port_drops.load(Ordering::Relaxed),
            slow_client_drops: self.slow_client_drops.load(Ordering::Relaxed),
        }
    }
}
