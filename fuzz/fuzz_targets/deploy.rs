//! Deploy requests, per-hop results and package transfer messages (`anode_wire::deploy`).
#![no_main]
use anode_wire::deploy::{Message, Transfer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::parse(data) {
        let bytes = m.to_bytes().expect("a parsed message re-encodes");
        assert_eq!(Message::parse(&bytes).as_ref(), Ok(&m));
    }
    if let Ok(t) = Transfer::parse(data) {
        let bytes = t.to_bytes().expect("a parsed transfer re-encodes");
        assert_eq!(Transfer::parse(&bytes).as_ref(), Ok(&t));
    }
});
