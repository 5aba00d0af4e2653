//! The virtual-time runner: a discrete-event simulator of the whole network in one thread.
//!
//! Time: one base `Instant` is captured when the simulator is built; virtual now is
//! `base + elapsed` and the clock is never read again, so a run takes as long as its events
//! take to compute, not as long as it covers.
//!
//! Events sit in a min-heap ordered by (time, sequence number); the sequence number breaks
//! ties in insertion order, so the run is a pure function of the topology file (and its seed).
//! Three kinds: a node timer (from `Node::poll_timeout`), a packet arriving at the end of a
//! link direction (see `link.rs`), and a scenario step.
//!
//! Invariants:
//! - after every input to a node (timer, packet, step) the node is *serviced*: its transmits
//!   are offered to its links, its events collected (deliveries go to the tracker), and its
//!   timer rescheduled; so no node holds queued work between events;
//! - a node has at most one live timer entry (`timers[i]`); heap entries that no longer match
//!   are stale and skipped;
//! - a timer scheduled right after `handle_timeout` lies strictly in the future, so a node that
//!   keeps reporting a past deadline cannot stall virtual time;
//! - all-pairs reachability is re-evaluated after any event that changed a forwarding entry or
//!   a link, and every change is logged (convergence and repair times come from that log); the
//!   re-evaluation looks only at the destinations whose entries changed (`reach.rs`), and
//!   links are found by their endpoints through an index, never by a scan;
//! - the route matrix (`routes`) holds, for every (destination, node), the link the node's
//!   forwarding table sends by: updated from each node's change log after every event, read
//!   by the reachability tracker and the `expect` steps instead of the n forwarding tables
//!   (debug builds check it against the tables at the end of every run).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::{Duration, Instant};

use anode_core::{DropReason, Event, LinkConfig, LinkId, Node, NodeConfig, Transmit};
use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_DATAGRAM;

use crate::error::EmuError;
use crate::link::{Link, Offer};
use crate::reach::{Hops, Reach};
use crate::report::{
    Assembly, LinkChange, LinkReport, NodeReport, ReachChange, Report, RouteReport, assemble,
    link_name, us,
};
use crate::scenario::{NO_HOP, Net, Next, NodeFn, Registry, Step, StepCtx};
use crate::topology::{LinkSpec, NodeSpec, Topology};
use crate::track::{FlowRec, Tracker, datagram_flow};
use crate::watch::{LinkSnap, NetSnapshot, NodeSnap, Tap};

#[derive(Debug)]
enum Ev {
    Timer(usize),
    Arrive {
        link: usize,
        dir: usize,
        generation: u64,
        buf: Vec<u8>,
    },
    Step(usize),
}

