//! Bytes -> decode packet body / chunk / value (and check canonical
//! re-encoding); must never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = anode_plan::fuzz_unmarshal(data);
});
