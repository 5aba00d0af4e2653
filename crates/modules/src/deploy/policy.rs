//! Who may deploy what at this node, how requests are signed and checked, and the wall clock
//! that request expiries are read against.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anode_wire::deploy::Request;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use crate::Category;

/// A key allowed to deploy modules here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployKey {
    /// The requester's ed25519 public key.
    pub key: [u8; 32],
    /// A name for logs.
    pub name: String,
    /// The module categories it may deploy (never `system`: those are the operator's).
    pub categories: Vec<Category>,
}

/// The node's deployment policy (`[deploy]` of a node config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployPolicy {
    /// Keys allowed to deploy; none: every request is refused as `disabled`.
    pub keys: Vec<DeployKey>,
    /// Longest soft-state lifetime a request may ask for.
    pub max_ttl_s: u32,
    /// Largest package accepted.
    pub max_package_bytes: u32,
    /// Most modules deployed here at once.
    pub max_modules: usize,
    /// Memory for packages kept to serve the next hop (and refreshes).
    pub cache_bytes: usize,
}

impl Default for DeployPolicy {
    fn default() -> Self {
        DeployPolicy {
            keys: Vec::new(),
            max_ttl_s: 3600,
            max_package_bytes: 4 << 20,
            max_modules: 32,
            cache_bytes: 32 << 20,
        }
    }
}

/// The categories a deploy key may deploy when its entry names none.
pub const DEFAULT_CATEGORIES: [Category; 2] = [Category::Function, Category::User];

/// Longest a request may stay valid (its expiry at most this far ahead).
pub const MAX_REQUEST_VALIDITY: Duration = Duration::from_secs(3600);

/// Why a node refused a request (each counted under `deploy/<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The node accepts no deployments (no `[[deploy.key]]`).
    Disabled,
    /// The signer is not among the node's deploy keys.
    UnknownKey,
    /// Too many failed signature checks from this neighbor lately.
    Throttled,
    /// The signature does not verify.
    BadSignature,
    /// The request's expiry has passed.
    Expired,
    /// The request's expiry is further ahead than a request may be valid.
    TooLong,
    /// This request (nonce) was seen before.
    Replayed,
    /// The soft-state lifetime asked for is longer than the policy allows (or zero).
    BadTtl,
    /// The package is larger than the policy allows.
    TooLarge,
    /// The key may not deploy modules of the package's category.
    NotPermitted,
    /// The node is at its limit of deployed modules or pending requests.
    Busy,
    /// A module of that name was installed here by the node's operator.
    LocalModule,
    /// The request says it comes from another node than the one that injected it.
    WrongOrigin,
}

impl Refusal {
    /// Every reason.
    pub const ALL: [Refusal; 13] = [
        Refusal::Disabled,
        Refusal::UnknownKey,
        Refusal::Throttled,
        Refusal::BadSignature,
        Refusal::Expired,
        Refusal::TooLong,
        Refusal::Replayed,
        Refusal::BadTtl,
        Refusal::TooLarge,
        Refusal::NotPermitted,
        Refusal::Busy,
        Refusal::LocalModule,
        Refusal::WrongOrigin,
    ];

    /// The short name (counter, JSON).
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Disabled => "disabled",
            Refusal::UnknownKey => "unknown_key",
            Refusal::Throttled => "throttled",
            Refusal::BadSignature => "bad_signature",
            Refusal::Expired => "expired",
            Refusal::TooLong => "too_long",
            Refusal::Replayed => "replayed",
            Refusal::BadTtl => "bad_ttl",
            Refusal::TooLarge => "too_large",
            Refusal::NotPermitted => "not_permitted",
            Refusal::Busy => "busy",
            Refusal::LocalModule => "local_module",
            Refusal::WrongOrigin => "wrong_origin",
        }
    }

    /// What it means, for the result's reason.
    pub fn explain(self) -> &'static str {
        match self {
            Refusal::Disabled => {
                "this node accepts no deployments (no [[deploy.key]] in its config)"
            }
            Refusal::UnknownKey => "the signing key is not one of this node's [[deploy.key]]",
            Refusal::Throttled => "too many bad signatures from this neighbor lately",
            Refusal::BadSignature => "the signature does not verify",
            Refusal::Expired => "the request has expired (check the clocks)",
            Refusal::TooLong => "the request's expiry is more than an hour ahead",
            Refusal::Replayed => "this request was seen before",
            Refusal::BadTtl => "the lifetime (ttl) is zero or longer than this node's max_ttl_s",
            Refusal::TooLarge => "the package is larger than this node's max_package_bytes",
            Refusal::NotPermitted => "the key may not deploy modules of this category here",
            Refusal::Busy => "this node is at its limit of deployed modules or pending requests",
            Refusal::LocalModule => {
                "a module of this name was installed here by the operator; deploy does not replace it"
            }
            Refusal::WrongOrigin => "the request names another node as its origin",
        }
    }
}

