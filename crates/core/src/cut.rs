//! Cut-through channels: the hook by which an EE moves a data flow onto the fast path.
//!
//! A cut-through channel (NodeOS "cutChan") joins an input channel, described by demux keys,
//! to an output inside the node: a routed packet of an EE's Type ID whose bytes match the keys
//! is forwarded like a fast-path packet and never reaches the EE, while the EE's other packets
//! (e.g. its control capsules) still do.
//!
//! The node core only defines the interface ([`CutThrough`]) and where it is consulted: in
//! `Node::route_ee`, after the transit header is checked and before the EE would be chosen,
//! for packets that are not addressed to this node. The table itself (a compiled demux
//! classifier and token buckets) lives in `anode-nodeos`, installed with
//! [`crate::Node::set_cut_through`]. With no table installed the check is one `Option` test.
//!
//! Contract: `classify` must not panic on any input and should be cheap (it runs per packet).

use std::fmt::Debug;
use std::time::Instant;

use anode_routing::NextHop;

/// One demux key: the packet matches when `packet[offset + i] & mask[i] == value[i] & mask[i]`
/// for every `i < value.len()`. Offsets count from the first byte of the ANEP packet.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DemuxKey {
    /// Byte offset from the start of the ANEP packet.
    pub offset: usize,
    /// The value to compare (its length is the key's length).
    pub value: Vec<u8>,
    /// The mask, as long as `value`.
    pub mask: Vec<u8>,
}

impl DemuxKey {
    /// A key comparing `value` exactly (mask all ones).
    pub fn exact(offset: usize, value: &[u8]) -> Self {
        DemuxKey {
            offset,
            value: value.to_vec(),
            mask: vec![0xff; value.len()],
        }
    }

    /// Whether `pkt` matches this key (a packet too short does not).
    pub fn matches(&self, pkt: &[u8]) -> bool {
        let Some(end) = self.offset.checked_add(self.value.len()) else {
            return false;
        };
        let Some(b) = pkt.get(self.offset..end) else {
            return false;
        };
        b.iter()
            .zip(self.value.iter().zip(&self.mask))
            .all(|(p, (v, m))| p & m == v & m)
    }
}

/// Where a cut-through channel sends what matches, for how long, and on whose behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutSpec {
    /// A fixed neighbor, or `None` for the default route to the transit destination.
    pub via: Option<NextHop>,
    /// Bandwidth limit in bytes per second (`None`: unlimited).
    pub rate_bytes_per_sec: Option<u64>,
    /// Token-bucket depth in bytes (ignored without a rate).
    pub burst_bytes: u64,
    /// When the channel closes by itself (`None`: when its EE closes it).
    pub expires: Option<Instant>,
    /// The domain that opened it, for listings and for closing a terminated domain's
    /// channels (e.g. `capsule/1a2b3c4d`).
    pub owner: String,
}

/// What a listing shows of one open cut-through channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutInfo {
    /// Its identity.
    pub id: CutId,
    /// The Type ID whose packets it takes.
    pub type_id: u16,
    /// The domain that opened it.
    pub owner: String,
    /// The keys (besides the Type ID, which is always matched).
    pub keys: Vec<DemuxKey>,
    /// The fixed neighbor, if any.
    pub via: Option<NextHop>,
    /// Packets and bytes it forwarded, packets it policed.
    pub packets: u64,
    /// Bytes it forwarded.
    pub bytes: u64,
    /// Packets dropped over its bandwidth limit.
    pub policed: u64,
    /// When it was opened.
    pub created: Instant,
    /// When it closes by itself.
    pub expires: Option<Instant>,
}

/// The identity of an open cut-through channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CutId(pub u64);

/// What the table decided for a matching packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutVerdict {
    /// Forward on the fast path (to `via`, or by the default route).
    Forward(Option<NextHop>),
    /// Over the channel's bandwidth: drop (counted as `cut_through_policed`).
    Police,
}

/// Why a cut-through channel could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CutError {
    /// No cut-through table is installed on this node.
    #[error("no cut-through table is installed on this node")]
    NotInstalled,
    /// The keys are unusable (empty list, value/mask lengths differ, too long).
    #[error("invalid demux keys: {0}")]
    BadKeys(String),
    /// The caller's domain may not open (more) channels.
    #[error("channel refused by policy: {0}")]
    Refused(String),
}

/// A cut-through table (implemented by `anode-nodeos`).
pub trait CutThrough: Send + Debug {
    /// Opens a channel at `now` for packets of `type_id` matching every key in `keys`.
    fn open(
        &mut self,
        now: Instant,
        type_id: u16,
        keys: Vec<DemuxKey>,
        spec: CutSpec,
    ) -> Result<CutId, CutError>;

    /// Closes a channel; `false` if it was not open.
    fn close(&mut self, id: CutId) -> bool;

    /// The verdict for a routed packet of `type_id` (`None`: no channel matches, go on to
    /// the EE as usual; a channel past its expiry matches nothing and is closed).
    fn classify(&mut self, now: Instant, type_id: u16, pkt: &[u8]) -> Option<CutVerdict>;

    /// The open channels (those expired by `now` are closed first).
    fn channels(&mut self, now: Instant) -> Vec<CutInfo>;

    /// Closes every channel `owner` opened (its domain was terminated); returns how many.
    fn close_owner(&mut self, owner: &str) -> usize;

    /// Closes every channel of `type_id` (its EE was stopped or removed); returns how many.
    fn close_type(&mut self, type_id: u16) -> usize;

    /// Whether some open channel treats a passive packet differently from the fast path (a
    /// fixed neighbor, a bandwidth limit): then a copy of the fast path outside the node
    /// (the kernel's) must leave every EE packet to the node. A channel that forwards by the
    /// default route without a limit does what the fast path does, so passive packets of
    /// its flow may be forwarded outside the node (and are not counted on it).
    fn diverts(&self) -> bool {
        true
    }
}
