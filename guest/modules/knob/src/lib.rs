//! A control service: one integer setting. Operators read and turn it with
//! `anode module call knob OP [ARG]` (op 0 reads it, op 1 sets it to ARG and returns the old
//! value); other modules read it through the service registry (`knob` 1.0.0). The value
//! survives an upgrade (state: 8 bytes little-endian).

#![no_std]

static mut VALUE: i64 = 0;

#[unsafe(no_mangle)]
pub extern "C" fn init() -> i32 {
    // SAFETY: single-threaded guest.
    unsafe { VALUE = anode_msdk::config_int("initial") };
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn service(op: i32, arg: i64) -> i64 {
    // SAFETY: single-threaded guest; no reference to VALUE outlives these statements.
    unsafe {
        let old = VALUE;
        if op == 1 {
            VALUE = arg;
        }
        old
    }
}

anode_msdk::u64_state!(VALUE, i64);
