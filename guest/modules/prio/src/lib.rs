//! Strict priority: class = the packet's priority (0 highest, from the low 3 bits of the
//! transit flow id); always serves the highest non-empty class.

#![no_std]

#[unsafe(no_mangle)]
pub extern "C" fn enqueue(_input: i32, _len: i32, prio: i32) -> i32 {
    prio.clamp(0, 7)
}

#[unsafe(no_mangle)]
pub extern "C" fn dequeue() -> i32 {
    (0..8).find(|c| anode_msdk::queue_len(*c) > 0).unwrap_or(-1)
}
