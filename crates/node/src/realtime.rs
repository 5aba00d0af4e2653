//! The realtime runner (`anode emulate --realtime`): every node runs in its own `anode-io`
//! UDP driver thread on 127.0.0.1 (or `[::1]` with `ipv6 = true`), with its own port, and the
//! scenario runs on the wall clock.
//!
//! Mapping from the file: node addresses become `127.0.0.1:PORT` (free ports reserved just
//! before start); each link direction becomes an egress [`anode_io::Impairment`] at the
//! sending node (delay, loss, rate, queue; loss draws are seeded from the file's seed, but
//! thread scheduling still makes runs differ).
//!
//! Differences from virtual time, stated in the report's `note`:
//! - times are wall-clock measurements: deliveries are timestamped when the runner collects
//!   them (every millisecond), reachability is sampled every 10 ms, and the report is not
//!   byte-identical from run to run;
//! - the driver cannot change impairments while it runs, so a failed link is taken
//!   administratively down at both ends (`Node::set_link_up`): the nodes learn of it at once
//!   instead of through missed hellos;
//! - per-link counters are not available (the drivers count per node); paths are not traced
//!   (hop counts come from the resource bound left).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anode_core::{DropReason, Event, LinkConfig, LinkId, NodeConfig};
use anode_io::Impairment;

use crate::builder::NodeBuilder;
use crate::run::{RunOptions, RunningNode};
use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_DATAGRAM;

use anode_emu::driver::{
    Assembly, LinkChange, all_pairs_reachable, assemble, link_name, node_report, us,
};
use anode_emu::{
    EeEvent, EmuError, FlowRec, LinkReport, LinkSpec, Net, Next, NodeFn, NodeSpec, ReachChange,
    Registry, Report, Step, StepCtx, Topology, Tracker,
};

const COLLECT_EVERY: Duration = Duration::from_millis(1);
const SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// The note every realtime report carries.
pub const NOTE: &str = "Real time over loopback UDP: times are wall-clock measurements (1 ms resolution, reachability sampled every 10 ms), so reports differ from run to run; a failed link is taken administratively down at both ends (nodes learn of it at once, not by missed hellos); per-link counters and paths are not available.";

struct RtNet {
    start: Instant,
    specs: Vec<NodeSpec>,
    link_specs: Vec<LinkSpec>,
    handles: Vec<RunningNode>,
    events: Vec<Receiver<Event>>,
    ends: Vec<[LinkId; 2]>,
    /// node -> its LinkId index -> peer node.
    peers: Vec<Vec<usize>>,
    by_addr: BTreeMap<NodeAddr, usize>,
    up: Vec<bool>,
    default_rb: Vec<u16>,
    tracker: Tracker,
    delivered: Vec<BTreeMap<u16, u64>>,
    ee_events: Vec<EeEvent>,
    /// Next-hop snapshot: tables[from][to].
    tables: Vec<Vec<Option<usize>>>,
    reach_state: bool,
    reach: Vec<ReachChange>,
    link_log: Vec<LinkChange>,
}

