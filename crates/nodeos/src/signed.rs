//! Signed policies: a principal's [`Policy`] signed with an ed25519 key, so a node can take a
//! domain's resources from a policy its operator did not write, provided a key the node trusts
//! signed it (the NodeOS paper's credentials: the policy alone sets what the domain gets).
//!
//! The file is TOML (keys are hex, the format of `anode keygen`'s `.pub` files):
//!
//! ```toml
//! principal = "capsule/5f3a..."
//! key = "9d1c..."          # the signer's ed25519 public key (hex)
//! signature = "07be..."    # ed25519 over the signed message (hex)
//!
//! [policy]
//! cpu_share = 2
//! memory_bytes = 1048576
//! ```
//!
//! Contract: the signature covers `anode-policy-v1\0`, the principal, `\0`, and the policy's
//! canonical JSON (every field, in declaration order), so changing the principal or any
//! limit — including one the file leaves at its default — breaks it. [`SignedPolicy::verify`]
//! accepts a policy only if it is signed, intact, and signed by one of the trusted keys, and
//! otherwise says which of the three it is not.

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::Policy;

/// What the signature is over, before the principal.
const DOMAIN_TAG: &[u8] = b"anode-policy-v1\0";

/// Why a signed policy was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignedPolicyError {
    /// The file is not a signed policy (syntax, unknown keys, bad hex).
    #[error("not a signed policy: {0}")]
    Malformed(String),
    /// It carries no signature.
    #[error("the policy of {principal:?} is unsigned")]
    Unsigned {
        /// Its principal.
        principal: String,
    },
    /// The signature does not match the principal and policy (changed after signing, or
    /// signed by another key than the one named).
    #[error("the policy of {principal:?} was tampered with: its signature does not verify")]
    Tampered {
        /// Its principal.
        principal: String,
    },
    /// It verifies, but under a key the node does not trust.
    #[error("the policy of {principal:?} is signed by key {key}, which this node does not trust")]
    Untrusted {
        /// Its principal.
        principal: String,
        /// The signer's public key, hex.
        key: String,
    },
}

/// A principal's policy with its signer and signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedPolicy {
    /// Whose policy.
    pub principal: String,
    /// What the principal's domain gets.
    pub policy: Policy,
    /// The signer's public key and the signature (`None`: unsigned).
    pub signature: Option<([u8; 32], [u8; 64])>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    principal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
    policy: Policy,
}

fn unhex<const N: usize>(what: &str, s: &str) -> Result<[u8; N], SignedPolicyError> {
    let mut b = [0u8; N];
    hex::decode_to_slice(s.trim(), &mut b).map_err(|e| {
        SignedPolicyError::Malformed(format!("{what} is not {N} bytes of hex: {e}"))
    })?;
    Ok(b)
}

impl SignedPolicy {
    /// The bytes a signature covers.
    pub fn signed_message(principal: &str, policy: &Policy) -> Vec<u8> {
        let mut m = DOMAIN_TAG.to_vec();
        m.extend_from_slice(principal.as_bytes());
        m.push(0);
        // Serializing a plain struct of integers and strings cannot fail.
        m.extend_from_slice(&serde_json::to_vec(policy).unwrap_or_default());
        m
    }

    /// Signs `policy` for `principal` with `key`.
    pub fn sign(principal: &str, policy: Policy, key: &SigningKey) -> Self {
        let sig = key.sign(&Self::signed_message(principal, &policy));
        SignedPolicy {
            principal: principal.to_string(),
            policy,
            signature: Some((key.verifying_key().to_bytes(), sig.to_bytes())),
        }
    }

    /// Parses the TOML file format (see the module docs); verifies nothing.
    pub fn from_toml(text: &str) -> Result<Self, SignedPolicyError> {
        let f: File = toml::from_str(text)
            .map_err(|e| SignedPolicyError::Malformed(e.message().trim().to_string()))?;
        let signature = match (&f.key, &f.signature) {
            (Some(k), Some(s)) => Some((unhex("key", k)?, unhex("signature", s)?)),
            (None, None) => None,
            _ => {
                return Err(SignedPolicyError::Malformed(
                    "key and signature go together: give both, or neither for an unsigned policy"
                        .into(),
                ));
            }
        };
        Ok(SignedPolicy {
            principal: f.principal,
            policy: f.policy,
            signature,
        })
    }

