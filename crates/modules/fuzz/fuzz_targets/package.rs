//! Module package files are untrusted input (fetched from a repository over HTTP, handed to a
//! node over its control socket). `Package::decode` must never panic; whatever it accepts
//! must re-encode to bytes that decode to the same package; and no package verifies under a
//! key whose private half the fuzzer does not have.
#![no_main]

use anode_modules::{Package, Trust, parse_public};
use libfuzzer_sys::fuzz_target;

/// A public key nobody holds the private key of in this corpus (RFC 8032 test 1's key).
const TRUSTED: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Package::decode(data) else {
        return;
    };
    let again = Package::decode(&p.encode()).expect("a decoded package re-encodes to a valid package");
    assert_eq!(again, p, "decode(encode(p)) == p");
    let trust = Trust::new(vec![parse_public(TRUSTED).expect("valid test key")]);
    assert!(trust.verify(&p).is_err(), "a fuzzed package must not verify");
    let _ = p.id();
    let _ = p.code_hash();
});