/// Maps the node's monotonic time to Unix time (request expiries are wall-clock times).
/// The driver makes it: real nodes from the system clock at start ([`UnixClock::system`]),
/// the emulator from a fixed epoch at the node's first use of it ([`UnixClock::lazy`]: every
/// emulated node starts at virtual time zero), so the node logic never reads a clock.
#[derive(Debug, Clone, Copy)]
pub struct UnixClock {
    at: Option<Instant>,
    unix_ms: u64,
}

impl UnixClock {
    /// `at` is `unix_ms` ms after the Unix epoch.
    pub fn new(at: Instant, unix_ms: u64) -> UnixClock {
        UnixClock {
            at: Some(at),
            unix_ms,
        }
    }

    /// The first time asked about is `unix_ms`.
    pub fn lazy(unix_ms: u64) -> UnixClock {
        UnixClock { at: None, unix_ms }
    }

    /// The system clock now (for drivers).
    pub fn system() -> UnixClock {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        UnixClock::new(Instant::now(), unix_ms)
    }

    /// Unix time in ms at `now`.
    pub fn unix_ms(&mut self, now: Instant) -> u64 {
        let at = *self.at.get_or_insert(now);
        match now.checked_duration_since(at) {
            Some(d) => self.unix_ms.saturating_add(d.as_millis() as u64),
            None => self
                .unix_ms
                .saturating_sub(at.duration_since(now).as_millis() as u64),
        }
    }
}

/// Signs `req` with `key` (sets `signer` and `signature`).
pub fn sign(req: &mut Request, key: &SigningKey) -> Result<(), anode_wire::WireError> {
    req.signer = key.verifying_key().to_bytes();
    let msg = req.signed_bytes()?;
    req.signature = key.sign(&msg).to_bytes();
    Ok(())
}

/// Whether `req`'s signature verifies under its `signer`.
pub fn verify(req: &Request) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(&req.signer) else {
        return false;
    };
    let Ok(msg) = req.signed_bytes() else {
        return false;
    };
    key.verify_strict(&msg, &Signature::from_bytes(&req.signature))
        .is_ok()
}

impl DeployPolicy {
    /// The deploy key entry of `signer`.
    pub fn key(&self, signer: &[u8; 32]) -> Option<&DeployKey> {
        self.keys.iter().find(|k| &k.key == signer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_maps_both_ways() {
        let t0 = Instant::now();
        let mut c = UnixClock::new(t0, 1_000_000);
        assert_eq!(c.unix_ms(t0 + Duration::from_millis(250)), 1_000_250);
        if let Some(before) = t0.checked_sub(Duration::from_millis(100)) {
            assert_eq!(c.unix_ms(before), 999_900);
        }
        let mut l = UnixClock::lazy(5_000);
        assert_eq!(l.unix_ms(t0 + Duration::from_secs(9)), 5_000);
        assert_eq!(l.unix_ms(t0 + Duration::from_secs(10)), 6_000);
    }

    #[test]
    fn signatures_cover_the_request() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let mut r = Request {
            op: anode_wire::deploy::Op::Deploy,
            hop: 0,
            reply_port: 0,
            ttl_s: 10,
            pkg_len: 1,
            expires_unix_ms: 5,
            nonce: [1; 16],
            origin: anode_wire::addr::v4(198, 18, 0, 1, 1),
            target: anode_wire::addr::v4(198, 18, 0, 2, 1),
            pkg_hash: [0; 32],
            signer: [0; 32],
            signature: [0; 64],
            via: anode_wire::addr::v4(198, 18, 0, 1, 1),
            name: "null".into(),
            version: "1.0.0".into(),
            repo: String::new(),
        };
        sign(&mut r, &key).unwrap();
        assert!(verify(&r));
        r.hop = 4; // nodes change the hop and the via: still valid
        r.via = anode_wire::addr::v4(198, 18, 0, 9, 1);
        assert!(verify(&r));
        r.ttl_s = 11;
        assert!(!verify(&r));
        r.ttl_s = 10;
        r.repo = "http://198.18.0.9:8700".into(); // nor may anyone redirect the fetches
        assert!(!verify(&r));
        let names: std::collections::BTreeSet<_> = Refusal::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), Refusal::ALL.len());
    }
}
