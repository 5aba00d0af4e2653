//! [`RunningNode`]: a built node at work over real UDP: the `anode-io` driver (its data-path
//! thread), the control server on a Unix socket (optional) and the Prometheus endpoint
//! (optional).
//!
//! Contracts:
//! - [`RunningNode::start`] claims the control socket before it binds UDP (a node already
//!   running on that socket is the likelier mistake, and its message is clearer), and undoes
//!   what it did if a later step fails: no socket file is left behind.
//! - The metrics endpoint holds the driver weakly, so it never keeps a stopped node alive.
//! - [`RunningNode::stop`] stops the control server (closing its connections and removing the
//!   socket file), then the data path, and returns the node for its final counters.
//! - Without a control server the node's events are the caller's
//!   ([`RunningNode::take_events`]); with one, they feed the control server's subscribers.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use anode_core::{Event, Node};
use anode_io::{DriverConfig, NodeHandle};

use crate::config::NodeFile;
use crate::control::{self, ControlServer, Driver, Job, NodeGone};

/// How a built node runs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The UDP driver's settings (bind address, batch, impairments).
    pub driver: DriverConfig,
    /// The control socket's path; `None`: no control server.
    pub socket: Option<PathBuf>,
    /// Where to serve Prometheus metrics (loopback only); `None`: off.
    pub metrics: Option<SocketAddr>,
    /// The control server's bounds.
    pub control: control::Limits,
    /// Remote management (`[remote]`): signed requests over TCP; needs a control socket.
    pub remote: Option<control::RemoteConfig>,
    /// The module journal's directory (a node hosting modules), so modules installed at
    /// run time come back after a restart.
    pub modules_state: Option<PathBuf>,
    /// Where the EEs' state kept across restarts lives (`[plan] state_file`, `durable.rs`);
    /// `None`: nothing is kept.
    pub durable_state: Option<PathBuf>,
    /// The config file, named in error messages.
    pub origin: String,
    /// With a control socket: also hand the caller a copy of every node event
    /// ([`RunningNode::take_events`]), as the real-time emulator needs to follow deliveries
    /// while tools attach to the node.
    pub tee_events: bool,
    /// The command line (after the program name) that starts this node again, for `anode
    /// upgrade` to start the new binary with (`crate::upgrade`); `None`: the node cannot be
    /// upgraded in place (its upgrade requests are refused).
    pub upgrade_args: Option<Vec<std::ffi::OsString>>,
}

impl RunOptions {
    /// UDP on `bind`, no control socket, no metrics.
    pub fn new(bind: SocketAddr) -> RunOptions {
        RunOptions {
            driver: DriverConfig::new(bind),
            socket: None,
            metrics: None,
            control: control::Limits::default(),
            remote: None,
            modules_state: None,
            durable_state: None,
            origin: format!("node on {bind}"),
            tee_events: false,
            upgrade_args: None,
        }
    }

    /// What a node file says: its bind address, control socket and `[metrics]`.
    pub fn from_file(file: &NodeFile) -> RunOptions {
        let mut driver = DriverConfig::new(file.bind);
        driver.impairments = file
            .impairments
            .iter()
            .map(crate::config::impair::LinkImpairment::to_driver)
            .collect();
        driver.kernel_transit = file.dataplane;
        driver.udp_offload = file.udp_offload;
        driver.busy_poll = file.busy_poll;
        RunOptions {
            driver,
            socket: Some(file.socket.clone()),
            metrics: file.metrics,
            control: file.control,
            remote: file.remote.clone(),
            modules_state: (!file.modules.trusted_keys.is_empty())
                .then(|| file.modules.state_dir.clone()),
            durable_state: Some(file.plan.state_file.clone()),
            origin: file.path.display().to_string(),
            tee_events: false,
            upgrade_args: None,
        }
    }
}

