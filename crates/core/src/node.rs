//! The [`Node`]: its state, its public driving API, and the timer work.

use std::collections::VecDeque;
use std::time::Instant;

use anode_routing::Routing;
use anode_routing::dv::Route;
use anode_routing::neighbors::{NeighborEvent, NeighborTable};
use anode_routing::{LinkId, NextHop};
use anode_wire::NodeAddr;
use anode_wire::anep::{AnepPacket, TYPE_CONTROL, TYPE_DATAGRAM};
use anode_wire::control::Control;
use anode_wire::datagram::Datagram;
use anode_wire::transit::TransitRepr;

use crate::cut::{CutThrough, CutVerdict};
use crate::ee::NodeContext;
use crate::hooks::{EeCall, HookInfo, HookPoint, HookVerdict, PacketHooks};
use crate::load::{LinkLoad, LinkTx};
use crate::txq::{LinkQueue, QueueDiscipline, TxQueues};
use crate::{
    ConfigError, Counters, Delivery, Dispatch, DropReason, EePacket, Event, ExecutionEnvironment,
    LinkConfig, NodeConfig, Transmit,
};

/// A link as the node holds it.
#[derive(Debug, Clone)]
pub(crate) struct LinkInfo {
    pub cfg: LinkConfig,
    /// What it sent (`load.rs`).
    pub tx: LinkTx,
}

/// Everything of a node except its EEs, so an EE can borrow it through [`NodeContext`].
#[derive(Debug)]
pub(crate) struct Core {
    pub addr: NodeAddr,
    /// `addr` in its 18-byte wire encoding, for the fast path's compares and writes.
    pub addr_raw: [u8; anode_wire::addr::NODE_ADDR_LEN],
    pub cfg: NodeConfig,
    pub links: Vec<LinkInfo>,
    pub neighbors: NeighborTable,
    pub routing: Routing,
    pub out: VecDeque<Transmit>,
    /// Control messages (hellos, routing updates, code transfer): sent before `out`, in a
    /// queue of their own, so no EE or flow can starve routing.
    pub out_ctl: VecDeque<Transmit>,
    pub events: VecDeque<Event>,
    pub counters: Counters,
    /// The most recent drop, so `inject` can tell its caller why.
    pub last_drop: Option<DropReason>,
    /// While `inject` runs: the first drop an EE decided ("ee/reason"), so the caller learns
    /// the EE's reason and not only [`DropReason::EeDropped`]. Not tracked otherwise (no
    /// cost on the packet path).
    pub inject_ee_drop: Option<Option<String>>,
    /// Where the packet being handled stands in the outcome ledger (`ledger.rs`).
    pub(crate) cur: crate::ledger::Cur,
    /// The cut-through table, if one is installed (`cut.rs`).
    pub cut: Option<Box<dyn CutThrough>>,
    /// Packet processors at the hook points, if any (`hooks.rs`).
    pub hooks: Option<Box<dyn PacketHooks>>,
    /// Per-link transmit queues, if any link has a queue discipline (`txq.rs`).
    pub txq: Option<TxQueues>,
    /// The link the packet being handled arrived on (for queue disciplines).
    pub cur_in: Option<LinkId>,
    /// The time of the call being handled (for hooks run where no time is passed down).
    pub now: Instant,
    /// Neighbor and link facts for [`crate::NodeView`]s; `None` after a change.
    pub view_cache: Option<std::sync::Arc<crate::view::ViewCache>>,
    /// Bumped whenever `view_cache` is dropped (a neighbor or link changed).
    pub view_epoch: u64,
}

/// What a copy of the fast path outside the node must leave to it ([`Node::transit_view`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransitView {
    /// Packet hooks run at ingress, pre- or post-routing: every packet goes through the node.
    pub hooks: bool,
    /// A cut-through channel is open that treats passive packets differently from the fast
    /// path (`CutThrough::diverts`): the node classifies every EE packet.
    pub cut_through: bool,
    /// The Type IDs of the node's EEs, in registration order.
    pub ee_types: Vec<u16>,
    /// Links with a queueing discipline: the node paces what leaves on them.
    pub qdisc_links: Vec<LinkId>,
}

/// The EE a packet of an EE's Type ID goes to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum EeRef {
    /// The built-in EE at this index of `Node::ees`.
    BuiltIn(usize),
    /// The EE module the packet hooks run (`PacketHooks::ee_owner`), running or stopped.
    Module { running: bool },
}

/// A neighbor as reported by [`Node::neighbors`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct NeighborInfo {
    /// The link.
    pub link: LinkId,
    /// The neighbor's address.
    pub addr: NodeAddr,
}

/// One anode node, sans-IO. See the crate docs for how to drive it.
pub struct Node {
    pub(crate) core: Core,
    pub(crate) ees: Vec<Box<dyn ExecutionEnvironment>>,
    /// Packets handed to each EE (parallel to `ees`).
    ee_packets: Vec<u64>,
    /// Type IDs of the EEs their operator stopped: their packets and control messages are
    /// dropped (`ee_stopped`); their timers still run.
    pub(crate) stopped: Vec<u16>,
}

