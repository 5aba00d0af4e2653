//! Capsule header and whole capsules.
#![no_main]
use anode_wire::capsule::{Capsule, CapsuleRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((h, _)) = CapsuleRepr::parse(data) {
        assert_eq!(CapsuleRepr::parse(&h.to_vec()).map(|x| x.0), Ok(h));
    }
    if let Ok(c) = Capsule::parse(data) {
        if let Ok(pkt) = c.to_packet() {
            let p = anode_wire::anep::AnepPacket::new_checked(&pkt[..]).expect("emitted capsule parses");
            assert_eq!(Capsule::parse(p.payload()).as_ref(), Ok(&c));
        }
    }
});