/// Why a node could not start running.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The control socket could not be claimed (another node is live on it, or the
    /// directory cannot be made).
    #[error("{0}")]
    Socket(#[from] control::SocketError),
    /// The UDP socket could not be bound.
    #[error(
        "cannot run the node on UDP {bind} ({source}); is another program using that port? change [node] address or bind in {origin}"
    )]
    Udp {
        /// The address.
        bind: SocketAddr,
        /// The config file.
        origin: String,
        /// Why.
        source: std::io::Error,
    },
    /// The remote-management listener could not be bound.
    #[error(
        "cannot listen for remote management on TCP {addr} ({source}); is the address this host's, and the port free? change [remote] listen in {origin}"
    )]
    Remote {
        /// The address.
        addr: SocketAddr,
        /// The config file.
        origin: String,
        /// Why.
        source: std::io::Error,
    },
    /// The driver's event channel was already taken.
    #[error("the UDP driver's event channel was already taken")]
    Events,
    /// The metrics endpoint could not start.
    #[error("{source} (in {origin})")]
    Metrics {
        /// The config file.
        origin: String,
        /// Why.
        source: anode_nodeos::metrics::MetricsError,
    },
}

/// Why a node stopped (what [`RunningNode::wait`] saw).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// The caller's stop condition held (a signal, a deadline).
    Requested,
    /// A control client asked for a shutdown (`anode stop`).
    ShutdownRequest,
    /// The data path ended on its own.
    DriverStopped,
    /// A successor process runs the node now (`anode upgrade`): retire
    /// ([`RunningNode::retire`]).
    Upgraded,
}

impl StopCause {
    /// A few words for a log line.
    pub fn as_str(self) -> &'static str {
        match self {
            StopCause::Requested => "signal",
            StopCause::ShutdownRequest => "shutdown request",
            StopCause::DriverStopped => "the UDP driver stopped",
            StopCause::Upgraded => "upgraded: a new process runs the node",
        }
    }
}

/// A stopped node: the node itself, unless a control thread still held its driver.
#[derive(Debug)]
pub struct Stopped {
    /// The node with its final state and counters.
    pub node: Option<Node>,
    /// The UDP driver's final counters (the kernel fast path's among them).
    pub driver: anode_io::DriverStats,
}

/// The UDP driver as the control server's [`Driver`].
#[derive(Debug)]
pub(crate) struct Udp(pub(crate) NodeHandle);

impl Driver for Udp {
    fn run(&self, job: Job) -> Result<(), NodeGone> {
        self.0.call(move |n, now| job(n, now)).map_err(|_| NodeGone)
    }

    fn driver_stats(&self) -> BTreeMap<String, u64> {
        self.0
            .stats()
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn bound_addr(&self) -> String {
        self.0.local_addr().to_string()
    }

    fn capture(&self, spec: anode_io::CaptureSpec) -> Result<anode_io::Capture, String> {
        self.0.capture(spec).map_err(|e| e.to_string())
    }
}

/// Gives the node's deployment service (if it runs one) a thread that verifies and compiles
/// deployed packages off the node's thread (`anode_modules::deploy::worker`) and one that
/// fetches packages from the repositories requests name (`anode_modules::deploy::repo`).
fn start_preparer(udp: &Arc<Udp>) {
    use anode_modules::deploy::{set_preparer, spawn_preparer};
    let has = udp
        .0
        .call(|n, _| n.ee_mut(anode_wire::anep::TYPE_DEPLOY).is_some())
        .unwrap_or(false);
    if !has {
        return;
    }
    let weak = Arc::downgrade(udp);
    match spawn_preparer(Box::new(move |job| {
        weak.upgrade().is_some_and(|u| u.run(job).is_ok())
    })) {
        Ok(tx) => {
            let _ = udp.0.call(move |n, _| set_preparer(n, tx));
        }
        Err(e) => tracing::warn!(
            "cannot start the deploy preparer thread ({e}): deployed packages compile on the node thread"
        ),
    }
    let weak = Arc::downgrade(udp);
    let fetcher = anode_modules::deploy::spawn_fetcher(
        Box::new(move |job| weak.upgrade().is_some_and(|u| u.run(job).is_ok())),
        Box::new(crate::repo::fetch),
    );
    match fetcher {
        Ok(tx) => {
            let _ = udp
                .0
                .call(move |n, _| anode_modules::deploy::set_fetcher(n, tx));
        }
        Err(e) => tracing::warn!(
            "cannot start the deploy fetcher thread ({e}): deployed packages come from the path only"
        ),
    }
}

/// A node running over UDP; see the module docs.
#[derive(Debug)]
pub struct RunningNode {
    pub(crate) udp: Arc<Udp>,
    pub(crate) server: Option<ControlServer>,
    socket: Option<PathBuf>,
    metrics: Option<SocketAddr>,
    metrics_server: Option<crate::metrics::MetricsServer>,
    /// The caller's copy of the node's events (`RunOptions::tee_events`).
    teed: std::sync::Mutex<Option<Receiver<Event>>>,
    /// Copies of the listening sockets, for a successor (`anode upgrade`).
    pub(crate) listeners: Listeners,
    /// `RunOptions::upgrade_args`.
    pub(crate) upgrade_args: Option<Vec<std::ffi::OsString>>,
    /// The process that took the node over, once one did.
    pub(crate) successor: Option<std::process::Child>,
    /// Keeps the EEs' durable state on disk (`RunOptions::durable_state`).
    durable: Option<crate::durable::Keeper>,
}

/// Second descriptors of a node's listening sockets, handed to a successor.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    pub control: Option<std::os::unix::net::UnixListener>,
    pub metrics: Option<std::net::TcpListener>,
    pub remote: Option<std::net::TcpListener>,
}

