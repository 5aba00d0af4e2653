//! The router's local anode node (`[node]` in the router config): a full anode node behind
//! the router's filters, on the data-path thread.
//!
//! - **Carriers:** ANEP over UDP to the node's port at any of the router's own addresses,
//!   and ANEP directly over Ethernet (EtherType 0x88B5), are diverted to the node by two
//!   router filters; its packets leave as UDP from the outgoing interface's address, or as
//!   Ethernet frames to a configured peer MAC ([`Carrier`]).
//! - **Execution environments:** unless `ees = false`, the node runs the PLAN and capsule
//!   EEs under the NodeOS exactly as `anode node` does (`crate::ees::register_with`): capsules
//!   and PLAN programs carried inside IP (or directly over Ethernet) are run by the router,
//!   code is demand-loaded from the previous hop into `capsule_cache`, `[node.nodeos]` sets
//!   the domains' limits (the same keys as `[nodeos]` of a node file).
//! - **Control socket:** with `control = "PATH"`, the node serves the `anode-ctl` protocol
//!   there, so `anode status|ping|traceroute|flood|plan inject|code|domains --socket PATH`
//!   and applications work against the router's node. Requests run on the data-path thread
//!   between rounds ([`NodeDriver`] queues them and wakes the loop through its
//!   [`Waker`]); the node's events go to the control server (deliveries to bound ports,
//!   neighbor and route changes) and, without one, to stderr.
//! - **Prefix exchange** and scheduled sends: see `prefixes.rs` and `[[node.send]]`.
//!
//! Contract: a job from the control server runs with the node and the current time between
//! two rounds of the data path, never during one; a job that panics is contained (its
//! caller gets `NodeGone`) and the router keeps running.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use anode_core::{Event, LinkConfig, LinkId, Node, NodeConfig};
use anode_ether::{Hooks, Waker};
use anode_ip::learn::PrefixAd;
use anode_ip::wire::{Ipv4Packet, Ipv6Packet, MacAddr, UdpPacket};
use anode_ip::{ANEP_UDP_PORT, ETHERTYPE_ANEP, Filter, FilterId, IfaceId, IpRouter};
use anode_wire::NodeAddr;
use serde::Deserialize;

use super::parse_mac;
use super::prefixes::PrefixExchange;
use crate::builder::{EeOptions, NodeBuilder};
use crate::config;
use crate::control::{self, ControlServer, Driver, Job, NodeGone};

/// Events waiting for the control server; beyond this they are dropped and counted.
const EVENT_CAPACITY: usize = 4096;
/// Control jobs run per data-path round at most (the rest wait for the next round).
const JOBS_PER_ROUND: usize = 64;

/// `[node]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NodeSection {
    address: NodeAddr,
    #[serde(default, rename = "link")]
    links: Vec<NodeLinkSection>,
    #[serde(default, rename = "send")]
    sends: Vec<NodeSendSection>,
    #[serde(default = "default_advertise_ms")]
    advertise_ms: u64,
    #[serde(default)]
    advertise_static: bool,
    routing: Option<anode_core::RoutingConfig>,
    /// Run the PLAN and capsule EEs (default true).
    #[serde(default = "yes")]
    ees: bool,
    /// The capsule EE's disk code cache (default: as `anode node`'s, by port).
    capsule_cache: Option<String>,
    /// The EEs under the NodeOS (`[node.nodeos]`, the keys of a node file's `[nodeos]`).
    #[serde(default)]
    nodeos: config::nodeos::RawNodeOs,
    /// Serve the control protocol on this Unix socket (default: no control socket).
    control: Option<String>,
}

/// One `[[node.link]]`: peer, interface, MAC.
pub(super) type LinkView<'a> = (NodeAddr, Option<&'a String>, Option<&'a String>);

impl NodeSection {
    /// The node's address and its links, for `--check`.
    pub(super) fn address_and_links(&self) -> (NodeAddr, Vec<LinkView<'_>>) {
        let links = self
            .links
            .iter()
            .map(|l| (l.peer, l.interface.as_ref(), l.mac.as_ref()))
            .collect();
        (self.address, links)
    }

