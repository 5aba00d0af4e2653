//! Drops the packets of a flow beyond its first `limit`, counting them with the
//! `flow-counter` service of another module.

#![no_std]

/// Offset of the transit flow id in a packet with the 8-byte basic ANEP header.
const FLOW_AT: usize = 8 + 8;

#[unsafe(no_mangle)]
pub extern "C" fn process(_point: i32) -> i32 {
    let mut f = [0u8; 8];
    if !anode_msdk::read(FLOW_AT, &mut f) {
        return anode_msdk::CONTINUE;
    }
    let n = anode_msdk::call_service("flow-counter", 0, i64::from_be_bytes(f));
    if n < 0 {
        return anode_msdk::CONTINUE;
    }
    if n > anode_msdk::config_int("limit") { anode_msdk::DROP } else { anode_msdk::CONTINUE }
}
