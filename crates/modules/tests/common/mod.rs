//! Shared test helpers: a signing key, signed built-in packages, a relay node.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anode_core::{LinkConfig, Node, NodeConfig};
use anode_modules::{ModRuntime, Package, Trust, builtin};
use anode_wire::NodeAddr;
use anode_wire::datagram::Datagram;
use anode_wire::transit::TransitRepr;
use ed25519_dalek::SigningKey;

pub fn key() -> SigningKey {
    SigningKey::from_bytes(&[7u8; 32])
}

pub fn trust() -> Trust {
    Trust::new(vec![key().verifying_key()])
}

pub fn rt() -> Arc<ModRuntime> {
    static RT: OnceLock<Arc<ModRuntime>> = OnceLock::new();
    RT.get_or_init(|| ModRuntime::new(64).unwrap()).clone()
}

/// A signed built-in package, optionally with its version replaced.
pub fn signed(name: &str, version: Option<&str>) -> Package {
    let p = builtin::package(name).unwrap();
    let mut text = p.manifest_text.clone();
    if let Some(v) = version {
        text = text.replace(
            &format!("version = \"{}\"", p.manifest.version),
            &format!("version = \"{v}\""),
        );
    }
    let mut p = Package::new(text, p.code).unwrap();
    p.sign(&key());
    p
}

pub fn addr(i: u8) -> NodeAddr {
    anode_wire::addr::v4(198, 18, 0, i, 3322)
}

/// A node (addr 10) with static neighbors `peers` on links 0.. and modules attached.
pub fn relay(peers: &[u8], now: Instant) -> Node {
    let mut n = Node::new(NodeConfig::new(addr(10)), now).unwrap();
    for p in peers {
        n.add_link(
            LinkConfig {
                static_neighbor: true,
                ..LinkConfig::new(addr(*p))
            },
            now,
        );
    }
    while n.poll_transmit().is_some() {}
    anode_modules::attach(&mut n, rt(), trust());
    n
}

/// A datagram from `src` to `dst` with `seq` in its payload and flow id `flow`.
pub fn datagram(src: u8, dst: u8, flow: u64, seq: u64, len: usize) -> Vec<u8> {
    let mut payload = vec![0u8; len.max(8) - 8];
    payload.extend_from_slice(&seq.to_be_bytes());
    Datagram {
        transit: TransitRepr {
            rb: 16,
            flow,
            src: addr(src),
            dst: addr(dst),
            prev_hop: addr(src),
            ..Default::default()
        },
        port: 9,
        payload,
    }
    .to_packet()
    .unwrap()
}

/// The sequence number of a datagram built by [`datagram`].
pub fn seq_of(buf: &[u8]) -> u64 {
    u64::from_be_bytes(buf[buf.len() - 8..].try_into().unwrap())
}

/// Whether a transmitted packet is a datagram (not a hello or routing update).
pub fn is_data(buf: &[u8]) -> bool {
    anode_wire::anep::AnepPacket::new_checked(buf)
        .is_ok_and(|p| p.type_id() == anode_wire::anep::TYPE_DATAGRAM)
}
