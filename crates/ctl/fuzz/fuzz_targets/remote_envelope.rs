//! A remote-management line as a node reads it (`anode_ctl::remote`): the envelope parse,
//! the signature check and the inner request's class. None may panic; an envelope that
//! parses re-encodes to one that parses to the same fields.
#![no_main]
use anode_ctl::parse_request;
use anode_ctl::remote::{Envelope, Opened};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(o) = Opened::parse(&text) else { return };
    let _ = o.verify();
    let line = serde_json::to_string(&o.env).expect("an envelope re-encodes");
    let again: Envelope = serde_json::from_str(&line).expect("and parses");
    assert_eq!(again, o.env);
    if let Ok(f) = parse_request(&o.env.request) {
        let _ = (f.request.remote_class(), f.request.op_name());
    }
});
