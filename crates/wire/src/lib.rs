//! # anode wire formats
//!
//! Every byte that crosses a link between anode nodes is described here, and nothing here does I/O.
//! The layering of one packet:
//!
//! ```text
//! +-----------------------------+  anep.rs: 8-byte basic header (version, flags, Type ID,
//! | ANEP basic header + options |  header length in 32-bit words, packet length) + TLV options
//! +-----------------------------+
//! | transit header (72 bytes)   |  transit.rs: what the fast path reads and rewrites in place:
//! |                             |  resource bound, flags, flow id, source, destination, previous hop
//! +-----------------------------+  (present for the routed Type IDs: capsule, PLAN, datagram)
//! | EE header                   |  capsule.rs / datagram.rs / the PLAN crate's header
//! +-----------------------------+
//! | payload                     |
//! +-----------------------------+
//! ```
//!
//! Control messages between neighbors (hello, distance-vector updates, code request/response)
//! use the same ANEP framing under [`anep::TYPE_CONTROL`] and carry no transit header (they are
//! link-local): see `control.rs`.
//!
//! ## Contracts
//! - Every parser takes untrusted bytes and returns `Result<_, WireError>`; no input makes it
//!   panic (fuzz targets in `fuzz/` and garbled-input tests check this). Checked views
//!   (`AnepPacket::new_checked`, `Transit::new_checked`) validate lengths once; afterwards their
//!   accessors cannot index out of bounds.
//! - Every `*Repr` type has `parse` and `emit`, and `parse(emit(x)) == x` (property tests).
//! - All integers are big-endian (network order).
//! - Headers carry a version and their own length, so later versions may append fields: a
//!   parser accepts a longer header of the same version and skips what it does not know.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
#![forbid(unsafe_code)]

pub mod addr;
pub mod anep;
pub mod auth;
pub mod capsule;
pub mod checksum;
pub mod control;
pub mod datagram;
pub mod deploy;
mod error;
pub mod transit;
mod util;

pub use addr::NodeAddr;
pub use error::WireError;

/// The default UDP port of anode nodes: 3322, IANA's "active-net".
pub const DEFAULT_PORT: u16 = 3322;

/// Builds a routed ANEP packet: basic header (no options, discard-if-unknown set), transit
/// header, EE header, payload.
pub fn routed_packet(
    type_id: u16,
    transit: &transit::TransitRepr,
    ee_header: &[u8],
    payload: &[u8],
) -> Result<Vec<u8>, WireError> {
    let total = anep::BASIC_HEADER_LEN + transit::LEN + ee_header.len() + payload.len();
    if total > usize::from(u16::MAX) {
        return Err(WireError::TooLarge {
            what: "ANEP packet",
            len: total,
            max: usize::from(u16::MAX),
        });
    }
    let mut out = Vec::with_capacity(total);
    out.resize(anep::BASIC_HEADER_LEN + transit::LEN, 0);
    anep::AnepRepr::new(type_id).emit(&mut out, total - anep::BASIC_HEADER_LEN)?;
    transit.emit(out.get_mut(anep::BASIC_HEADER_LEN..).unwrap_or(&mut []))?;
    out.extend_from_slice(ee_header);
    out.extend_from_slice(payload);
    Ok(out)
}

/// Builds a routed ANEP packet of a Type ID some nodes may not know (the deployment
/// service's, an EE module's): like [`routed_packet`], but the basic header does not ask to
/// be discarded where the type is unknown and names the transit destination in an ANEP
/// option, so such nodes forward it toward its destination.
pub fn passable_packet(
    type_id: u16,
    transit: &transit::TransitRepr,
    ee_header: &[u8],
    payload: &[u8],
) -> Result<Vec<u8>, WireError> {
    let mut body = transit.to_vec();
    body.extend_from_slice(ee_header);
    body.extend_from_slice(payload);
    anep::AnepRepr {
        flags: 0,
        type_id,
        options: vec![anep::AnepOptionT::Destination(transit.dst)],
    }
    .emit_packet(&body)
}
