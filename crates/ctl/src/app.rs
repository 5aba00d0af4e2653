//! Types of the application-library ops (PAN's PAL over the control socket): injecting ANEP
//! packets, binding a Type ID's application port, and the capsule code cache.
//!
//! Contract: these are additive to protocol version 1. Code objects are named by the
//! lowercase hex SHA-256 of their WebAssembly bytes (64 characters).

use serde::{Deserialize, Serialize};

/// One code object of the node's capsule code cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeEntry {
    /// SHA-256 of the module, lowercase hex.
    pub hash: String,
    /// The protocol's name, from the module's `anode.name` section ("" if it has none).
    #[serde(default)]
    pub name: String,
    /// Module size, bytes.
    pub wasm_len: u64,
    /// Bytes it holds in the memory cache (0 if only on disk).
    pub mem_bytes: u64,
    /// In the memory cache.
    pub in_memory: bool,
    /// Has a live instance.
    pub live: bool,
    /// In the disk cache.
    pub on_disk: bool,
}

/// One soft-state entry of a code object (`anode code state`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateEntry {
    /// The key.
    pub key: crate::Payload,
    /// The value.
    pub value: crate::Payload,
    /// Milliseconds until it expires.
    pub expires_in_ms: u64,
}

/// Why a code name does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a code name: give the 64 hex digits of its SHA-256 (see `anode code list`)")]
pub struct BadCodeName(pub String);

/// Parses a code name (64 hex digits).
pub fn parse_code_name(s: &str) -> Result<[u8; 32], BadCodeName> {
    let s = s.trim();
    let mut out = [0u8; 32];
    if s.len() != 64 || !s.is_ascii() {
        return Err(BadCodeName(s.to_string()));
    }
    for (i, o) in out.iter_mut().enumerate() {
        let b = s
            .get(2 * i..2 * i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .ok_or_else(|| BadCodeName(s.to_string()))?;
        *o = b;
    }
    Ok(out)
}

/// Writes a code name.
pub fn code_name(h: &[u8; 32]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_names_round_trip_and_reject_garbage() {
        let h: [u8; 32] = std::array::from_fn(|i| i as u8 * 7);
        assert_eq!(parse_code_name(&code_name(&h)).unwrap(), h);
        assert!(parse_code_name("abc").is_err());
        assert!(parse_code_name(&"zz".repeat(32)).is_err());
        assert!(parse_code_name(&"é".repeat(32)).is_err());
    }

    #[test]
    fn new_ops_on_the_wire() {
        use crate::{Request, parse_request};
        let f = parse_request(r#"{"id":4,"op":"inject","packet":"00ff"}"#).unwrap();
        assert_eq!(
            f.request,
            Request::Inject {
                packet: vec![0, 255].into(),
                logs: false,
                count: 1,
                partial: false
            }
        );
        let f = parse_request(r#"{"id":5,"op":"bind_app","type_id":3,"port":7}"#).unwrap();
        assert_eq!(
            f.request,
            Request::BindApp {
                type_id: 3,
                port: 7
            }
        );
        for (line, req) in [
            (r#"{"id":1,"op":"code_list"}"#, Request::CodeList),
            (
                r#"{"id":1,"op":"code_evict","hash":"ab"}"#,
                Request::CodeEvict { hash: "ab".into() },
            ),
        ] {
            assert_eq!(parse_request(line).unwrap().request, req);
        }
        let e = parse_request(r#"{"id":6,"op":"inject"}"#).unwrap_err();
        assert_eq!(e.0, Some(6));
        assert!(e.1.contains("packet"), "{}", e.1);
    }
}
