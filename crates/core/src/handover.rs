//! [`NodeHandover`]: the state of a running node that the process taking its place
//! (`anode upgrade`) needs so that nothing the node accepted is lost and it forwards from its
//! first packet on: the neighbors and routes (`anode_routing::handover`), links taken down at
//! run time, stopped EEs, the packets the EEs hold (capsules waiting for code, packets queued
//! for a NodeOS domain), the packets waiting to leave, and each EE's and the packet hooks'
//! own state.
//!
//! Contract:
//! - [`Node::hand_over`] leaves the node as it was: held packets are copied (the EEs keep
//!   holding them), queues are read back in order. If the successor fails, the node simply
//!   goes on.
//! - [`Node::take_over`] checks what it is given against its own configuration: the node
//!   address must match, a packet must parse as an EE packet of a Type ID this node serves
//!   and name one of its links, anything else is skipped and counted in the
//!   [`TakeoverReport`]. Nothing in a handover can make the node panic.
//! - A handed-over packet re-enters the node as it entered the old one, minus the ingress
//!   and pre-routing hooks (it passed them there): it counts as received, gets exactly one
//!   outcome in the ledger, and goes to its EE by the same classification.

use std::time::Instant;

use anode_routing::LinkId;
use anode_routing::handover::{Restored, RoutingHandover};
use anode_wire::NodeAddr;
use anode_wire::anep::{AnepPacket, TYPE_CONTROL, TYPE_DATAGRAM};

use crate::node::{EeRef, Node};
use crate::{NodeContext, Transmit};

/// The version of the handover format; a successor refuses another.
pub const HANDOVER_FORMAT: u32 = 1;

/// Bytes in a handover, as hex (JSON carries them as text).
pub mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes bytes as lowercase hex.
    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(b))
    }

    /// Parses what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        hex::decode(s.as_ref()).map_err(serde::de::Error::custom)
    }
}

/// A packet an EE holds: it re-enters the successor where it entered this node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HeldPacket {
    /// The link it arrived on (`None`: a local application sent it).
    pub link: Option<u32>,
    /// The whole ANEP packet.
    #[serde(with = "hex_bytes")]
    pub buf: Vec<u8>,
}

/// A packet waiting to leave (in a link's queue discipline or the driver's queue).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QueuedPacket {
    /// The link it leaves on.
    pub link: u32,
    /// The neighbor it goes to.
    pub dst: NodeAddr,
    /// The whole ANEP packet.
    #[serde(with = "hex_bytes")]
    pub buf: Vec<u8>,
}

/// What one EE hands over: copies of the packets it holds and its own state.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EeHandover {
    /// Copies of the packets it holds (it keeps holding the originals).
    pub held: Vec<HeldPacket>,
    /// Whatever else it wants back (its own format; `null`: nothing).
    pub state: serde_json::Value,
}

/// One EE's part of a [`NodeHandover`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EeState {
    /// Its ANEP Type ID.
    pub type_id: u16,
    /// Its name.
    pub name: String,
    /// What it handed over.
    pub handover: EeHandover,
}

/// A running node's state for the process that takes its place. See the module docs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeHandover {
    /// [`HANDOVER_FORMAT`].
    pub format: u32,
    /// The node's address: a successor with another one refuses the handover.
    pub address: NodeAddr,
    /// Neighbors, routes, the link-state database, static routes.
    pub routing: RoutingHandover,
    /// Links taken down at run time (by index).
    pub links_down: Vec<u32>,
    /// Built-in EEs an operator stopped (Type IDs).
    pub stopped_ees: Vec<u16>,
    /// Each built-in EE's part.
    pub ees: Vec<EeState>,
    /// Packets waiting to leave, in the order they would have left.
    pub queued: Vec<QueuedPacket>,
    /// The packet hooks' state (the module host's; `null`: none).
    pub hooks: serde_json::Value,
}

