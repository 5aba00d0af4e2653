//! The service packages of the PLAN guide (§7.2: install, port, resident, RIP, arp, flow,
//! dns, auth, frag, reliable, csum) as anode provides them. The stored guide names the
//! packages but not their routines; the names and types below are anode's, chosen after the
//! PLAN 2.x Java guide where it describes a package, and listed in `docs/plan.md`.
//!
//! | package | routines | where |
//! |---|---|---|
//! | port | `openPort : int -> port` | builtin |
//! | resident | `put : (string, key, 'a, int) -> unit`, `get : (string, key) -> 'a`, `delete : (string, key) -> unit`, `generateKey : void -> key` | here |
//! | RIP | `RIPGetRoutes : void -> (host * host * int) list` (destination, next hop, metric; routes to other nodes) | here |
//! | arp | `arpInstall : (host, dev) -> unit`, `arpLookup : host -> dev`; the resolution itself is the PLAN program `programs/arp.plan` | here |
//! | flow | `flowRoute`, `queueLength`, `getMark`, `setMark`, `newFlowId`, `installFlow` | [`super::route`], [`super::scout`] |
//! | dns | `getHostByName : string -> host` (the node's name table, then literal addresses) | core |
//! | auth | `authEval : ('a chunk, key, blob) -> 'a`, `keyFromHex`, `blobFromHex`, `blobToHex` | builtin; keys: [`super::PlanEe::set_trusted_keys`] |
//! | frag | `fragment`, `fragPiece` | builtin |
//! | reliable | `RetransOnRemote` acknowledged and retransmitted; `retransDeliver`, `retransAck` | [`super::reliable`] |
//! | csum | `checksum : blob -> int` (RFC 1071) | builtin |
//! | install | `installService` — **not provided**: programs naming it are refused with why | here |
//!
//! Contract: [`install`] registers every routine of every package anode provides and the
//! refusal of those it does not; `PlanEe::new` calls it, so every node, `anode plan run` and
//! `anode plan check` see the same services. Resident data is bounded (entries, bytes per
//! value and in total) and expires (at most [`ResidentStore::MAX_TTL`]); `get` of a value
//! whose type differs from the one its caller needs raises `ServiceError` (the checker puts a
//! run-time check on every such call).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anode_core::LinkId;
use anode_core::wire::NodeAddr;

use super::services::ServiceEnv;
use super::{PlanEe, reliable, scout};
use crate::Value;
use crate::marshal::encode_value;
use crate::services::ServiceError;

/// A resident value: the value, its size in bytes (marshalled, with its name and key), and
/// when it expires.
type Resident = (Value, usize, Instant);

/// Resident data: values left on the node under (name, key), each until its timeout.
#[derive(Debug, Default)]
pub struct ResidentStore {
    map: HashMap<(Vec<u8>, Vec<u8>), Resident>,
    bytes: usize,
}

impl ResidentStore {
    /// Longest a value stays (the PLAN 2.x guide: "may not exceed 5 minutes").
    pub const MAX_TTL: Duration = Duration::from_secs(300);
    /// Most entries.
    pub const MAX_ENTRIES: usize = 4096;
    /// Largest value (marshalled).
    pub const MAX_VALUE_BYTES: usize = 64 * 1024;
    /// Most bytes over all values (marshalled).
    pub const MAX_BYTES: usize = 4 * 1024 * 1024;

    fn purge(&mut self, now: Instant) {
        let mut freed = 0;
        self.map.retain(|_, (_, n, exp)| {
            let live = *exp > now;
            if !live {
                freed += *n;
            }
            live
        });
        self.bytes = self.bytes.saturating_sub(freed);
    }

    /// Stores `v` under (`name`, `key`) for `ttl` (capped at [`Self::MAX_TTL`]).
    pub fn put(
        &mut self,
        name: &[u8],
        key: &[u8],
        v: Value,
        ttl: Duration,
        now: Instant,
    ) -> Result<(), ServiceError> {
        let size = encode_value(&v).len() + name.len() + key.len();
        if size > Self::MAX_VALUE_BYTES {
            return Err(full(format!(
                "put: the value is {size} bytes; the limit is {}",
                Self::MAX_VALUE_BYTES
            )));
        }
        let k = (name.to_vec(), key.to_vec());
        if let Some((_, old, _)) = self.map.remove(&k) {
            self.bytes = self.bytes.saturating_sub(old);
        }
        if self.map.len() >= Self::MAX_ENTRIES || self.bytes + size > Self::MAX_BYTES {
            self.purge(now);
            if self.map.len() >= Self::MAX_ENTRIES || self.bytes + size > Self::MAX_BYTES {
                return Err(full("put: the resident data table is full".into()));
            }
        }
        self.bytes += size;
        self.map.insert(k, (v, size, now + ttl.min(Self::MAX_TTL)));
        Ok(())
    }

