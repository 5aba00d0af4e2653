//! The execution-environment interface: how the capsule EE, the PLAN EE and any later EE plug
//! into the node.
//!
//! An EE registers for one ANEP Type ID. The node hands it a packet ([`EePacket`]) when the
//! packet is addressed to this node, asks for evaluation at every hop, or asks for the EE's
//! routing function; and control messages of kinds the routing service does not own (code
//! transfer, the EE's own link-local messages). The EE acts on the node only through
//! [`NodeContext`]: route lookups, forwarding (which spends the resource bound like the fast
//! path does), sending control messages to neighbors, deliveries to applications, counters.
//! An EE never blocks and never does I/O itself; if it needs time to pass it returns a
//! deadline from [`ExecutionEnvironment::poll_timeout`].

use std::any::Any;
use std::time::Instant;

use anode_routing::{LinkId, NextHop};
use anode_wire::NodeAddr;
use anode_wire::capsule::CapsuleRepr;
use anode_wire::control::Control;
use anode_wire::transit::Transit;

use crate::cut::{CutError, CutId, CutSpec, DemuxKey};
use crate::node::Core;
use crate::view::{NodeFacts, NodeView};
use crate::{Delivery, DropReason, Event};

/// Why the node handed a packet to an EE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    /// The packet is addressed to this node.
    Destination,
    /// The packet asks for evaluation at every hop.
    EveryHop,
    /// The packet names the EE's routing function instead of the default route.
    Route,
    /// A local application injected it here.
    Local,
}

/// A packet handed to an EE: the buffer that arrived (no copy) and its headers, checked and
/// parsed once by the node; they travel with it as a checked view of the transit header and
/// the parsed EE header (the NodeOS guard and the EE read them here instead of parsing the
/// bytes again).
#[derive(Debug)]
pub struct EePacket {
    /// The whole ANEP packet.
    pub buf: Vec<u8>,
    /// Length of the ANEP header (basic header and options); the transit header starts here.
    pub anep_len: usize,
    /// Length of the transit header; the EE header starts at `anep_len + transit_len`.
    pub transit_len: usize,
    /// The EE header, for the EE types whose header the node knows.
    pub header: EeHeader,
    /// The link it arrived on (`None` when injected locally).
    pub link: Option<LinkId>,
    /// Why the EE gets it.
    pub why: Dispatch,
    /// Whether the EE holds it (the outcome ledger, `ledger.rs`).
    pub(crate) held: bool,
}

/// The EE header of an [`EePacket`], parsed once by the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EeHeader {
    /// A capsule header (`TYPE_CAPSULE`) and its length; the payload follows it.
    Capsule(CapsuleRepr, usize),
    /// A capsule whose header does not parse (the EE drops it as `bad_header`).
    BadCapsule,
    /// Another EE's packet: the EE parses its own header.
    Other,
}

impl EeHeader {
    /// Parses the EE header of a `type_id` packet from `ee_bytes`.
    pub fn parse(type_id: u16, ee_bytes: &[u8]) -> EeHeader {
        if type_id != anode_wire::anep::TYPE_CAPSULE {
            return EeHeader::Other;
        }
        match CapsuleRepr::parse(ee_bytes) {
            Ok((h, len)) => EeHeader::Capsule(h, len),
            Err(_) => EeHeader::BadCapsule,
        }
    }

    /// The capsule header, if this is a well-formed capsule.
    pub fn capsule(&self) -> Option<&CapsuleRepr> {
        match self {
            EeHeader::Capsule(h, _) => Some(h),
            _ => None,
        }
    }
}

impl EePacket {
    /// A packet for an EE: `buf`'s transit header (at `anep_len`, `transit_len` bytes) has
    /// been checked by the node; its EE header is parsed here for the types the node knows.
    pub fn new(
        type_id: u16,
        buf: Vec<u8>,
        (anep_len, transit_len): (usize, usize),
        link: Option<LinkId>,
        why: Dispatch,
    ) -> EePacket {
        let header = EeHeader::parse(type_id, buf.get(anep_len + transit_len..).unwrap_or(&[]));
        EePacket {
            buf,
            anep_len,
            transit_len,
            header,
            link,
            why,
            held: false,
        }
    }

    /// The transit header (checked when the packet was made; nothing is checked again).
    pub fn transit(&self) -> Transit<&[u8]> {
        Transit::new_unchecked(
            self.buf.get(self.anep_len..).unwrap_or(&[]),
            self.transit_len,
        )
    }

    /// The bytes after the transit header (EE header and payload).
    pub fn ee_bytes(&self) -> &[u8] {
        self.buf
            .get(self.anep_len + self.transit_len..)
            .unwrap_or(&[])
    }
}

