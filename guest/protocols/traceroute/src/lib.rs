//! Traceroute by route recording. Payload (big-endian):
//! `kind u8 (0 probe, 1 reply) | hops u8 | reply port u16 | t0 ns u64 | hops x address (18)`.
//! Every node a probe passes appends its address (the origin included); the destination
//! appends itself and sends the record back to the source in a reply capsule, which is
//! delivered to the reply port there with the round-trip time in the t0 field.

#![no_std]

use anode_sdk::{ADDR_LEN, Capsule, Verdict, Why, be16, be64, node_addr, now_ns};

const HDR: usize = 12;
const MAX_HOPS: usize = 32;

fn record(cap: &mut Capsule, h: &mut [u8; HDR]) -> bool {
    let n = h[1] as usize;
    if n >= MAX_HOPS {
        return false;
    }
    h[1] = (n + 1) as u8;
    cap.write(0, h).is_ok() && cap.append(&node_addr().0).is_ok()
}

fn accept(cap: &mut Capsule, why: Why) -> Verdict {
    let mut h = [0u8; HDR];
    if cap.read(0, &mut h) != Ok(HDR) {
        return Verdict::Drop;
    }
    match (h[0], why) {
        (0, Why::Local) => {
            h[4..12].copy_from_slice(&now_ns().to_be_bytes());
            if record(cap, &mut h) {
                Verdict::Forward
            } else {
                Verdict::Drop
            }
        }
        (0, Why::Destination) => {
            if !record(cap, &mut h) {
                return Verdict::Drop;
            }
            let Ok(info) = cap.info() else {
                return Verdict::Drop;
            };
            let mut buf = [0u8; HDR + MAX_HOPS * ADDR_LEN];
            let len = HDR + h[1] as usize * ADDR_LEN;
            if cap.read(0, &mut buf[..len]) != Ok(len) {
                return Verdict::Drop;
            }
            buf[0] = 1;
            match cap.send(&info.src, None, info.rb, info.flow, &buf[..len]) {
                Ok(()) => Verdict::Done,
                Err(_) => Verdict::Drop,
            }
        }
        (0, _) => {
            if record(cap, &mut h) {
                Verdict::Forward
            } else {
                Verdict::Drop
            }
        }
        (1, Why::Destination) => {
            let rtt = now_ns().saturating_sub(be64(&h, 4));
            if cap.write(4, &rtt.to_be_bytes()).is_err() {
                return Verdict::Drop;
            }
            match cap.deliver(be16(&h, 2)) {
                Ok(()) => Verdict::Done,
                Err(_) => Verdict::Drop,
            }
        }
        (1, _) => Verdict::Forward,
        _ => Verdict::Drop,
    }
}

anode_sdk::export_accept!(accept);
