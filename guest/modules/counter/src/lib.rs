//! Counts the packets it sees and passes them on. Service `packet-counter` op 0 returns the
//! count. On upgrade it hands its count to its successor (state: 8 bytes little-endian).

#![no_std]

static mut COUNT: u64 = 0;
static mut STATE: [u8; 8] = [0; 8];

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
    // SAFETY: single-threaded guest; the pointer is to a static the host reads at once.
    unsafe {
        STATE = COUNT.to_le_bytes();
        let p = core::ptr::addr_of!(STATE) as usize as i64;
        (p << 32) | 8
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn alloc(_len: i32) -> i32 {
    core::ptr::addr_of!(STATE) as usize as i32
}

#[unsafe(no_mangle)]
pub extern "C" fn state_import(_ptr: i32, len: i32) -> i32 {
    if len != 8 {
        return -1;
    }
    // SAFETY: single-threaded guest; the host wrote 8 bytes into STATE.
    unsafe { COUNT = u64::from_le_bytes(STATE) };
    0
}