/// An execution environment.
pub trait ExecutionEnvironment: Send {
    /// The ANEP Type ID this EE owns.
    fn type_id(&self) -> u16;

    /// A short name for reports and counters ("capsule", "plan").
    fn name(&self) -> &str;

    /// Handles a packet (see [`Dispatch`] for why it came).
    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket);

    /// Handles a control message the routing service does not own (code transfer, `Ee`).
    fn handle_control(&mut self, ctx: &mut NodeContext<'_>, link: LinkId, msg: &Control) {
        let _ = (ctx, link, msg);
    }

    /// Runs timers due at `ctx.now()`.
    fn handle_timeout(&mut self, ctx: &mut NodeContext<'_>) {
        let _ = ctx;
    }

    /// The EE's next deadline.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// Per-domain accounting, for EEs running under the NodeOS layer (`None`: no domains).
    fn domain_report(&self) -> Option<crate::DomainReport> {
        None
    }

    /// The operator stopped this EE (`Node::set_ee_running`): its packets are dropped as
    /// `ee_stopped` from now on. An EE under the NodeOS ends its protocol domains here. The
    /// default does nothing.
    fn on_stop(&mut self, ctx: &mut NodeContext<'_>) {
        let _ = ctx;
    }

    /// This EE's part of the node's handover to the process taking its place (`anode
    /// upgrade`, `handover.rs`): copies of the packets it holds (it keeps holding them: if
    /// the successor fails, this node goes on) and whatever state it wants back. The
    /// default hands over nothing.
    fn hand_over(&mut self, now: Instant, out: &mut crate::handover::EeHandover) {
        let _ = (now, out);
    }

    /// Takes back the state [`ExecutionEnvironment::hand_over`] gave in another process
    /// (held packets are re-entered by the node). It comes from outside this process: check
    /// it, never panic on it; an error says why it was refused.
    fn take_over(
        &mut self,
        ctx: &mut NodeContext<'_>,
        state: &serde_json::Value,
    ) -> Result<(), String> {
        let _ = (ctx, state);
        Ok(())
    }

    /// State this EE wants kept across a cold restart (a stop and a fresh start, not only an
    /// upgrade), small enough to snapshot every second: e.g. the signers' replay windows, so
    /// a packet accepted before the restart is still a replay after it. The driver stores it
    /// (`Node::durable_states`); `None` (the default): nothing to keep.
    fn durable_state(&self) -> Option<serde_json::Value> {
        None
    }

    /// Takes back what [`ExecutionEnvironment::durable_state`] gave before the restart,
    /// before the first packet. It comes from disk: check it, never panic on it; an error
    /// says what was refused.
    fn restore_durable(&mut self, state: &serde_json::Value) -> Result<(), String> {
        let _ = state;
        Ok(())
    }

    /// For drivers and tools that need the concrete EE (e.g. to inject or inspect).
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// What an EE may do to the node while it handles a packet or a timer.
#[derive(Debug)]
pub struct NodeContext<'a> {
    pub(crate) core: &'a mut Core,
    pub(crate) now: Instant,
}