/// What [`Node::take_over`] restored and skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TakeoverReport {
    /// Routing: neighbors, routes, database entries restored and skipped.
    pub routing: Restored,
    /// Held packets that re-entered the node.
    pub held: usize,
    /// Packets queued to leave again.
    pub queued: usize,
    /// Packets or records that did not fit this node (another link list, an EE it does not
    /// run, a malformed packet).
    pub skipped: usize,
    /// EEs (or the hooks) that could not take their state back, with the reason; the rest of
    /// the handover still applies.
    pub refused: Vec<String>,
}

/// Why a handover cannot be taken over at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandoverError {
    /// It was written in a format this node does not read.
    #[error("handover format {found}, this node reads format {HANDOVER_FORMAT}")]
    Format {
        /// The format it says.
        found: u32,
    },
    /// It is another node's state.
    #[error("the handover is of node {found}, this node is {me}")]
    Address {
        /// The node it is of.
        found: NodeAddr,
        /// This node.
        me: NodeAddr,
    },
}

impl Node {
    /// This node's state for the process that takes its place; the node is left as it was
    /// (see the module docs).
    pub fn hand_over(&mut self, now: Instant) -> NodeHandover {
        let neighbors = self.core.neighbors.export(now);
        let routing = self.core.routing.export(now, neighbors);
        let links_down = (0..self.core.links.len())
            .map(|i| i as u32)
            .filter(|&i| !self.core.neighbors.is_enabled(LinkId(i)))
            .collect();
        let ees = self
            .ees
            .iter_mut()
            .map(|e| {
                let mut h = EeHandover::default();
                e.hand_over(now, &mut h);
                EeState {
                    type_id: e.type_id(),
                    name: e.name().to_string(),
                    handover: h,
                }
            })
            .collect();
        let hooks = self
            .core
            .hooks
            .as_mut()
            .map_or(serde_json::Value::Null, |h| h.hand_over(now));
        NodeHandover {
            format: HANDOVER_FORMAT,
            address: self.core.addr,
            routing,
            links_down,
            stopped_ees: self.stopped.clone(),
            ees,
            queued: self.queued_copies(),
            hooks,
        }
    }

    /// Copies of the packets waiting to leave: control, then data, then each link queue in
    /// the order its discipline releases them (read out and put back).
    fn queued_copies(&mut self) -> Vec<QueuedPacket> {
        let copy = |t: &Transmit| QueuedPacket {
            link: t.link.0,
            dst: t.dst,
            buf: t.buf.clone(),
        };
        let mut v: Vec<QueuedPacket> = self.core.out_ctl.iter().map(copy).collect();
        v.extend(self.core.out.iter().map(copy));
        for q in self
            .core
            .txq
            .iter_mut()
            .flat_map(|t| t.links.iter_mut().flatten())
        {
            let mut all = Vec::with_capacity(q.qdisc.len());
            while let Some(t) = q.qdisc.dequeue() {
                all.push(t);
            }
            v.extend(all.iter().map(copy));
            for t in all {
                // Back in release order; a discipline that took them once takes them again.
                let _ = q.qdisc.enqueue(None, t);
            }
        }
        v
    }

    /// Takes over the state another process of this node handed over (see the module docs):
    /// routing first, so the packets that follow find their routes.
    pub fn take_over(
        &mut self,
        now: Instant,
        h: &NodeHandover,
    ) -> Result<TakeoverReport, HandoverError> {
        if h.format != HANDOVER_FORMAT {
            return Err(HandoverError::Format { found: h.format });
        }
        if h.address != self.core.addr {
            return Err(HandoverError::Address {
                found: h.address,
                me: self.core.addr,
            });
        }
        self.core.now = now;
        let mut rep = TakeoverReport::default();
        for &l in &h.links_down {
            if (l as usize) < self.core.links.len() {
                self.set_link_up(LinkId(l), false, now);
            }
        }
        self.restore_routing(now, &h.routing, &mut rep);
        for &t in &h.stopped_ees {
            self.set_ee_running(t, false);
        }
        for s in &h.ees {
            self.restore_ee(now, s, &mut rep);
        }
        if !h.hooks.is_null()
            && let Some(hooks) = self.core.hooks.as_mut()
            && let Err(e) = hooks.take_over(now, &h.hooks)
        {
            rep.refused.push(format!("modules: {e}"));
        }
        for q in &h.queued {
            self.requeue(q, &mut rep);
        }
        for s in &h.ees {
            for p in &s.handover.held {
                if self.receive_handed(now, p) {
                    rep.held += 1;
                } else {
                    rep.skipped += 1;
                }
            }
        }
        Ok(rep)
    }