#[derive(Debug)]
struct Entry {
    at: Duration,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// The simulated network.
#[derive(Debug)]
pub struct Sim {
    base: Instant,
    now: Duration,
    seq: u64,
    heap: BinaryHeap<Reverse<Entry>>,
    nodes: Vec<Node>,
    timers: Vec<Option<Duration>>,
    specs: Vec<NodeSpec>,
    link_specs: Vec<LinkSpec>,
    links: Vec<Link>,
    /// The LinkId each end of a link has at its node: [at a, at b].
    ends: Vec<[LinkId; 2]>,
    /// node -> its LinkId index -> (link, direction when sending from this node).
    ports: Vec<Vec<(usize, usize)>>,
    by_addr: BTreeMap<NodeAddr, usize>,
    /// Node index by address (the reachability tracker's lookups).
    index: rustc_hash::FxHashMap<NodeAddr, usize>,
    /// Link index by its endpoints (lower index first).
    link_at: rustc_hash::FxHashMap<(usize, usize), usize>,
    /// Per node: (neighbor, link).
    adjacency: Vec<Vec<(usize, usize)>>,
    reach_tracker: Reach,
    /// Every node's route toward every destination as the link it leaves by, destination
    /// major (`routes[d * n + u]`, [`NO_HOP`] where u has none), kept from the nodes'
    /// forwarding changes: the reachability tracker walks paths here, in order, instead of
    /// hashing into n forwarding tables (4n² bytes: 58 MB for 3,815 nodes).
    routes: Vec<u32>,
    route_buf: Vec<NodeAddr>,
    tracker: Tracker,
    delivered: Vec<BTreeMap<u16, u64>>,
    ee_events: Vec<crate::scenario::EeEvent>,
    dirty: bool,
    reach_state: bool,
    reach: Vec<ReachChange>,
    link_log: Vec<LinkChange>,
    events: u64,
    taps: Vec<Box<dyn Tap>>,
}

impl Sim {
    /// Builds the nodes and links of `topo` at virtual time 0; `registry`'s node hooks run on
    /// every node.
    pub fn new(topo: &Topology, registry: &Registry) -> Result<Sim, EmuError> {
        let base = Instant::now();
        let mut nodes = Vec::with_capacity(topo.nodes.len());
        let lsas = anode_routing::LsaPool::new();
        for (i, n) in topo.nodes.iter().enumerate() {
            let mut cfg = NodeConfig::new(n.address);
            cfg.routing = topo.routing;
            let mut node = Node::new(cfg, base).map_err(|e| EmuError::Node {
                node: n.name.clone(),
                reason: e.to_string(),
            })?;
            node.set_route_log(true);
            node.share_lsa_lists(lsas.clone());
            registry.setup_node(i, &mut node);
            nodes.push(node);
        }
        let mut ports = vec![Vec::new(); nodes.len()];
        let mut links = Vec::with_capacity(topo.links.len());
        let mut ends = Vec::with_capacity(topo.links.len());
        for (li, l) in topo.links.iter().enumerate() {
            let mut ids = [LinkId(0); 2];
            for (dir, (me, peer)) in [(l.a, l.b), (l.b, l.a)].into_iter().enumerate() {
                let (Some(peer_spec), Some(node)) = (topo.nodes.get(peer), nodes.get_mut(me))
                else {
                    return Err(EmuError::Node {
                        node: topo.node_name(me).to_string(),
                        reason: format!("link {li} names a node that does not exist"),
                    });
                };
                let cfg = LinkConfig {
                    name: format!("to-{}", peer_spec.name),
                    peer: peer_spec.address,
                    mtu: l.mtu,
                    cost: l.cost,
                    static_neighbor: false,
                };
                let id = node.add_link(cfg, base);
                if let Some(p) = ports.get_mut(me) {
                    p.push((li, dir));
                }
                if let Some(slot) = ids.get_mut(dir) {
                    *slot = id;
                }
            }
            ends.push(ids);
            links.push(Link::new(
                l.clone(),
                topo.seed,
                (topo.node_name(l.a), topo.node_name(l.b)),
            ));
        }
        let n = nodes.len();
        let mut adjacency = vec![Vec::new(); n];
        let mut link_at = rustc_hash::FxHashMap::default();
        for (li, l) in topo.links.iter().enumerate() {
            link_at.insert((l.a.min(l.b), l.a.max(l.b)), li);
            if let Some(v) = adjacency.get_mut(l.a) {
                v.push((l.b, li));
            }
            if let Some(v) = adjacency.get_mut(l.b) {
                v.push((l.a, li));
            }
        }
        let mut sim = Sim {
            base,
            now: Duration::ZERO,
            seq: 0,
            heap: BinaryHeap::new(),
            nodes,
            timers: vec![None; n],
            specs: topo.nodes.clone(),
            link_specs: topo.links.clone(),
            links,
            ends,
            ports,
            by_addr: topo
                .nodes
                .iter()
                .enumerate()
                .map(|(i, s)| (s.address, i))
                .collect(),
            index: topo
                .nodes
                .iter()
                .enumerate()
                .map(|(i, s)| (s.address, i))
                .collect(),
            link_at,
            adjacency,
            reach_tracker: Reach::new(n),
            routes: vec![NO_HOP; n * n],
            route_buf: Vec::new(),
            tracker: Tracker::default(),
            delivered: vec![BTreeMap::new(); n],
            ee_events: Vec::new(),
            dirty: true,
            reach_state: false,
            reach: Vec::new(),
            link_log: Vec::new(),
            events: 0,
            taps: Vec::new(),
        };
        for i in 0..n {
            sim.service(i, false);
        }
        Ok(sim)
    }

    fn instant(&self) -> Instant {
        self.base + self.now
    }

