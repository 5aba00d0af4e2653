//! Counts packets per flow id in a small open-addressed table; service `flow-counter`:
//! op 0 counts one packet of flow `arg` and returns its count, op 1 returns the count.
//! On upgrade it hands its table to its successor (state: the keys, then the counts, each
//! N little-endian i64s).

#![no_std]

use anode_msdk as _;

const N: usize = 1024;
static mut KEYS: [i64; N] = [0; N];
static mut COUNTS: [i64; N] = [0; N];
/// The state handed over on upgrade.
static mut STATE: [u8; 16 * N] = [0; 16 * N];

fn slot(flow: i64) -> Option<usize> {
    let h = (flow as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as usize;
    // SAFETY: single-threaded guest.
    let keys = unsafe { &mut *core::ptr::addr_of_mut!(KEYS) };
    for i in 0..N {
        let s = (h + i) % N;
        let k = keys.get_mut(s)?;
        if *k == flow + 1 || *k == 0 {
            *k = flow + 1;
            return Some(s);
        }
    }
    None
}

#[unsafe(no_mangle)]
pub extern "C" fn service(op: i32, arg: i64) -> i64 {
    let Some(s) = slot(arg) else { return -1 };
    // SAFETY: single-threaded guest.
    let counts = unsafe { &mut *core::ptr::addr_of_mut!(COUNTS) };
    let Some(c) = counts.get_mut(s) else { return -1 };
    if op == 0 {
        *c += 1;
    }
    *c
}

#[unsafe(no_mangle)]
pub extern "C" fn state_export() -> i64 {
    // SAFETY: single-threaded guest; the host reads STATE at once, before any other call.
    let (keys, counts, state) = unsafe {
        (
            &*core::ptr::addr_of!(KEYS),
            &*core::ptr::addr_of!(COUNTS),
            &mut *core::ptr::addr_of_mut!(STATE),
        )
    };
    for (dst, v) in state.chunks_exact_mut(8).zip(keys.iter().chain(counts.iter())) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
    let p = state.as_ptr() as usize as i64;
    (p << 32) | (16 * N) as i64
}

#[unsafe(no_mangle)]
pub extern "C" fn alloc(_len: i32) -> i32 {
    core::ptr::addr_of!(STATE) as usize as i32
}

#[unsafe(no_mangle)]
pub extern "C" fn state_import(_ptr: i32, len: i32) -> i32 {
    if len != (16 * N) as i32 {
        return -1;
    }
    // SAFETY: single-threaded guest; the host wrote the state into STATE.
    let (keys, counts, state) = unsafe {
        (
            &mut *core::ptr::addr_of_mut!(KEYS),
            &mut *core::ptr::addr_of_mut!(COUNTS),
            &*core::ptr::addr_of!(STATE),
        )
    };
    for (v, src) in keys
        .iter_mut()
        .chain(counts.iter_mut())
        .zip(state.chunks_exact(8))
    {
        let mut b = [0u8; 8];
        b.copy_from_slice(src);
        *v = i64::from_le_bytes(b);
    }
    0
}
