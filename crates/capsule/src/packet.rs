//! Building capsules, for applications and tools that inject them into a node.

use anode_wire::NodeAddr;
use anode_wire::capsule::{Capsule, CapsuleRepr};
use anode_wire::transit::{FLAG_EVAL_EVERY_HOP, TransitRepr};

use crate::{CapsuleError, CodeHash};

/// A whole ANEP capsule packet from `src` to `dst` running `code` at every hop, with resource
/// bound `rb`, flow id `flow` and `payload`; the code is demand-loaded from the previous hop.
pub fn capsule_packet(
    code: CodeHash,
    src: NodeAddr,
    dst: NodeAddr,
    rb: u16,
    flow: u64,
    payload: &[u8],
) -> Result<Vec<u8>, CapsuleError> {
    Capsule {
        transit: TransitRepr {
            flags: FLAG_EVAL_EVERY_HOP,
            rb,
            flow,
            src,
            dst,
            prev_hop: src,
        },
        header: CapsuleRepr {
            flags: 0,
            code,
            code_source: None,
        },
        payload: payload.to_vec(),
    }
    .to_packet()
    .map_err(|e| CapsuleError::Packet(e.to_string()))
}