/// An execution environment as the node runs it (`Node::ees`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EeInfo {
    /// Its ANEP Type ID.
    pub type_id: u16,
    /// Its name ("capsule", "plan", "deploy").
    pub name: String,
    /// False once stopped: its packets are dropped until it is started again.
    pub running: bool,
    /// Packets handed to it.
    pub packets: u64,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("addr", &self.core.addr)
            .field("links", &self.core.links.len())
            .field(
                "ees",
                &self
                    .ees
                    .iter()
                    .map(|e| e.name().to_string())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Node {
    /// A node with no links. Fails if the configuration does not validate.
    pub fn new(cfg: NodeConfig, now: Instant) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let r = cfg.routing;
        Ok(Node {
            core: Core {
                addr: cfg.address,
                addr_raw: cfg.address.to_bytes(),
                neighbors: NeighborTable::new(cfg.address, r.hello_interval, r.dead_interval),
                routing: Routing::new(cfg.address, r, now),
                links: Vec::new(),
                out: VecDeque::new(),
                out_ctl: VecDeque::new(),
                events: VecDeque::new(),
                counters: Counters::default(),
                last_drop: None,
                inject_ee_drop: None,
                cur: crate::ledger::Cur::Idle,
                cut: None,
                hooks: None,
                txq: None,
                cur_in: None,
                now,
                view_cache: None,
                view_epoch: 0,
                cfg,
            },
            ees: Vec::new(),
            ee_packets: Vec::new(),
            stopped: Vec::new(),
        })
    }

    /// The time of the last call the node handled (its creation time before any): a driver
    /// setting up a node just made reads the time the node was made at.
    pub fn last_now(&self) -> Instant {
        self.core.now
    }

    /// This node's address.
    pub fn address(&self) -> NodeAddr {
        self.core.addr
    }

    /// The configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.core.cfg
    }

    /// Adds a point-to-point link; hellos start at once.
    pub fn add_link(&mut self, cfg: LinkConfig, now: Instant) -> LinkId {
        let id = self.core.neighbors.add_link(now);
        let pin = cfg.static_neighbor.then_some(cfg.peer);
        self.core.links.push(LinkInfo {
            cfg,
            tx: LinkTx::default(),
        });
        self.core.drop_view_cache();
        if let Some(peer) = pin
            && let Some(ev) = self.core.neighbors.pin(id, peer, now)
        {
            self.core.neighbor_event(now, ev);
        }
        id
    }

    /// The links, in id order.
    pub fn links(&self) -> impl Iterator<Item = (LinkId, &LinkConfig, bool)> {
        self.core.links.iter().enumerate().map(|(i, l)| {
            (
                LinkId(i as u32),
                &l.cfg,
                self.core.neighbors.is_enabled(LinkId(i as u32)),
            )
        })
    }

    /// What `link` has sent and how fast lately, at `now` (`load.rs`); `None` if there is no
    /// such link.
    pub fn link_load(&self, link: LinkId, now: Instant) -> Option<LinkLoad> {
        self.core.link_load(link, now)
    }

    /// The link whose peer is `peer` (drivers map a datagram's source to its link with this).
    pub fn link_by_peer(&self, peer: &NodeAddr) -> Option<LinkId> {
        self.core
            .links
            .iter()
            .position(|l| l.cfg.peer == *peer)
            .map(|i| LinkId(i as u32))
    }

    /// Takes a link administratively up or down. Down drops its neighbor at once.
    pub fn set_link_up(&mut self, link: LinkId, up: bool, now: Instant) {
        self.core.drop_view_cache();
        if let Some(ev) = self.core.neighbors.set_enabled(link, up, now) {
            self.core.neighbor_event(now, ev);
        }
        self.core.flush_control(now);
    }

    /// Adds a static route to `dest` through neighbor `via`.
    pub fn add_static_route(&mut self, dest: NodeAddr, via: NodeAddr, metric: u16, now: Instant) {
        self.core.routing.add_static(now, dest, via, metric);
    }

    /// Removes the static route to `dest`; false if there was none.
    pub fn remove_static_route(&mut self, dest: NodeAddr, now: Instant) -> bool {
        self.core.routing.remove_static(now, dest)
    }

    /// Registers an execution environment for its Type ID, replacing any earlier one.
    pub fn register_ee(&mut self, ee: Box<dyn ExecutionEnvironment>) {
        let t = ee.type_id();
        if let Some(i) = self.ees.iter().position(|e| e.type_id() == t) {
            self.ees.remove(i);
            self.ee_packets.remove(i);
        }
        self.ees.push(ee);
        self.ee_packets.push(0);
    }

    /// The EEs, in registration order.
    pub fn ees(&self) -> Vec<EeInfo> {
        self.ees
            .iter()
            .zip(&self.ee_packets)
            .map(|(e, n)| EeInfo {
                type_id: e.type_id(),
                name: e.name().to_string(),
                running: !self.stopped.contains(&e.type_id()),
                packets: *n,
            })
            .collect()
    }

    /// Stops (`running` false) or starts the EE of `type_id`. A stopped EE keeps its state
    /// (code cache, soft state, domains); the packets it would get are dropped and counted
    /// as `ee_stopped` until it is started again, and the cut-through channels it opened
    /// are closed (their flows are the EE's packets too; it opens them again once started).
    /// False if no EE has that Type ID.
    pub fn set_ee_running(&mut self, type_id: u16, running: bool) -> bool {
        if !self.ees.iter().any(|e| e.type_id() == type_id) {
            return false;
        }
        let was_stopped = self.stopped.contains(&type_id);
        self.stopped.retain(|t| *t != type_id);
        if !running {
            self.stopped.push(type_id);
            if !was_stopped && let Some(ee) = self.ees.iter_mut().find(|e| e.type_id() == type_id) {
                let now = self.core.now;
                ee.on_stop(&mut NodeContext {
                    core: &mut self.core,
                    now,
                });
            }
            let closed = self.core.cut.as_mut().map_or(0, |c| c.close_type(type_id));
            if closed > 0 {
                self.core.push_event(Event::Log {
                    ee: "node".into(),
                    message: format!(
                        "EE {type_id:#06x} stopped: closed its {closed} cut-through channels"
                    ),
                });
            }
        }
        true
    }

    /// The EE registered for `type_id`.
    pub fn ee_mut(&mut self, type_id: u16) -> Option<&mut dyn ExecutionEnvironment> {
        self.ees
            .iter_mut()
            .find(|e| e.type_id() == type_id)
            .map(|b| &mut **b as _)
    }

    /// Runs `f` with the EE registered for `type_id` and a context on the node, e.g. for a
    /// local application's request. `None` if no such EE.
    pub fn with_ee<R>(
        &mut self,
        now: Instant,
        type_id: u16,
        f: impl FnOnce(&mut dyn ExecutionEnvironment, &mut NodeContext<'_>) -> R,
    ) -> Option<R> {
        let ee = self.ees.iter_mut().find(|e| e.type_id() == type_id)?;
        self.core.now = now;
        let mut ctx = NodeContext {
            core: &mut self.core,
            now,
        };
        let r = f(&mut **ee, &mut ctx);
        self.core.release_txq(now);
        Some(r)
    }

    /// What each EE wants kept across a cold restart, by Type ID
    /// ([`crate::ExecutionEnvironment::durable_state`]).
    pub fn durable_states(&self) -> Vec<(u16, serde_json::Value)> {
        self.ees
            .iter()
            .filter_map(|e| Some((e.type_id(), e.durable_state()?)))
            .collect()
    }

    /// Gives the EE of `type_id` what it kept before a cold restart; an error says why it
    /// was refused (no such EE, or the EE's reason).
    pub fn restore_durable(
        &mut self,
        type_id: u16,
        state: &serde_json::Value,
    ) -> Result<(), String> {
        match self.ees.iter_mut().find(|e| e.type_id() == type_id) {
            Some(e) => e.restore_durable(state),
            None => Err(format!("no EE with Type ID {type_id} on this node")),
        }
    }

    /// The domain reports of the EEs that keep domains (NodeOS layer), in registration order.
    pub fn domain_reports(&self) -> Vec<crate::DomainReport> {
        self.ees.iter().filter_map(|e| e.domain_report()).collect()
    }

    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.core.counters
    }

    /// The routing table, sorted by destination (unreachable entries included).
    pub fn routes(&self) -> Vec<Route> {
        self.core.routing.routes()
    }

    /// The forwarding table (every reachable destination by its wire encoding).
    pub fn fib(&self) -> &anode_routing::Fib {
        self.core.routing.fib()
    }

    /// Next hop toward `dst`.
    pub fn lookup(&self, dst: &NodeAddr) -> Option<NextHop> {
        self.core.routing.lookup(dst)
    }

    /// The up neighbors.
    pub fn neighbors(&self) -> Vec<NeighborInfo> {
        self.core
            .neighbors
            .up()
            .map(|(link, n)| NeighborInfo { link, addr: n.addr })
            .collect()
    }

    /// Number of route changes so far (for convergence reports).
    pub fn route_changes(&self) -> u64 {
        self.core.routing.change_count()
    }

    /// The routing protocol's counters by name (`anode_routing::RoutingStats`), with the
    /// protocol's name first (`protocol_ls` or `protocol_dv`, value 1) and the number of
    /// routes.
    pub fn routing_stats(&self) -> Vec<(String, u64)> {
        let p = self.core.routing.protocol();
        let name = match p {
            anode_routing::Protocol::Dv => "dv",
            anode_routing::Protocol::Ls => "ls",
        };
        let mut v = vec![
            (format!("protocol_{name}"), 1),
            ("routes".to_string(), self.core.routing.fib().len() as u64),
            ("route_changes".to_string(), self.route_changes()),
        ];
        v.extend(
            self.routing_counters()
                .into_iter()
                .map(|(k, n)| (k.to_string(), n)),
        );
        v
    }

    /// The routing protocol's own counters alone, by name
    /// (`anode_routing::RoutingStats::fields` of the protocol running).
    pub fn routing_counters(&self) -> Vec<(&'static str, u64)> {
        let r = &self.core.routing;
        r.stats().fields(r.protocol())
    }

    /// Starts (or stops) logging which destinations' forwarding entries change (for the
    /// emulator's reachability tracker; off by default, bounded).
    pub fn set_route_log(&mut self, on: bool) {
        self.core.routing.change_log().set_enabled(on);
    }

    /// Shares stored LSA link lists with the other nodes of this process given the same
    /// pool (the emulator: one copy per LSA instead of one per node; see
    /// [`anode_routing::LsaPool`]).
    pub fn share_lsa_lists(&mut self, pool: anode_routing::LsaPool) {
        self.core.routing.share_lsa_lists(pool);
    }

    /// Moves the destinations whose forwarding entry changed since the last call into `out`
    /// (possibly repeated); true if the log overflowed (then any destination may have).
    pub fn drain_route_changes(&mut self, out: &mut Vec<NodeAddr>) -> bool {
        self.core.routing.change_log().drain(out)
    }

    /// Sends a datagram from a local application to `port` at `dst`.
    pub fn send_datagram(
        &mut self,
        now: Instant,
        dst: NodeAddr,
        port: u16,
        flow: u64,
        rb: Option<u16>,
        payload: &[u8],
    ) -> Result<(), DropReason> {
        let d = self.local_datagram(0, (dst, port), (flow, rb), payload);
        let buf = d.to_packet();
        self.inject_built(now, buf)
    }

    /// Sends a datagram to `to` (node, application port) under the Type ID of an EE module
    /// (`type_id`), with the evaluate-at-every-hop flag if `every_hop`: the packet the EE
    /// module gets ([`crate::hooks::EeCall`]); nodes without the EE forward it toward its
    /// destination (ANEP destination option, not discard-if-unknown).
    pub fn send_ee_datagram(
        &mut self,
        now: Instant,
        (type_id, every_hop): (u16, bool),
        to: (NodeAddr, u16),
        (flow, rb): (u64, Option<u16>),
        payload: &[u8],
    ) -> Result<(), DropReason> {
        let flags = if every_hop {
            anode_wire::transit::FLAG_EVAL_EVERY_HOP
        } else {
            0
        };
        let buf = self
            .local_datagram(flags, to, (flow, rb), payload)
            .to_packet_as(type_id);
        self.inject_built(now, buf)
    }

    /// A datagram from this node to `to` (node, port), resource bound `rb` or the default.
    fn local_datagram(
        &self,
        flags: u8,
        (dst, port): (NodeAddr, u16),
        (flow, rb): (u64, Option<u16>),
        payload: &[u8],
    ) -> Datagram {
        Datagram {
            transit: TransitRepr {
                flags,
                rb: rb.unwrap_or(self.core.cfg.default_rb),
                flow,
                src: self.core.addr,
                dst,
                prev_hop: self.core.addr,
            },
            port,
            payload: payload.to_vec(),
        }
    }

    /// Injects a packet a local application's request built; one that could not be built
    /// (too large) is counted as `too_big`.
    fn inject_built(
        &mut self,
        now: Instant,
        buf: Result<Vec<u8>, anode_wire::WireError>,
    ) -> Result<(), DropReason> {
        let buf = buf.map_err(|_| {
            self.core.counters.drop(DropReason::TooBig);
            DropReason::TooBig
        })?;
        self.inject(now, buf)
    }

    /// Injects a whole ANEP packet as if originated by a local application: it is routed (or
    /// handed to its EE, or delivered) like an arriving packet but with no incoming link.
    /// On a drop the error is the node's reason, or [`DropReason::EeDropped`] when an EE
    /// dropped it ([`Node::inject_drop_detail`] then says which EE and why).
    pub fn inject(&mut self, now: Instant, buf: Vec<u8>) -> Result<(), DropReason> {
        self.core.counters.local_packets += 1;
        let before = self.core.counters.total_drops();
        self.core.last_drop = None;
        self.core.inject_ee_drop = Some(None);
        let prev = self.core.open();
        self.dispatch(now, None, buf);
        self.core.close(prev);
        let ee_drop = self.core.inject_ee_drop.take().flatten();
        if self.core.counters.total_drops() > before {
            self.core.inject_ee_drop = Some(ee_drop);
            Err(self.core.last_drop.unwrap_or(DropReason::EeDropped))
        } else {
            Ok(())
        }
    }

    /// After an [`Node::inject`] that an EE dropped: the EE's name and reason ("ee/reason",
    /// e.g. `capsule+nodeos/bandwidth`), until the next packet is injected.
    pub fn inject_drop_detail(&self) -> Option<&str> {
        self.core.inject_ee_drop.as_ref()?.as_deref()
    }

    /// Handles one packet that arrived on `link`. Takes ownership of the buffer: a forwarded
    /// packet leaves in the same allocation.
    pub fn handle_packet(&mut self, now: Instant, link: LinkId, buf: Vec<u8>) {
        let prev = self.core.open();
        self.receive(now, link, buf);
        self.core.close(prev);
    }

    fn receive(&mut self, now: Instant, link: LinkId, buf: Vec<u8>) {
        self.core.counters.rx_packets += 1;
        self.core.counters.rx_bytes += buf.len() as u64;
        if (link.0 as usize) >= self.core.links.len() {
            self.core.drop(DropReason::UnknownLink);
            return;
        }
        if !self.core.neighbors.is_enabled(link) {
            self.core.drop(DropReason::LinkDown);
            return;
        }
        self.core.neighbors.heard(now, link);
        let buf = if let Some(h) = &self.core.hooks
            && h.wants(HookPoint::Ingress)
        {
            let info = HookInfo {
                point: HookPoint::Ingress,
                now,
                in_link: Some(link),
                out_link: None,
            };
            match self.core.run_hook(info, buf) {
                Some(b) => b,
                None => return self.core.release_txq(now),
            }
        } else {
            buf
        };
        self.dispatch(now, Some(link), buf);
    }

    fn dispatch(&mut self, now: Instant, link: Option<LinkId>, buf: Vec<u8>) {
        self.core.cur_in = link;
        self.core.now = now;
        self.dispatch_inner(now, link, buf);
        self.core.cur_in = None;
        self.core.release_txq(now);
    }

    fn dispatch_inner(&mut self, now: Instant, link: Option<LinkId>, buf: Vec<u8>) {
        let (type_id, anep_len, discard) = match AnepPacket::new_checked(&buf[..]) {
            Ok(p) => (p.type_id(), p.header_len(), p.discard_if_unknown()),
            Err(_) => {
                self.core.drop(DropReason::MalformedAnep);
                return;
            }
        };
        let buf = if type_id != TYPE_CONTROL
            && let Some(h) = &self.core.hooks
            && h.wants(HookPoint::PreRouting)
        {
            let info = HookInfo {
                point: HookPoint::PreRouting,
                now,
                in_link: link,
                out_link: None,
            };
            match self.core.run_hook(info, buf) {
                Some(b) => b,
                None => return,
            }
        } else {
            buf
        };
        match type_id {
            TYPE_CONTROL => match link {
                Some(l) => self.handle_control(now, l, &buf, anep_len),
                None => self.core.drop(DropReason::UnhandledControl),
            },
            TYPE_DATAGRAM => self.route_datagram(now, buf, anep_len),
            t => match self.ees.iter().position(|e| e.type_id() == t) {
                Some(i) => self.route_ee(now, link, EeRef::BuiltIn(i), t, buf, anep_len),
                None => match self.core.hooks.as_ref().and_then(|h| h.ee_owner(t)) {
                    Some(running) => {
                        self.route_ee(now, link, EeRef::Module { running }, t, buf, anep_len);
                    }
                    None => self.core.unknown_type(buf, discard),
                },
            },
        }
    }

    fn route_datagram(&mut self, _now: Instant, buf: Vec<u8>, anep_len: usize) {
        match self.core.classify(&buf, anep_len) {
            Err(r) => self.core.drop(r),
            Ok(c) if c.for_me => self.core.deliver_datagram(buf, anep_len, c.transit_len),
            Ok(_) => {
                let _ = self.core.forward(buf, anep_len, None);
            }
        }
    }

    /// Routes a packet of an EE's Type ID to the EE `ee` names.
    pub(crate) fn route_ee(
        &mut self,
        now: Instant,
        link: Option<LinkId>,
        ee: EeRef,
        type_id: u16,
        buf: Vec<u8>,
        anep_len: usize,
    ) {
        let c = match self.core.classify(&buf, anep_len) {
            Ok(c) => c,
            Err(r) => return self.core.drop(r),
        };
        if !c.for_me
            && let Some(cut) = self.core.cut.as_mut()
            && let Some(v) = cut.classify(now, type_id, &buf)
        {
            // A cut-through channel owns this flow: fast path, no EE.
            match v {
                CutVerdict::Forward(via) => {
                    if self.core.forward(buf, anep_len, via).is_ok() {
                        self.core.counters.cut_through += 1;
                    }
                }
                CutVerdict::Police => self.core.drop(DropReason::CutThroughPoliced),
            }
            return;
        }
        let why = if c.for_me {
            Dispatch::Destination
        } else if link.is_none() {
            Dispatch::Local
        } else if c.every_hop {
            Dispatch::EveryHop
        } else if c.ee_route {
            Dispatch::Route
        } else {
            // The fast path: no EE, no copy.
            let _ = self.core.forward(buf, anep_len, None);
            return;
        };
        if c.for_me && !self.core.checksum_ok(&buf, anep_len) {
            return self.core.drop(DropReason::BadChecksum);
        }
        let running = match ee {
            EeRef::BuiltIn(_) => self.stopped.is_empty() || !self.stopped.contains(&type_id),
            EeRef::Module { running } => running,
        };
        if !running {
            return self.core.drop(DropReason::EeStopped);
        }
        self.core.counters.to_ee += 1;
        let EeRef::BuiltIn(i) = ee else {
            let call = EeCall {
                type_id,
                why,
                now,
                in_link: link,
                payload_at: 0,
            };
            return self
                .core
                .run_module_ee(call, buf, (anep_len, c.transit_len));
        };
        if let Some(n) = self.ee_packets.get_mut(i) {
            *n += 1;
        }
        let Some(ee) = self.ees.get_mut(i) else {
            return self.core.drop(DropReason::EeDropped);
        };
        let mut ctx = NodeContext {
            core: &mut self.core,
            now,
        };
        // The one parse of the headers on the packet's way through the EE and the NodeOS.
        let pkt = EePacket::new(type_id, buf, (anep_len, c.transit_len), link, why);
        ee.handle_packet(&mut ctx, pkt);
    }

    /// Runs every timer due at `now`: hellos, neighbor expiry, routing updates, EE timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.core.now = now;
        let mut evs = Vec::new();
        self.core.neighbors.handle_timeout(now, &mut evs);
        for ev in evs {
            self.core.neighbor_event(now, ev);
        }
        self.core.routing.handle_timeout(now);
        self.core.flush_control(now);
        self.core.release_txq(now);
        for ee in &mut self.ees {
            if ee.poll_timeout().is_some_and(|t| t <= now) {
                let mut ctx = NodeContext {
                    core: &mut self.core,
                    now,
                };
                ee.handle_timeout(&mut ctx);
            }
        }
        self.core.release_txq(now);
    }

    /// Installs the packet processors consulted at the hook points (see `hooks.rs`),
    /// replacing any earlier ones; `None` removes them.
    pub fn set_packet_hooks(&mut self, hooks: Option<Box<dyn PacketHooks>>) {
        self.core.hooks = hooks;
    }

    /// The installed packet processors.
    pub fn packet_hooks_mut(&mut self) -> Option<&mut (dyn PacketHooks + 'static)> {
        self.core.hooks.as_deref_mut()
    }

    /// Puts a queue discipline with a rate (bits per second) on `link`, replacing any earlier
    /// one: the packets waiting in the old discipline move to the new one in the order the old
    /// one would have sent them (any it refuses are counted as `qdisc_dropped`). `None`
    /// removes the discipline and hands what waits to the driver. Returns the name of the
    /// discipline replaced. See `txq.rs`.
    pub fn set_link_qdisc(
        &mut self,
        link: LinkId,
        qdisc: Option<(Box<dyn QueueDiscipline>, u64)>,
        now: Instant,
    ) -> Option<String> {
        let idx = link.0 as usize;
        if idx >= self.core.links.len() {
            return None;
        }
        let txq = self.core.txq.get_or_insert_with(TxQueues::default);
        if txq.links.len() <= idx {
            txq.links.resize_with(idx + 1, || None);
        }
        let old = txq.links.get_mut(idx).and_then(Option::take);
        let old_name = old.as_ref().map(|q| q.qdisc.name().to_string());
        let next_free = old.as_ref().and_then(|q| q.next_free);
        let mut waiting = Vec::new();
        if let Some(mut q) = old {
            while let Some(t) = q.qdisc.dequeue() {
                waiting.push(t);
            }
        }
        match qdisc {
            Some((mut qd, rate_bps)) => {
                for t in waiting {
                    if qd.enqueue(None, t).is_err() {
                        self.core.drop(DropReason::QdiscDropped);
                    }
                }
                if let Some(slot) = self.core.txq.as_mut().and_then(|t| t.links.get_mut(idx)) {
                    *slot = Some(LinkQueue {
                        qdisc: qd,
                        rate_bps,
                        next_free,
                    });
                }
            }
            None => {
                self.core.out.extend(waiting);
                if self
                    .core
                    .txq
                    .as_ref()
                    .is_some_and(|t| t.links.iter().all(Option::is_none))
                {
                    self.core.txq = None;
                }
            }
        }
        self.core.release_txq(now);
        old_name
    }

    /// The name of the queue discipline on `link` and the packets waiting in it.
    pub fn link_qdisc(&self, link: LinkId) -> Option<(&str, usize)> {
        let q = self
            .core
            .txq
            .as_ref()?
            .links
            .get(link.0 as usize)?
            .as_ref()?;
        Some((q.qdisc.name(), q.qdisc.len()))
    }

    /// What the node does besides its fast path for packets that only pass through, which a
    /// copy of the fast path elsewhere (the kernel's: `anode_ether::transit`) must leave to
    /// the node. Cheap: no table is copied.
    pub fn transit_view(&self) -> TransitView {
        let hooks = self.core.hooks.as_ref().is_some_and(|h| {
            [
                HookPoint::Ingress,
                HookPoint::PreRouting,
                HookPoint::PostRouting,
            ]
            .into_iter()
            .any(|p| h.wants(p))
        });
        TransitView {
            hooks,
            cut_through: self.core.cut.as_ref().is_some_and(|t| t.diverts()),
            ee_types: self.ees.iter().map(|e| e.type_id()).collect(),
            qdisc_links: (0..self.core.links.len())
                .map(|i| LinkId(i as u32))
                .filter(|l| self.link_qdisc(*l).is_some())
                .collect(),
        }
    }

    /// Installs a cut-through table (see `cut.rs`), replacing any earlier one. EEs open
    /// channels in it with [`NodeContext::open_cut_through`].
    pub fn set_cut_through(&mut self, table: Box<dyn CutThrough>) {
        self.core.cut = Some(table);
    }

    /// The installed cut-through table.
    pub fn cut_through_mut(&mut self) -> Option<&mut (dyn CutThrough + 'static)> {
        self.core.cut.as_deref_mut()
    }

    /// The earliest time [`Node::handle_timeout`] has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = [
            self.core.neighbors.poll_timeout(),
            self.core.routing.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(q) = self.core.txq.as_ref().and_then(TxQueues::poll_timeout) {
            t = Some(t.map_or(q, |t| t.min(q)));
        }
        for ee in &self.ees {
            if let Some(e) = ee.poll_timeout() {
                t = Some(t.map_or(e, |t| t.min(e)));
            }
        }
        t
    }

    /// Next packet to send: control messages first, then the rest in order.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        match self.core.out_ctl.pop_front() {
            Some(t) => Some(t),
            None => self.core.out.pop_front(),
        }
    }

    /// Packets waiting to be sent.
    pub fn pending_transmits(&self) -> usize {
        self.core.out.len() + self.core.out_ctl.len()
    }

    /// Next event (deliveries, neighbor changes, EE logs).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.core.events.pop_front()
    }
}

