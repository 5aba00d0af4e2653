//! An execution environment in a module (kind `ee`, ANEP Type ID 0x0A10): every node that
//! runs it adds one to the big-endian u16 at the start of the packet's payload, at every hop
//! that evaluates it and at its destination, where the node then delivers it to the
//! application on its port. With `max_hops` > 0, a packet whose count would pass it is
//! dropped. Packets with a payload shorter than 2 bytes go on unchanged.
//!
//! State: the number of packets it handled (8 bytes little-endian), handed to its successor
//! on upgrade; service `hopcount` op 0 returns it.

#![no_std]

static mut SEEN: u64 = 0;

#[unsafe(no_mangle)]
pub extern "C" fn ee_packet(_why: i32) -> i32 {
    // SAFETY: single-threaded guest; no reference to SEEN outlives this statement.
    unsafe { SEEN = SEEN.wrapping_add(1) };
    let Some(at) = anode_msdk::ee_payload_offset() else {
        return anode_msdk::CONTINUE;
    };
    let mut b = [0u8; 2];
    if !anode_msdk::read(at, &mut b) {
        return anode_msdk::CONTINUE;
    }
    let n = u16::from_be_bytes(b).saturating_add(1);
    let max = anode_msdk::config_int("max_hops");
    if max > 0 && i64::from(n) > max {
        return anode_msdk::DROP;
    }
    anode_msdk::write(at, &n.to_be_bytes());
    anode_msdk::CONTINUE
}

#[unsafe(no_mangle)]
pub extern "C" fn service(op: i32, _arg: i64) -> i64 {
    match op {
        // SAFETY: single-threaded guest.
        0 => unsafe { SEEN as i64 },
        _ => -1,
    }
}

anode_msdk::u64_state!(SEEN, u64);
