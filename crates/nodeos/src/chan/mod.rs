//! Channels (NodeOS §II-C): input channels (protocol spec, address spec, demux keys, buffer
//! limit, handler), output channels (destination, bandwidth limit), and cut-through channels
//! (an input joined to an output inside the node: matching packets never reach an EE).
//!
//! - [`spec`]: protocol specs such as `if0/ip/udp/anep`;
//! - [`demux`]: the compiled classifier;
//! - [`bucket`]: the token bucket that enforces bandwidth;
//! - [`cut`]: [`CutTable`], the cut-through table the node core consults before EE dispatch.
//!
//! Address specs are compiled into demux keys: an ANEP Type ID is a 2-byte key at offset 2,
//! a transit source or destination an 18-byte key at `8 + 16` or `8 + 34`, a flow id an
//! 8-byte key at `8 + 8` (offsets for packets without ANEP options, which is how anode
//! builds routed packets; a sender that adds options shifts the transit header and its
//! packets do not match).

pub use anode_core::bucket;
pub mod cut;
pub mod demux;
pub mod spec;

use anode_wire::NodeAddr;
use anode_wire::anep::BASIC_HEADER_LEN;
use serde::Serialize;

pub use bucket::TokenBucket;
pub use cut::CutTable;
pub use demux::{Classifier, DemuxKey};
pub use spec::{Layer, ProtocolSpec, SpecError};

/// A channel's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ChanId(pub u64);

/// Which of an EE's handlers an input channel's packets go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct HandlerId(pub u32);

/// What packets an input channel wants, besides its demux keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddrSpec {
    /// ANEP Type ID (the EE).
    pub type_id: Option<u16>,
    /// Transit source.
    pub src: Option<NodeAddr>,
    /// Transit destination.
    pub dst: Option<NodeAddr>,
    /// Transit flow id.
    pub flow: Option<u64>,
}

impl AddrSpec {
    /// The demux keys this address spec stands for.
    pub fn keys(&self) -> Vec<DemuxKey> {
        let t = BASIC_HEADER_LEN;
        let mut k = Vec::new();
        if let Some(ty) = self.type_id {
            k.push(DemuxKey::exact(2, &ty.to_be_bytes()));
        }
        if let Some(f) = self.flow {
            k.push(DemuxKey::exact(t + 8, &f.to_be_bytes()));
        }
        if let Some(a) = self.src {
            k.push(DemuxKey::exact(t + 16, &a.to_bytes()));
        }
        if let Some(a) = self.dst {
            k.push(DemuxKey::exact(t + 34, &a.to_bytes()));
        }
        k
    }
}

/// The demux key selecting one capsule protocol (code group): the 32-byte code object name
/// in the capsule header, which follows the 72-byte transit header.
pub fn capsule_protocol_key(code: &[u8; 32]) -> DemuxKey {
    DemuxKey::exact(
        BASIC_HEADER_LEN + anode_wire::transit::LEN + 4,
        code.as_slice(),
    )
}

/// The demux key selecting one transit flow id.
pub fn flow_key(flow: u64) -> DemuxKey {
    DemuxKey::exact(BASIC_HEADER_LEN + 8, &flow.to_be_bytes())
}

/// An input channel's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InChanSpec {
    /// Protocol spec text, e.g. `udp/anep`.
    pub protocol: String,
    /// Address spec.
    pub addr: AddrSpec,
    /// Extra demux keys (all must match, with the address spec's).
    pub keys: Vec<DemuxKey>,
    /// Most packets buffered for the handler.
    pub buffer_limit: usize,
    /// The EE handler its packets go to.
    pub handler: HandlerId,
    /// Match priority (see [`demux`]).
    pub priority: u32,
}

/// An open input channel.
#[derive(Debug, Clone)]
pub struct InChan {
    /// Parsed protocol spec.
    pub protocol: ProtocolSpec,
    /// Its parameters.
    pub spec: InChanSpec,
    /// Packets buffered now.
    pub buffered: usize,
    /// Classifier handle.
    pub(crate) entry: usize,
}

/// An open output channel.
#[derive(Debug, Clone)]
pub struct OutChan {
    /// Destination.
    pub dest: NodeAddr,
    /// Its bandwidth limiter.
    pub bucket: TokenBucket,
}
