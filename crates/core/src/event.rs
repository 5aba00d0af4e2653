//! What the node hands back to its driver: transmits and events.

use anode_routing::LinkId;
use anode_wire::NodeAddr;

/// A packet to send on a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// The link to send on.
    pub link: LinkId,
    /// The neighbor to send to (for UDP links: the datagram's destination).
    pub dst: NodeAddr,
    /// The whole ANEP packet. For forwarded packets this is the buffer that arrived, reused.
    pub buf: Vec<u8>,
}

/// A packet delivered to a local application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// ANEP Type ID it arrived under.
    pub type_id: u16,
    /// Application port.
    pub port: u16,
    /// The node that originated it.
    pub src: NodeAddr,
    /// Flow id.
    pub flow: u64,
    /// Resource bound left on arrival.
    pub rb: u16,
    /// The buffer; the payload is `buf[offset..]`.
    pub buf: Vec<u8>,
    /// Where the payload starts in `buf`.
    pub offset: usize,
}

impl Delivery {
    /// The application payload.
    pub fn payload(&self) -> &[u8] {
        self.buf.get(self.offset..).unwrap_or(&[])
    }
}

/// Something that happened in the node, for the driver, tools and reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A neighbor is up (hellos both ways).
    NeighborUp {
        /// The link.
        link: LinkId,
        /// The neighbor.
        addr: NodeAddr,
    },
    /// A neighbor went down.
    NeighborDown {
        /// The link.
        link: LinkId,
        /// The neighbor.
        addr: NodeAddr,
    },
    /// A packet for a local application.
    Delivered(Delivery),
    /// A message an execution environment logged.
    Log {
        /// The EE's name.
        ee: String,
        /// The message.
        message: String,
    },
}