    /// Whether the router advertises its static routes too.
    pub(super) fn advertise_static(&self) -> bool {
        self.advertise_static
    }
}

fn default_advertise_ms() -> u64 {
    1000
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSendSection {
    to: NodeAddr,
    port: u16,
    payload: String,
    #[serde(default = "default_every_ms")]
    every_ms: u64,
    #[serde(default = "default_count")]
    count: u32,
}

fn default_every_ms() -> u64 {
    200
}

fn default_count() -> u32 {
    50
}

/// A datagram the node sends on a schedule.
struct Send {
    cfg: NodeSendSection,
    next: Instant,
    left: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeLinkSection {
    peer: NodeAddr,
    interface: Option<String>,
    mac: Option<String>,
}

/// How a node link reaches its peer.
#[derive(Debug, Clone, Copy)]
enum Carrier {
    Udp(SocketAddr),
    Ether(IfaceId, MacAddr),
}

/// Counters the control server reads while the node runs (`anode status` shows them as the
/// driver's).
#[derive(Debug, Default)]
struct Shared {
    /// Diverted frames handed to the node.
    rx: AtomicU64,
    /// Packets the node sent.
    tx: AtomicU64,
    /// Packets the node sent that the router could not (no route, no neighbor, ...).
    tx_failed: AtomicU64,
    /// Diverted frames from no configured peer.
    unmatched: AtomicU64,
    /// Events the control server's queue had no room for.
    event_drops: AtomicU64,
    /// Control jobs that panicked (a bug; contained).
    job_panics: AtomicU64,
}

/// The control server's side of the node: jobs go to the data-path thread.
struct NodeDriver {
    calls: Sender<Job>,
    waker: Waker,
    addr: String,
    shared: Arc<Shared>,
}

impl Driver for NodeDriver {
    fn run(&self, job: Job) -> Result<(), NodeGone> {
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |n, now| {
            job(n, now);
            let _ = done_tx.send(());
        });
        self.calls.send(job).map_err(|_| NodeGone)?;
        self.waker.wake();
        done_rx.recv().map_err(|_| NodeGone)
    }

    fn driver_stats(&self) -> BTreeMap<String, u64> {
        let s = &self.shared;
        [
            ("router_node_rx", &s.rx),
            ("router_node_tx", &s.tx),
            ("router_node_tx_failed", &s.tx_failed),
            ("router_node_unmatched", &s.unmatched),
            ("router_node_event_drops", &s.event_drops),
            ("router_node_job_panics", &s.job_panics),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.load(Ordering::Relaxed)))
        .collect()
    }

    fn bound_addr(&self) -> String {
        self.addr.clone()
    }
}

/// The control socket, claimed but not yet served (the data path's waker is needed first).
pub(super) struct PendingControl {
    path: PathBuf,
    listener: std::os::unix::net::UnixListener,
    calls: Sender<Job>,
    events: Receiver<Event>,
    addr: String,
    shared: Arc<Shared>,
}

impl PendingControl {
    /// Starts serving, waking the data path through `waker` for every request.
    pub(super) fn serve(self, waker: Waker) -> Result<ControlServer, String> {
        let path = self.path.clone();
        let driver = Arc::new(NodeDriver {
            calls: self.calls,
            waker,
            addr: self.addr,
            shared: self.shared,
        });
        ControlServer::serve(self.listener, &self.path, driver, self.events).map_err(|e| {
            control::remove_socket(&path);
            format!("control socket {}: {e}", path.display())
        })
    }

    /// The socket's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

/// What [`NodeHooks::build`] needs.
pub(super) struct NodeSetup<'a> {
    /// The router config file (for messages and relative paths).
    pub file: &'a Path,
    /// Its text (for `[node.nodeos]` error positions).
    pub text: &'a str,
    /// `[node]`.
    pub section: &'a NodeSection,
    /// The router's interface names, by `IfaceId`.
    pub interfaces: &'a [String],
    /// The router's own addresses and prefixes, to advertise.
    pub own: &'a PrefixAd,
    /// The router (gets the node's two filters).
    pub router: &'a mut IpRouter,
    /// Now.
    pub now: Instant,
}