impl NodeContext<'_> {
    /// The current time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// This node's address.
    pub fn address(&self) -> NodeAddr {
        self.core.addr
    }

    /// The next hop toward `dst` by the default (distance-vector) route.
    pub fn lookup(&self, dst: &NodeAddr) -> Option<NextHop> {
        self.core.routing.lookup(dst)
    }

    /// An owned view of the node for the rest of this call (`view.rs`): time, address,
    /// forwarding table, up neighbors, link MTUs; costs reference-count increments only.
    pub fn view(&mut self) -> NodeView {
        NodeView::new(
            self.now,
            self.core.addr,
            self.core.cfg.default_rb,
            self.core.routing.fib().clone(),
            self.core.view_cache(),
        )
    }

    /// Changes whenever a view taken now would differ from one taken before in more than its
    /// time (routes, neighbors, links): an EE may keep a [`NodeView`] and refresh only its time
    /// ([`NodeView::set_now`]) while this stays the same.
    pub fn view_generation(&self) -> (u64, u64) {
        (self.core.routing.change_count(), self.core.view_epoch)
    }

    /// The up neighbors.
    pub fn neighbors(&self) -> Vec<NextHop> {
        self.core
            .neighbors
            .up()
            .map(|(link, n)| NextHop { link, addr: n.addr })
            .collect()
    }

    /// The routing table (reachable routes): (destination, metric, next hop).
    pub fn routes(&self) -> Vec<(NodeAddr, u16, Option<NextHop>)> {
        let inf = self.core.routing.infinity();
        self.core
            .routing
            .routes()
            .into_iter()
            .filter(|r| r.metric < inf)
            .map(|r| (r.dest, r.metric, r.next_hop))
            .collect()
    }

    /// Forwards a whole ANEP packet toward its transit destination by the default route,
    /// spending one unit of resource bound and rewriting the previous hop, exactly as the fast
    /// path does. Returns the link it was queued on; the error says why it was dropped
    /// (already counted).
    pub fn forward(&mut self, buf: Vec<u8>, anep_len: usize) -> Result<LinkId, DropReason> {
        self.core.forward(buf, anep_len, None)
    }

    /// Like [`NodeContext::forward`] but to a chosen neighbor (an EE's routing function).
    pub fn forward_via(
        &mut self,
        hop: NextHop,
        buf: Vec<u8>,
        anep_len: usize,
    ) -> Result<LinkId, DropReason> {
        self.core.forward(buf, anep_len, Some(hop))
    }

    /// Sends a control message to the neighbor on `link`.
    pub fn send_control(&mut self, link: LinkId, msg: &Control) -> Result<(), DropReason> {
        self.core.send_control(link, msg)
    }

    /// Delivers to a local application.
    pub fn deliver(&mut self, d: Delivery) {
        self.core.deliver(d);
    }

    /// Logs a message as an [`Event::Log`].
    pub fn log(&mut self, ee: &str, message: String) {
        self.core.push_event(Event::Log {
            ee: ee.to_string(),
            message,
        });
    }

    /// Counts a drop the EE decided, shown as "ee/reason".
    pub fn count_drop(&mut self, ee: &str, reason: DropReason) {
        self.core.counters.drop_ee(ee, reason);
        self.core.settle(crate::ledger::Outcome::Dropped);
        if let Some(first @ None) = &mut self.core.inject_ee_drop {
            *first = Some(format!("{ee}/{reason}"));
        }
    }

    /// Opens a cut-through channel: routed packets of `type_id` matching all `keys` are
    /// forwarded on the fast path per `spec` and no longer reach the EE. Fails if no table is
    /// installed or the keys are unusable.
    pub fn open_cut_through(
        &mut self,
        type_id: u16,
        keys: Vec<DemuxKey>,
        spec: CutSpec,
    ) -> Result<CutId, CutError> {
        match self.core.cut.as_mut() {
            Some(t) => t.open(self.now, type_id, keys, spec),
            None => Err(CutError::NotInstalled),
        }
    }

    /// Closes a cut-through channel; `false` if it was not open.
    pub fn close_cut_through(&mut self, id: CutId) -> bool {
        self.core.cut.as_mut().is_some_and(|t| t.close(id))
    }

    /// Closes every cut-through channel `owner` (a domain's principal) opened; how many.
    pub fn close_cut_owner(&mut self, owner: &str) -> usize {
        self.core.cut.as_mut().map_or(0, |t| t.close_owner(owner))
    }

    /// What `link` has sent and how fast lately (`load.rs`): the device load of PLAN's
    /// `queueLength`. `None` if there is no such link.
    pub fn link_load(&self, link: LinkId) -> Option<crate::LinkLoad> {
        self.core.link_load(link, self.now)
    }

    /// The node's packet processors (the service-module host), for an EE that manages
    /// modules (the deployment service installs and removes them). `None` if none is
    /// installed.
    pub fn packet_hooks_mut(&mut self) -> Option<&mut (dyn crate::hooks::PacketHooks + 'static)> {
        self.core.hooks.as_deref_mut()
    }

    /// Default resource bound for packets this node originates.
    pub fn default_rb(&self) -> u16 {
        self.core.cfg.default_rb
    }

    /// Packets and bytes the node has queued for transmission so far (its `tx_packets` and
    /// `tx_bytes` counters): the difference around an EE call is what the call sent, which
    /// the NodeOS charges to the domain it ran for.
    pub fn tx_totals(&self) -> (u64, u64) {
        (self.core.counters.tx_packets, self.core.counters.tx_bytes)
    }
}

impl NodeFacts for NodeContext<'_> {
    fn address(&self) -> NodeAddr {
        self.core.addr
    }

    fn lookup(&self, dst: &NodeAddr) -> Option<NextHop> {
        self.core.routing.lookup(dst)
    }

    fn neighbor_on(&self, link: LinkId) -> Option<NextHop> {
        let n = self.core.neighbors.neighbor(link)?;
        self.core
            .neighbors
            .up()
            .any(|(l, _)| l == link)
            .then_some(NextHop { link, addr: n.addr })
    }
}
