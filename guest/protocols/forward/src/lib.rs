//! The smallest useful code object: forward toward the destination at every hop; at the
//! destination deliver to the port in the first two payload bytes (big-endian). Used to
//! measure the EE's own cost per capsule.

#![no_std]

use anode_sdk::{Capsule, Verdict, Why};

fn accept(cap: &mut Capsule, why: Why) -> Verdict {
    if why != Why::Destination {
        return Verdict::Forward;
    }
    let mut p = [0u8; 2];
    if cap.read(0, &mut p) != Ok(2) {
        return Verdict::Drop;
    }
    match cap.deliver(u16::from_be_bytes(p)) {
        Ok(()) => Verdict::Done,
        Err(_) => Verdict::Drop,
    }
}

anode_sdk::export_accept!(accept);

anode_sdk::protocol_name!(b"forward");