impl RunningNode {
    /// Starts `node`: claims the control socket, binds UDP, serves control and metrics.
    pub fn start(node: Node, opts: RunOptions) -> Result<RunningNode, RunError> {
        Self::start_with(node, opts, None)
    }

    /// [`RunningNode::start`] on the sockets a process this one takes over from handed
    /// over (`anode upgrade`), where it gives them, instead of binding new ones; the socket
    /// file it serves is then not removed if a later step fails (the other process serves
    /// it again).
    pub fn start_with(
        mut node: Node,
        opts: RunOptions,
        inherited: Option<crate::upgrade::new::Inherited>,
    ) -> Result<RunningNode, RunError> {
        let (udp_fd, inh_control, inh_metrics, inh_remote) = match inherited {
            Some(i) => (Some(i.udp), i.control, i.metrics, i.remote),
            None => (None, None, None, None),
        };
        let bound_here = inh_control.is_none();
        let listener = match (&opts.socket, inh_control) {
            (Some(_), Some(l)) => Some(l),
            (Some(p), None) => Some(control::bind_socket(p)?),
            (None, _) => None,
        };
        let cleanup = |opts: &RunOptions| {
            if let (true, Some(p)) = (bound_here, &opts.socket) {
                control::remove_socket(p);
            }
        };
        let remote = match &opts.remote {
            Some(cfg) => {
                match inh_remote.map_or_else(|| std::net::TcpListener::bind(cfg.listen), Ok) {
                    Ok(l) => Some((l, cfg.clone())),
                    Err(source) => {
                        cleanup(&opts);
                        return Err(RunError::Remote {
                            addr: cfg.listen,
                            origin: opts.origin.clone(),
                            source,
                        });
                    }
                }
            }
            None => None,
        };
        let listeners = Listeners {
            control: listener.as_ref().and_then(|l| l.try_clone().ok()),
            metrics: None,
            remote: remote.as_ref().and_then(|(l, _)| l.try_clone().ok()),
        };
        let durable = opts
            .durable_state
            .as_ref()
            .map(|p| restore_durable(&mut node, p));
        let bind = opts.driver.bind;
        let handle = anode_io::spawn_on(node, opts.driver.clone(), udp_fd).map_err(|source| {
            cleanup(&opts);
            RunError::Udp {
                bind,
                origin: opts.origin.clone(),
                source,
            }
        })?;
        let udp = Arc::new(Udp(handle));
        start_preparer(&udp);
        let mut teed = None;
        let server = match (listener, &opts.socket) {
            (Some(l), Some(path)) => {
                let Some(mut events) = udp.0.take_events() else {
                    cleanup(&opts);
                    return Err(RunError::Events);
                };
                if opts.tee_events {
                    let (server_rx, caller_rx) = tee(events).map_err(|source| {
                        cleanup(&opts);
                        RunError::Socket(control::SocketError::Thread { source })
                    })?;
                    events = server_rx;
                    teed = Some(caller_rx);
                }
                let driver: Arc<dyn Driver> = udp.clone();
                Some(
                    ControlServer::serve_full(l, path, driver, events, opts.control, remote)
                        .inspect_err(|_| {
                            cleanup(&opts);
                        })?,
                )
            }
            _ => None,
        };
        if let Some(s) = &server {
            s.set_upgradable(opts.upgrade_args.is_some());
            if let Some(dir) = &opts.modules_state {
                s.set_module_journal(crate::modules::journal::Store::new(dir));
            }
        }
        let mut running = RunningNode {
            udp,
            server,
            socket: opts.socket.clone(),
            metrics: None,
            metrics_server: None,
            teed: std::sync::Mutex::new(teed),
            listeners,
            upgrade_args: opts.upgrade_args.clone(),
            successor: None,
            durable,
        };
        if let Some(addr) = opts.metrics
            && let Err(source) = running.serve_metrics(addr, inh_metrics)
        {
            running.stop();
            return Err(RunError::Metrics {
                origin: opts.origin,
                source,
            });
        }
        Ok(running)
    }