impl Core {
    pub(crate) fn push_event(&mut self, e: Event) {
        if self.events.len() >= self.cfg.max_events {
            self.drop(DropReason::EventQueueFull);
            return;
        }
        self.events.push_back(e);
    }

    pub(crate) fn deliver(&mut self, mut d: Delivery) {
        if let Some(h) = &self.hooks
            && h.wants(HookPoint::LocalDelivery)
        {
            let info = HookInfo {
                point: HookPoint::LocalDelivery,
                now: self.now,
                in_link: self.cur_in,
                out_link: None,
            };
            match self.run_hook(info, std::mem::take(&mut d.buf)) {
                Some(b) => d.buf = b,
                None => return,
            }
        }
        if self.events.len() >= self.cfg.max_events {
            self.drop(DropReason::EventQueueFull);
            return;
        }
        self.counters.delivered += 1;
        self.settle(crate::ledger::Outcome::Delivered);
        self.events.push_back(Event::Delivered(d));
    }

    /// Forgets the neighbor and link facts (they changed).
    pub(crate) fn drop_view_cache(&mut self) {
        self.view_cache = None;
        self.view_epoch += 1;
    }

    /// The neighbor and link facts for views, built once after each change.
    pub(crate) fn view_cache(&mut self) -> std::sync::Arc<crate::view::ViewCache> {
        if let Some(c) = &self.view_cache {
            return c.clone();
        }
        let c = std::sync::Arc::new(crate::view::ViewCache {
            neighbors: self
                .neighbors
                .up()
                .map(|(link, n)| NextHop { link, addr: n.addr })
                .collect(),
            links: self
                .links
                .iter()
                .enumerate()
                .map(|(i, l)| (l.cfg.mtu, self.neighbors.is_enabled(LinkId(i as u32))))
                .collect(),
        });
        self.view_cache = Some(c.clone());
        c
    }