    fn push(&mut self, at: Duration, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.seq,
            ev,
        }));
    }

    fn schedule_timer(&mut self, i: usize, after_timeout: bool) {
        let Some(node) = self.nodes.get(i) else {
            return;
        };
        let Some(t) = node.poll_timeout() else {
            if let Some(slot) = self.timers.get_mut(i) {
                *slot = None;
            }
            return;
        };
        let mut at = t.saturating_duration_since(self.base).max(self.now);
        if after_timeout && at <= self.now {
            at = self.now + Duration::from_micros(1);
        }
        if self.timers.get(i).copied().flatten() != Some(at) {
            if let Some(slot) = self.timers.get_mut(i) {
                *slot = Some(at);
            }
            self.push(at, Ev::Timer(i));
        }
    }

    /// Offers the node's transmits to its links, collects its events, reschedules its timer.
    fn service(&mut self, i: usize, after_timeout: bool) {
        while let Some(t) = self.nodes.get_mut(i).and_then(|n| n.poll_transmit()) {
            self.transmit(i, t);
        }
        let now = self.now;
        while let Some(e) = self.nodes.get_mut(i).and_then(|n| n.poll_event()) {
            crate::scenario::record_ee_event(&mut self.ee_events, now, i, &e);
            if let Event::Delivered(d) = e {
                if let Some(m) = self.delivered.get_mut(i) {
                    *m.entry(d.port).or_insert(0) += 1;
                }
                if d.type_id == TYPE_DATAGRAM {
                    self.tracker.deliver(d.flow, i, now, d.rb);
                }
            }
        }
        self.note_route_changes(i);
        self.schedule_timer(i, after_timeout);
    }

    /// Hands node `i`'s forwarding changes to the reachability tracker.
    fn note_route_changes(&mut self, i: usize) {
        let Some(node) = self.nodes.get_mut(i) else {
            return;
        };
        let mut buf = std::mem::take(&mut self.route_buf);
        let overflow = node.drain_route_changes(&mut buf);
        if overflow {
            buf.clear();
            buf.extend(self.specs.iter().map(|s| s.address));
        }
        if !buf.is_empty() {
            self.dirty = true;
        }
        let n = self.specs.len();
        for a in buf.drain(..) {
            let Some(&d) = self.index.get(&a) else {
                continue;
            };
            let (link, present) = self.route_link(i, &a);
            if let Some(slot) = self.routes.get_mut(d * n + i) {
                *slot = link;
            }
            self.reach_tracker.note(i, d, present);
        }
        self.route_buf = buf;
    }

    /// Node `u`'s route toward `dest` as the route matrix holds it: the link it leaves by
    /// ([`NO_HOP`] if none), and whether the node has a route at all.
    fn route_link(&self, u: usize, dest: &NodeAddr) -> (u32, bool) {
        let hop = self.nodes.get(u).and_then(|node| node.lookup(dest));
        let link = hop
            .and_then(|h| self.ports.get(u)?.get(h.link.0 as usize))
            .and_then(|&(li, _)| u32::try_from(li).ok());
        (link.unwrap_or(NO_HOP), hop.is_some())
    }

    fn transmit(&mut self, from: usize, t: Transmit) {
        let Some(&(li, dir)) = self.ports.get(from).and_then(|p| p.get(t.link.0 as usize)) else {
            return;
        };
        if let Some(flow) = datagram_flow(&t.buf) {
            self.tracker.hop(flow, from);
        }
        let now = self.now;
        if !self.taps.is_empty()
            && let (Some(me), Some(peer)) = (self.specs.get(from), self.link_specs.get(li))
        {
            let to = if dir == 0 { peer.b } else { peer.a };
            if let Some(to) = self.specs.get(to) {
                for tap in &mut self.taps {
                    tap.packet(li, now, me.address, to.address, &t.buf);
                }
            }
        }
        let Some(link) = self.links.get_mut(li) else {
            return;
        };
        if let Offer::Arrive { at, generation } = link.offer(dir, now, t.buf.len()) {
            self.push(
                at,
                Ev::Arrive {
                    link: li,
                    dir,
                    generation,
                    buf: t.buf,
                },
            );
        }
    }

    fn handle(&mut self, ev: Ev, at: Duration) {
        match ev {
            Ev::Timer(i) => {
                if self.timers.get(i).copied().flatten() != Some(at) {
                    return;
                }
                if let Some(slot) = self.timers.get_mut(i) {
                    *slot = None;
                }
                let now = self.instant();
                if let Some(n) = self.nodes.get_mut(i) {
                    n.handle_timeout(now);
                }
                self.service(i, true);
            }
            Ev::Arrive {
                link,
                dir,
                generation,
                buf,
            } => {
                let (Some(l), Some(ends)) = (self.links.get_mut(link), self.ends.get(link)) else {
                    return;
                };
                if !l.arrive(dir, generation, buf.len()) {
                    return;
                }
                let (to, id) = if dir == 0 {
                    (l.spec.b, ends[1])
                } else {
                    (l.spec.a, ends[0])
                };
                let now = self.instant();
                if let Some(n) = self.nodes.get_mut(to) {
                    n.handle_packet(now, id, buf);
                }
                self.service(to, false);
            }
            Ev::Step(_) => {}
        }
    }

    /// The link behind node `u`'s port `link` and the node at its other end (up or not).
    fn across(&self, u: usize, link: LinkId) -> Option<(&Link, usize)> {
        let &(li, dir) = self.ports.get(u)?.get(link.0 as usize)?;
        let l = self.links.get(li)?;
        Some((l, if dir == 0 { l.spec.b } else { l.spec.a }))
    }

    fn update_reachability(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let mut tracker = std::mem::replace(&mut self.reach_tracker, Reach::new(0));
        let ok = tracker.evaluate(self);
        self.reach_tracker = tracker;
        if ok != self.reach_state || self.reach.is_empty() {
            self.reach_state = ok;
            self.reach.push(ReachChange {
                at_us: us(self.now),
                all_pairs: ok,
            });
        }
    }

    /// Datagrams tracked so far.
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }
}