/// A built node and its control socket, if configured.
pub(super) struct BuiltNode {
    pub hooks: NodeHooks,
    pub control: Option<PendingControl>,
}

/// The local node behind the router's filters.
pub(super) struct NodeHooks {
    node: Node,
    carriers: Vec<Carrier>,
    udp_filter: FilterId,
    ether_filter: FilterId,
    sends: Vec<Send>,
    route_changes: u64,
    prefixes: Option<PrefixExchange>,
    /// Control jobs (with a control socket).
    jobs: Option<Receiver<Job>>,
    /// The control server's event queue (with a control socket).
    events: Option<SyncSender<Event>>,
    shared: Arc<Shared>,
}

/// A path from the config, relative to the config file's directory.
fn relative_to(file: &Path, given: &str) -> PathBuf {
    let p = Path::new(given);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        file.parent().unwrap_or(Path::new(".")).join(p)
    }
}

impl NodeHooks {
    /// Builds the node of `[node]`: links and carriers, EEs under the NodeOS, the prefix
    /// exchange, the router's two filters, and the control socket (claimed here, so a node
    /// already serving it is reported before the router starts).
    pub(super) fn build(s: NodeSetup<'_>) -> Result<BuiltNode, String> {
        let n = s.section;
        let now = s.now;
        let mut nc = NodeConfig::new(n.address);
        if let Some(r) = n.routing {
            r.validate().map_err(|e| format!("[node.routing]: {e}"))?;
            nc.routing = r;
        }
        let mut builder = NodeBuilder::new(nc);
        if n.ees {
            let nodeos = config::check_nodeos(s.file, s.text, &n.nodeos).map_err(|e| {
                format!("{e} (in [node.nodeos]; the keys are those of a node file's [nodeos])")
            })?;
            let cache = match &n.capsule_cache {
                Some(c) if c.trim().is_empty() => {
                    return Err(format!(
                        "{}: [node] capsule_cache is empty; give a directory, or leave it out for the default",
                        s.file.display()
                    ));
                }
                Some(c) => relative_to(s.file, c.trim()),
                None => config::default_code_cache(n.address.port()),
            };
            builder = builder.ees(EeOptions {
                cache_dir: Some(cache),
                nodeos,
                ..EeOptions::default()
            });
        }
        let prefixes = if n.advertise_ms == 0 {
            None
        } else {
            s.own.to_bytes().map_err(|e| {
                format!(
                    "{}: {e}: advertise fewer addresses and prefixes, or set \
                     [node] advertise_ms = 0 to turn the prefix exchange off",
                    s.file.display()
                )
            })?;
            Some(PrefixExchange::new(
                s.own.clone(),
                Duration::from_millis(n.advertise_ms),
                now,
            ))
        };
        let mut carriers = Vec::new();
        for l in &n.links {
            let carrier = match (&l.interface, &l.mac) {
                (Some(ifname), Some(mac)) => {
                    let idx = s
                        .interfaces
                        .iter()
                        .position(|i| i == ifname)
                        .ok_or_else(|| format!("node link {}: no interface {ifname}", l.peer))?;
                    Carrier::Ether(IfaceId(idx as u32), parse_mac(mac)?)
                }
                (None, None) => Carrier::Udp(l.peer.socket_addr()),
                _ => {
                    return Err(format!(
                        "node link {}: give both interface and mac (Ethernet) or neither (UDP)",
                        l.peer
                    ));
                }
            };
            let mut lc = LinkConfig::new(l.peer);
            lc.name = match carrier {
                Carrier::Udp(_) => format!("udp:{}", l.peer),
                Carrier::Ether(i, m) => format!("ether:{i}:{m}"),
            };
            builder = builder.link(lc);
            carriers.push(carrier);
        }
        let node = builder.build(now).map_err(|e| {
            format!(
                "{e} (router node in {}: set [node] capsule_cache, or ees = false)",
                s.file.display()
            )
        })?;
        let shared = Arc::new(Shared::default());
        let (jobs, events, control) = match &n.control {
            None => (None, None, None),
            Some(c) if c.trim().is_empty() => {
                return Err(format!(
                    "{}: [node] control is empty; give a socket path like \"/tmp/anode-router.sock\", or leave it out",
                    s.file.display()
                ));
            }
            Some(c) => {
                let path = relative_to(s.file, c.trim());
                let listener = control::bind_socket(&path).map_err(|e| e.to_string())?;
                let (calls_tx, calls_rx) = mpsc::channel();
                let (ev_tx, ev_rx) = mpsc::sync_channel(EVENT_CAPACITY);
                let pending = PendingControl {
                    path,
                    listener,
                    calls: calls_tx,
                    events: ev_rx,
                    addr: n.address.to_string(),
                    shared: shared.clone(),
                };
                (Some(calls_rx), Some(ev_tx), Some(pending))
            }
        };
        let udp_filter = s.router.add_filter(Filter::LocalUdp {
            port: n.address.port(),
        });
        let ether_filter = s.router.add_filter(Filter::EtherType(ETHERTYPE_ANEP));
        let hooks = NodeHooks {
            node,
            carriers,
            udp_filter,
            ether_filter,
            sends: n
                .sends
                .iter()
                .map(|c| Send {
                    cfg: c.clone(),
                    next: now,
                    left: c.count,
                })
                .collect(),
            route_changes: 0,
            prefixes,
            jobs,
            events,
            shared,
        };
        Ok(BuiltNode { hooks, control })
    }

