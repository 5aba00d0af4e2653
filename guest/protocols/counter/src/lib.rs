//! A stateful counting protocol. Payload (big-endian):
//! `count at destination u64 | hops u32 | port u16 | pad u16`.
//! Every node a capsule runs at counts the capsules of its flow in soft state (key: the flow
//! id; TTL 60 s) and increments `hops`; the destination writes its count into the payload and
//! delivers it to `port`. Consecutive capsules of one flow thus see 1, 2, 3, ...

#![no_std]

use anode_sdk::{Capsule, Verdict, Why, be16, be32, state};

fn accept(cap: &mut Capsule, why: Why) -> Verdict {
    let mut h = [0u8; 16];
    if cap.read(0, &mut h) != Ok(16) {
        return Verdict::Drop;
    }
    let Ok(info) = cap.info() else {
        return Verdict::Drop;
    };
    let key = info.flow.to_le_bytes();
    let n = state::get_u64(&key).unwrap_or(0) + 1;
    if state::put(&key, &n.to_le_bytes(), 60_000).is_err() {
        return Verdict::Drop;
    }
    let hops = be32(&h, 8).wrapping_add(1);
    if cap.write(8, &hops.to_be_bytes()).is_err() {
        return Verdict::Drop;
    }
    if why != Why::Destination {
        return Verdict::Forward;
    }
    if cap.write(0, &n.to_be_bytes()).is_err() {
        return Verdict::Drop;
    }
    match cap.deliver(be16(&h, 12)) {
        Ok(()) => Verdict::Done,
        Err(_) => Verdict::Drop,
    }
}

anode_sdk::export_accept!(accept);

anode_sdk::protocol_name!(b"counter");
