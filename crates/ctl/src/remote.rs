//! Remote management: control requests signed with an ed25519 key, sent over TCP to a node
//! that listens for them (`[remote] listen` in the node config; off by default).
//!
//! ## Wire format
//! The same line-delimited protocol as the Unix socket, except that every request line is an
//! [`Envelope`]: the request frame as a string, where it is for, a nonce, an expiry, the
//! signer's public key and the signature.
//!
//! ```text
//! > {"request":"{\"id\":1,\"op\":\"module_list\"}","to":"198.18.0.1:7100",
//!    "nonce":"9f2c...(32 hex)","expires":1795000000,"key":"3b6a...(64 hex)","sig":"...(128 hex)"}
//! < {"type":"reply","id":1,"result":{"kind":"modules",...}}
//! ```
//!
//! The signature covers [`signed_bytes`]: a domain tag, `to`, the nonce, the expiry and the
//! request text, NUL-separated. Replies are not signed or encrypted (the channel is plain
//! TCP): remote management authenticates who may act on a node, not what a listener sees.
//!
//! ## What the node checks, in order (see [`Refusal`])
//! The envelope parses; the key is one the node trusts; the peer has not sent too many bad
//! signatures lately (signature checks are the costly part); the signature verifies; `to` is the
//! address the connection arrived on (a request signed for one node does not work on
//! another); the expiry is in the future and at most the node's bound ahead (so a nonce
//! need only be remembered until then); the op may be done remotely at all
//! ([`Request::remote_class`]) and this key may do that class; last, the nonce was not seen
//! before (no replay; only requests that passed everything else are remembered).

use std::net::SocketAddr;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::Request;

/// The domain tag at the start of every signed message.
pub const DOMAIN: &[u8] = b"anode-remote-v1";
/// Bytes of a nonce.
pub const NONCE_LEN: usize = 16;
/// How long a request the client signs stays valid, by default.
pub const DEFAULT_TTL_S: u64 = 60;

/// A signed request, one JSON line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The request frame, exactly as signed.
    pub request: String,
    /// The node address (IP:port of its remote listener) the request is for.
    pub to: String,
    /// 32 hex digits, fresh for every request.
    pub nonce: String,
    /// Unix time (seconds) after which the node refuses the request.
    pub expires: u64,
    /// The signer's ed25519 public key, 64 hex digits.
    pub key: String,
    /// The signature over [`signed_bytes`], 128 hex digits.
    pub sig: String,
}

/// What a remote request may do, coarsest first; a key is granted a set of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteClass {
    /// Look: status, routes, neighbors, links, stats, domains, code and module listings.
    Read,
    /// Change: modules of the function and user categories (install, upgrade, start, stop,
    /// remove, call), the code cache, static routes, links up or down.
    Manage,
    /// With `manage`: also modules of the system and standard categories of the service
    /// hierarchy (queue disciplines, routing functions, the node's standard services) and
    /// link queue disciplines.
    System,
    /// Stop the node.
    Shutdown,
}

impl RemoteClass {
    /// The name used in config files and messages.
    pub fn name(self) -> &'static str {
        match self {
            RemoteClass::Read => "read",
            RemoteClass::Manage => "manage",
            RemoteClass::System => "system",
            RemoteClass::Shutdown => "shutdown",
        }
    }

    /// The class named `s`.
    pub fn parse(s: &str) -> Option<RemoteClass> {
        match s {
            "read" => Some(RemoteClass::Read),
            "manage" => Some(RemoteClass::Manage),
            "system" => Some(RemoteClass::System),
            "shutdown" => Some(RemoteClass::Shutdown),
            _ => None,
        }
    }
}