    fn restore_routing(&mut self, now: Instant, h: &RoutingHandover, rep: &mut TakeoverReport) {
        let mut up = Vec::new();
        for rec in &h.neighbors {
            match self.core.neighbors.restore(now, rec) {
                Some(link) => {
                    let cost = self
                        .core
                        .links
                        .get(link.0 as usize)
                        .map_or(1, |l| l.cfg.cost);
                    up.push((link, rec.addr, cost));
                }
                None => rep.skipped += 1,
            }
        }
        rep.routing = self.core.routing.restore(now, &up, h);
        rep.routing.neighbors = up.len();
        self.core.drop_view_cache();
    }

    fn restore_ee(&mut self, now: Instant, s: &EeState, rep: &mut TakeoverReport) {
        if s.handover.state.is_null() {
            return;
        }
        let Some(ee) = self.ees.iter_mut().find(|e| e.type_id() == s.type_id) else {
            rep.refused
                .push(format!("{}: this node does not run it", s.name));
            return;
        };
        let mut ctx = NodeContext {
            core: &mut self.core,
            now,
        };
        if let Err(e) = ee.take_over(&mut ctx, &s.handover.state) {
            rep.refused.push(format!("{}: {e}", s.name));
        }
    }

    fn requeue(&mut self, q: &QueuedPacket, rep: &mut TakeoverReport) {
        let t = Transmit {
            link: LinkId(q.link),
            dst: q.dst,
            buf: q.buf.clone(),
        };
        if (q.link as usize) < self.core.links.len()
            && AnepPacket::new_checked(&t.buf[..]).is_ok()
            && self.core.transmit_unhooked(t).is_ok()
        {
            rep.queued += 1;
        } else {
            rep.skipped += 1;
        }
    }

    /// A handed-over packet re-enters the node: received (counted, one outcome), routed to
    /// its EE by the same classification as any packet, without the ingress and pre-routing
    /// hooks it passed in the old process. False if it is not an EE packet for one of this
    /// node's EEs on one of its links (nothing counted then).
    fn receive_handed(&mut self, now: Instant, p: &HeldPacket) -> bool {
        let link = match p.link {
            Some(l) if (l as usize) < self.core.links.len() => Some(LinkId(l)),
            Some(_) => return false,
            None => None,
        };
        let Ok(anep) = AnepPacket::new_checked(&p.buf[..]) else {
            return false;
        };
        let (type_id, anep_len) = (anep.type_id(), anep.header_len());
        let ee = if type_id == TYPE_CONTROL || type_id == TYPE_DATAGRAM {
            None
        } else if let Some(i) = self.ees.iter().position(|e| e.type_id() == type_id) {
            Some(EeRef::BuiltIn(i))
        } else {
            self.core
                .hooks
                .as_ref()
                .and_then(|h| h.ee_owner(type_id))
                .map(|running| EeRef::Module { running })
        };
        let Some(ee) = ee else {
            return false;
        };
        let prev = self.core.open();
        match link {
            Some(_) => {
                self.core.counters.rx_packets += 1;
                self.core.counters.rx_bytes += p.buf.len() as u64;
            }
            None => self.core.counters.local_packets += 1,
        }
        self.core.cur_in = link;
        self.core.now = now;
        self.route_ee(now, link, ee, type_id, p.buf.clone(), anep_len);
        self.core.cur_in = None;
        self.core.release_txq(now);
        self.core.close(prev);
        true
    }
}
