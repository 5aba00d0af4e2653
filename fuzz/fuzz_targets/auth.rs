//! Signed packets (ANEP authentication option, scheme 1): find the option, lay out the signed
//! bytes, re-sign; what parsed must come back the same.
#![no_main]
use anode_wire::auth::{self, AuthData};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let found = auth::find(data);
    let mut msg = Vec::new();
    let laid = auth::signed_bytes(data, 7, &mut msg);
    if let Ok(Some(a)) = found {
        assert_eq!(AuthData::parse(&a.to_bytes()), Ok(a));
    }
    if laid.is_ok() {
        // Adding (or replacing) the option keeps the signed bytes and is found again.
        let a = AuthData {
            key: [1; 32],
            seq: 7,
            sig: [2; 64],
        };
        if let Ok(p) = auth::with_auth(data, &a) {
            assert_eq!(auth::find(&p), Ok(Some(a)));
            let mut again = Vec::new();
            auth::signed_bytes(&p, 7, &mut again).expect("a signed packet still lays out");
            assert_eq!(again, msg);
        }
    }
});