/// Reserves `n` distinct free UDP ports on `ip` (bound together, then released).
fn reserve_ports(ip: IpAddr, n: usize) -> Result<Vec<u16>, EmuError> {
    let mut socks = Vec::with_capacity(n);
    for _ in 0..n {
        let s = UdpSocket::bind(SocketAddr::new(ip, 0))
            .map_err(|e| EmuError::Realtime(format!("cannot bind a UDP socket on {ip}: {e}")))?;
        socks.push(s);
    }
    socks
        .iter()
        .map(|s| {
            s.local_addr()
                .map(|a| a.port())
                .map_err(|e| EmuError::Realtime(format!("cannot read a socket's port: {e}")))
        })
        .collect()
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl RtNet {
    fn collect(&mut self) {
        let now = self.start.elapsed();
        for (i, rx) in self.events.iter().enumerate() {
            while let Ok(e) = rx.try_recv() {
                anode_emu::driver::record_ee_event(&mut self.ee_events, now, i, &e);
                if let Event::Delivered(d) = e {
                    if let Some(m) = self.delivered.get_mut(i) {
                        *m.entry(d.port).or_insert(0) += 1;
                    }
                    if d.type_id == TYPE_DATAGRAM {
                        self.tracker.deliver(d.flow, i, now, d.rb);
                    }
                }
            }
        }
    }

    fn refresh(&mut self) {
        let n = self.specs.len();
        for from in 0..n {
            let Some(h) = self.handles.get(from) else {
                continue;
            };
            let hops: Vec<(NodeAddr, LinkId)> = h
                .call(|node, _| {
                    node.routes()
                        .into_iter()
                        .filter_map(|r| {
                            r.next_hop
                                .filter(|_| r.metric < node.config().routing.infinity)
                                .map(|h| (r.dest, h.link))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut row = vec![None; n];
            for (dest, link) in hops {
                if let (Some(&to), Some(&peer)) = (
                    self.by_addr.get(&dest),
                    self.peers.get(from).and_then(|p| p.get(link.0 as usize)),
                ) && let Some(slot) = row.get_mut(to)
                {
                    *slot = Some(peer);
                }
            }
            if let Some(t) = self.tables.get_mut(from) {
                *t = row;
            }
        }
    }

    fn sample(&mut self) {
        self.refresh();
        let ok = all_pairs_reachable(self);
        if ok != self.reach_state || self.reach.is_empty() {
            self.reach_state = ok;
            self.reach.push(ReachChange {
                at_us: us(self.start.elapsed()),
                all_pairs: ok,
            });
        }
    }
}

impl Net for RtNet {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn nodes(&self) -> &[NodeSpec] {
        &self.specs
    }

    fn links(&self) -> &[LinkSpec] {
        &self.link_specs
    }

    fn with_node(&mut self, node: usize, f: NodeFn) {
        if let Some(h) = self.handles.get(node) {
            let _ = h.call(move |n, now| f(n, now));
        }
    }

    fn send_tracked(
        &mut self,
        step: usize,
        from: usize,
        to: usize,
        port: u16,
        rb: Option<u16>,
        payload: &[u8],
    ) -> Result<(), DropReason> {
        let (Some(dst), Some(h)) = (
            self.specs.get(to).map(|s| s.address),
            self.handles.get(from),
        ) else {
            return Err(DropReason::NoRoute);
        };
        let rb = rb.unwrap_or(self.default_rb.get(from).copied().unwrap_or(32));
        let flow = self.tracker.open(FlowRec {
            step,
            from,
            to,
            sent_at: self.start.elapsed(),
            rb,
            bytes: payload.len(),
            refused: None,
            path: Vec::new(),
            arrival: None,
        });
        let payload = payload.to_vec();
        let r = h
            .call(move |n, now| n.send_datagram(now, dst, port, flow, Some(rb), &payload))
            .unwrap_or(Err(DropReason::EeDropped));
        if let Err(e) = r {
            self.tracker.refuse(flow, e);
        }
        r
    }

    fn set_link_up(&mut self, link: usize, up: bool) {
        let (Some(l), Some(ends)) = (self.link_specs.get(link), self.ends.get(link)) else {
            return;
        };
        if self.up.get(link) == Some(&up) {
            return;
        }
        for (node, id) in [(l.a, ends[0]), (l.b, ends[1])] {
            if let Some(h) = self.handles.get(node) {
                let _ = h.call(move |n, now| n.set_link_up(id, up, now));
            }
        }
        if let Some(u) = self.up.get_mut(link) {
            *u = up;
        }
        let partitions = !self.connected();
        self.link_log.push(LinkChange {
            at: self.start.elapsed(),
            link,
            up,
            partitions,
        });
    }

    fn link_up(&self, link: usize) -> bool {
        self.up.get(link).copied().unwrap_or(false)
    }

    fn next_hop(&mut self, from: usize, to: usize) -> Option<usize> {
        self.tables.get(from)?.get(to).copied().flatten()
    }

    fn ee_events(&self) -> &[EeEvent] {
        &self.ee_events
    }

    fn delivered(&self, node: usize, port: Option<u16>) -> u64 {
        self.delivered.get(node).map_or(0, |m| match port {
            Some(p) => m.get(&p).copied().unwrap_or(0),
            None => m.values().sum(),
        })
    }
}

/// Runs `topo` in real time over loopback UDP, for `[network] duration_ms` of wall-clock time.
pub fn run(topo: Topology, registry: &Registry) -> Result<Report, EmuError> {
    run_with(topo, registry, RealtimeOptions::default())
}

/// What a real-time run offers besides its report.
#[derive(Default)]
pub struct RealtimeOptions {
    /// Give every node a control socket `DIR/NAME.sock`, so tools attach to it while the
    /// emulation runs (`anode status --node NAME`); `None`: no sockets.
    pub sockets: Option<std::path::PathBuf>,
    /// Called about once a second with the time run so far and the whole duration.
    pub progress: Option<Box<dyn FnMut(Duration, Duration)>>,
}

impl std::fmt::Debug for RealtimeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealtimeOptions")
            .field("sockets", &self.sockets)
            .finish_non_exhaustive()
    }
}

/// The control socket of node `name` in a real-time run's socket directory (the file name
/// `anode_ctl::path::emulation_socket_path` gives).
pub fn socket_of(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    dir.join(anode_ctl::path::emulation_socket_name(name))
}

/// [`run`] with control sockets for the nodes and progress reports.
pub fn run_with(
    mut topo: Topology,
    registry: &Registry,
    mut opts: RealtimeOptions,
) -> Result<Report, EmuError> {
    let mut net = start(&topo, registry, opts.sockets.as_deref())?;
    let mut steps: Vec<Step> = std::mem::take(&mut topo.steps);
    drive(&mut net, &mut steps, topo.duration, &mut opts.progress);
    Ok(finish(net, &topo, &steps))
}

/// Wires the topology's nodes (free loopback ports, links with their impairments) and
/// starts each as a [`RunningNode`].
fn start(
    topo: &Topology,
    registry: &Registry,
    sockets: Option<&std::path::Path>,
) -> Result<RtNet, EmuError> {
    let ip = if topo.ipv6 {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    };
    let ports = reserve_ports(ip, topo.nodes.len())?;
    let specs: Vec<NodeSpec> = topo
        .nodes
        .iter()
        .zip(&ports)
        .map(|(n, p)| NodeSpec {
            name: n.name.clone(),
            address: NodeAddr::new(ip, *p),
        })
        .collect();
    let t0 = Instant::now();
    let mut builders: Vec<NodeBuilder> = specs
        .iter()
        .map(|s| {
            let mut cfg = NodeConfig::new(s.address);
            cfg.routing = topo.routing;
            NodeBuilder::new(cfg)
        })
        .collect();
    let mut impairments: Vec<Vec<Impairment>> = vec![Vec::new(); builders.len()];
    let mut peers = vec![Vec::new(); builders.len()];
    let mut ends = Vec::with_capacity(topo.links.len());
    for l in &topo.links {
        let mut ids = [LinkId(0); 2];
        for (dir, (me, peer)) in [(l.a, l.b), (l.b, l.a)].into_iter().enumerate() {
            let (Some(peer_spec), Some(b)) = (specs.get(peer), builders.get_mut(me)) else {
                return Err(EmuError::Realtime("a link names a missing node".into()));
            };
            let id = b.push_link(LinkConfig {
                name: format!("to-{}", peer_spec.name),
                peer: peer_spec.address,
                mtu: l.mtu,
                cost: l.cost,
                static_neighbor: false,
            });
            if let Some(slot) = ids.get_mut(dir) {
                *slot = id;
            }
            if let Some(p) = peers.get_mut(me) {
                p.push(peer);
            }
            if let Some(imp) = impairments.get_mut(me) {
                imp.push(Impairment {
                    peer: peer_spec.address.socket_addr(),
                    delay: l.delay,
                    loss: l.loss,
                    rate_bps: l.bandwidth_bps,
                    queue_bytes: l.queue_bytes as usize,
                });
            }
        }
        ends.push(ids);
    }
    let default_rb = builders.iter().map(|b| b.config().default_rb).collect();
    let mut handles = Vec::with_capacity(builders.len());
    let mut events = Vec::with_capacity(builders.len());
    for (i, ((b, imp), s)) in builders
        .into_iter()
        .zip(impairments)
        .zip(&specs)
        .enumerate()
    {
        let fail = |what: String| EmuError::Realtime(format!("node '{}': {what}", s.name));
        let mut node = b.build(t0).map_err(|e| fail(e.to_string()))?;
        registry.setup_node(i, &mut node);
        let mut opts = RunOptions::new(s.address.socket_addr());
        opts.driver.impairments = imp;
        opts.driver.seed = topo.seed ^ fnv(&s.name);
        if let Some(dir) = sockets {
            opts.socket = Some(socket_of(dir, &s.name));
            opts.tee_events = true;
        }
        let h = RunningNode::start(node, opts)
            .map_err(|e| fail(format!("could not start on {}: {e}", s.address)))?;
        events.push(
            h.take_events()
                .ok_or_else(|| fail("event channel unavailable".into()))?,
        );
        handles.push(h);
    }
    let n = specs.len();
    Ok(RtNet {
        start: t0,
        by_addr: specs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.address, i))
            .collect(),
        specs,
        link_specs: topo.links.clone(),
        handles,
        events,
        ends,
        peers,
        up: vec![true; topo.links.len()],
        default_rb,
        tracker: Tracker::default(),
        delivered: vec![BTreeMap::new(); n],
        ee_events: Vec::new(),
        tables: vec![vec![None; n]; n],
        reach_state: false,
        reach: Vec::new(),
        link_log: Vec::new(),
    })
}

/// Runs the steps at their wall-clock times until `end`, collecting deliveries every
/// millisecond and sampling reachability every 10 ms.
fn drive(
    net: &mut RtNet,
    steps: &mut [Step],
    end: Duration,
    progress: &mut Option<Box<dyn FnMut(Duration, Duration)>>,
) {
    let mut next_progress = Duration::from_secs(1);
    let mut due: BinaryHeap<Reverse<(Duration, usize)>> = steps
        .iter()
        .enumerate()
        .map(|(k, s)| Reverse((s.at, k)))
        .collect();
    let mut next_sample = Duration::ZERO;
    loop {
        let now = net.start.elapsed();
        if now >= end {
            break;
        }
        if now >= next_progress {
            if let Some(p) = progress.as_mut() {
                p(now, end);
            }
            next_progress = now + Duration::from_secs(1);
        }
        net.collect();
        if now >= next_sample {
            net.sample();
            next_sample = now + SAMPLE_EVERY;
        }
        let mut ran = false;
        while let Some(Reverse((at, k))) = due.peek().copied() {
            if at > net.start.elapsed() {
                break;
            }
            due.pop();
            if !ran {
                net.refresh();
                ran = true;
            }
            if let Some(step) = steps.get_mut(k) {
                let mut ctx = StepCtx::new(&mut *net, step.index);
                if let Next::After(d) = step.action.run(&mut ctx) {
                    due.push(Reverse((at + d, k)));
                }
            }
        }
        let wake = due
            .peek()
            .map_or(end, |r| r.0.0)
            .min(net.start.elapsed() + COLLECT_EVERY)
            .min(end);
        std::thread::sleep(wake.saturating_sub(net.start.elapsed()));
    }
    net.collect();
}

/// Stops every node and builds the report.
fn finish(mut net: RtNet, topo: &Topology, steps: &[Step]) -> Report {
    let handles = std::mem::take(&mut net.handles);
    let nodes = handles
        .into_iter()
        .zip(&net.specs)
        .filter_map(|(h, s)| Some(node_report(&h.stop().node?, s, &net.by_addr, &net.specs)))
        .collect();
    let links = net
        .link_specs
        .iter()
        .enumerate()
        .map(|(i, l)| LinkReport {
            name: link_name(&net.specs, &net.link_specs, i),
            delay_us: us(l.delay),
            bandwidth_bps: l.bandwidth_bps,
            loss: l.loss,
            mtu: l.mtu,
            queue_bytes: l.queue_bytes,
            up_at_end: net.up.get(i).copied().unwrap_or(false),
            a_to_b: None,
            b_to_a: None,
        })
        .collect();
    assemble(Assembly {
        topo,
        deterministic: false,
        note: NOTE,
        specs: &net.specs,
        link_specs: &net.link_specs,
        steps,
        tracker: &net.tracker,
        reach: &net.reach,
        link_log: &net.link_log,
        end: topo.duration,
        links,
        nodes,
        events: 0,
    })
}
