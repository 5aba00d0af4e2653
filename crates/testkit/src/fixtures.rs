//! Fixtures: node addresses, the benchmarks' transit node, test keys.

use std::time::Instant;

use anode_core::{LinkConfig, LinkId, Node, NodeConfig};
use anode_wire::NodeAddr;
use anode_wire::addr::v4;
use anode_wire::control::{Control, Hello, Routes};

/// Node `i`'s address in test networks: 198.18.0.(i+1):3322 (up to 255 nodes).
pub fn addr(i: usize) -> NodeAddr {
    v4(198, 18, 0, (i + 1) as u8, 3322)
}

/// The `i`-th destination of [`transit_node`]'s routing table: 198.19.x.y:3322.
pub fn far(i: u16) -> NodeAddr {
    v4(198, 19, (i >> 8) as u8, i as u8, 3322)
}

/// A transit node (`addr(1)`) between two neighbors, `addr(0)` on link 0 and `addr(2)` on
/// link 1, both up (a hello from each has been handled), with `routes` destinations
/// ([`far`]) learned via `addr(2)` at metric 1, and links of `mtu` bytes (`None`: the
/// default). Its transmit and event queues are empty. The fixture the per-packet benchmarks
/// measure a hop with.
pub fn transit_node(mtu: Option<usize>, routes: u16) -> (Node, Instant) {
    let now = Instant::now();
    let me = addr(1);
    let (a, c) = (addr(0), addr(2));
    let mut n = Node::new(NodeConfig::new(me), now).unwrap();
    for peer in [a, c] {
        let mut l = LinkConfig::new(peer);
        if let Some(m) = mtu {
            l.mtu = m;
        }
        n.add_link(l, now);
    }
    hear(&mut n, now, &[a, c], routes);
    (n, now)
}

/// Makes `n` hear a hello from each of `peers` (the peer of link i is `peers[i]`) and
/// `routes` destinations ([`far`]) at metric 1 from the last of them; then empties its
/// transmit and event queues. A node built from a config gets the state of
/// [`transit_node`] this way.
pub fn hear(n: &mut Node, now: Instant, peers: &[NodeAddr], routes: u16) {
    let me = n.address();
    for (i, peer) in peers.iter().enumerate() {
        let h = Control::Hello(Hello {
            sender: *peer,
            hello_ms: 1000,
            dead_ms: 1_000_000,
            seq: 1,
            seen: vec![me],
        });
        n.handle_packet(now, LinkId(i as u32), h.to_packet().unwrap());
    }
    let Some(last) = peers.last() else { return };
    let entries: Vec<_> = (0..routes).map(|i| (far(i), 1)).collect();
    for ch in entries.chunks(64) {
        let r = Control::Routes(Routes::plain(*last, ch.to_vec()));
        n.handle_packet(now, LinkId(peers.len() as u32 - 1), r.to_packet().unwrap());
    }
    while n.poll_transmit().is_some() {}
    while n.poll_event().is_some() {}
}

/// A deterministic ed25519 signing key for tests (`seed` picks one of 256).
pub fn signing_key(seed: u8) -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
}

/// The WebAssembly text of a capsule code object (ABI v1) that works a while on every
/// capsule — 5,000 loop iterations, about 25,000 fuel: heavy enough that a capsule EE with
/// workers holds its capsules for a batch — and then runs `tail`, which leaves the verdict
/// (`$len` and `$why` are `accept`'s parameters). `head` goes first in the module: imports,
/// then globals.
pub fn busy_capsule_wat(head: &str, tail: &str) -> String {
    format!(
        r#"(module
            {head}
            (memory (export "memory") 1)
            (func (export "anode_abi_v1"))
            (func (export "accept") (param $len i32) (param $why i32) (result i32)
                (local $i i32)
                (loop $l
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_if $l (i32.lt_u (local.get $i) (i32.const 5000))))
                {tail}))"#
    )
}

/// [`busy_capsule_wat`] that forwards, and ends the capsule at its destination.
pub fn busy_forward_wat() -> String {
    busy_capsule_wat(
        "",
        "(select (i32.const 0) (i32.const 1) (i32.eqz (local.get $why)))",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transit_node_knows_its_routes() {
        let (n, _) = transit_node(Some(9000), 100);
        let routes = n.routes();
        assert!(routes.iter().any(|r| r.dest == far(99)));
        assert!(routes.iter().any(|r| r.dest == addr(2)));
        assert_eq!(n.neighbors().len(), 2);
    }

    #[test]
    fn keys_are_deterministic() {
        assert_eq!(
            signing_key(7).verifying_key(),
            signing_key(7).verifying_key()
        );
        assert_ne!(
            signing_key(7).verifying_key(),
            signing_key(8).verifying_key()
        );
    }
}
