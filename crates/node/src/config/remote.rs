//! `[remote]`: remote management, off unless `listen` is set.
//!
//! ```toml
//! [remote]
//! listen = "198.18.0.1:7100"   # TCP address for signed control requests
//! # max_ttl_s = 300            # longest validity a request may claim (1 to 3600)
//! # max_connections = 16       # remote connections at once (the local socket has its own)
//!
//! [[remote.key]]               # one per key allowed to act; none: nothing is accepted
//! key = "3b6a27bc..."          # ed25519 public key (BASE.pub of `anode keygen --out BASE`)
//! name = "ops"                 # in the node's log (default: the key's first 16 hex digits)
//! may = ["read", "manage"]     # read: look; manage: function and user modules, code,
//!                              # routes, links; system: also system and standard modules
//!                              # and link queue disciplines; shutdown: stop the node
//! ```
//!
//! Clients sign with the matching secret key: `anode --node 198.18.0.1:7100 --key BASE.key
//! module list`. See `anode_ctl::remote` for the wire format and the checks.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use anode_ctl::remote::{RemoteClass, short_key};
use serde::Deserialize;
use toml::Spanned;

use super::check::{Problem, at, public_key};
use crate::control::{
    REMOTE_MAX_CONNECTIONS, REMOTE_MAX_NONCES, REMOTE_MAX_TTL_S, RemoteConfig, RemoteKey,
};

/// `[remote]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRemote {
    pub listen: Option<Spanned<String>>,
    pub max_ttl_s: Option<Spanned<u64>>,
    pub max_connections: Option<Spanned<usize>>,
    #[serde(default)]
    pub key: Vec<RawRemoteKey>,
}

/// `[[remote.key]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRemoteKey {
    pub key: Spanned<String>,
    pub name: Option<String>,
    pub may: Spanned<Vec<String>>,
}

/// Checks `[remote]` (parsed from `text`): `None` when remote management is off.
pub(super) fn check(text: &str, raw: &RawRemote) -> Result<Option<RemoteConfig>, Problem> {
    let Some(listen) = &raw.listen else {
        if let Some(k) = raw.key.first() {
            return Err(at(
                text,
                &k.key,
                "[[remote.key]] is given but remote management is off".into(),
                "add [remote] listen = \"IP:PORT\" to accept signed requests, or remove the keys",
            ));
        }
        return Ok(None);
    };
    let addr: SocketAddr = listen.get_ref().trim().parse().map_err(|e| {
        at(
            text,
            listen,
            format!(
                "[remote] listen '{}' is not IP:PORT ({e})",
                listen.get_ref()
            ),
            "give the TCP address to accept signed requests on, e.g. \"198.18.0.1:7100\"",
        )
    })?;
    if addr.port() == 0 {
        return Err(at(
            text,
            listen,
            "[remote] listen has port 0".into(),
            "give a fixed port: clients sign requests for it",
        ));
    }
    if raw.key.is_empty() {
        return Err(at(
            text,
            listen,
            "[remote] listen is set but no [[remote.key]] may act".into(),
            "add [[remote.key]] key = \"HEX\" (BASE.pub of `anode keygen --out BASE`) and may = [\"read\"]",
        ));
    }
    let max_ttl_s = match &raw.max_ttl_s {
        None => REMOTE_MAX_TTL_S,
        Some(t) if (1..=3600).contains(t.get_ref()) => *t.get_ref(),
        Some(t) => {
            return Err(at(
                text,
                t,
                format!("[remote] max_ttl_s = {} is out of range", t.get_ref()),
                "give 1 to 3600 seconds (a nonce is remembered that long)",
            ));
        }
    };
    let max_connections = match &raw.max_connections {
        None => REMOTE_MAX_CONNECTIONS,
        Some(n) if (1..=1024).contains(n.get_ref()) => *n.get_ref(),
        Some(n) => {
            return Err(at(
                text,
                n,
                format!("[remote] max_connections = {} is out of range", n.get_ref()),
                "give 1 to 1024",
            ));
        }
    };
    let mut keys: Vec<RemoteKey> = Vec::new();
    for k in &raw.key {
        let key = check_key(text, k)?;
        if keys.iter().any(|o| o.key == key.key) {
            return Err(at(
                text,
                &k.key,
                format!(
                    "key {} is listed twice in [[remote.key]]",
                    short_key(&key.key)
                ),
                "give each key once, with every class it may use",
            ));
        }
        keys.push(key);
    }
    Ok(Some(RemoteConfig {
        listen: addr,
        keys,
        max_ttl_s,
        max_nonces: REMOTE_MAX_NONCES,
        max_connections,
    }))
}

fn check_key(text: &str, k: &RawRemoteKey) -> Result<RemoteKey, Problem> {
    let key = public_key(
        text,
        &k.key,
        "[[remote.key]]",
        "give the 64 hex digits of the BASE.pub file `anode keygen --out BASE` writes",
    )?;
    let mut may = BTreeSet::new();
    for c in k.may.get_ref() {
        let Some(class) = RemoteClass::parse(c) else {
            return Err(at(
                text,
                &k.may,
                format!("[[remote.key]] may has '{c}', which is not a class"),
                "use \"read\", \"manage\", \"system\" and \"shutdown\"",
            ));
        };
        may.insert(class);
    }
    if may.is_empty() {
        return Err(at(
            text,
            &k.may,
            "[[remote.key]] may is empty: the key could do nothing".into(),
            "give at least may = [\"read\"], or remove the key",
        ));
    }
    Ok(RemoteKey {
        name: k.name.clone().unwrap_or_else(|| short_key(&key)),
        key,
        may,
    })
}
