//! `[plan]`: what the node's PLAN EE needs to know that no packet can tell it.
//!
//! ```toml
//! [plan]
//! trusted_keys = ["3b6a27bc..."]   # ed25519 public keys whose signatures authEval accepts
//!                                  # (none: authEval raises AuthFailed)
//! state_file = "plan-state.json"  # the signers' replay windows, kept across restarts
//!                                  # (default: plan-PORT.json in the node's state directory)
//! [plan.hosts]                     # the names getHostByName resolves (literal addresses
//! b = "127.0.0.1:4002"             # always resolve)
//! ```
//!
//! Contract: [`check`] accepts only keys that are ed25519 public keys (64 hex digits) and
//! names that are non-empty and free of blanks, each with a full `IP:PORT`; a problem names
//! the key and its line.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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
    #[serde(default)]
    pub state_file: Option<Spanned<String>>,
}

/// The checked `[plan]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanFile {
    /// ed25519 public keys `authEval` accepts signatures of.
    pub trusted_keys: Vec<[u8; 32]>,
    /// Names `getHostByName` resolves, in name order.
    pub hosts: Vec<(String, SocketAddr)>,
    /// Where the PLAN EE's signers' replay windows are kept across restarts (written about
    /// once a second while they change, and at a clean stop; read and checked at start).
    pub state_file: PathBuf,
}

/// Checks `[plan]` (parsed from `text`).
pub(super) fn check(
    path: &Path,
    text: &str,
    raw: &RawPlan,
    port: u16,
) -> Result<PlanFile, Problem> {
    let mut out = PlanFile {
        state_file: super::check::state_path(
            path,
            text,
            raw.state_file.as_ref(),
            (
                "[plan] state_file is empty",
                "give a file name, or leave state_file out for the default",
            ),
            || super::check::default_state_dir(&format!("plan-{port}.json")),
        )?,
        ..PlanFile::default()
    };
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
