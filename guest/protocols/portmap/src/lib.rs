//! The portmapper (PAN's PAL: "a portmapper code object maps port numbers to it"): maps
//! *service numbers* to the application ports that hold them at this node, in its soft state,
//! so capsules addressed to a service number reach the application that registered it.
//!
//! An application's capability is its bound port (`bind_app` over the node's control socket):
//! the node delivers to a port only for the application holding it. Registering a service
//! proves the capability: the registration capsule itself is delivered back to the named port
//! as the acknowledgement, and the mapping stays only if that delivery succeeded.
//!
//! Payload (big-endian): `op u8 | status u8 | service u16 | port u16 | pad u16 | ttl_ms u32 |
//! data...` (12 header bytes).
//! - `op 1` register `service -> port` for `ttl_ms` (0: 10 minutes; re-register to keep it;
//!   soft state, so the node may also evict it). Accepted only where the capsule was injected
//!   (its source is this node). A service held by another port is refused (`status 2`) until
//!   its holder unregisters or the registration expires. The acknowledgement goes to `port`
//!   with `status 1` (registered) or `2` (taken); if `port` is not bound here nothing changes
//!   and the capsule is dropped.
//! - `op 2` unregister `service` held by `port` (same rules; ack `status 1`).
//! - `op 3` send: forwarded toward its destination, where it is delivered to the port mapped
//!   to `service` (`port` is filled in); dropped if the service is not registered there.
//!
//! Export for dependents (PAN guardian): `portmap_lookup(service) -> port or -1`, so other
//! code objects importing it from `code:<this hash>` resolve services through the same map.

#![no_std]

use anode_sdk::{Capsule, Verdict, Why, be16, be32, node_addr, state};

const HDR: usize = 12;
const REGISTER: u8 = 1;
const UNREGISTER: u8 = 2;
const SEND: u8 = 3;
const DEFAULT_TTL_MS: u32 = 600_000;

fn key(service: u16) -> [u8; 5] {
    let s = service.to_be_bytes();
    [b's', b'v', b'c', s[0], s[1]]
}

fn lookup(service: u16) -> Option<u16> {
    let mut b = [0u8; 2];
    match state::get(&key(service), &mut b) {
        Ok(2) => Some(u16::from_be_bytes(b)),
        _ => None,
    }
}

/// Resolves `service` at this node: its port, or -1.
#[unsafe(no_mangle)]
pub extern "C" fn portmap_lookup(service: i32) -> i32 {
    match u16::try_from(service).ok().and_then(lookup) {
        Some(p) => i32::from(p),
        None => -1,
    }
}

/// Acknowledges to `port` with `status`; false if `port` is not bound here.
fn ack(cap: &mut Capsule, status: u8, port: u16) -> bool {
    cap.write(1, &[status]).is_ok() && cap.deliver(port).is_ok()
}

fn accept(cap: &mut Capsule, why: Why) -> Verdict {
    let mut h = [0u8; HDR];
    if cap.read(0, &mut h) != Ok(HDR) {
        return Verdict::Drop;
    }
    let (op, service, port) = (h[0], be16(&h, 2), be16(&h, 4));
    if op == SEND {
        if why != Why::Destination {
            return Verdict::Forward;
        }
        let Some(p) = lookup(service) else {
            return Verdict::Drop;
        };
        if cap.write(4, &p.to_be_bytes()).is_err() {
            return Verdict::Drop;
        }
        return match cap.deliver(p) {
            Ok(()) => Verdict::Done,
            Err(_) => Verdict::Drop,
        };
    }
    // Registration changes happen only where they were injected.
    let Ok(info) = cap.info() else {
        return Verdict::Drop;
    };
    if info.src != node_addr() || !matches!(why, Why::Destination | Why::Local) {
        return Verdict::Drop;
    }
    let held = lookup(service);
    match op {
        REGISTER => {
            if held.is_some_and(|p| p != port) {
                return if ack(cap, 2, port) {
                    Verdict::Done
                } else {
                    Verdict::Drop
                };
            }
            let ttl = match be32(&h, 8) {
                0 => DEFAULT_TTL_MS,
                t => t,
            };
            if state::put(&key(service), &port.to_be_bytes(), ttl).is_err() {
                return Verdict::Drop;
            }
            if ack(cap, 1, port) {
                return Verdict::Done;
            }
            // Not this application's port: undo (restore what was there).
            if held.is_none() {
                let _ = state::delete(&key(service));
            }
            Verdict::Drop
        }
        UNREGISTER => {
            if held != Some(port) {
                return Verdict::Drop;
            }
            // The capsule is consumed by the ack only if `port` is bound here.
            if !ack(cap, 1, port) {
                return Verdict::Drop;
            }
            let _ = state::delete(&key(service));
            Verdict::Done
        }
        _ => Verdict::Drop,
    }
}

anode_sdk::export_accept!(accept);

anode_sdk::protocol_name!(b"portmap");
