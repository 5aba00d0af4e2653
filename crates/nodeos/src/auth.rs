//! Authenticated principals: packets signed with an ed25519 key (the ANEP authentication
//! option, scheme 1, laid out by `anode_wire::auth`) get their signer as principal.
//!
//! - [`sign_packet`] signs a routed ANEP packet (what `anode plan inject --sign` sends).
//! - [`Authenticator`] holds the keys a node's policy names and one replay window per key. It
//!   answers in two steps, so a guard can charge the expensive one:
//!   1. [`Authenticator::claimed`], cheap: the key a packet claims, if it is one of the named
//!      keys (a packet signed by any other key is treated as unsigned: nothing is verified
//!      for a key the node does not know, so unknown keys cost nothing);
//!   2. [`Authenticator::verify`], about 50 µs: the signature, then the replay window.
//!
//! Replay window (as IPsec's): per key, the highest sequence number accepted and a bitmap of
//! the [`WINDOW`] numbers below it; a number at or below the window's floor, or already seen,
//! is a replay. Senders use increasing numbers (`anode plan inject` takes the time in
//! microseconds). Memory: one window per named key, so bounded by the policy file.
//!
//! Contract: nothing here panics on any packet; a packet that fails [`Authenticator::verify`]
//! leaves the window as it was, so a forgery cannot move it.

use anode_core::DropReason;
use anode_wire::auth::{self, AuthData};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use rustc_hash::FxHashMap;
use thiserror::Error;

/// How far below the highest accepted sequence number a number is still accepted (once).
pub const WINDOW: u64 = 64;

/// Why a packet could not be signed.
#[derive(Debug, Error)]
pub enum SignError {
    /// The bytes are not a routed ANEP packet (ANEP header, then a transit header).
    #[error("not a routed ANEP packet: {0}")]
    NotRouted(anode_wire::WireError),
    /// The packet with the authentication option would be larger than an ANEP packet may be.
    #[error("the signed packet would be too large: {0}")]
    TooLarge(anode_wire::WireError),
}

/// `packet` signed by `key` with sequence number `seq` (scheme 1; any earlier scheme-1
/// option replaced).
pub fn sign_packet(packet: &[u8], key: &SigningKey, seq: u64) -> Result<Vec<u8>, SignError> {
    let mut msg = Vec::new();
    auth::signed_bytes(packet, seq, &mut msg).map_err(SignError::NotRouted)?;
    let data = AuthData {
        key: key.verifying_key().to_bytes(),
        seq,
        sig: key.sign(&msg).to_bytes(),
    };
    auth::with_auth(packet, &data).map_err(SignError::TooLarge)
}

/// A named key: its parsed form and its replay window.
#[derive(Debug)]
struct Known {
    key: VerifyingKey,
    /// Highest sequence number accepted (`None`: none yet).
    top: Option<u64>,
    /// Bit `i`: `top - 1 - i` was accepted.
    seen: u64,
}

impl Known {
    /// Whether `seq` is new; records it if `commit`.
    fn fresh(&mut self, seq: u64, commit: bool) -> bool {
        let Some(top) = self.top else {
            if commit {
                self.top = Some(seq);
            }
            return true;
        };
        if seq > top {
            if commit {
                let shift = seq - top;
                self.seen = if shift > WINDOW {
                    0
                } else {
                    // Bit for the old top, then the older ones moved along.
                    ((self.seen << 1) | 1)
                        .checked_shl((shift - 1) as u32)
                        .unwrap_or(0)
                };
                self.top = Some(seq);
            }
            return true;
        }
        let back = top - seq;
        if back == 0 || back > WINDOW {
            return false;
        }
        let bit = 1u64 << (back - 1);
        if self.seen & bit != 0 {
            return false;
        }
        if commit {
            self.seen |= bit;
        }
        true
    }
}

/// The keys a node accepts signatures from, and their replay windows (see the module docs).
#[derive(Debug, Default)]
pub struct Authenticator {
    keys: FxHashMap<[u8; 32], Known>,
    /// Reused for the signed bytes.
    scratch: Vec<u8>,
}

impl Authenticator {
    /// An authenticator for `keys` (public keys that are not valid ed25519 points are left
    /// out: no signature could verify under them).
    pub fn new(keys: impl IntoIterator<Item = [u8; 32]>) -> Self {
        let keys = keys
            .into_iter()
            .filter_map(|k| {
                let key = VerifyingKey::from_bytes(&k).ok()?;
                Some((
                    k,
                    Known {
                        key,
                        top: None,
                        seen: 0,
                    },
                ))
            })
            .collect();
        Authenticator {
            keys,
            scratch: Vec::new(),
        }
    }