impl Request {
    /// The class a remote party needs for this request, or `None` when it is local only
    /// (the application ops: datagrams, ports, subscriptions, captures, injected packets;
    /// they stream to a long-lived local connection).
    pub fn remote_class(&self) -> Option<RemoteClass> {
        use Request as R;
        match self {
            R::Hello { .. }
            | R::Status
            | R::Routes
            | R::Neighbors
            | R::Links
            | R::Stats
            | R::Domains
            | R::Channels
            | R::CodeList
            | R::CodeShow { .. }
            | R::CodeState { .. }
            | R::ModuleList
            | R::ModuleEes
            | R::ModuleServices { .. }
            | R::ModuleDeployments
            | R::ModuleInfo { .. } => Some(RemoteClass::Read),
            R::AddRoute { .. }
            | R::SetLink { .. }
            | R::CodePut { .. }
            | R::CodeEvict { .. }
            | R::ModuleInstall { .. }
            | R::ModuleUpgrade { .. }
            | R::ModuleStart { .. }
            | R::ModuleStop { .. }
            | R::ModuleRemove { .. }
            | R::ModuleQdisc { .. }
            | R::ModuleCall { .. } => Some(RemoteClass::Manage),
            R::Shutdown => Some(RemoteClass::Shutdown),
            R::Send { .. }
            | R::Bind { .. }
            | R::Unbind { .. }
            | R::Subscribe
            | R::Capture { .. }
            | R::Inject { .. }
            | R::ModuleStage { .. }
            | R::Upgrade { .. }
            | R::BindApp { .. } => None,
        }
    }

    /// The request's `op` as it is written on the wire (`"module_list"`).
    pub fn op_name(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("op").and_then(|o| o.as_str()).map(str::to_string))
            .unwrap_or_default()
    }
}

/// Why a node refused a remote request (each reason has its own counter at the node).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The line is not an envelope.
    #[error(
        "not a signed request ({0}); remote requests are envelopes made by `anode --node HOST:PORT --key FILE`"
    )]
    Malformed(String),
    /// The key is not among the node's `[[remote.key]]`.
    #[error("key {0} is not trusted for remote management at this node")]
    UnknownKey(String),
    /// The signature does not verify with the key.
    #[error("the signature does not verify with key {0}")]
    BadSignature(String),
    /// Signed for another address.
    #[error("the request is for {to}, and this connection arrived at {here}")]
    WrongNode {
        /// The envelope's `to`.
        to: String,
        /// The address the connection arrived on.
        here: SocketAddr,
    },
    /// Past its expiry.
    #[error("the request expired {ago} s ago (check the clocks, or sign it again)")]
    Expired {
        /// Seconds since it expired.
        ago: u64,
    },
    /// An expiry further ahead than the node allows.
    #[error("the request is valid for {ttl} s, longer than this node's limit of {max} s")]
    TooLong {
        /// Seconds until the envelope's expiry.
        ttl: u64,
        /// The node's bound.
        max: u64,
    },
    /// The nonce was used before.
    #[error("nonce {0} was already used: a request is accepted once (replay refused)")]
    Replayed(String),
    /// The peer sent too many requests whose signatures failed lately: its requests are
    /// refused unchecked for a while.
    #[error(
        "too many requests with bad signatures from {0} lately: refused unchecked; wait a second"
    )]
    Throttled(std::net::IpAddr),
    /// The node remembers as many nonces as it may; it accepts more as they expire.
    #[error("too many recent remote requests to remember ({0}); try again shortly")]
    Busy(usize),
    /// The op cannot be done remotely.
    #[error("'{0}' is local only: use the node's control socket")]
    LocalOnly(String),
    /// The key lacks the class.
    #[error("key {key} may not '{op}' (needs '{class}' in its [[remote.key]] may)")]
    NotPermitted {
        /// The key's name at the node.
        key: String,
        /// The op.
        op: String,
        /// The class it needs.
        class: &'static str,
    },
}

impl Refusal {
    /// A short name, for counters and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Malformed(_) => "malformed",
            Refusal::UnknownKey(_) => "unknown_key",
            Refusal::BadSignature(_) => "bad_signature",
            Refusal::WrongNode { .. } => "wrong_node",
            Refusal::Expired { .. } => "expired",
            Refusal::TooLong { .. } => "too_long",
            Refusal::Replayed(_) => "replayed",
            Refusal::Throttled(_) => "throttled",
            Refusal::Busy(_) => "busy",
            Refusal::LocalOnly(_) => "local_only",
            Refusal::NotPermitted { .. } => "not_permitted",
        }
    }
}

