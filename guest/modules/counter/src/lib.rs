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

#[unsafe(no_mangle)]
pub extern "C" fn state_export() -> i64 {
    // SAFETY: single-threaded guest.
    anode_msdk::export_u64(unsafe { COUNT })
}

#[unsafe(no_mangle)]
pub extern "C" fn alloc(_len: i32) -> i32 {
    anode_msdk::state_u64_buffer()
}

#[unsafe(no_mangle)]
pub extern "C" fn state_import(_ptr: i32, len: i32) -> i32 {
    let Some(v) = anode_msdk::import_u64(len) else {
        return -1;
    };
    // SAFETY: single-threaded guest.
    unsafe { COUNT = v };
    0
}