    /// Each named key's replay window that has accepted a number: (key, highest accepted,
    /// bitmap of the 64 below it), for a process that takes this node's place.
    pub fn windows(&self) -> Vec<([u8; 32], u64, u64)> {
        let mut w: Vec<_> = self
            .keys
            .iter()
            .filter_map(|(k, known)| known.top.map(|top| (*k, top, known.seen)))
            .collect();
        w.sort_unstable();
        w
    }

    /// Restores `key`'s replay window handed over by another process; `false` if the key is
    /// not named here (its window is dropped).
    pub fn restore_window(&mut self, key: &[u8; 32], top: u64, seen: u64) -> bool {
        match self.keys.get_mut(key) {
            Some(k) => {
                k.top = Some(top);
                k.seen = seen;
                true
            }
            None => false,
        }
    }

    /// Whether no key is named (then every packet is unauthenticated).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The named key `packet` claims to be signed by (not yet verified), or `None`: unsigned,
    /// signed by a key not named, or an authentication option that does not parse.
    pub fn claimed(&self, packet: &[u8]) -> Option<[u8; 32]> {
        if self.keys.is_empty() {
            return None;
        }
        let a = auth::find(packet).ok()??;
        self.keys.contains_key(&a.key).then_some(a.key)
    }

    /// Verifies that `packet` is signed by `key` with a sequence number not seen before, and
    /// records the number. Refusals: [`DropReason::BadSignature`] (no such option, not this
    /// key, or the signature does not verify) and [`DropReason::Replayed`].
    pub fn verify(&mut self, key: &[u8; 32], packet: &[u8]) -> Result<(), DropReason> {
        let a = match auth::find(packet) {
            Ok(Some(a)) if &a.key == key => a,
            _ => return Err(DropReason::BadSignature),
        };
        let known = self.keys.get_mut(key).ok_or(DropReason::BadSignature)?;
        // The cheap refusal first: a replayed number is refused before any curve arithmetic.
        if !known.fresh(a.seq, false) {
            return Err(DropReason::Replayed);
        }
        self.scratch.clear();
        auth::signed_bytes(packet, a.seq, &mut self.scratch)
            .map_err(|_| DropReason::BadSignature)?;
        known
            .key
            .verify_strict(&self.scratch, &Signature::from_bytes(&a.sig))
            .map_err(|_| DropReason::BadSignature)?;
        known.fresh(a.seq, true);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use anode_wire::anep::TYPE_PLAN;
    use anode_wire::transit::{self, TransitRepr};

    use super::*;

    fn key(b: u8) -> SigningKey {
        SigningKey::from_bytes(&[b; 32])
    }

    fn packet(body: &[u8]) -> Vec<u8> {
        let t = TransitRepr {
            flags: 0,
            rb: 9,
            flow: 7,
            src: "198.18.0.1:3322".parse().unwrap(),
            dst: "198.18.0.3:3322".parse().unwrap(),
            prev_hop: "198.18.0.1:3322".parse().unwrap(),
        };
        anode_wire::routed_packet(TYPE_PLAN, &t, b"", body).unwrap()
    }

    fn pubkey(b: u8) -> [u8; 32] {
        key(b).verifying_key().to_bytes()
    }

    #[test]
    fn a_signed_packet_verifies_under_its_named_key_only() {
        let mut a = Authenticator::new([pubkey(1)]);
        let p = sign_packet(&packet(b"hello"), &key(1), 10).unwrap();
        assert_eq!(a.claimed(&p), Some(pubkey(1)));
        assert_eq!(a.verify(&pubkey(1), &p), Ok(()));
        // Unsigned, or signed by a key the node does not name: no claim, nothing verified.
        assert_eq!(a.claimed(&packet(b"hello")), None);
        let other = sign_packet(&packet(b"hello"), &key(2), 10).unwrap();
        assert_eq!(a.claimed(&other), None);
        assert_eq!(a.verify(&pubkey(1), &other), Err(DropReason::BadSignature));
    }

    #[test]
    fn tampering_with_anything_but_the_hop_fields_breaks_the_signature() {
        let mut a = Authenticator::new([pubkey(1)]);
        let p = sign_packet(&packet(b"hello"), &key(1), 1).unwrap();
        let t = p.len() - 5 - transit::LEN;
        // A later hop spends resource bound and rewrites the previous hop: still valid.
        let mut hop = p.clone();
        hop[t + transit::field::RB + 1] = 2;
        hop[t + transit::field::PREV_HOP + 3] ^= 0x55;
        assert_eq!(a.verify(&pubkey(1), &hop), Ok(()));
        // The body, the destination or the source changed: refused (fresh numbers each).
        for (i, at) in [
            p.len() - 1,
            t + transit::field::DST + 5,
            t + transit::field::SRC + 5,
        ]
        .into_iter()
        .enumerate()
        {
            let q = sign_packet(&packet(b"hello"), &key(1), 100 + i as u64).unwrap();
            let mut q = q;
            q[at] ^= 1;
            assert_eq!(
                a.verify(&pubkey(1), &q),
                Err(DropReason::BadSignature),
                "byte {at}"
            );
        }
        // A forged number did not move the window: the genuine one still passes.
        let q = sign_packet(&packet(b"hello"), &key(1), 100).unwrap();
        assert_eq!(a.verify(&pubkey(1), &q), Ok(()));
    }

    #[test]
    fn replays_are_refused_within_and_below_the_window() {
        let mut a = Authenticator::new([pubkey(1)]);
        let signed = |seq| sign_packet(&packet(b"x"), &key(1), seq).unwrap();
        assert_eq!(a.verify(&pubkey(1), &signed(100)), Ok(()));
        assert_eq!(
            a.verify(&pubkey(1), &signed(100)),
            Err(DropReason::Replayed)
        );
        // Out of order but inside the window: once each.
        for s in [99, 37, 98] {
            assert_eq!(a.verify(&pubkey(1), &signed(s)), Ok(()), "{s}");
            assert_eq!(
                a.verify(&pubkey(1), &signed(s)),
                Err(DropReason::Replayed),
                "{s}"
            );
        }
        // Below the window (top - 64 is its floor): refused, even if never seen.
        assert_eq!(a.verify(&pubkey(1), &signed(35)), Err(DropReason::Replayed));
        assert_eq!(a.verify(&pubkey(1), &signed(36)), Ok(()));
        // A jump forward keeps what is still inside the window.
        assert_eq!(a.verify(&pubkey(1), &signed(110)), Ok(()));
        for s in [110, 100, 99, 98] {
            assert_eq!(a.verify(&pubkey(1), &signed(s)), Err(DropReason::Replayed));
        }
        assert_eq!(a.verify(&pubkey(1), &signed(101)), Ok(()));
        // A jump past the window forgets it all.
        assert_eq!(a.verify(&pubkey(1), &signed(1_000)), Ok(()));
        assert_eq!(a.verify(&pubkey(1), &signed(999)), Ok(()));
        assert_eq!(
            a.verify(&pubkey(1), &signed(935)),
            Err(DropReason::Replayed)
        );
        assert_eq!(a.verify(&pubkey(1), &signed(936)), Ok(()));
    }

    #[test]
    fn the_window_matches_a_model() {
        // Every sequence of numbers: accepted exactly when new and above top - WINDOW.
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut k = Known {
            key: key(1).verifying_key(),
            top: None,
            seen: 0,
        };
        let mut accepted = std::collections::BTreeSet::new();
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let top = accepted.last().copied().unwrap_or(500u64);
            let seq = (top + 20).saturating_sub(rng % 120);
            let want =
                !accepted.contains(&seq) && accepted.last().is_none_or(|&t| seq + WINDOW >= t);
            assert_eq!(k.fresh(seq, true), want, "seq {seq} top {top}");
            if want {
                accepted.insert(seq);
            }
        }
    }