/// Every [`Refusal::reason`], in counter order.
pub const REFUSAL_REASONS: [&str; 11] = [
    "malformed",
    "unknown_key",
    "throttled",
    "bad_signature",
    "wrong_node",
    "expired",
    "too_long",
    "replayed",
    "busy",
    "local_only",
    "not_permitted",
];

/// The bytes a remote request's signature covers.
pub fn signed_bytes(to: &str, nonce: &str, expires: u64, request: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(DOMAIN.len() + to.len() + nonce.len() + request.len() + 24);
    for part in [DOMAIN, to.as_bytes(), nonce.as_bytes()] {
        m.extend_from_slice(part);
        m.push(0);
    }
    m.extend_from_slice(expires.to_string().as_bytes());
    m.push(0);
    m.extend_from_slice(request.as_bytes());
    m
}

/// Signs `request` (a request frame's JSON) for the node listening at `to`; the result is
/// one envelope line without its newline.
pub fn seal(
    key: &SigningKey,
    to: SocketAddr,
    request: &str,
    nonce: [u8; NONCE_LEN],
    expires: u64,
) -> String {
    let to = to.to_string();
    let nonce = hex::encode(nonce);
    let sig = key.sign(&signed_bytes(&to, &nonce, expires, request));
    let env = Envelope {
        request: request.to_string(),
        to,
        nonce,
        expires,
        key: hex::encode(key.verifying_key().as_bytes()),
        sig: hex::encode(sig.to_bytes()),
    };
    serde_json::to_string(&env).unwrap_or_default()
}

/// An envelope whose fields parsed (nothing verified yet).
#[derive(Debug, Clone)]
pub struct Opened {
    /// The envelope.
    pub env: Envelope,
    /// Its key.
    pub key: VerifyingKey,
    /// Its nonce.
    pub nonce: [u8; NONCE_LEN],
    sig: Signature,
}

impl Opened {
    /// Parses `line` as an envelope; checks the shapes of its key, nonce and signature.
    pub fn parse(line: &str) -> Result<Opened, Refusal> {
        let env: Envelope =
            serde_json::from_str(line).map_err(|e| Refusal::Malformed(e.to_string()))?;
        let mut k = [0u8; 32];
        hex::decode_to_slice(&env.key, &mut k)
            .map_err(|e| Refusal::Malformed(format!("key: {e}")))?;
        let key =
            VerifyingKey::from_bytes(&k).map_err(|e| Refusal::Malformed(format!("key: {e}")))?;
        let mut nonce = [0u8; NONCE_LEN];
        hex::decode_to_slice(&env.nonce, &mut nonce)
            .map_err(|e| Refusal::Malformed(format!("nonce: {e}")))?;
        let mut s = [0u8; 64];
        hex::decode_to_slice(&env.sig, &mut s)
            .map_err(|e| Refusal::Malformed(format!("sig: {e}")))?;
        Ok(Opened {
            env,
            key,
            nonce,
            sig: Signature::from_bytes(&s),
        })
    }

    /// Checks the signature.
    pub fn verify(&self) -> Result<(), Refusal> {
        let e = &self.env;
        self.key
            .verify(
                &signed_bytes(&e.to, &e.nonce, e.expires, &e.request),
                &self.sig,
            )
            .map_err(|_| Refusal::BadSignature(short_key(&self.key)))
    }
}

/// The first 16 hex digits of a key, as logs and messages name it.
pub fn short_key(k: &VerifyingKey) -> String {
    hex::encode(k.as_bytes()).chars().take(16).collect()
}

/// How a client signs its requests to a remote node.
#[derive(Debug, Clone)]
pub struct RemoteSigner {
    /// The signing key.
    pub key: SigningKey,
    /// The node's remote listener, as connected to.
    pub to: SocketAddr,
    /// Validity of each request, in seconds.
    pub ttl_s: u64,
}

