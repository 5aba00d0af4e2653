//! The outcome ledger ([`Outcomes`]): every packet handed to the node ends in exactly one
//! outcome, so `rx_packets + local_packets == outcomes.total()` at every moment.
//!
//! Contract:
//! - [`Node::handle_packet`](crate::Node::handle_packet) and
//!   [`Node::inject`](crate::Node::inject) open the ledger for their packet and close it when
//!   they return. In between, the first outcome the node or an EE gives settles it: a forward
//!   that was queued, a delivery, a drop (the node's or an EE's, under one reason), or a hold.
//!   A packet still open at close was consumed (a control message, a capsule its code ended,
//!   an evaluated PLAN program, a packet a module consumed).
//! - Outside a packet (timers, operator calls) nothing settles: what EEs send then are new
//!   packets, not outcomes. Inside one, an EE sends a packet it made (a copy, an error
//!   report, a PLAN program's `OnRemote`) through [`NodeContext::originate`], so the new
//!   packet's fate is not taken for the handled packet's outcome. (A send an EE makes
//!   without it would settle the handled packet: the sum stays exact, the split by kind
//!   would credit the copy.)
//! - An EE that keeps a packet past its `handle_packet` (a capsule waiting for code, a packet
//!   queued for a NodeOS domain) calls [`NodeContext::hold`] on it; the packet is `held`
//!   until the EE calls [`NodeContext::resume`] on it, gives it its outcome, and calls
//!   [`NodeContext::finish`]. If the EE cannot keep it after all (its queue refused it),
//!   [`NodeContext::unhold`] reopens its outcome at once. A held packet the EE drops later is
//!   resumed, dropped with its reason and finished like any other.

use crate::counters::Outcomes;
use crate::ee::{EePacket, NodeContext};
use crate::node::Core;

/// Where the packet being handled stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Cur {
    /// No packet is being handled (timers, operator calls).
    #[default]
    Idle,
    /// A packet is being handled and has no outcome yet.
    Open,
    /// The packet being handled has its outcome.
    Settled,
    /// The packet being handled was just held (an [`NodeContext::unhold`] may reopen it).
    Held,
}

/// An outcome that settles the packet being handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Forwarded,
    Delivered,
    Dropped,
}

/// What [`NodeContext::resume`] saved: the state to go back to at
/// [`NodeContext::finish`] (`None`: the packet was not held, nothing to settle).
#[derive(Debug)]
#[must_use = "pass it to NodeContext::finish once the packet has its outcome"]
pub struct Resumed(Option<Cur>);

impl Core {
    /// Starts handling an input packet; returns the state to restore at [`Core::close`].
    #[inline]
    pub(crate) fn open(&mut self) -> Cur {
        std::mem::replace(&mut self.cur, Cur::Open)
    }

    /// Ends handling a packet: one still open was consumed.
    #[inline]
    pub(crate) fn close(&mut self, prev: Cur) {
        if self.cur == Cur::Open {
            self.counters.outcomes.consumed += 1;
        }
        self.cur = prev;
    }

    /// Gives the packet being handled its outcome, if it has none yet.
    #[inline]
    pub(crate) fn settle(&mut self, o: Outcome) {
        if self.cur == Cur::Open {
            self.cur = Cur::Settled;
            let c: &mut Outcomes = &mut self.counters.outcomes;
            match o {
                Outcome::Forwarded => c.forwarded += 1,
                Outcome::Delivered => c.delivered += 1,
                Outcome::Dropped => c.dropped += 1,
            }
        }
    }
}

impl NodeContext<'_> {
    /// The EE keeps `pkt` (the packet it is handling) past this call: it counts as held until
    /// [`NodeContext::resume`]. Nothing happens for a packet the EE made itself.
    pub fn hold(&mut self, pkt: &mut EePacket) {
        if self.core.cur == Cur::Open && !pkt.held {
            self.core.cur = Cur::Held;
            self.core.counters.outcomes.held += 1;
            pkt.held = true;
        }
    }

    /// The packet just held could not be kept after all (a full queue refused it): its
    /// outcome is open again (the EE drops it next, with the reason).
    pub fn unhold(&mut self) {
        if self.core.cur == Cur::Held {
            self.core.cur = Cur::Open;
            let h = &mut self.core.counters.outcomes.held;
            *h = h.saturating_sub(1);
        }
    }

    /// The EE goes on with a packet it held: what it does with it next (until
    /// [`NodeContext::finish`]) is the packet's outcome.
    pub fn resume(&mut self, pkt: &mut EePacket) -> Resumed {
        if !pkt.held {
            return Resumed(None);
        }
        pkt.held = false;
        let h = &mut self.core.counters.outcomes.held;
        *h = h.saturating_sub(1);
        Resumed(Some(self.core.open()))
    }

    /// Runs `f` for a packet the EE made itself (a copy, a report, a program's new packet):
    /// what `f` sends, delivers or drops is that packet's fate, not an outcome of the packet
    /// being handled.
    pub fn originate<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let prev = std::mem::replace(&mut self.core.cur, Cur::Idle);
        let r = f(self);
        self.core.cur = prev;
        r
    }

    /// Drops `pkt`, held or not, counted under `ee` and `reason`: resumed, dropped and
    /// finished, its one outcome.
    pub fn drop_held(&mut self, ee: &str, mut pkt: EePacket, reason: crate::DropReason) {
        let r = self.resume(&mut pkt);
        self.count_drop(ee, reason);
        self.finish(r);
    }

    /// Ends a resumed packet's handling: one given no other outcome was consumed.
    pub fn finish(&mut self, r: Resumed) {
        if let Some(prev) = r.0 {
            self.core.close(prev);
        }
    }
}