    #[test]
    fn a_restored_window_refuses_what_the_old_one_saw() {
        let mut a = Authenticator::new([pubkey(1), pubkey(2)]);
        let signed = |seq| sign_packet(&packet(b"x"), &key(1), seq).unwrap();
        for s in [5, 9, 7] {
            a.verify(&pubkey(1), &signed(s)).unwrap();
        }
        let w = a.windows();
        assert_eq!(w.len(), 1, "only windows that accepted a number");
        let mut b = Authenticator::new([pubkey(1)]);
        for (k, top, seen) in &w {
            assert!(b.restore_window(k, *top, *seen));
        }
        assert!(!b.restore_window(&pubkey(2), 1, 0), "a key no longer named");
        for s in [5, 9, 7] {
            assert_eq!(b.verify(&pubkey(1), &signed(s)), Err(DropReason::Replayed));
        }
        assert_eq!(b.verify(&pubkey(1), &signed(8)), Ok(()));
    }

    #[test]
    fn garbage_never_panics() {
        let mut a = Authenticator::new([pubkey(1)]);
        let p = sign_packet(&packet(b"hello"), &key(1), 1).unwrap();
        for n in 0..p.len() {
            let _ = a.claimed(&p[..n]);
            let _ = a.verify(&pubkey(1), &p[..n]);
        }
        assert!(sign_packet(b"not a packet", &key(1), 1).is_err());
    }
}
