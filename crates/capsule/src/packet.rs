//! Building capsules, for applications and tools that inject them into a node.

use anode_wire::NodeAddr;

use crate::{CapsuleError, CodeHash};

/// A whole ANEP capsule packet from `src` to `dst` running `code` at every hop, with resource
/// bound `rb`, flow id `flow` and `payload`; the code is demand-loaded from the previous hop
/// (`anode_wire::capsule::capsule_packet`, its error as a [`CapsuleError`]).
pub fn capsule_packet(
    code: CodeHash,
    src: NodeAddr,
    dst: NodeAddr,
    rb: u16,
    flow: u64,
    payload: &[u8],
) -> Result<Vec<u8>, CapsuleError> {
    anode_wire::capsule::capsule_packet(code, src, dst, rb, flow, payload)
        .map_err(|e| CapsuleError::Packet(e.to_string()))
}
