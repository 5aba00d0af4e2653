//! Tracking of the datagrams scenario steps send: when each left, which nodes forwarded it,
//! when and where it arrived and with how much resource bound left.
//!
//! Every tracked datagram carries its own flow id: [`FLOW_TAG`] in the top 16 bits and its
//! index in the tracker below, so a delivery is matched to its record without reading the
//! payload (which is the user's). Records are kept in send order; nothing here depends on
//! hash-map order, so reports built from it are deterministic.

use std::time::Duration;

use anode_core::DropReason;
use anode_wire::anep::{AnepPacket, TYPE_DATAGRAM};
use anode_wire::transit::field;

/// Marks a flow id as one of the emulator's tracked datagrams.
pub const FLOW_TAG: u64 = 0xE3E0 << 48;
const INDEX_MASK: u64 = (1 << 48) - 1;

/// Where and when a tracked datagram arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Time since the start of the run.
    pub at: Duration,
    /// Resource bound left on arrival.
    pub rb_left: u16,
}

/// One tracked datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRec {
    /// The step that sent it.
    pub step: usize,
    /// Source node.
    pub from: usize,
    /// Destination node.
    pub to: usize,
    /// When it was handed to the source node.
    pub sent_at: Duration,
    /// Resource bound it left with.
    pub rb: u16,
    /// Payload bytes.
    pub bytes: usize,
    /// Set when the source node refused it (no route, too big, ...).
    pub refused: Option<DropReason>,
    /// The nodes that transmitted it, in order (virtual time only).
    pub path: Vec<usize>,
    /// Its arrival at the destination.
    pub arrival: Option<Arrival>,
}

impl FlowRec {
    /// One-way latency, if it arrived.
    pub fn latency(&self) -> Option<Duration> {
        self.arrival.map(|a| a.at.saturating_sub(self.sent_at))
    }

    /// Hops taken (resource bound spent), if it arrived.
    pub fn hops(&self) -> Option<u16> {
        self.arrival.map(|a| self.rb.saturating_sub(a.rb_left))
    }
}

/// The tracked datagrams of a run.
#[derive(Debug, Default, Clone)]
pub struct Tracker {
    flows: Vec<FlowRec>,
}

impl Tracker {
    /// Records a datagram about to be sent; returns the flow id to send it with.
    pub fn open(&mut self, rec: FlowRec) -> u64 {
        self.flows.push(rec);
        FLOW_TAG | (self.flows.len() as u64 - 1)
    }

    fn get_mut(&mut self, flow: u64) -> Option<&mut FlowRec> {
        if flow & !INDEX_MASK != FLOW_TAG {
            return None;
        }
        self.flows.get_mut((flow & INDEX_MASK) as usize)
    }

    /// The source refused it.
    pub fn refuse(&mut self, flow: u64, why: DropReason) {
        if let Some(r) = self.get_mut(flow) {
            r.refused = Some(why);
        }
    }

    /// `node` transmitted it.
    pub fn hop(&mut self, flow: u64, node: usize) {
        if let Some(r) = self.get_mut(flow)
            && r.path.len() < 4096
        {
            r.path.push(node);
        }
    }

    /// It was delivered at `node`; ignored unless `node` is its destination and it has not
    /// arrived before.
    pub fn deliver(&mut self, flow: u64, node: usize, at: Duration, rb_left: u16) {
        if let Some(r) = self.get_mut(flow)
            && r.to == node
            && r.arrival.is_none()
        {
            r.arrival = Some(Arrival { at, rb_left });
        }
    }

    /// The datagrams of one step, in send order.
    pub fn of_step(&self, step: usize) -> impl Iterator<Item = &FlowRec> {
        self.flows.iter().filter(move |f| f.step == step)
    }

    /// All tracked datagrams, in send order.
    pub fn all(&self) -> &[FlowRec] {
        &self.flows
    }
}

/// The flow id of a datagram packet, without copying it; `None` for anything else.
pub fn datagram_flow(buf: &[u8]) -> Option<u64> {
    let p = AnepPacket::new_checked(buf).ok()?;
    if p.type_id() != TYPE_DATAGRAM {
        return None;
    }
    let at = p.header_len() + field::FLOW;
    let b: [u8; 8] = buf.get(at..at + 8)?.try_into().ok()?;
    let flow = u64::from_be_bytes(b);
    (flow & !INDEX_MASK == FLOW_TAG).then_some(flow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_wire::addr::v4;
    use anode_wire::datagram::Datagram;
    use anode_wire::transit::TransitRepr;

    #[test]
    fn flow_is_read_from_datagrams_only() {
        let mut t = Tracker::default();
        let flow = t.open(FlowRec {
            step: 0,
            from: 0,
            to: 1,
            sent_at: Duration::ZERO,
            rb: 9,
            bytes: 2,
            refused: None,
            path: vec![],
            arrival: None,
        });
        let d = Datagram {
            transit: TransitRepr {
                rb: 9,
                flow,
                src: v4(198, 18, 0, 1, 1),
                dst: v4(198, 18, 0, 2, 1),
                ..Default::default()
            },
            port: 7,
            payload: b"hi".to_vec(),
        };
        let pkt = d.to_packet().unwrap();
        assert_eq!(datagram_flow(&pkt), Some(flow));
        assert_eq!(datagram_flow(&pkt[..20]), None);
        t.hop(flow, 0);
        t.deliver(flow, 2, Duration::from_millis(1), 8);
        assert!(t.all()[0].arrival.is_none(), "wrong node");
        t.deliver(flow, 1, Duration::from_millis(3), 8);
        assert_eq!(t.all()[0].latency(), Some(Duration::from_millis(3)));
        assert_eq!(t.all()[0].hops(), Some(1));
        assert_eq!(t.all()[0].path, vec![0]);
    }
}
