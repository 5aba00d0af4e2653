//! First come, first served: one queue for every packet.

#![no_std]

#[unsafe(no_mangle)]
pub extern "C" fn enqueue(_input: i32, _len: i32, _prio: i32) -> i32 {
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn dequeue() -> i32 {
    if anode_msdk::queue_len(0) > 0 { 0 } else { -1 }
}
