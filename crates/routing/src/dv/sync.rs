//! Per-neighbor state of the distance-vector service, and the rule that lets a periodic
//! update be a digest instead of the whole table.
//!
//! RIP sends every neighbor the whole table every update interval, and the receiver looks
//! up every entry: n entries per neighbor per interval at every node, n² work over a
//! network of n nodes (on a 3,815-node backbone, three quarters of a billion lookups in a
//! 108 s run). Most of those tables repeat what the receiver already has. So:
//!
//! - the sender numbers the Routes messages it sends each neighbor (`seq`, wrapping) and
//!   marks the first and last message of a full table;
//! - the receiver follows the stream ([`RxSync`]): it is *in step* with a neighbor once it
//!   has received a whole full table with no gap in the numbers, and every message since;
//! - at the periodic update the sender sends a neighbor a 24-byte digest ("my table toward
//!   you is what my messages up to `seq` said") instead of the table, unless that neighbor
//!   asked for the table or never sent a flagged message (a node from before digests, which
//!   keeps getting full tables);
//! - a receiver in step refreshes every route through the sender at once (what the full
//!   table would have done, since it would repeat each of them unchanged); one not in step
//!   (a lost message, a restart, a sender that numbers nothing) asks for the full table,
//!   which comes in the sender's next triggered round (at most once per update interval per
//!   neighbor, else at its periodic update), and does not refresh;
//! - a node whose route got worse or unreachable asks every neighbor for its full table: a
//!   full table is how a distance-vector node hears of the alternatives it ignored while its
//!   route was better, and with digests it would otherwise never hear them again.
//!
//! Invariant: a route is refreshed only by its next hop's full table, a triggered update
//! that names it, or a digest from a neighbor the receiver is in step with. So a route
//! times out after `route_timeout` exactly when, under RIP's rules, its next hop stopped
//! advertising it (or the receiver could not tell for that long).

use crate::LinkId;

/// One up neighbor.
#[derive(Debug, Clone, Copy)]
pub(super) struct Neighbor {
    /// The link it is on.
    pub(super) link: LinkId,
    /// The link's cost.
    pub(super) cost: u16,
    /// The number the next Routes message to it will carry.
    pub(super) tx_seq: u16,
    /// It asked for the full table: send it at the next periodic update, not a digest (unless
    /// `answer_now` sends it sooner).
    pub(super) wants_table: bool,
    /// It asked, and no full table went to it within the last update interval: answer in
    /// the next triggered round instead (RIP answers a whole-table request at once; the
    /// interval bounds what a neighbor's requests can make this node send).
    pub(super) answer_now: bool,
    /// When the last full table to it was queued.
    pub(super) last_full: Option<std::time::Instant>,
    /// Ask it for its full table in the next triggered round.
    pub(super) ask: bool,
    /// It has sent a message with flags, so it numbers its stream and understands digests.
    /// A node from before digests sends none, and keeps getting full tables (it would take
    /// a digest for an empty update, and let this node's routes time out).
    pub(super) understands_digests: bool,
    /// Where this node is in the neighbor's stream.
    pub(super) rx: RxSync,
}

impl Neighbor {
    /// A neighbor just up: nothing heard yet, so not in step.
    pub(super) fn new(link: LinkId, cost: u16) -> Self {
        Neighbor {
            link,
            cost,
            tx_seq: 0,
            wants_table: false,
            answer_now: false,
            last_full: None,
            ask: false,
            understands_digests: false,
            rx: RxSync::default(),
        }
    }

    /// The number for the next message to it (and counts it).
    pub(super) fn take_seq(&mut self) -> u16 {
        let s = self.tx_seq;
        self.tx_seq = s.wrapping_add(1);
        s
    }

    /// The number of the last message sent to it (what a digest carries).
    pub(super) fn last_seq(&self) -> u16 {
        self.tx_seq.wrapping_sub(1)
    }
}

/// A receiver's place in one neighbor's stream of Routes messages.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RxSync {
    /// The number the next message should carry (`None`: nothing received yet).
    next: Option<u16>,
    /// Inside a full table received with no gap so far.
    filling: bool,
    /// A whole full table arrived, and every message since.
    in_step: bool,
}

impl RxSync {
    /// A (non-digest) message numbered `seq` with `flags` arrived.
    pub(super) fn accept(&mut self, seq: u16, first: bool, last: bool) {
        let in_order = self.next == Some(seq);
        if first {
            // A full table starts: whatever was missed before it, it repeats.
            self.filling = true;
        } else if !in_order {
            self.filling = false;
            self.in_step = false;
        }
        if last && self.filling {
            self.filling = false;
            self.in_step = true;
        }
        self.next = Some(seq.wrapping_add(1));
    }

    /// Whether a digest saying "up to message `seq`" describes what this node has: in step,
    /// and `seq` is the last message received.
    pub(super) fn matches(&self, seq: u16) -> bool {
        self.in_step && self.next == Some(seq.wrapping_add(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_step_after_a_whole_full_table_and_out_at_a_gap() {
        let mut r = RxSync::default();
        assert!(!r.matches(0), "nothing heard");
        r.accept(5, false, false);
        assert!(!r.matches(5), "a triggered update alone is not a table");
        r.accept(6, true, false);
        r.accept(7, false, false);
        assert!(!r.matches(7), "the table is not complete");
        r.accept(8, false, true);
        assert!(r.matches(8));
        assert!(!r.matches(9), "a digest past what arrived");
        assert!(!r.matches(7), "a digest before what arrived");
        r.accept(9, false, false);
        assert!(r.matches(9), "a triggered update in order keeps step");
        r.accept(11, false, false);
        assert!(!r.matches(11), "message 10 was lost");
        // A gap inside a full table: still out.
        r.accept(12, true, false);
        r.accept(14, false, true);
        assert!(!r.matches(14));
        // A one-message table after a gap: in step again.
        r.accept(20, true, true);
        assert!(r.matches(20));
    }

    #[test]
    fn numbers_wrap() {
        let mut r = RxSync::default();
        r.accept(u16::MAX, true, false);
        r.accept(0, false, true);
        assert!(r.matches(0));
        let mut n = Neighbor::new(LinkId(0), 1);
        n.tx_seq = u16::MAX;
        assert_eq!(n.take_seq(), u16::MAX);
        assert_eq!((n.tx_seq, n.last_seq()), (0, u16::MAX));
    }
}
