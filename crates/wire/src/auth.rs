//! Signed packets: the layout of the ANEP authentication option's scheme 1 and the bytes its
//! signature covers. The signing and verifying themselves (ed25519) live in the NodeOS crate
//! (`anode_nodeos::auth`); this module only parses and lays out, so it is fuzzed with the
//! other parsers and never needs a key.
//!
//! Scheme [`SCHEME_ED25519`] data, 104 bytes (the option is 112 bytes with its headers):
//!
//! ```text
//! | signer public key (32) | sequence number (64-bit, big-endian) | ed25519 signature (64) |
//! ```
//!
//! The signature covers, in this order: the tag [`SIGNED_TAG`], the ANEP Type ID (2 bytes),
//! the sequence number (8 bytes), the transit header with the two fields that change hop by
//! hop zeroed (resource bound and previous hop), and every byte after the transit header (the
//! EE header and payload). It does not cover the ANEP header's other options, so a node may
//! add or drop a checksum or identifier option without breaking it.
//!
//! Contract: [`AuthData::parse`], [`find`] and [`signed_bytes`] return an error (never panic)
//! on any input; [`find`] reports the first scheme-1 option and ignores other schemes.

use crate::anep::{AnepOptionT, AnepPacket, AnepRepr};
use crate::transit::{self, Transit};
use crate::{WireError, util};

/// Authentication scheme 1: ed25519 over [`signed_bytes`], with a sequence number.
pub const SCHEME_ED25519: u16 = 1;
/// Bytes of a public key.
pub const KEY_LEN: usize = 32;
/// Bytes of a signature.
pub const SIG_LEN: usize = 64;
/// Bytes of scheme-1 data.
pub const DATA_LEN: usize = KEY_LEN + 8 + SIG_LEN;
/// What a scheme-1 signature starts with (domain separation from every other signature an
/// anode key makes: module packages, policies, remote-management requests).
pub const SIGNED_TAG: &[u8] = b"anode ANEP packet signature v1\0";

/// The data of a scheme-1 authentication option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthData {
    /// The signer's ed25519 public key.
    pub key: [u8; KEY_LEN],
    /// The sender's sequence number (increasing per key; receivers refuse replays).
    pub seq: u64,
    /// The ed25519 signature over [`signed_bytes`].
    pub sig: [u8; SIG_LEN],
}

impl AuthData {
    /// Parses scheme-1 data (exactly [`DATA_LEN`] bytes).
    pub fn parse(data: &[u8]) -> Result<Self, WireError> {
        if data.len() != DATA_LEN {
            return Err(WireError::BadLength {
                what: "ANEP authentication (scheme 1)",
                detail: "data is not 104 bytes (key, sequence number, signature)",
            });
        }
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(util::get(data, 0, KEY_LEN, "authentication key")?);
        let seq = util::u64_at(data, KEY_LEN, "authentication sequence number")?;
        let mut sig = [0u8; SIG_LEN];
        sig.copy_from_slice(util::get(
            data,
            KEY_LEN + 8,
            SIG_LEN,
            "authentication signature",
        )?);
        Ok(AuthData { key, seq, sig })
    }

    /// The data bytes.
    pub fn to_bytes(&self) -> [u8; DATA_LEN] {
        let mut out = [0u8; DATA_LEN];
        let (k, rest) = out.split_at_mut(KEY_LEN);
        k.copy_from_slice(&self.key);
        let (s, sig) = rest.split_at_mut(8);
        s.copy_from_slice(&self.seq.to_be_bytes());
        sig.copy_from_slice(&self.sig);
        out
    }
}

/// The scheme-1 authentication of the ANEP packet `packet`: `Ok(None)` if it has none. An
/// unparsable packet, or a scheme-1 option whose data is not 104 bytes, is an error.
pub fn find(packet: &[u8]) -> Result<Option<AuthData>, WireError> {
    let p = AnepPacket::new_checked(packet)?;
    for o in p.options() {
        if let AnepOptionT::Authentication { scheme, data } = o?.value
            && scheme == SCHEME_ED25519
        {
            return AuthData::parse(data).map(Some);
        }
    }
    Ok(None)
}

