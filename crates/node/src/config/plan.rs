//! `[plan]`: what the node's PLAN EE needs to know that no packet can tell it.
//!
//! ```toml
//! [plan]
//! trusted_keys = ["3b6a27bc..."]   # ed25519 public keys whose signatures authEval accepts
//!                                  # (none: authEval raises AuthFailed)
//! [plan.hosts]                     # the names getHostByName resolves (literal addresses
//! b = "127.0.0.1:4002"             # always resolve)
//! ```
//!
//! Contract: [`check`] accepts only keys that are ed25519 public keys (64 hex digits) and
//! names that are non-empty and free of blanks, each with a full `IP:PORT`; a problem names
//! the key and its line.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use anode_wire::NodeAddr;
use serde::Deserialize;
use toml::Spanned;

use super::check::{Problem, at, public_key};

/// `[plan]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlan {
    #[serde(default)]
    pub trusted_keys: Vec<Spanned<String>>,
    #[serde(default)]
    pub hosts: BTreeMap<String, Spanned<NodeAddr>>,
}

/// The checked `[plan]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanFile {
    /// ed25519 public keys `authEval` accepts signatures of.
    pub trusted_keys: Vec<[u8; 32]>,
    /// Names `getHostByName` resolves, in name order.
    pub hosts: Vec<(String, SocketAddr)>,
}

/// Checks `[plan]` (parsed from `text`).
pub(super) fn check(text: &str, raw: &RawPlan) -> Result<PlanFile, Problem> {
    let mut out = PlanFile::default();
    for k in &raw.trusted_keys {
        let key = public_key(
            text,
            k,
            "[plan] trusted key",
            "give the 64 hex digits of a public key (the BASE.pub file `anode keygen --out BASE` writes)",
        )?;
        out.trusted_keys.push(key.to_bytes());
    }
    for (name, a) in &raw.hosts {
        let written = text.get(a.span()).unwrap_or("").trim().trim_matches('"');
        if written.parse::<SocketAddr>().is_err() {
            return Err(at(
                text,
                a,
                format!("[plan.hosts] {name} = '{written}' has no port"),
                "write IP:PORT, e.g. \"127.0.0.1:4002\" (a host is a node's UDP socket)",
            ));
        }
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(at(
                text,
                a,
                format!("[plan.hosts] name {name:?} is empty or has blanks"),
                "name hosts with one word, e.g. b = \"127.0.0.1:4002\"",
            ));
        }
        out.hosts.push((name.clone(), a.get_ref().socket_addr()));
    }
    Ok(out)
}
