//! EE modules (kind `ee`) on a node: the packets of their ANEP Type ID reach them where the
//! node's own EEs get theirs, their verdicts are carried out, the node's headers are not
//! theirs to change, a Type ID has one owner, and a stopped EE's packets are dropped.

mod common;

use std::time::Instant;

use anode_core::{DropReason, Event, LinkId, Node};
use anode_modules::{Package, host};
use anode_wire::anep::AnepPacket;
use anode_wire::datagram::Datagram;
use anode_wire::transit::{FLAG_EVAL_EVERY_HOP, TransitRepr};
use common::*;

const TYPE: u16 = 0x0A10;

/// A packet of the EE's type from `src` to `dst` with `payload`, evaluated at every hop.
fn ee_packet(src: u8, dst: u8, payload: &[u8]) -> Vec<u8> {
    Datagram {
        transit: TransitRepr {
            flags: FLAG_EVAL_EVERY_HOP,
            rb: 16,
            src: addr(src),
            dst: addr(dst),
            prev_hop: addr(src),
            ..Default::default()
        },
        port: 9,
        payload: payload.to_vec(),
    }
    .to_packet_as(TYPE)
    .unwrap()
}

fn payload_of(buf: &[u8]) -> Vec<u8> {
    let p = AnepPacket::new_checked(buf).unwrap();
    let d = Datagram::parse(&buf[p.header_len()..]).unwrap();
    d.payload
}

/// A relay (neighbors 1 and 2) with `hopcount` installed (max_hops `max`).
fn relay_with_hopcount(max: i64, now: Instant) -> Node {
    let mut n = relay(&[1, 2], now);
    let mut cfg = toml::Table::new();
    cfg.insert("max_hops".into(), max.into());
    let h = host(&mut n).unwrap();
    h.install(signed("hopcount", None), &cfg).unwrap();
    h.start("hopcount").unwrap();
    n
}

fn sent(n: &mut Node) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(t) = n.poll_transmit() {
        out.push((t.link.0, payload_of(&t.buf)));
    }
    out
}

#[test]
fn every_hop_destination_and_max_hops() {
    let now = Instant::now();
    let mut n = relay_with_hopcount(3, now);
    // In transit, evaluated here: counted and forwarded toward 2 (link 1).
    n.handle_packet(now, LinkId(0), ee_packet(1, 2, &[0, 1, 0xEE]));
    assert_eq!(sent(&mut n), [(1, vec![0, 2, 0xEE])]);
    // Past max_hops: dropped by the EE, counted.
    n.handle_packet(now, LinkId(0), ee_packet(1, 2, &[0, 3]));
    assert_eq!(sent(&mut n), []);
    assert_eq!(n.counters().drops(DropReason::EeDropped), 1);
    // For this node: counted and delivered under the EE's Type ID.
    n.handle_packet(now, LinkId(0), ee_packet(1, 10, &[0, 0, 7]));
    let d = std::iter::from_fn(|| n.poll_event())
        .find_map(|e| match e {
            Event::Delivered(d) => Some(d),
            _ => None,
        })
        .expect("delivered");
    assert_eq!(
        (d.type_id, d.port, d.payload()),
        (TYPE, 9, &[0u8, 1, 7][..])
    );
    assert_eq!(host(&mut n).unwrap().info("hopcount").unwrap().packets, 3);
    // A payload too short to count in goes on unchanged.
    n.handle_packet(now, LinkId(0), ee_packet(1, 2, &[5]));
    assert_eq!(sent(&mut n), [(1, vec![5])]);
}

#[test]
fn a_stopped_ee_drops_a_removed_one_passes_and_a_type_has_one_owner() {
    let now = Instant::now();
    let mut n = relay_with_hopcount(0, now);
    let h = host(&mut n).unwrap();
    // Another EE module for the same Type ID is refused, naming the owner.
    let p = anode_modules::builtin::package("hopcount").unwrap();
    let mut other = Package::new(
        p.manifest_text
            .replace("name = \"hopcount\"", "name = \"hopcount-two\""),
        p.code,
    )
    .unwrap();
    other.sign(&key());
    let e = h
        .install(other, &toml::Table::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("belongs to the installed EE hopcount"), "{e}");
    h.stop("hopcount").unwrap();
    n.handle_packet(now, LinkId(0), ee_packet(1, 2, &[0, 0]));
    assert_eq!(sent(&mut n), []);
    assert_eq!(n.counters().drops(DropReason::EeStopped), 1);
    host(&mut n).unwrap().remove("hopcount").unwrap();
    n.handle_packet(now, LinkId(0), ee_packet(1, 2, &[0, 0]));
    assert_eq!(
        sent(&mut n),
        [(1, vec![0, 0])],
        "forwarded as an unknown type"
    );
    assert_eq!(n.counters().unknown_type_forwarded, 1);
}

/// A guest that tries to overwrite the ANEP header (refused: -1) and then marks the first
/// payload byte at `ee_offset()`; it returns CONTINUE only if the header write was refused.
const HOSTILE: &str = r#"(module
  (import "anode_mod" "pkt_write" (func $w (param i32 i32 i32) (result i32)))
  (import "anode_mod" "ee_offset" (func $off (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\ff\ab")
  (func (export "ee_packet") (param i32) (result i32)
    (if (i32.ne (call $w (i32.const 0) (i32.const 0) (i32.const 1)) (i32.const -1))
      (then (return (i32.const 1))))
    (drop (call $w (call $off) (i32.const 1) (i32.const 1)))
    (i32.const 0)))"#;

#[test]
fn the_nodes_headers_are_not_the_ees_to_change() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    let manifest = "name = \"hostile-ee\"\nversion = \"1.0.0\"\nsummary = \"Tries to rewrite the headers.\"\nkind = \"ee\"\ntype_id = 0x0A10\n";
    let mut p = Package::new(manifest.into(), wat::parse_str(HOSTILE).unwrap()).unwrap();
    p.sign(&key());
    let h = host(&mut n).unwrap();
    h.install(p, &toml::Table::new()).unwrap();
    h.start("hostile-ee").unwrap();
    let pkt = ee_packet(1, 2, &[0, 0]);
    n.handle_packet(now, LinkId(0), pkt.clone());
    let t = n.poll_transmit().expect("forwarded");
    assert_eq!(t.buf[..4], pkt[..4], "the ANEP header is unchanged");
    assert_eq!(payload_of(&t.buf), [0xAB, 0]);
}