impl Net for Sim {
    fn now(&self) -> Duration {
        self.now
    }

    fn nodes(&self) -> &[NodeSpec] {
        &self.specs
    }

    fn links(&self) -> &[LinkSpec] {
        &self.link_specs
    }

    fn with_node(&mut self, node: usize, f: NodeFn) {
        let now = self.instant();
        if let Some(n) = self.nodes.get_mut(node) {
            f(n, now);
            self.service(node, false);
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
        let (Some(dst), Some(node)) = (self.specs.get(to).map(|s| s.address), self.nodes.get(from))
        else {
            return Err(DropReason::NoRoute);
        };
        let rb = rb.unwrap_or(node.config().default_rb);
        let flow = self.tracker.open(FlowRec {
            step,
            from,
            to,
            sent_at: self.now,
            rb,
            bytes: payload.len(),
            refused: None,
            path: Vec::new(),
            arrival: None,
        });
        let now = self.instant();
        let r = match self.nodes.get_mut(from) {
            Some(n) => n.send_datagram(now, dst, port, flow, Some(rb), payload),
            None => Err(DropReason::NoRoute),
        };
        if let Err(e) = r {
            self.tracker.refuse(flow, e);
        }
        self.service(from, false);
        r
    }

    fn set_link_up(&mut self, link: usize, up: bool) {
        let now = self.now;
        let Some(l) = self.links.get_mut(link) else {
            return;
        };
        if l.is_up() == up {
            return;
        }
        l.set_up(up, now);
        self.reach_tracker.links_changed();
        let partitions = !self.connected();
        self.link_log.push(LinkChange {
            at: now,
            link,
            up,
            partitions,
        });
        self.dirty = true;
    }

    fn link_up(&self, link: usize) -> bool {
        self.links.get(link).is_some_and(|l| l.is_up())
    }

    fn link_between(&self, a: usize, b: usize) -> Option<usize> {
        self.link_at.get(&(a.min(b), a.max(b))).copied()
    }

    fn connected(&self) -> bool {
        let n = self.specs.len();
        let mut seen = vec![false; n];
        let mut stack = vec![0usize];
        let mut count = 0;
        if let Some(s) = seen.first_mut() {
            *s = true;
            count = 1;
        }
        while let Some(x) = stack.pop() {
            for &(y, li) in self.adjacency.get(x).map_or(&[][..], |v| v.as_slice()) {
                if self.link_up(li)
                    && let Some(s) = seen.get_mut(y)
                    && !*s
                {
                    *s = true;
                    count += 1;
                    stack.push(y);
                }
            }
        }
        count == n
    }

    fn next_hop(&mut self, from: usize, to: usize) -> Option<usize> {
        let dst = self.specs.get(to)?.address;
        let hop = self.nodes.get(from)?.lookup(&dst)?;
        self.across(from, hop.link).map(|(_, v)| v)
    }

    /// The route matrix with links that are down left out.
    fn next_hop_table(&mut self) -> Vec<u32> {
        let n = self.specs.len();
        let mut t = vec![NO_HOP; n * n];
        for (k, slot) in t.iter_mut().enumerate() {
            if let Some(v) = self.hop(k % n, k / n)
                && let Ok(v) = u32::try_from(v)
            {
                *slot = v;
            }
        }
        t
    }

    fn ee_events(&self) -> &[crate::scenario::EeEvent] {
        &self.ee_events
    }

    fn delivered(&self, node: usize, port: Option<u16>) -> u64 {
        self.delivered.get(node).map_or(0, |m| match port {
            Some(p) => m.get(&p).copied().unwrap_or(0),
            None => m.values().sum(),
        })
    }
}

impl Sim {
    /// The first (node, destination) whose entry in the route matrix is not what the node's
    /// forwarding table says (debug builds check this at the end of every run, so every
    /// emulator test checks that the forwarding changes reached the matrix).
    fn routes_disagreeing(&self) -> Option<(usize, usize)> {
        let n = self.specs.len();
        for u in 0..self.nodes.len() {
            for (d, spec) in self.specs.iter().enumerate() {
                let (want, _) = self.route_link(u, &spec.address);
                if self.routes.get(d * n + u) != Some(&want) {
                    return Some((u, d));
                }
            }
        }
        None
    }
}

impl Hops for Sim {
    fn hop(&self, u: usize, d: usize) -> Option<usize> {
        let n = self.specs.len();
        if u >= n {
            return None;
        }
        let li = *self.routes.get(d.checked_mul(n)?.checked_add(u)?)?;
        let l = self.links.get(usize::try_from(li).ok()?)?;
        let v = if l.spec.a == u { l.spec.b } else { l.spec.a };
        l.is_up().then_some(v)
    }
}

/// Runs `topo` in virtual time with the built-in actions' node hooks from `registry` and
/// returns the report.
pub fn run(topo: Topology, registry: &Registry) -> Result<Report, EmuError> {
    run_tapped(topo, registry, Vec::new())
}

/// [`run`], watched by `taps` (see [`crate::watch`]).
pub fn run_tapped(
    mut topo: Topology,
    registry: &Registry,
    taps: Vec<Box<dyn Tap>>,
) -> Result<Report, EmuError> {
    let mut sim = Sim::new(&topo, registry)?;
    sim.taps = taps;
    let end = topo.duration;
    let mut steps: Vec<Step> = std::mem::take(&mut topo.steps);
    for k in 0..steps.len() {
        let at = steps.get(k).map_or(Duration::ZERO, |s| s.at);
        sim.push(at, Ev::Step(k));
    }
    sim.update_reachability();
    while let Some(Reverse(top)) = sim.heap.peek() {
        if top.at > end {
            break;
        }
        let Some(Reverse(e)) = sim.heap.pop() else {
            break;
        };
        sim.now = e.at;
        sim.events += 1;
        match e.ev {
            Ev::Step(k) => {
                if let Some(step) = steps.get_mut(k) {
                    let mut ctx = StepCtx {
                        net: &mut sim,
                        step: step.index,
                    };
                    if let Next::After(d) = step.action.run(&mut ctx) {
                        sim.push(e.at + d, Ev::Step(k));
                    }
                }
            }
            ev => sim.handle(ev, e.at),
        }
        sim.update_reachability();
        sim.watch(false);
    }
    sim.now = end;
    sim.watch(true);
    debug_assert_eq!(
        sim.routes_disagreeing(),
        None,
        "the route matrix missed a forwarding change"
    );
    Ok(build_report(&sim, &topo, &steps))
}

impl Sim {
    /// Lets the taps look: a snapshot for every tap that asks (all of them when `done`).
    fn watch(&mut self, done: bool) {
        if self.taps.is_empty() {
            return;
        }
        let (now, events) = (self.now, self.events);
        let mut taps = std::mem::take(&mut self.taps);
        let mut snap: Option<NetSnapshot> = None;
        for tap in &mut taps {
            if tap.step(now, events) || done {
                let s = snap.get_or_insert_with(|| self.snapshot(done));
                tap.snapshot(s);
            }
        }
        self.taps = taps;
    }

