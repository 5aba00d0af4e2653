//! Packet-path hook points (NetServ's processing modules, Openet's JFWD filters).
//!
//! A [`PacketHooks`] implementation (the service-module manager of `anode-modules`) is
//! installed with [`crate::Node::set_packet_hooks`]. The node consults it at four points:
//! - [`HookPoint::Ingress`]: every packet that arrived on an up link, before the ANEP check;
//! - [`HookPoint::PreRouting`]: every packet that is not a control message (arrived or
//!   injected locally) after the ANEP header is checked, before the routing decision (fast
//!   path, EE, or delivery); a redirect here sends the packet as it is (no hop is spent);
//! - [`HookPoint::PostRouting`]: every packet queued for transmission (forwarded, originated,
//!   control), with the link chosen;
//! - [`HookPoint::LocalDelivery`]: packets delivered to a local application.
//!
//! With no hooks installed each point costs one `Option` test. With hooks installed,
//! [`PacketHooks::wants`] is asked first, so points nobody registered for cost one more call,
//! and the implementation decides by its demux filters which packets its processors see;
//! packets that match no filter keep their fast path.
//!
//! The packet is handed over by value (the node's buffer, no copy) and comes back in the
//! [`HookVerdict`]. Packets a processor emits are queued for transmission after the hook
//! returns, without passing the post-routing hook again (no recursion).
//!
//! Contract: `run` must not panic on any packet and must return promptly (it runs on the
//! data path).

use std::fmt::Debug;
use std::time::Instant;

use anode_routing::{LinkId, NextHop};

use crate::Transmit;

/// Where in the packet path a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookPoint {
    /// Every packet arriving on a link, before any check.
    Ingress,
    /// Routed packets before the routing decision.
    PreRouting,
    /// Every packet about to be queued on a link.
    PostRouting,
    /// Packets delivered to local applications.
    LocalDelivery,
}

impl HookPoint {
    /// All points, in path order.
    pub const ALL: [HookPoint; 4] = [
        HookPoint::Ingress,
        HookPoint::PreRouting,
        HookPoint::PostRouting,
        HookPoint::LocalDelivery,
    ];

    /// The name used in manifests and reports.
    pub fn name(self) -> &'static str {
        match self {
            HookPoint::Ingress => "ingress",
            HookPoint::PreRouting => "pre-routing",
            HookPoint::PostRouting => "post-routing",
            HookPoint::LocalDelivery => "local-delivery",
        }
    }

    /// Parses a name from [`HookPoint::name`].
    pub fn from_name(s: &str) -> Option<HookPoint> {
        HookPoint::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// What a hook decided about a packet.
#[derive(Debug)]
pub enum HookVerdict {
    /// Go on along the path with this buffer (possibly modified in place).
    Continue(Vec<u8>),
    /// Drop it (counted as `hook_dropped`).
    Drop,
    /// A processor took it; the node does nothing more with it.
    Consumed,
    /// Send it to this neighbor instead of where it was going (no further routing).
    Redirect(NextHop, Vec<u8>),
}

/// The packet a hook sees, besides its bytes.
#[derive(Debug, Clone, Copy)]
pub struct HookInfo {
    /// The hook point.
    pub point: HookPoint,
    /// The time.
    pub now: Instant,
    /// The link it arrived on (`None` for local packets).
    pub in_link: Option<LinkId>,
    /// For post-routing: the link it is about to leave on.
    pub out_link: Option<LinkId>,
}

/// The packet processors of a node (implemented by `anode-modules`).
pub trait PacketHooks: Send + Debug {
    /// Whether anything is registered at `point` (asked before each packet there).
    fn wants(&self, point: HookPoint) -> bool;

    /// Runs the processors registered at `info.point` on `buf`, in load order; packets they
    /// emit go to `emit`.
    fn run(&mut self, info: HookInfo, buf: Vec<u8>, emit: &mut Vec<Transmit>) -> HookVerdict;

    /// For an ANEP Type ID no built-in EE owns: whether an EE module owns it (`Some`), and
    /// if so whether it runs (`Some(false)`: stopped, its packets are dropped as
    /// `ee_stopped`). `None` (the default): the ANEP rule for unknown types applies.
    fn ee_owner(&self, type_id: u16) -> Option<bool> {
        let _ = type_id;
        None
    }

    /// Runs the EE module that owns `call.type_id` on a packet the node checked and routed
    /// to it (see [`EeCall`]); packets it emits go to `emit`. The verdict's meaning:
    /// `Continue` delivers the packet at its destination and forwards it by the default
    /// route elsewhere, `Redirect` forwards it to that neighbor (spending the resource bound
    /// like any forward), `Drop` drops it as `ee_dropped`, `Consumed` ends it.
    fn run_ee(&mut self, call: EeCall, buf: Vec<u8>, emit: &mut Vec<Transmit>) -> HookVerdict {
        let _ = (call, emit);
        HookVerdict::Continue(buf)
    }

    /// For the module manager to reach its concrete type through the node.
    /// The hooks' part of the node's handover (`handover.rs`): their own state, as JSON.
    /// The default hands over nothing.
    fn hand_over(&mut self, now: Instant) -> serde_json::Value {
        let _ = now;
        serde_json::Value::Null
    }

    /// Takes back what [`PacketHooks::hand_over`] gave in another process; it comes from
    /// outside this process: check it, never panic on it.
    fn take_over(&mut self, now: Instant, state: &serde_json::Value) -> Result<(), String> {
        let _ = (now, state);
        Ok(())
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

/// A packet for an EE module, besides its bytes: checked like every EE's packet (ANEP,
/// transit header, checksum at its destination, datagram header).
#[derive(Debug, Clone, Copy)]
pub struct EeCall {
    /// Its ANEP Type ID.
    pub type_id: u16,
    /// Why the EE gets it.
    pub why: crate::ee::Dispatch,
    /// The time.
    pub now: Instant,
    /// The link it arrived on (`None` for local packets).
    pub in_link: Option<LinkId>,
    /// Where its payload starts (after the datagram header).
    pub payload_at: usize,
}
