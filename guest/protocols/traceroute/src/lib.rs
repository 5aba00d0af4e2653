//! Traceroute, two ways. Payload (big-endian):
//! `kind u8 | hops u8 | reply port u16 | t0 ns u64 | hops x address (18)`.
//!
//! - Route recording (kind 0 probe, 1 reply): every node a probe passes appends its address
//!   (the origin included); the destination appends itself and sends the record back to the
//!   source in a reply capsule, which is delivered to the reply port there with the
//!   round-trip time in the t0 field.
//! - Hop-limited probes, as IP traceroute (kind 2 probe, 3 reply): `hops` is the number of
//!   hops the probe may go. Each node it reaches counts one off; the node where it reaches
//!   zero, or the destination, sends a reply carrying its own address (`hops` = 1 if it is the
//!   destination, else 0) back to the source, which delivers it with the round-trip time in
//!   the t0 field, measured on the source's own clock.

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
        (2, Why::Local) => {
            h[4..12].copy_from_slice(&now_ns().to_be_bytes());
            if cap.write(0, &h).is_ok() {
                Verdict::Forward
            } else {
                Verdict::Drop
            }
        }
        (2, why) => {
            let reached = why == Why::Destination;
            let left = h[1].saturating_sub(1);
            if !reached && left > 0 {
                h[1] = left;
                return if cap.write(0, &h).is_ok() {
                    Verdict::Forward
                } else {
                    Verdict::Drop
                };
            }
            hop_reply(cap, &h, reached)
        }
        (3, Why::Destination) => {
            let rtt = now_ns().saturating_sub(be64(&h, 4));
            if cap.write(4, &rtt.to_be_bytes()).is_err() {
                return Verdict::Drop;
            }
            match cap.deliver(be16(&h, 2)) {
                Ok(()) => Verdict::Done,
                Err(_) => Verdict::Drop,
            }
        }
        (3, _) => Verdict::Forward,
        _ => Verdict::Drop,
    }
}

/// Answers a hop-limited probe from this node: its address, whether it is the destination,
/// and the probe's t0, back to the probe's source.
fn hop_reply(cap: &mut Capsule, h: &[u8; HDR], reached: bool) -> Verdict {
    let Ok(info) = cap.info() else {
        return Verdict::Drop;
    };
    let mut buf = [0u8; HDR + ADDR_LEN];
    buf[..HDR].copy_from_slice(h);
    buf[0] = 3;
    buf[1] = u8::from(reached);
    buf[HDR..].copy_from_slice(&node_addr().0);
    match cap.send(&info.src, None, info.rb, info.flow, &buf) {
        Ok(()) => Verdict::Done,
        Err(_) => Verdict::Drop,
    }
}

anode_sdk::export_accept!(accept);

anode_sdk::protocol_name!(b"traceroute");