    /// The network now (see [`NetSnapshot`]).
    pub fn snapshot(&self, done: bool) -> NetSnapshot {
        let tables = self.nodes.len() <= crate::watch::ROUTE_TABLES_MAX_NODES;
        let name = |a: &NodeAddr| addr_name(&self.by_addr, &self.specs, a);
        let nodes = self
            .nodes
            .iter()
            .zip(&self.specs)
            .map(|(n, s)| {
                let c = n.counters();
                let inf = n.config().routing.infinity;
                let routes: Vec<_> = n
                    .routes()
                    .into_iter()
                    .filter(|r| r.metric < inf && r.next_hop.is_some())
                    .collect();
                let route_table = if tables {
                    routes
                        .iter()
                        .filter_map(|r| Some((name(&r.dest), name(&r.next_hop?.addr), r.metric)))
                        .collect()
                } else {
                    Vec::new()
                };
                NodeSnap {
                    name: s.name.clone(),
                    address: s.address,
                    neighbors: n.neighbors().len(),
                    routes: routes.len(),
                    route_table,
                    rx_packets: c.rx_packets,
                    tx_packets: c.tx_packets,
                    to_ee: c.to_ee,
                    delivered: c.delivered,
                    drops: c.total_drops(),
                }
            })
            .collect();
        let links = self
            .links
            .iter()
            .map(|l| LinkSnap {
                a: l.spec.a,
                b: l.spec.b,
                up: l.is_up(),
                a_to_b: l.stats(0),
                b_to_a: l.stats(1),
            })
            .collect();
        NetSnapshot {
            now: self.now,
            events: self.events,
            done,
            nodes,
            links,
        }
    }
}

/// Node name of an address, or the address.
fn addr_name(by_addr: &BTreeMap<NodeAddr, usize>, specs: &[NodeSpec], a: &NodeAddr) -> String {
    by_addr
        .get(a)
        .and_then(|i| specs.get(*i))
        .map_or_else(|| a.to_string(), |s| s.name.clone())
}

fn build_report(sim: &Sim, topo: &Topology, steps: &[Step]) -> Report {
    let links = sim
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| LinkReport {
            name: link_name(&sim.specs, &sim.link_specs, i),
            delay_us: us(l.spec.delay),
            bandwidth_bps: l.spec.bandwidth_bps,
            loss: l.spec.loss,
            mtu: l.spec.mtu,
            queue_bytes: l.spec.queue_bytes,
            up_at_end: l.is_up(),
            a_to_b: Some(l.stats(0)),
            b_to_a: Some(l.stats(1)),
        })
        .collect();
    let nodes = sim
        .nodes
        .iter()
        .zip(&sim.specs)
        .map(|(n, s)| node_report(n, s, &sim.by_addr, &sim.specs))
        .collect();
    assemble(Assembly {
        topo,
        deterministic: true,
        note: "Deterministic virtual time: the same file and seed give a byte-identical report.",
        specs: &sim.specs,
        link_specs: &sim.link_specs,
        steps,
        tracker: &sim.tracker,
        reach: &sim.reach,
        link_log: &sim.link_log,
        end: sim.now,
        links,
        nodes,
        events: sim.events,
    })
}