    fn serve_metrics(
        &mut self,
        addr: SocketAddr,
        inherited: Option<std::net::TcpListener>,
    ) -> Result<(), anode_nodeos::metrics::MetricsError> {
        let cfg = anode_nodeos::metrics::MetricsConfig {
            listen: Some(addr.to_string()),
        };
        let Some(addr) = cfg.listen_addr()? else {
            return Ok(());
        };
        let bind_err = |err| anode_nodeos::metrics::MetricsError::Bind { addr, err };
        let listener = match inherited {
            Some(l) => l,
            None => std::net::TcpListener::bind(addr).map_err(bind_err)?,
        };
        self.listeners.metrics = listener.try_clone().ok();
        let weak = Arc::downgrade(&self.udp);
        let control = self.server.as_ref().map(ControlServer::stats_source);
        let snapshot = move || {
            let u = weak.upgrade()?;
            let mut s = control::call(&*u, |n, _| crate::metrics::Snapshot::of(n)).ok()?;
            s.driver = u.driver_stats();
            s.control = control.as_ref().map(|c| c());
            Some(s)
        };
        let server = crate::metrics::serve(listener, Arc::new(snapshot)).map_err(bind_err)?;
        self.metrics = Some(server.addr());
        self.metrics_server = Some(server);
        Ok(())
    }

