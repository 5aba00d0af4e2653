//! Multicast over a tree built from joins (ANTS-style). Payload (big-endian):
//! `kind u8 (0 join, 1 data) | pad u8 | port u16 | group u32 | data...`.
//! A join travels from a member to the group's root (its destination). At the member it
//! records `m<group> -> port`; at every later node, the previous hop is added to the
//! downstream set `d<group>` (at most 8 neighbors). A data capsule injected at the root (its
//! destination is the root) is copied to every downstream neighbor of each node it reaches
//! and delivered to the local member's port where there is one. State is soft (TTL 5 min):
//! members re-join to keep the tree.

#![no_std]

use anode_sdk::{ADDR_LEN, Addr, Capsule, Verdict, Why, be16, state};

const HDR: usize = 8;
const MAX_DOWN: usize = 8;
const TTL_MS: u32 = 300_000;

fn key(tag: u8, h: &[u8; HDR]) -> [u8; 5] {
    [tag, h[4], h[5], h[6], h[7]]
}

fn add_downstream(h: &[u8; HDR], hop: &Addr) -> bool {
    let k = key(b'd', h);
    let mut v = [0u8; MAX_DOWN * ADDR_LEN];
    let n = state::get(&k, &mut v).unwrap_or(0).min(v.len()) / ADDR_LEN;
    if v[..n * ADDR_LEN].chunks(ADDR_LEN).any(|a| a == hop.0) {
        return state::put(&k, &v[..n * ADDR_LEN], TTL_MS).is_ok();
    }
    if n >= MAX_DOWN {
        return false;
    }
    v[n * ADDR_LEN..(n + 1) * ADDR_LEN].copy_from_slice(&hop.0);
    state::put(&k, &v[..(n + 1) * ADDR_LEN], TTL_MS).is_ok()
}

fn accept(cap: &mut Capsule, why: Why) -> Verdict {
    let mut h = [0u8; HDR];
    if cap.read(0, &mut h) != Ok(HDR) {
        return Verdict::Drop;
    }
    let Ok(info) = cap.info() else {
        return Verdict::Drop;
    };
    match h[0] {
        0 => {
            if why == Why::Local {
                if state::put(&key(b'm', &h), &h[2..4], TTL_MS).is_err() {
                    return Verdict::Drop;
                }
            } else if !add_downstream(&h, &info.prev_hop) {
                return Verdict::Drop;
            }
            if why == Why::Destination {
                Verdict::Done
            } else {
                Verdict::Forward
            }
        }
        1 => {
            let mut v = [0u8; MAX_DOWN * ADDR_LEN];
            let n = state::get(&key(b'd', &h), &mut v).unwrap_or(0).min(v.len()) / ADDR_LEN;
            for a in v[..n * ADDR_LEN].chunks(ADDR_LEN) {
                let mut hop = Addr::default();
                hop.0.copy_from_slice(a);
                let _ = cap.copy_via(&hop);
            }
            let mut port = [0u8; 2];
            if state::get(&key(b'm', &h), &mut port) == Ok(2) {
                let _ = cap.deliver(be16(&port, 0));
            }
            Verdict::Done
        }
        _ => Verdict::Drop,
    }
}

anode_sdk::export_accept!(accept);

anode_sdk::protocol_name!(b"multicast");
