//! The PLAN service `mix : int -> int` (registered with the node's PLAN EE while the module is
//! active): a 64-bit hash of its argument and config `seed` (splitmix64's finalizer), so PLAN
//! programs can spread flows or sample packets the same way on every node.

#![no_std]

#[unsafe(no_mangle)]
pub extern "C" fn plan_call(arg: i64) -> i64 {
    let mut z = (arg as u64) ^ (anode_msdk::config_int("seed") as u64);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as i64
}
