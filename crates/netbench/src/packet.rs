//! The benchmark's packets: ANEP datagrams and capsules of an exact total size.
//!
//! Contract: [`datagram_of_size`] returns a packet of exactly `size` bytes (the UDP payload)
//! that an anode node forwards on its fast path toward `dst`: transit header with resource
//! bound 64, source and previous hop `src`, no flags, no ANEP options. [`capsule_of_size`]
//! returns a capsule of exactly `size` bytes with the same transit fields but the flag
//! `FLAG_EVAL_EVERY_HOP`, naming the code object `protocols::FORWARD` (no code source), so a
//! node holding that code runs it on the capsule.

use anode_capsule::{capsule_packet, code_hash, protocols};
use anode_wire::NodeAddr;
use anode_wire::anep::{BASIC_HEADER_LEN, TYPE_CAPSULE, TYPE_DATAGRAM};
use anode_wire::datagram::{self, Datagram};
use anode_wire::transit::{self, TransitRepr};

use crate::BenchError;

/// Bytes of an ANEP datagram before its payload.
pub const OVERHEAD: usize = BASIC_HEADER_LEN + transit::LEN + datagram::LEN;
/// Bytes of an ANEP capsule before its payload (8 ANEP + 72 transit + 56 capsule header).
pub const CAPSULE_OVERHEAD: usize = BASIC_HEADER_LEN + transit::LEN + anode_wire::capsule::LEN;
/// Largest UDP payload over IPv4.
pub const MAX_SIZE: usize = 65507;
/// Bytes of the send-time stamp (`anode-blast --stamp`): the packet's last 8 bytes, the
/// sender's `CLOCK_MONOTONIC` in ns, big endian, inside the payload (no forwarder rewrites
/// it). A stamped datagram has at least [`OVERHEAD`] + 8 bytes, a capsule
/// [`CAPSULE_OVERHEAD`] + 8.
pub const STAMP_LEN: usize = 8;

/// The smallest packet of kind `capsule` that carries a stamp after its headers.
pub fn min_stamped(capsule: bool) -> usize {
    STAMP_LEN + if capsule { CAPSULE_OVERHEAD } else { OVERHEAD }
}

/// The send-time stamp of a stamped packet of kind `capsule` (`None` if it is too short to
/// carry one).
pub fn stamp_of(pkt: &[u8], capsule: bool) -> Option<u64> {
    if pkt.len() < min_stamped(capsule) {
        return None;
    }
    let b: [u8; STAMP_LEN] = pkt.get(pkt.len() - STAMP_LEN..)?.try_into().ok()?;
    Some(u64::from_be_bytes(b))
}

/// The application port the benchmark datagrams are addressed to.
pub const BENCH_PORT: u16 = 9;

/// An ANEP datagram of exactly `size` bytes from `src` to `dst` with flow id `flow`.
pub fn datagram_of_size(
    size: usize,
    src: NodeAddr,
    dst: NodeAddr,
    flow: u64,
) -> Result<Vec<u8>, BenchError> {
    if !(OVERHEAD..=MAX_SIZE).contains(&size) {
        return Err(BenchError::Size {
            size,
            min: OVERHEAD,
            max: MAX_SIZE,
        });
    }
    let d = Datagram {
        transit: TransitRepr {
            rb: 64,
            flow,
            src,
            dst,
            prev_hop: src,
            ..Default::default()
        },
        port: BENCH_PORT,
        payload: vec![0x5a; size - OVERHEAD],
    };
    Ok(d.to_packet()?)
}

/// An ANEP capsule of exactly `size` bytes from `src` to `dst` with flow id `flow`, running
/// `protocols::FORWARD` at every hop.
pub fn capsule_of_size(
    size: usize,
    src: NodeAddr,
    dst: NodeAddr,
    flow: u64,
) -> Result<Vec<u8>, BenchError> {
    code_capsule_of_size(size, (src, dst, flow), protocols::FORWARD, &[])
}

/// Bytes of a flood data capsule's own header (`guest/protocols/flood`).
const FLOOD_HEADER: usize = 24;

/// The smallest capsule [`cut_capsule_of_size`] makes.
pub const MIN_CUT_CAPSULE: usize = CAPSULE_OVERHEAD + FLOOD_HEADER;

/// A flood data capsule (`protocols::FLOOD`) of exactly `size` bytes with the protocol's
/// cut-through flag: the first one of a flow a node runs asks it to cut the flow through,
/// and the node forwards the rest on the fast path (`anode flood --cut-through`'s packets).
pub fn cut_capsule_of_size(
    size: usize,
    src: NodeAddr,
    dst: NodeAddr,
    flow: u64,
) -> Result<Vec<u8>, BenchError> {
    let mut head = [0u8; FLOOD_HEADER];
    head[0] = 1; // data
    head[1] = 1; // cut through
    code_capsule_of_size(size, (src, dst, flow), protocols::FLOOD, &head)
}

