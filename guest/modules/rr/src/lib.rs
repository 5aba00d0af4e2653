//! Round robin per input link: one queue per arrival link (local packets share class 0),
//! served one packet each in turn (PLANet §V-A).

#![no_std]

static mut NEXT: i32 = 0;

#[unsafe(no_mangle)]
pub extern "C" fn enqueue(input: i32, _len: i32, _prio: i32) -> i32 {
    (input + 1).clamp(0, anode_msdk::CLASSES - 1)
}

#[unsafe(no_mangle)]
pub extern "C" fn dequeue() -> i32 {
    // SAFETY: single-threaded guest.
    let start = unsafe { NEXT };
    for i in 0..anode_msdk::CLASSES {
        let c = (start + i) % anode_msdk::CLASSES;
        if anode_msdk::queue_len(c) > 0 {
            // SAFETY: single-threaded guest.
            unsafe { NEXT = (c + 1) % anode_msdk::CLASSES };
            return c;
        }
    }
    -1
}
