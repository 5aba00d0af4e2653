//! Loops forever on every packet (a faulty module: the node must stop it when its fuel runs out).

#![no_std]

#[unsafe(no_mangle)]
pub extern "C" fn process(_point: i32) -> i32 {
    let mut n: u64 = 0;
    loop {
        n = core::hint::black_box(n.wrapping_add(1));
        if n == u64::MAX {
            return anode_msdk::CONTINUE;
        }
    }
}
