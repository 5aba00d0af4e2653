//! The verdicts with a real WebAssembly module (`verdicts`): modify in place, redirect to
//! another link, emit a copy beside the packet, consume.

mod common;

use std::time::Instant;

use anode_core::LinkId;
use anode_modules::host;
use common::*;

/// A relay (neighbors 1 and 2) with `verdicts` in `mode`; a datagram 1 -> 2 goes in on link 0;
/// returns what left: (link, last byte).
fn run(mode: i64, link: i64) -> (Vec<(u32, u8)>, u64) {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    let mut cfg = toml::Table::new();
    cfg.insert("mode".into(), mode.into());
    cfg.insert("link".into(), link.into());
    let h = host(&mut n).unwrap();
    h.install(signed("verdicts", None), &cfg).unwrap();
    h.start("verdicts").unwrap();
    n.handle_packet(now, LinkId(0), datagram(1, 2, 0, 0x0102, 64));
    let mut out = Vec::new();
    while let Some(t) = n.poll_transmit() {
        out.push((t.link.0, *t.buf.last().unwrap()));
    }
    let packets = host(&mut n).unwrap().info("verdicts").unwrap().packets;
    assert!(
        host(&mut n)
            .unwrap()
            .info("verdicts")
            .unwrap()
            .last_error
            .is_none()
    );
    (out, packets)
}

#[test]
fn modify_redirect_emit_and_consume() {
    // Without the module the datagram leaves on link 1 unchanged (its last byte is 0x02).
    // Modify: same link, last byte rewritten in place.
    assert_eq!(run(0, 0), (vec![(1, 0xAA)], 1));
    // Redirect: out on link 0 instead, unchanged.
    assert_eq!(run(1, 0), (vec![(0, 0x02)], 1));
    // Emit: a copy on link 0 and the packet itself on link 1.
    let (mut out, n) = run(2, 0);
    out.sort();
    assert_eq!((out, n), (vec![(0, 0x02), (1, 0x02)], 1));
    // Consume: nothing leaves.
    assert_eq!(run(3, 0), (vec![], 1));
    // Redirect to a link the node does not have: dropped, not sent anywhere.
    assert_eq!(run(1, 9), (vec![], 1));
}
