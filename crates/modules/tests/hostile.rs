//! Packages come from repositories and control clients: garbled package bytes and manifests
//! are refused with an error, never a panic, and a package changed anywhere never verifies.

mod common;

use anode_modules::{Manifest, Package};
use common::*;

#[test]
fn garbled_packages_and_manifests_are_refused_not_panicked_on() {
    let good = signed("ratelimit", None).encode();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let t = trust();
    // Every truncation.
    for len in 0..good.len() {
        assert!(Package::decode(&good[..len]).is_err(), "truncated to {len}");
    }
    // Random byte changes: either refused by the decoder or by the signature check.
    let mut decoded = 0;
    for _ in 0..300 {
        let mut b = good.clone();
        for _ in 0..(rnd() % 3 + 1) {
            let i = (rnd() as usize) % b.len();
            b[i] ^= (rnd() as u8) | 1;
        }
        if let Ok(p) = Package::decode(&b) {
            decoded += 1;
            assert!(t.verify(&p).is_err(), "a changed package verified");
        }
    }
    assert!(decoded > 0, "no mutation reached the signature check");
    // Manifests: random edits of a real one, and random bytes.
    let text = anode_modules::builtin::BUILTIN
        .iter()
        .find(|(n, _, _)| *n == "ratelimit")
        .unwrap()
        .1;
    for _ in 0..300 {
        let mut b = text.as_bytes().to_vec();
        let i = (rnd() as usize) % b.len();
        b[i] = rnd() as u8;
        if let Ok(s) = std::str::from_utf8(&b) {
            let _ = Manifest::parse(s);
        }
        let junk: Vec<u8> = (0..(rnd() % 64)).map(|_| rnd() as u8).collect();
        let _ = Package::decode(&junk);
    }
}