    pub(crate) fn neighbor_event(&mut self, now: Instant, ev: NeighborEvent) {
        self.drop_view_cache();
        match ev {
            NeighborEvent::Up { link, addr } => {
                let cost = self.links.get(link.0 as usize).map_or(1, |l| l.cfg.cost);
                self.routing.neighbor_up(now, link, addr, cost);
                self.push_event(Event::NeighborUp { link, addr });
            }
            NeighborEvent::Down { link, addr } => {
                self.routing.neighbor_down(now, addr);
                self.push_event(Event::NeighborDown { link, addr });
            }
        }
    }

    /// Sends due hellos and queued routing updates.
    pub(crate) fn flush_control(&mut self, now: Instant) {
        let mut hellos = Vec::new();
        self.neighbors.poll_hellos(now, &mut hellos);
        for (link, h) in hellos {
            let _ = self.send_control(link, &Control::Hello(h));
        }
        while let Some((link, msg)) = self.routing.poll_message() {
            let _ = self.send_control(link, &msg);
        }
    }

    pub(crate) fn send_control(&mut self, link: LinkId, msg: &Control) -> Result<(), DropReason> {
        let Some(l) = self.links.get(link.0 as usize) else {
            self.drop(DropReason::UnknownLink);
            return Err(DropReason::UnknownLink);
        };
        let dst = l.cfg.peer;
        let buf = match msg.to_packet() {
            Ok(b) => b,
            Err(_) => {
                self.drop(DropReason::TooBig);
                return Err(DropReason::TooBig);
            }
        };
        self.counters.control_tx += 1;
        self.transmit_with(Transmit { link, dst, buf }, true)
    }

