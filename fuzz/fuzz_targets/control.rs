//! Control messages (hello, routes, code transfer, EE messages).
#![no_main]
use anode_wire::control::Control;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Control::parse(data) {
        let bytes = c.to_bytes().expect("a parsed message re-encodes");
        assert_eq!(Control::parse(&bytes).as_ref(), Ok(&c));
    }
});
