//! Counts the packets it sees and passes them on. Service `packet-counter` op 0 returns the
//! count. On upgrade it hands its count to its successor (state: 8 bytes little-endian).

#![no_std]

static mut COUNT: u64 = 0;

#[unsafe(no_mangle)]
pub extern "C" fn process(_point: i32) -> i32 {
    // SAFETY: single-threaded guest; no reference to COUNT outlives this statement.
    unsafe { COUNT = COUNT.wrapping_add(1) };
    anode_msdk::CONTINUE
}

#[unsafe(no_mangle)]
pub extern "C" fn service(op: i32, _arg: i64) -> i64 {
    match op {
        // SAFETY: single-threaded guest.
        0 => unsafe { COUNT as i64 },
        _ => -1,
    }
}

anode_msdk::u64_state!(COUNT, u64);
