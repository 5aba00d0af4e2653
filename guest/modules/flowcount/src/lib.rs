//! Counts packets per flow id in a small open-addressed table; service `flow-counter`:
//! op 0 counts one packet of flow `arg` and returns its count, op 1 returns the count.

#![no_std]

use anode_msdk as _;

const N: usize = 1024;
static mut KEYS: [i64; N] = [0; N];
static mut COUNTS: [i64; N] = [0; N];

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