    /// Runs the hooks at `info.point` on `buf`; `Some` if the packet goes on along the path.
    /// What they emit is queued without passing the post-routing hook again.
    pub(crate) fn run_hook(&mut self, info: HookInfo, buf: Vec<u8>) -> Option<Vec<u8>> {
        let Some(mut h) = self.hooks.take() else {
            return Some(buf);
        };
        let mut emit = Vec::new();
        let v = h.run(info, buf, &mut emit);
        self.hooks = Some(h);
        for t in emit {
            let _ = self.transmit_unhooked(t);
        }
        match v {
            HookVerdict::Continue(b) => Some(b),
            HookVerdict::Drop => {
                self.drop(DropReason::HookDropped);
                None
            }
            HookVerdict::Consumed => {
                self.counters.hook_consumed += 1;
                None
            }
            HookVerdict::Redirect(hop, buf) => {
                let sent = self.transmit_unhooked(Transmit {
                    link: hop.link,
                    dst: hop.addr,
                    buf,
                });
                if sent.is_ok() {
                    self.settle(crate::ledger::Outcome::Forwarded);
                }
                None
            }
        }
    }

    /// Moves packets whose time has come from the link queues to the driver's queue.
    #[inline]
    pub(crate) fn release_txq(&mut self, now: Instant) {
        if let Some(q) = self.txq.as_mut() {
            let out = &mut self.out;
            q.release(now, |t| out.push_back(t));
        }
    }