/// One node's report entry: counters, neighbors and routes by name.
pub fn node_report(
    n: &Node,
    s: &NodeSpec,
    by_addr: &BTreeMap<NodeAddr, usize>,
    specs: &[NodeSpec],
) -> NodeReport {
    let all = n.routes();
    let route_count = all.len();
    let tables = specs.len() <= crate::report::ROUTE_TABLES_MAX_NODES;
    // Not `filter(|_| tables)`: an in-place collect would keep the whole table's
    // allocation behind every empty list (1.2 GB for a 3,815-node run).
    let all = if tables { all } else { Vec::new() };
    let mut routes: Vec<(usize, RouteReport)> = all
        .into_iter()
        .map(|r| {
            (
                by_addr.get(&r.dest).copied().unwrap_or(usize::MAX),
                RouteReport {
                    dest: addr_name(by_addr, specs, &r.dest),
                    metric: r.metric,
                    next_hop: r.next_hop.map(|h| addr_name(by_addr, specs, &h.addr)),
                    kind: r.kind,
                },
            )
        })
        .collect();
    routes.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.dest.cmp(&b.1.dest)));
    let mut neighbors: Vec<(usize, String)> = n
        .neighbors()
        .iter()
        .map(|x| {
            (
                by_addr.get(&x.addr).copied().unwrap_or(usize::MAX),
                addr_name(by_addr, specs, &x.addr),
            )
        })
        .collect();
    neighbors.sort();
    NodeReport {
        name: s.name.clone(),
        address: s.address.to_string(),
        neighbors: neighbors.into_iter().map(|x| x.1).collect(),
        counters: n.counters().clone(),
        route_count,
        routes: routes.into_iter().map(|x| x.1).collect(),
        routing: n.routing_stats().into_iter().collect(),
    }
}