    /// Diverted frames that matched no node link.
    pub(super) fn unmatched(&self) -> u64 {
        self.shared.unmatched.load(Ordering::Relaxed)
    }

    fn link_for_udp(&self, from: SocketAddr) -> Option<LinkId> {
        self.node.link_by_peer(&NodeAddr::from(from))
    }

    fn link_for_mac(&self, iface: IfaceId, mac: MacAddr) -> Option<LinkId> {
        self.carriers
            .iter()
            .position(|c| matches!(c, Carrier::Ether(i, m) if *i == iface && *m == mac))
            .map(|i| LinkId(i as u32))
    }

    /// Sends what the node queued and takes its events.
    fn flush(&mut self, now: Instant, router: &mut IpRouter) {
        while let Some(t) = self.node.poll_transmit() {
            let r = match self.carriers.get(t.link.0 as usize) {
                Some(Carrier::Udp(dst)) => router.send_udp(now, None, ANEP_UDP_PORT, *dst, &t.buf),
                Some(Carrier::Ether(iface, mac)) => {
                    router.send_ether(*iface, *mac, ETHERTYPE_ANEP, &t.buf)
                }
                None => continue,
            };
            match r {
                Ok(()) => self.shared.tx.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    tracing::debug!("node transmit on {} dropped: {}", t.link, e.as_str());
                    self.shared.tx_failed.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
        while let Some(ev) = self.node.poll_event() {
            match &ev {
                Event::NeighborUp { link, addr } => {
                    eprintln!("anode router: node neighbor up {addr} on {link}");
                }
                Event::NeighborDown { link, addr } => {
                    eprintln!("anode router: node neighbor down {addr} on {link}");
                }
                Event::Delivered(d) if PrefixExchange::is_ad_port(d.port) => {
                    if let Some(p) = self.prefixes.as_mut() {
                        p.receive(now, d.src, d.payload());
                    }
                    continue;
                }
                Event::Delivered(d) if self.events.is_none() => eprintln!(
                    "anode router: node delivered {} bytes from {} to port {}: {}",
                    d.payload().len(),
                    d.src,
                    d.port,
                    String::from_utf8_lossy(d.payload())
                ),
                Event::Delivered(_) => {}
                Event::Log { .. } => tracing::info!("node: {ev:?}"),
            }
            if let Some(tx) = &self.events
                && let Err(TrySendError::Full(_)) = tx.try_send(ev)
            {
                self.shared.event_drops.fetch_add(1, Ordering::Relaxed);
            }
        }
        let changes = self.node.route_changes();
        if changes != self.route_changes {
            self.route_changes = changes;
            if let Some(p) = self.prefixes.as_mut() {
                p.routes_changed(now);
            }
            let routes: Vec<String> = self
                .node
                .routes()
                .iter()
                .map(|r| match &r.next_hop {
                    Some(nh) => format!("{} via {:?} metric {}", r.dest, nh, r.metric),
                    None => format!("{} local", r.dest),
                })
                .collect();
            eprintln!("anode router: node routes: {}", routes.join("; "));
        }
    }

    fn send_due(&mut self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for s in self.sends.iter_mut().filter(|s| s.left > 0) {
            if s.next <= now {
                s.left -= 1;
                s.next = now + Duration::from_millis(s.cfg.every_ms.max(1));
                if let Err(e) = self.node.send_datagram(
                    now,
                    s.cfg.to,
                    s.cfg.port,
                    0,
                    None,
                    s.cfg.payload.as_bytes(),
                ) {
                    tracing::debug!("node datagram to {} dropped: {e:?}", s.cfg.to);
                }
            }
            if s.left > 0 {
                next = Some(next.map_or(s.next, |n| n.min(s.next)));
            }
        }
        next
    }

    /// Runs the control jobs waiting (at most [`JOBS_PER_ROUND`]); a panicking job is
    /// contained and counted.
    fn run_jobs(&mut self, now: Instant) {
        let Some(jobs) = &self.jobs else {
            return;
        };
        for _ in 0..JOBS_PER_ROUND {
            let Ok(job) = jobs.try_recv() else {
                break;
            };
            let node = &mut self.node;
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(node, now)));
            if r.is_err() {
                self.shared.job_panics.fetch_add(1, Ordering::Relaxed);
                tracing::error!("a control request panicked on the router's node (contained)");
            }
        }
    }
}