    /// Every live value: (name, key, value, time left), for a handover.
    pub(crate) fn export(&self, now: Instant) -> Vec<(Vec<u8>, Vec<u8>, Value, Duration)> {
        let mut v: Vec<_> = self
            .map
            .iter()
            .filter(|(_, (_, _, exp))| *exp > now)
            .map(|((n, k), (v, _, exp))| (n.clone(), k.clone(), v.clone(), *exp - now))
            .collect();
        v.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        v
    }

    /// The live value under (`name`, `key`).
    pub fn get(&self, name: &[u8], key: &[u8], now: Instant) -> Option<&Value> {
        self.map
            .get(&(name.to_vec(), key.to_vec()))
            .filter(|(_, _, exp)| *exp > now)
            .map(|(v, _, _)| v)
    }

    /// Removes the value under (`name`, `key`); whether there was one.
    pub fn delete(&mut self, name: &[u8], key: &[u8]) -> bool {
        match self.map.remove(&(name.to_vec(), key.to_vec())) {
            Some((_, n, _)) => {
                self.bytes = self.bytes.saturating_sub(n);
                true
            }
            None => false,
        }
    }

    /// Number of entries (live or not yet purged).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

fn full(msg: String) -> ServiceError {
    ServiceError::new("ServiceError", msg)
}

fn bad(name: &str) -> ServiceError {
    ServiceError::new("ServiceError", format!("{name}: bad arguments"))
}

fn name_key<'v>(a: &'v [Value], what: &str) -> Result<(&'v [u8], &'v [u8]), ServiceError> {
    match (a.first(), a.get(1)) {
        (Some(Value::Str(n)), Some(Value::Key(k))) => Ok((n, k)),
        _ => Err(bad(what)),
    }
}

fn put(env: &mut ServiceEnv<'_, '_>, a: &[Value]) -> Result<Value, ServiceError> {
    let (name, key) = name_key(a, "put")?;
    let (Some(v), Some(Value::Int(secs))) = (a.get(2), a.get(3)) else {
        return Err(bad("put"));
    };
    let ttl = Duration::from_secs(u64::try_from(*secs).map_err(|_| {
        ServiceError::new("ServiceError", format!("put: timeout {secs} is negative"))
    })?);
    let now = env.ctx.now();
    env.state.resident.put(name, key, v.clone(), ttl, now)?;
    Ok(Value::Unit)
}

fn get(env: &mut ServiceEnv<'_, '_>, a: &[Value]) -> Result<Value, ServiceError> {
    let (name, key) = name_key(a, "get")?;
    let now = env.ctx.now();
    env.state
        .resident
        .get(name, key, now)
        .cloned()
        .ok_or_else(|| {
            ServiceError::new(
                "NotFound",
                format!(
                    "get: no resident data {:?} under this key",
                    String::from_utf8_lossy(name)
                ),
            )
        })
}

fn delete(env: &mut ServiceEnv<'_, '_>, a: &[Value]) -> Result<Value, ServiceError> {
    let (name, key) = name_key(a, "delete")?;
    env.state.resident.delete(name, key);
    Ok(Value::Unit)
}

/// A fresh key: SHA-256 of the node's key seed and a counter, so keys are unique to the
/// node and cannot be guessed without the seed ([`PlanEe::set_key_seed`]).
fn generate_key(env: &mut ServiceEnv<'_, '_>, _a: &[Value]) -> Result<Value, ServiceError> {
    let st = &mut *env.state;
    st.next_key = st.next_key.wrapping_add(1);
    let mut m = st.key_seed.to_vec();
    m.extend_from_slice(&st.next_key.to_be_bytes());
    m.extend_from_slice(&env.ctx.address().to_bytes());
    let h = crate::program::sha256(&m);
    Ok(Value::Key(std::sync::Arc::from(&h[..16])))
}