/// Appends to `out` the bytes a scheme-1 signature with sequence number `seq` covers in the
/// routed ANEP packet `packet` (see the module docs). Fails if `packet` has no valid ANEP or
/// transit header.
pub fn signed_bytes(packet: &[u8], seq: u64, out: &mut Vec<u8>) -> Result<(), WireError> {
    let p = AnepPacket::new_checked(packet)?;
    let body = p.payload();
    let t = Transit::new_checked(body)?;
    let hl = t.header_len();
    let header = util::get(body, 0, hl, "transit header")?;
    let rest = body.get(hl..).unwrap_or_default();
    out.reserve(SIGNED_TAG.len() + 10 + body.len());
    out.extend_from_slice(SIGNED_TAG);
    out.extend_from_slice(&p.type_id().to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    let start = out.len();
    out.extend_from_slice(header);
    // The fields every hop rewrites: the resource bound and the previous hop.
    zero(out, start + transit::field::RB, 2);
    zero(
        out,
        start + transit::field::PREV_HOP,
        crate::addr::NODE_ADDR_LEN,
    );
    out.extend_from_slice(rest);
    Ok(())
}

fn zero(b: &mut [u8], at: usize, len: usize) {
    if let Some(s) = b.get_mut(at..at.saturating_add(len)) {
        s.fill(0);
    }
}

/// `packet` with `auth` as its scheme-1 authentication option (any earlier scheme-1 option
/// is replaced; other options are kept, a checksum recomputed).
pub fn with_auth(packet: &[u8], auth: &AuthData) -> Result<Vec<u8>, WireError> {
    let p = AnepPacket::new_checked(packet)?;
    let mut r = AnepRepr::parse(&p)?;
    r.options.retain(
        |o| !matches!(o, AnepOptionT::Authentication { scheme, .. } if *scheme == SCHEME_ED25519),
    );
    r.options.push(AnepOptionT::Authentication {
        scheme: SCHEME_ED25519,
        data: auth.to_bytes().to_vec(),
    });
    r.emit_packet(p.payload())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anep::TYPE_PLAN;
    use crate::transit::TransitRepr;

    fn packet() -> Vec<u8> {
        let t = TransitRepr {
            flags: 0,
            rb: 9,
            flow: 7,
            src: "198.18.0.1:3322".parse().unwrap(),
            dst: "198.18.0.3:3322".parse().unwrap(),
            prev_hop: "198.18.0.1:3322".parse().unwrap(),
        };
        crate::routed_packet(TYPE_PLAN, &t, b"hdr", b"body").unwrap()
    }

    fn auth() -> AuthData {
        AuthData {
            key: [7; 32],
            seq: 0x0102_0304_0506_0708,
            sig: [9; 64],
        }
    }

    #[test]
    fn data_round_trips_and_other_lengths_are_refused() {
        let a = auth();
        let b = a.to_bytes();
        assert_eq!(&b[32..40], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(AuthData::parse(&b), Ok(a));
        assert!(AuthData::parse(&b[..103]).is_err());
        assert!(AuthData::parse(&[0; 105]).is_err());
    }

    #[test]
    fn the_option_is_added_found_and_replaced() {
        let p = packet();
        assert_eq!(find(&p), Ok(None));
        let signed = with_auth(&p, &auth()).unwrap();
        // Basic header + 4-byte option header + scheme and length + 104 bytes of data.
        assert_eq!(signed.len(), p.len() + 112);
        assert_eq!(find(&signed), Ok(Some(auth())));
        let again = with_auth(&signed, &AuthData { seq: 1, ..auth() }).unwrap();
        assert_eq!(again.len(), signed.len());
        assert_eq!(find(&again).unwrap().unwrap().seq, 1);
        // Same payload, so the same signed bytes under the same sequence number.
        let (mut x, mut y) = (Vec::new(), Vec::new());
        signed_bytes(&p, 5, &mut x).unwrap();
        signed_bytes(&again, 5, &mut y).unwrap();
        assert_eq!(x, y);
    }

    #[test]
    fn signed_bytes_ignore_the_hop_fields_and_cover_the_rest() {
        let p = packet();
        let mut base = Vec::new();
        signed_bytes(&p, 1, &mut base).unwrap();
        assert!(base.starts_with(SIGNED_TAG));
        // A later hop: resource bound spent, previous hop rewritten.
        let mut hop = p.clone();
        let t = crate::anep::BASIC_HEADER_LEN;
        hop[t + transit::field::RB + 1] = 3;
        hop[t + transit::field::PREV_HOP + 5] ^= 0xff;
        let mut b = Vec::new();
        signed_bytes(&hop, 1, &mut b).unwrap();
        assert_eq!(b, base);
        // Anything else changed: the destination, the body, the sequence number.
        for at in [t + transit::field::DST + 5, p.len() - 1] {
            let mut q = p.clone();
            q[at] ^= 1;
            let mut c = Vec::new();
            signed_bytes(&q, 1, &mut c).unwrap();
            assert_ne!(c, base, "byte {at}");
        }
        let mut c = Vec::new();
        signed_bytes(&p, 2, &mut c).unwrap();
        assert_ne!(c, base);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        for n in 0..80 {
            let junk = vec![1u8; n];
            let _ = find(&junk);
            let _ = signed_bytes(&junk, 0, &mut out);
        }
        // A valid ANEP header around a short transit header.
        let short = AnepRepr::new(TYPE_PLAN)
            .emit_packet(&[1, 0, 0, 72])
            .unwrap();
        assert!(signed_bytes(&short, 0, &mut out).is_err());
    }
}