/// A capsule of exactly `size` bytes running `code` (its SHA-256 in the header), payload
/// `head` then filler.
pub fn code_capsule_of_size(
    size: usize,
    (src, dst, flow): (NodeAddr, NodeAddr, u64),
    code: &[u8],
    head: &[u8],
) -> Result<Vec<u8>, BenchError> {
    let min = CAPSULE_OVERHEAD + head.len();
    if !(min..=MAX_SIZE).contains(&size) {
        return Err(BenchError::Size {
            size,
            min,
            max: MAX_SIZE,
        });
    }
    let mut payload = head.to_vec();
    payload.resize(size - CAPSULE_OVERHEAD, 0x5a);
    capsule_packet(code_hash(code), src, dst, 64, flow, &payload).map_err(|e| {
        BenchError::io("capsule")(std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    })
}

/// True if `buf` starts like an ANEP capsule (version 1, capsule Type ID).
pub fn is_anep_capsule(buf: &[u8]) -> bool {
    matches!(buf, [1, _, t0, t1, ..] if u16::from_be_bytes([*t0, *t1]) == TYPE_CAPSULE)
}

/// True if `buf` starts like an ANEP datagram (version 1, datagram Type ID): what the sink
/// counts, so the node's hellos and routing updates are not counted as traffic.
pub fn is_anep_datagram(buf: &[u8]) -> bool {
    matches!(buf, [1, _, t0, t1, ..] if u16::from_be_bytes([*t0, *t1]) == TYPE_DATAGRAM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_wire::anep::AnepPacket;

    #[test]
    fn exact_sizes_and_fast_path_fields() {
        let (s, d): (NodeAddr, NodeAddr) = (
            "198.18.1.1:3322".parse().unwrap(),
            "198.18.2.2:3322".parse().unwrap(),
        );
        for size in [OVERHEAD, 100, 1472] {
            let p = datagram_of_size(size, s, d, 3).unwrap();
            assert_eq!(p.len(), size);
            assert!(is_anep_datagram(&p));
            let a = AnepPacket::new_checked(&p[..]).unwrap();
            let g = Datagram::parse(a.payload()).unwrap();
            assert_eq!(g.transit.rb, 64);
            assert_eq!(g.transit.dst, d);
            assert_eq!(g.transit.prev_hop, s);
            assert_eq!(g.transit.flow, 3);
            assert_eq!(g.transit.flags, 0);
        }
        assert_eq!(OVERHEAD, 84);
        let e = datagram_of_size(64, s, d, 0).unwrap_err();
        assert!(e.to_string().contains("84 to 65507"));
        assert!(datagram_of_size(MAX_SIZE + 1, s, d, 0).is_err());
    }

    #[test]
    fn capsule_sizes_and_fields() {
        use anode_wire::capsule::Capsule;
        use anode_wire::transit::FLAG_EVAL_EVERY_HOP;
        let (s, d): (NodeAddr, NodeAddr) = (
            "198.18.1.1:3322".parse().unwrap(),
            "198.18.2.2:3322".parse().unwrap(),
        );
        assert_eq!(CAPSULE_OVERHEAD, 136);
        for size in [CAPSULE_OVERHEAD, 200, 1472] {
            let p = capsule_of_size(size, s, d, 5).unwrap();
            assert_eq!(p.len(), size);
            assert!(is_anep_capsule(&p));
            assert!(!is_anep_datagram(&p));
            let a = AnepPacket::new_checked(&p[..]).unwrap();
            let c = Capsule::parse(a.payload()).unwrap();
            assert_eq!(c.transit.flags, FLAG_EVAL_EVERY_HOP);
            assert_eq!(c.transit.dst, d);
            assert_eq!(c.transit.prev_hop, s);
            assert_eq!(c.header.code, code_hash(protocols::FORWARD));
            assert_eq!(c.header.code_source, None);
        }
        assert!(capsule_of_size(135, s, d, 0).is_err());
        assert!(capsule_of_size(MAX_SIZE + 1, s, d, 0).is_err());
    }

    #[test]
    fn classification() {
        assert!(!is_anep_datagram(&[1, 0x80, 0x0a, 0x01, 0, 2]));
        assert!(!is_anep_datagram(&[1, 0x80]));
        assert!(!is_anep_datagram(&[]));
        assert!(is_anep_datagram(&[1, 0x80, 0x0a, 0x02]));
    }
}