/// The UDP source and the range of the UDP payload of the IP packet at `frame[l3..]`.
fn udp_source(frame: &[u8], l3: usize) -> Option<(SocketAddr, std::ops::Range<usize>)> {
    let pkt = frame.get(l3..)?;
    let (src, l4) = match pkt.first()? >> 4 {
        4 => {
            let p = Ipv4Packet::new_checked(pkt).ok()?;
            (
                IpAddr::V4(p.src()),
                l3 + p.header_len()..l3 + usize::from(p.total_len()),
            )
        }
        6 => {
            let p = Ipv6Packet::new_checked(pkt).ok()?;
            let u = p.upper_layer().ok()?;
            (
                IpAddr::V6(p.src()),
                l3 + u.offset..l3 + 40 + usize::from(p.payload_len()),
            )
        }
        _ => return None,
    };
    let u = UdpPacket::new_checked(frame.get(l4.clone())?).ok()?;
    let start = l4.start + 8;
    Some((
        SocketAddr::new(src, u.src_port()),
        start..l4.start + usize::from(u.len()),
    ))
}

impl Hooks for NodeHooks {
    fn divert(
        &mut self,
        now: Instant,
        router: &mut IpRouter,
        iface: IfaceId,
        filter: FilterId,
        frame: &[u8],
        l3_offset: usize,
    ) {
        let (link, body) = if filter == self.udp_filter {
            match udp_source(frame, l3_offset) {
                Some((from, range)) => (self.link_for_udp(from), frame.get(range)),
                None => (None, None),
            }
        } else if filter == self.ether_filter {
            let src = MacAddr(
                frame
                    .get(6..12)
                    .and_then(|s| s.try_into().ok())
                    .unwrap_or([0; 6]),
            );
            (self.link_for_mac(iface, src), frame.get(l3_offset..))
        } else {
            (None, None)
        };
        match (link, body) {
            (Some(l), Some(b)) => {
                self.shared.rx.fetch_add(1, Ordering::Relaxed);
                self.node.handle_packet(now, l, b.to_vec());
            }
            _ => {
                self.shared.unmatched.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.flush(now, router);
    }

    fn poll(&mut self, now: Instant, router: &mut IpRouter) -> Option<Instant> {
        self.run_jobs(now);
        if self.node.poll_timeout().is_some_and(|t| t <= now) {
            self.node.handle_timeout(now);
        }
        let send = self.send_due(now);
        let ads = self
            .prefixes
            .as_mut()
            .map(|p| p.poll(now, &mut self.node, router));
        self.flush(now, router);
        [self.node.poll_timeout(), send, ads]
            .into_iter()
            .flatten()
            .min()
    }
}
