//! Active ping (ANTS/PAN APing). Payload (big-endian):
//! `kind u8 (0 request, 1 reply) | pad u8 | reply port u16 | t0 ns u64 | rtt ns u64 | data...`.
//! At the origin the request stamps t0 with the node's clock; at the destination it sends a
//! reply capsule back to the source with all its remaining resource bound; at the source the
//! reply computes the round-trip time and is delivered to the reply port.

#![no_std]

use anode_sdk::{Capsule, Verdict, Why, be16, be64, now_ns};

const HDR: usize = 20;

fn accept(cap: &mut Capsule, why: Why) -> Verdict {
    let mut h = [0u8; HDR];
    if cap.read(0, &mut h) != Ok(HDR) {
        return Verdict::Drop;
    }
    let kind = h[0];
    match (kind, why) {
        (0, Why::Local) => {
            if cap.write(4, &now_ns().to_be_bytes()).is_err() {
                return Verdict::Drop;
            }
            Verdict::Forward
        }
        (0, Why::Destination) => {
            let Ok(info) = cap.info() else {
                return Verdict::Drop;
            };
            let mut reply = h;
            reply[0] = 1;
            match cap.send(&info.src, None, info.rb, info.flow, &reply) {
                Ok(()) => Verdict::Done,
                Err(_) => Verdict::Drop,
            }
        }
        (1, Why::Destination) => {
            let rtt = now_ns().saturating_sub(be64(&h, 4));
            if cap.write(12, &rtt.to_be_bytes()).is_err() {
                return Verdict::Drop;
            }
            match cap.deliver(be16(&h, 2)) {
                Ok(()) => Verdict::Done,
                Err(_) => Verdict::Drop,
            }
        }
        (0 | 1, _) => Verdict::Forward,
        _ => Verdict::Drop,
    }
}

anode_sdk::export_accept!(accept);

anode_sdk::protocol_name!(b"ping");
