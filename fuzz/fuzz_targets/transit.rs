//! Transit header: checked view, accessors, in-place rewrite, round trip.
#![no_main]
use anode_wire::transit::{Transit, TransitRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut buf = data.to_vec();
    if let Ok(mut t) = Transit::new_checked(&mut buf[..]) {
        let rb = t.rb();
        let _ = (t.src(), t.dst(), t.prev_hop(), t.flow(), t.rest().len());
        t.set_rb(rb.saturating_sub(1));
        t.set_prev_hop(anode_wire::NodeAddr::UNSPECIFIED);
    }
    if let Ok((r, _)) = TransitRepr::parse(data) {
        assert_eq!(TransitRepr::parse(&r.to_vec()).map(|x| x.0), Ok(r));
    }
});
