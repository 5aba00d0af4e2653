//! [`NodeView`]: an owned, read-only view of the node for one EE call, and [`NodeFacts`], what
//! routing functions may ask of the node whether they hold the live [`NodeContext`] or a view.
//!
//! An EE that runs guest code with the node out of reach (inside a wasmtime store, or on a
//! worker thread) takes a view at the start of the call: the time, the node's address, its
//! forwarding table (an `Arc` of the routing service's [`Fib`]), its up neighbors and its
//! links' MTUs (both cached by the node until a neighbor or link changes). Taking a view costs
//! two reference-count increments; nothing is copied.
//!
//! [`NodeView::check_forward`] answers what [`NodeContext::forward`] would answer from the
//! same facts (resource bound, route, link MTU), so an EE can tell a guest the outcome of a
//! send it will apply after the call; a drop only the transmit queue can decide (queue full,
//! a queue discipline) is counted by the node when the send is applied.
//!
//! [`NodeContext::forward`]: crate::NodeContext::forward

use std::sync::Arc;
use std::time::Instant;

use anode_routing::{Fib, LinkId, NextHop};
use anode_wire::NodeAddr;
use anode_wire::transit::Transit;

use crate::DropReason;

/// What the node tells routing functions: enough to pick a next hop.
pub trait NodeFacts {
    /// This node's address.
    fn address(&self) -> NodeAddr;
    /// The next hop toward `dst` by the default route, if reachable.
    fn lookup(&self, dst: &NodeAddr) -> Option<NextHop>;
    /// The up neighbor on `link`, if any.
    fn neighbor_on(&self, link: LinkId) -> Option<NextHop>;
}

/// The neighbor and link facts a node caches for views (rebuilt after a change; shared by
/// the views taken until then).
#[derive(Debug)]
pub(crate) struct ViewCache {
    pub neighbors: Vec<NextHop>,
    /// Per link: its MTU and whether it is administratively up.
    pub links: Vec<(usize, bool)>,
}

/// An owned view of the node; see the module docs.
#[derive(Debug, Clone)]
pub struct NodeView {
    now: Instant,
    address: NodeAddr,
    default_rb: u16,
    fib: Arc<Fib>,
    cache: Arc<ViewCache>,
}

impl NodeView {
    pub(crate) fn new(
        now: Instant,
        address: NodeAddr,
        default_rb: u16,
        fib: Arc<Fib>,
        cache: Arc<ViewCache>,
    ) -> NodeView {
        NodeView {
            now,
            address,
            default_rb,
            fib,
            cache,
        }
    }

    /// The time of the call.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Makes a kept view current for a later call whose [`NodeContext::view_generation`]
    /// is the same as when the view was taken: only the time differs.
    ///
    /// [`NodeContext::view_generation`]: crate::NodeContext::view_generation
    pub fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    /// The default resource bound of packets this node originates.
    pub fn default_rb(&self) -> u16 {
        self.default_rb
    }

    /// The metric of the route to `dst`, if reachable.
    pub fn metric(&self, dst: &NodeAddr) -> Option<u16> {
        self.fib.get(dst).map(|e| e.metric)
    }

    /// The up neighbors.
    pub fn neighbors(&self) -> &[NextHop] {
        &self.cache.neighbors
    }

    /// The up neighbor with address `addr`, if any.
    pub fn neighbor(&self, addr: &NodeAddr) -> Option<NextHop> {
        self.cache
            .neighbors
            .iter()
            .find(|n| n.addr == *addr)
            .copied()
    }

    /// The MTU of `link`.
    pub fn link_mtu(&self, link: LinkId) -> Option<usize> {
        self.cache.links.get(link.0 as usize).map(|l| l.0)
    }

    /// What forwarding `buf` (an ANEP packet whose transit header starts at `anep_len`) by
    /// the default route, or via `via`, would do: the next hop, or the drop the node would
    /// count. The same checks, in the same order, as the node's forward.
    pub fn check_forward(
        &self,
        buf: &[u8],
        anep_len: usize,
        via: Option<NextHop>,
    ) -> Result<NextHop, DropReason> {
        let Some(Ok(t)) = buf.get(anep_len..).map(Transit::new_checked) else {
            return Err(DropReason::MalformedTransit);
        };
        let dst = t.dst();
        if dst == self.address && via.is_none() {
            return Err(DropReason::Loop);
        }
        if t.rb() == 0 {
            return Err(DropReason::RbExhausted);
        }
        let hop = via
            .or_else(|| self.fib.get(&dst).map(|e| e.hop))
            .ok_or(DropReason::NoRoute)?;
        match self.cache.links.get(hop.link.0 as usize) {
            None => Err(DropReason::UnknownLink),
            Some(&(mtu, _)) if buf.len() > mtu => Err(DropReason::TooBig),
            Some((_, false)) => Err(DropReason::LinkDown),
            Some(_) => Ok(hop),
        }
    }
}

impl NodeFacts for NodeView {
    fn address(&self) -> NodeAddr {
        self.address
    }

    fn lookup(&self, dst: &NodeAddr) -> Option<NextHop> {
        self.fib.get(dst).map(|e| e.hop)
    }

    fn neighbor_on(&self, link: LinkId) -> Option<NextHop> {
        self.cache
            .neighbors
            .iter()
            .find(|n| n.link == link)
            .copied()
    }
}