    pub(crate) fn transmit(&mut self, t: Transmit) -> Result<(), DropReason> {
        self.transmit_with(t, false)
    }

    /// Queues `t` after the post-routing hooks; `control` messages go to their own queue.
    fn transmit_with(&mut self, t: Transmit, control: bool) -> Result<(), DropReason> {
        let t = if let Some(h) = &self.hooks
            && h.wants(HookPoint::PostRouting)
        {
            let info = HookInfo {
                point: HookPoint::PostRouting,
                now: self.now,
                in_link: self.cur_in,
                out_link: Some(t.link),
            };
            let (link, dst) = (t.link, t.dst);
            match self.run_hook(info, t.buf) {
                Some(buf) => Transmit { link, dst, buf },
                None => return Ok(()),
            }
        } else {
            t
        };
        if control {
            return self.transmit_control(t);
        }
        self.transmit_unhooked(t)
    }

    /// Queues a control message in the control queue (its own bound of `max_tx_queue`).
    fn transmit_control(&mut self, t: Transmit) -> Result<(), DropReason> {
        self.admit(&t, self.out_ctl.len())?;
        self.count_tx(t.link, t.buf.len() as u64);
        self.out_ctl.push_back(t);
        Ok(())
    }

    /// Whether `t` may be queued: its link exists, is enabled and takes its size, and the
    /// queue it goes to (now `queued` long) has room. A refusal is counted as a drop.
    fn admit(&mut self, t: &Transmit, queued: usize) -> Result<(), DropReason> {
        let refused = match self.links.get(t.link.0 as usize) {
            None => Some(DropReason::UnknownLink),
            Some(l) if t.buf.len() > l.cfg.mtu => Some(DropReason::TooBig),
            Some(_) if !self.neighbors.is_enabled(t.link) => Some(DropReason::LinkDown),
            Some(_) if queued >= self.cfg.max_tx_queue => Some(DropReason::TxQueueFull),
            Some(_) => None,
        };
        match refused {
            Some(r) => {
                self.drop(r);
                Err(r)
            }
            None => Ok(()),
        }
    }