    /// The TOML file format.
    pub fn to_toml(&self) -> String {
        let f = File {
            principal: self.principal.clone(),
            key: self.signature.map(|(k, _)| hex::encode(k)),
            signature: self.signature.map(|(_, s)| hex::encode(s)),
            policy: self.policy.clone(),
        };
        toml::to_string(&f).unwrap_or_default()
    }

    /// Accepts the policy if it is signed, intact, and signed by one of `trusted`.
    pub fn verify(&self, trusted: &[VerifyingKey]) -> Result<(), SignedPolicyError> {
        let principal = self.principal.clone();
        let Some((k, s)) = &self.signature else {
            return Err(SignedPolicyError::Unsigned { principal });
        };
        let key = VerifyingKey::from_bytes(k).map_err(|_| SignedPolicyError::Tampered {
            principal: principal.clone(),
        })?;
        key.verify(
            &Self::signed_message(&self.principal, &self.policy),
            &Signature::from_bytes(s),
        )
        .map_err(|_| SignedPolicyError::Tampered {
            principal: principal.clone(),
        })?;
        if !trusted.contains(&key) {
            return Err(SignedPolicyError::Untrusted {
                principal,
                key: hex::encode(k),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> SigningKey {
        SigningKey::from_bytes(&[b; 32])
    }

    fn pol() -> Policy {
        Policy {
            cpu_share: 3,
            memory_bytes: 2 << 20,
            ..Policy::default()
        }
    }

    #[test]
    fn signed_intact_trusted_is_accepted_and_round_trips() {
        let k = key(7);
        let sp = SignedPolicy::sign("capsule/ab", pol(), &k);
        assert_eq!(sp.verify(&[k.verifying_key()]), Ok(()));
        let text = sp.to_toml();
        assert!(text.contains("principal = \"capsule/ab\""), "{text}");
        let back = SignedPolicy::from_toml(&text).unwrap();
        assert_eq!(back, sp);
        assert_eq!(
            back.verify(&[key(1).verifying_key(), k.verifying_key()]),
            Ok(())
        );
    }

    #[test]
    fn unsigned_tampered_untrusted_are_refused_by_name() {
        let k = key(7);
        let trusted = [k.verifying_key()];
        let unsigned = SignedPolicy {
            signature: None,
            ..SignedPolicy::sign("capsule/ab", pol(), &k)
        };
        let e = unsigned.verify(&trusted).unwrap_err();
        assert!(matches!(e, SignedPolicyError::Unsigned { .. }), "{e}");
        let u = SignedPolicy::from_toml(&unsigned.to_toml()).unwrap();
        assert!(u.signature.is_none());

        // Any limit changed after signing, or another principal: tampered.
        let text = SignedPolicy::sign("capsule/ab", pol(), &k).to_toml();
        let raised = text.replace("memory_bytes = 2097152", "memory_bytes = 2097153");
        assert_ne!(raised, text);
        let e = SignedPolicy::from_toml(&raised)
            .unwrap()
            .verify(&trusted)
            .unwrap_err();
        assert!(matches!(e, SignedPolicyError::Tampered { .. }), "{e}");
        let moved = text.replace("capsule/ab", "capsule/cd");
        let e = SignedPolicy::from_toml(&moved)
            .unwrap()
            .verify(&trusted)
            .unwrap_err();
        assert!(e.to_string().contains("tampered"), "{e}");
        // A limit the file leaves out is covered too (defaults are signed explicitly).
        let mut sp = SignedPolicy::sign("capsule/ab", pol(), &k);
        sp.policy.max_channels += 1;
        assert!(matches!(
            sp.verify(&trusted),
            Err(SignedPolicyError::Tampered { .. })
        ));

        // Intact, but by a key the node does not trust.
        let other = SignedPolicy::sign("capsule/ab", pol(), &key(9));
        let e = other.verify(&trusted).unwrap_err();
        assert!(matches!(e, SignedPolicyError::Untrusted { .. }), "{e}");
        assert!(
            e.to_string()
                .contains(&hex::encode(key(9).verifying_key().to_bytes()))
        );
    }

    #[test]
    fn malformed_files_say_why() {
        for (text, want) in [
            ("principal = \"p\"\n", "missing field `policy`"),
            (
                "principal = \"p\"\nkey = \"00\"\n[policy]\n",
                "key and signature go together",
            ),
            (
                "principal = \"p\"\nkey = \"zz\"\nsignature = \"00\"\n[policy]\n",
                "key is not 32 bytes of hex",
            ),
            ("principal = \"p\"\n[policy]\ncpu = 1\n", "unknown field"),
        ] {
            let e = SignedPolicy::from_toml(text).unwrap_err();
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
    }
}
