//! Routing by a named routing function of the node. Payload:
//! `port u16 (big-endian) | name_len u8 | name[name_len] | data`.
//!
//! At the destination the payload is delivered to `port` (dropped if the port is not
//! registered). Elsewhere the capsule is forwarded with `forward_by(name, flow)`: the node's
//! routing function `name` picks the next hop for the capsule's flow. Fallbacks:
//! - `name_len` 0: forwarded by the node's default route;
//! - no routing function of that name here (`NOT_FOUND`, counted by the node as
//!   `unknown_route_fn`), or it has no route: dropped (`capsule/guest_drop`);
//! - a payload too short for its header: dropped.

#![no_std]

use anode_sdk::{Capsule, Verdict, Why};

/// Longest name the header may carry (the host's limit).
const MAX_NAME: usize = 64;

fn accept(cap: &mut Capsule, why: Why) -> Verdict {
    let mut h = [0u8; 3];
    if cap.read(0, &mut h) != Ok(3) {
        return Verdict::Drop;
    }
    if why == Why::Destination {
        return match cap.deliver(u16::from_be_bytes([h[0], h[1]])) {
            Ok(()) => Verdict::Done,
            Err(_) => Verdict::Drop,
        };
    }
    let len = usize::from(h[2]);
    if len == 0 {
        return Verdict::Forward;
    }
    if len > MAX_NAME {
        return Verdict::Drop;
    }
    let mut name = [0u8; MAX_NAME];
    let Some(name) = name.get_mut(..len) else {
        return Verdict::Drop;
    };
    if cap.read(3, name) != Ok(len) {
        return Verdict::Drop;
    }
    let Ok(info) = cap.info() else {
        return Verdict::Drop;
    };
    match cap.forward_by(name, info.flow) {
        Ok(()) => Verdict::Done,
        Err(_) => Verdict::Drop,
    }
}

anode_sdk::export_accept!(accept);

anode_sdk::protocol_name!(b"routefn");