fn rip_routes(env: &mut ServiceEnv<'_, '_>, _a: &[Value]) -> Result<Value, ServiceError> {
    let mut out = Vec::new();
    let me = env.ctx.address();
    for (dest, metric, hop) in env.ctx.routes().into_iter().filter(|r| r.0 != me) {
        let next = hop.map_or(dest, |h| h.addr);
        let t = Value::tuple(vec![
            Value::Host(dest.socket_addr()),
            Value::Host(next.socket_addr()),
            Value::Int(i64::from(metric)),
        ])
        .map_err(|e| full(e.to_string()))?;
        out.push(t);
    }
    Value::list(out).map_err(|e| full(e.to_string()))
}

pub(crate) const ARP: &str = "arp";
/// How long a binding learned by the PLAN resolution program stays.
pub const ARP_TTL: Duration = Duration::from_secs(60);

fn arp_install(env: &mut ServiceEnv<'_, '_>, a: &[Value]) -> Result<Value, ServiceError> {
    let (Some(h @ Value::Host(addr)), Some(d @ Value::Dev(dev))) = (a.first(), a.get(1)) else {
        return Err(bad("arpInstall"));
    };
    let on_link = env
        .ctx
        .neighbors()
        .iter()
        .any(|n| n.link == LinkId(*dev) && n.addr == NodeAddr::from(*addr));
    if !on_link {
        return Err(ServiceError::new(
            "NotANeighbor",
            format!("arpInstall: {addr} is not the neighbor on device {dev}"),
        ));
    }
    let now = env.ctx.now();
    if env.state.soft.set(ARP, h, d.clone(), ARP_TTL, now) {
        Ok(Value::Unit)
    } else {
        Err(full("arpInstall: soft state is full".into()))
    }
}

fn arp_lookup(env: &mut ServiceEnv<'_, '_>, a: &[Value]) -> Result<Value, ServiceError> {
    let Some(h @ Value::Host(addr)) = a.first() else {
        return Err(bad("arpLookup"));
    };
    let now = env.ctx.now();
    env.state.soft.get(ARP, h, now).cloned().ok_or_else(|| {
        ServiceError::new(
            "NotFound",
            format!("arpLookup: {addr} has not been resolved (run the arp program)"),
        )
    })
}

/// Installs the packages anode provides on `ee`, and the refusals of the routines it does
/// not provide. Names already registered keep their first registration (the core registry
/// never defines these names, so this does not happen).
pub fn install(ee: &mut PlanEe) {
    let _ = scout::install(ee);
    let _ = reliable::install(ee);
    type Svc = fn(&mut ServiceEnv<'_, '_>, &[Value]) -> Result<Value, ServiceError>;
    let table: [(&str, &str, Svc); 7] = [
        ("put", "(string, key, 'a, int) -> unit", put),
        ("get", "(string, key) -> 'a", get),
        ("delete", "(string, key) -> unit", delete),
        ("generateKey", "void -> key", generate_key),
        (
            "RIPGetRoutes",
            "void -> (host * host * int) list",
            rip_routes,
        ),
        ("arpInstall", "(host, dev) -> unit", arp_install),
        ("arpLookup", "host -> dev", arp_lookup),
    ];
    for (name, sig, f) in table {
        let _ = ee.register_service(name, sig, Box::new(f));
    }
    ee.refuse(
        "installService",
        "install",
        "anode installs node code only as signed service modules (`anode module install`, \
         kind plan-service for PLAN services); a PLAN packet cannot install code",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_store_is_bounded_and_expires() {
        let now = Instant::now();
        let mut r = ResidentStore::default();
        r.put(b"n", b"k", Value::Int(1), Duration::from_secs(1), now)
            .unwrap();
        assert_eq!(r.get(b"n", b"k", now), Some(&Value::Int(1)));
        assert_eq!(r.get(b"n", b"other", now), None);
        assert_eq!(r.get(b"n", b"k", now + Duration::from_secs(2)), None);
        let big = Value::str(&"x".repeat(ResidentStore::MAX_VALUE_BYTES));
        assert!(r.put(b"n", b"k", big, Duration::from_secs(1), now).is_err());
        // A long timeout is capped.
        r.put(b"m", b"k", Value::Unit, Duration::from_secs(9999), now)
            .unwrap();
        assert_eq!(r.get(b"m", b"k", now + ResidentStore::MAX_TTL), None);
        assert!(r.delete(b"m", b"k"));
        assert_eq!(r.len(), 1);
    }
}