impl RemoteSigner {
    /// `request` sealed with a fresh nonce, valid for `ttl_s` from `now_unix`.
    pub fn seal(&self, request: &str, now_unix: u64) -> String {
        let nonce: [u8; NONCE_LEN] = rand::random();
        seal(
            &self.key,
            self.to,
            request,
            nonce,
            now_unix.saturating_add(self.ttl_s),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> SigningKey {
        SigningKey::from_bytes(&[b; 32])
    }

    const TO: &str = "198.18.0.1:7100";

    /// A status request sealed by key 1 for TO, nonce 7s, expiring at 99.
    fn sealed_status() -> String {
        seal(
            &key(1),
            TO.parse().unwrap(),
            r#"{"id":1,"op":"status"}"#,
            [7; 16],
            99,
        )
    }

    #[test]
    fn a_sealed_request_opens_and_verifies() {
        let line = sealed_status();
        let o = Opened::parse(&line).unwrap();
        o.verify().unwrap();
        assert_eq!(o.env.to, TO);
        assert_eq!(o.env.expires, 99);
        assert_eq!(o.nonce, [7; 16]);
        assert_eq!(o.key, key(1).verifying_key());
    }

    #[test]
    fn any_changed_field_breaks_the_signature() {
        let line = sealed_status();
        let env: Envelope = serde_json::from_str(&line).unwrap();
        let edits: [fn(&mut Envelope); 4] = [
            |e| e.request = r#"{"id":1,"op":"shutdown"}"#.into(),
            |e| e.to = "198.18.0.2:7100".into(),
            |e| e.nonce = hex::encode([8u8; 16]),
            |e| e.expires += 1,
        ];
        for edit in edits {
            let mut e = env.clone();
            edit(&mut e);
            let o = Opened::parse(&serde_json::to_string(&e).unwrap()).unwrap();
            assert_eq!(o.verify().unwrap_err().reason(), "bad_signature");
        }
        // Another key's signature over the same bytes.
        let mut e = env.clone();
        e.key = hex::encode(key(2).verifying_key().as_bytes());
        let o = Opened::parse(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(o.verify().unwrap_err().reason(), "bad_signature");
    }

    #[test]
    fn malformed_envelopes_are_refused_with_a_reason() {
        for bad in [
            "",
            "not json",
            r#"{"id":1,"op":"status"}"#,
            r#"{"request":"x","to":"a","nonce":"zz","expires":1,"key":"00","sig":"00"}"#,
        ] {
            let e = Opened::parse(bad).unwrap_err();
            assert_eq!(e.reason(), "malformed", "{bad}: {e}");
        }
    }

    #[test]
    fn every_op_has_a_class_and_app_ops_are_local() {
        let status: Request = serde_json::from_str(r#"{"op":"status"}"#).unwrap();
        assert_eq!(status.remote_class(), Some(RemoteClass::Read));
        let bind: Request = serde_json::from_str(r#"{"op":"bind","port":7}"#).unwrap();
        assert_eq!(bind.remote_class(), None);
        let stop: Request = serde_json::from_str(r#"{"op":"shutdown"}"#).unwrap();
        assert_eq!(stop.remote_class(), Some(RemoteClass::Shutdown));
        assert_eq!(stop.op_name(), "shutdown");
        let list: Request = serde_json::from_str(r#"{"op":"module_list"}"#).unwrap();
        assert_eq!(list.op_name(), "module_list");
        for c in [
            RemoteClass::Read,
            RemoteClass::Manage,
            RemoteClass::Shutdown,
        ] {
            assert_eq!(RemoteClass::parse(c.name()), Some(c));
        }
    }

    #[test]
    fn every_refusal_reason_is_listed_once() {
        let all = [
            Refusal::Malformed(String::new()),
            Refusal::UnknownKey(String::new()),
            Refusal::Throttled(std::net::Ipv4Addr::LOCALHOST.into()),
            Refusal::BadSignature(String::new()),
            Refusal::WrongNode {
                to: String::new(),
                here: TO.parse().unwrap(),
            },
            Refusal::Expired { ago: 0 },
            Refusal::TooLong { ttl: 0, max: 0 },
            Refusal::Replayed(String::new()),
            Refusal::Busy(0),
            Refusal::LocalOnly(String::new()),
            Refusal::NotPermitted {
                key: String::new(),
                op: String::new(),
                class: "",
            },
        ];
        let names: Vec<&str> = all.iter().map(Refusal::reason).collect();
        assert_eq!(names, REFUSAL_REASONS);
    }
}
