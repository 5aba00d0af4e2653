//! ANEP basic header and options: parse, walk options, re-emit what parsed.
#![no_main]
use anode_wire::anep::{AnepPacket, AnepRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = AnepPacket::new_checked(data) {
        let _ = (p.payload(), p.destination(), p.source(), p.verify_checksum());
        if let Ok(r) = AnepRepr::parse(&p) {
            // What parsed must re-emit and parse back to the same header.
            let bytes = r.emit_packet(p.payload()).expect("a parsed header re-emits");
            let q = AnepPacket::new_checked(&bytes[..]).expect("re-emitted packet parses");
            assert_eq!(q.type_id(), p.type_id());
            assert_eq!(q.payload(), p.payload());
        }
    }
});