    pub(crate) fn transmit_unhooked(&mut self, t: Transmit) -> Result<(), DropReason> {
        self.admit(&t, self.out.len())?;
        let (link, len) = (t.link, t.buf.len() as u64);
        if let Some(q) = self.txq.as_mut()
            && let Some(lq) = q.get_mut(link)
        {
            if lq.qdisc.enqueue(self.cur_in, t).is_err() {
                self.drop(DropReason::QdiscDropped);
                return Err(DropReason::QdiscDropped);
            }
        } else {
            self.out.push_back(t);
        }
        self.count_tx(link, len);
        Ok(())
    }

    /// Counts a queued transmit: the node's totals and the link's rate (`load.rs`).
    fn count_tx(&mut self, link: LinkId, len: u64) {
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += len;
        let now = self.now;
        if let Some(l) = self.links.get_mut(link.0 as usize) {
            l.tx.record(now, usize::try_from(len).unwrap_or(usize::MAX));
        }
    }

    /// The transmit load of `link` at `now` (`load.rs`).
    pub(crate) fn link_load(&self, link: LinkId, now: Instant) -> Option<LinkLoad> {
        let l = self.links.get(link.0 as usize)?;
        let queued = self
            .txq
            .as_ref()
            .and_then(|q| q.links.get(link.0 as usize))
            .and_then(Option::as_ref)
            .map_or(0, |q| q.qdisc.len());
        Some(l.tx.load(now, queued))
    }
}
