//! Passes every packet on unchanged (the null processor of NetServ's overhead measurement).

#![no_std]

use anode_msdk as _;

#[unsafe(no_mangle)]
pub extern "C" fn process(_point: i32) -> i32 {
    anode_msdk::CONTINUE
}