    /// The UDP address the node is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.udp.0.local_addr()
    }

    /// The control socket, if the node serves one.
    pub fn control_socket(&self) -> Option<&Path> {
        self.socket.as_deref()
    }

    /// Where metrics are served, if they are.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics
    }

    /// The node's events, when it runs without a control server (`None` with one, or when
    /// taken already).
    pub fn take_events(&self) -> Option<Receiver<Event>> {
        if self.server.is_some() {
            return self
                .teed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
        }
        self.udp.0.take_events()
    }

    /// Runs `f` on the node's thread and returns its result.
    pub fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Node, std::time::Instant) -> R + Send + 'static,
    ) -> Result<R, NodeGone> {
        control::call(&*self.udp, f)
    }

    /// The driver's statistics.
    pub fn driver_stats(&self) -> anode_io::DriverStats {
        self.udp.0.stats()
    }

    /// Why the node should stop now, if it should: `requested` is the caller's own
    /// condition (a signal flag, a deadline).
    pub fn stop_cause(&self, requested: bool) -> Option<StopCause> {
        if requested {
            Some(StopCause::Requested)
        } else if self.server.as_ref().is_some_and(|s| s.shutdown_requested()) {
            Some(StopCause::ShutdownRequest)
        } else if !self.udp.0.is_running() {
            Some(StopCause::DriverStopped)
        } else {
            None
        }
    }

    /// Waits (checking every 50 ms) until `requested` returns true, a client asks for a
    /// shutdown, or the data path ends. Meanwhile it carries out the upgrades clients ask
    /// for (`crate::upgrade`): one that succeeds ends the wait with
    /// [`StopCause::Upgraded`], one that fails is answered and the node goes on.
    pub fn wait(&mut self, mut requested: impl FnMut() -> bool) -> StopCause {
        loop {
            if let Some(c) = self.stop_cause(requested()) {
                return c;
            }
            if let Some(p) = self.server.as_ref().and_then(ControlServer::take_upgrade) {
                match self.upgrade(&p.request) {
                    Ok(info) => {
                        p.answer(Ok(info));
                        return StopCause::Upgraded;
                    }
                    Err(e) => {
                        tracing::warn!("upgrade failed: {e}");
                        p.answer(Err(e.to_string()));
                    }
                }
            }
            self.keep_durable(false);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Writes the EEs' durable state if it changed: at most once a second, or now if
    /// `flush` (a clean stop). A failure is logged, and the node goes on.
    fn keep_durable(&mut self, flush: bool) {
        let Some(k) = self.durable.as_mut() else {
            return;
        };
        let udp = Arc::clone(&self.udp);
        let states = || control::call(&*udp, |n, _| n.durable_states()).ok();
        let r = if flush {
            k.flush(states)
        } else {
            k.tick(std::time::Instant::now(), states)
        };
        if let Err(e) = r {
            tracing::warn!("cannot keep the EEs' state: {e}");
        }
    }

    /// After [`StopCause::Upgraded`]: answers what is still being answered, closes this
    /// process's connections and servers (the socket file stays: the successor serves it)
    /// and stops the paused data path. Returns the successor process, which this one should
    /// wait for (`anode node` does, passing signals on).
    pub fn retire(mut self) -> Option<std::process::Child> {
        if let Some(s) = self.server.take() {
            s.retire();
        }
        if let Some(m) = self.metrics_server.take() {
            m.stop();
        }
        let child = self.successor.take();
        let udp = Arc::clone(&self.udp);
        drop(self);
        if let Ok(Udp(h)) = Arc::try_unwrap(udp) {
            drop(h.shutdown());
        }
        child
    }

    /// Stops the control server and the data path; returns the node. The EEs' durable
    /// state is written first, so a clean stop loses none of it.
    pub fn stop(mut self) -> Stopped {
        self.keep_durable(true);
        if let Some(s) = self.server.take() {
            s.stop();
        }
        if let Some(m) = self.metrics_server.take() {
            m.stop();
        }
        let udp = Arc::clone(&self.udp);
        drop(self);
        match Arc::try_unwrap(udp) {
            Ok(Udp(h)) => {
                let (node, driver) = h.shutdown_with_stats();
                Stopped {
                    node: Some(node),
                    driver,
                }
            }
            // A metrics scrape or control thread still holds the driver; dropping it here
            // stops the data path once that thread lets go.
            Err(u) => Stopped {
                node: None,
                driver: u.0.stats(),
            },
        }
    }
}

impl Drop for RunningNode {
    /// A node dropped without [`RunningNode::stop`] (a panic, an early return) still closes
    /// its control server and removes the socket file; the data path stops with the last
    /// handle.
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}

/// Gives `node`'s EEs what they kept at `path` before this start (`durable.rs`), and
/// returns the keeper that goes on writing it. A file that fails its checks is not
/// trusted: the node starts without it and says so.
fn restore_durable(node: &mut Node, path: &Path) -> crate::durable::Keeper {
    let kept = match crate::durable::load(path) {
        Ok(k) => k,
        Err(e) => {
            tracing::warn!("{e}");
            Vec::new()
        }
    };
    for (t, state) in &kept {
        match node.restore_durable(*t, state) {
            Ok(()) => tracing::info!("restored the state of EE {t} kept in {}", path.display()),
            Err(e) => tracing::warn!("{}: EE {t}: {e}", path.display()),
        }
    }
    crate::durable::Keeper::new(path.to_path_buf(), Duration::from_secs(1), kept)
}

/// Events a tee holds for a slow reader before it drops (and the reader misses) more.
const TEE_QUEUE: usize = 65_536;

/// Splits the node's events in two: one channel for the control server, one for the caller.
/// The tee thread never blocks the data path: a full channel loses the event for that side.
fn tee(events: Receiver<Event>) -> std::io::Result<(Receiver<Event>, Receiver<Event>)> {
    let (to_server, server_rx) = std::sync::mpsc::sync_channel(TEE_QUEUE);
    let (to_caller, caller_rx) = std::sync::mpsc::sync_channel(TEE_QUEUE);
    std::thread::Builder::new()
        .name("anode-event-tee".into())
        .spawn(move || {
            for e in events {
                let _ = to_caller.try_send(e.clone());
                let _ = to_server.try_send(e);
            }
        })?;
    Ok((server_rx, caller_rx))
}
