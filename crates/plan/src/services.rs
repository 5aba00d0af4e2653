//! Service routines: the run-time registry of their names and types, and
//! the [`Services`] trait through which the evaluator reaches the node.
//!
//! Contract for node integrators:
//! * build one [`ServiceRegistry`] (start from [`ServiceRegistry::with_core`])
//!   and register extension services with [`ServiceRegistry::register`]
//!   giving their PLAN type, e.g. `"(host, int) -> unit"`; programs are
//!   type-checked against it;
//! * implement [`Services`] for the node; the evaluator calls it for every
//!   node-touching routine and for every extension service. Methods must
//!   not block for long: they run inside packet evaluation. Failures are
//!   reported as [`ServiceError`]s naming a PLAN exception, which the PLAN
//!   program may `handle`;
//! * the registry is append-only: a name, once registered, keeps its type,
//!   so programs compiled against it (and cached) stay valid.

use crate::builtins::{BUILTIN_EXCEPTIONS, BUILTINS};
use crate::check::scheme_of_type_text;
use crate::host::parse_host;
use crate::ir::SvcTarget;
use crate::types::Scheme;
use crate::value::{Chunk, Dev, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use thiserror::Error;

/// A failure inside a service routine, surfaced to PLAN as an exception.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{exn}: {msg}")]
pub struct ServiceError {
    /// Name of the PLAN exception to raise (e.g. `NoRoute`).
    pub exn: String,
    /// Human-readable detail.
    pub msg: String,
}

impl ServiceError {
    /// Builds an error raising exception `exn`.
    pub fn new(exn: impl Into<String>, msg: impl Into<String>) -> Self {
        ServiceError {
            exn: exn.into(),
            msg: msg.into(),
        }
    }
}

/// Errors when registering services.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RegistryError {
    /// The name is already registered (the registry is append-only).
    #[error("service `{0}` is already registered")]
    Duplicate(String),
    /// The type signature does not parse or is not well-formed.
    #[error("bad type signature for service `{name}`: {reason}")]
    BadSignature {
        /// Service name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The name is not a valid PLAN identifier.
    #[error("`{0}` is not a valid PLAN identifier")]
    BadName(String),
}

/// A registered service.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceEntry {
    /// Name.
    pub name: Arc<str>,
    /// Type scheme.
    pub scheme: Scheme,
    /// How calls are dispatched.
    pub target: SvcTarget,
}

/// A routine of a PLAN service package that this node does not provide, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The package (guide §7.2) the routine belongs to.
    pub package: String,
    /// Why it is not provided, and what to use instead.
    pub reason: String,
}

/// Names and types of the services available on a node.
#[derive(Clone, Debug, Default)]
pub struct ServiceRegistry {
    entries: Vec<ServiceEntry>,
    by_name: HashMap<Arc<str>, usize>,
    exceptions: Vec<String>,
    extensions: u32,
    refused: HashMap<String, Refusal>,
}

fn valid_ident(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '\'')
        && !crate::lexer::KEYWORDS.contains(&s)
}

impl ServiceRegistry {
    /// An empty registry (no services at all).
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry holding the core services and exceptions of this crate.
    pub fn with_core() -> Self {
        let mut r = Self::new();
        for (name, sig, b) in BUILTINS {
            // The builtin table is static and covered by tests; a bad entry
            // is skipped rather than panicking.
            if let Ok(scheme) = scheme_of_type_text(sig) {
                r.insert(name, scheme, SvcTarget::Builtin(*b));
            }
        }
        for e in BUILTIN_EXCEPTIONS {
            r.exceptions.push((*e).to_string());
        }
        r
    }

    fn insert(&mut self, name: &str, scheme: Scheme, target: SvcTarget) -> usize {
        let name: Arc<str> = Arc::from(name);
        self.entries.push(ServiceEntry {
            name: name.clone(),
            scheme,
            target,
        });
        let idx = self.entries.len() - 1;
        self.by_name.insert(name, idx);
        idx
    }

    /// Registers an extension service with the given PLAN type (e.g.
    /// `"(host, int) -> unit"` or `"void -> int"`); calls are dispatched
    /// to [`Services::call`] with the returned id.
    pub fn register(&mut self, name: &str, signature: &str) -> Result<u32, RegistryError> {
        if !valid_ident(name) {
            return Err(RegistryError::BadName(name.to_string()));
        }
        if self.by_name.contains_key(name) {
            return Err(RegistryError::Duplicate(name.to_string()));
        }
        let scheme = scheme_of_type_text(signature).map_err(|e| RegistryError::BadSignature {
            name: name.to_string(),
            reason: e,
        })?;
        let id = self.extensions;
        self.extensions += 1;
        self.insert(name, scheme, SvcTarget::Extension(id));
        Ok(id)
    }

    /// Registers an exception name that services may raise.
    pub fn register_exception(&mut self, name: &str) -> Result<(), RegistryError> {
        if !valid_ident(name) {
            return Err(RegistryError::BadName(name.to_string()));
        }
        if !self.exceptions.iter().any(|e| e == name) {
            self.exceptions.push(name.to_string());
        }
        Ok(())
    }

    /// Records that routine `name` of PLAN package `package` is not provided here, and why:
    /// programs declaring or calling it are refused with that reason instead of failing at
    /// run time. A name that is registered as a service stays provided.
    pub fn refuse(&mut self, name: &str, package: &str, reason: &str) {
        self.refused.insert(
            name.to_string(),
            Refusal {
                package: package.to_string(),
                reason: reason.to_string(),
            },
        );
    }

    /// Why routine `name` is not provided, if it is a refused package routine.
    pub fn refusal(&self, name: &str) -> Option<&Refusal> {
        if self.by_name.contains_key(name) {
            return None;
        }
        self.refused.get(name)
    }

    /// Looks a service up by name.
    pub fn lookup(&self, name: &str) -> Option<&ServiceEntry> {
        self.by_name.get(name).and_then(|i| self.entries.get(*i))
    }

    /// Whether `name` is a known exception.
    pub fn is_exception(&self, name: &str) -> bool {
        self.exceptions.iter().any(|e| e == name)
    }

    /// All registered services.
    pub fn entries(&self) -> &[ServiceEntry] {
        &self.entries
    }
}

/// How an outgoing packet was requested.
#[derive(Clone, Debug, PartialEq)]
pub enum SendKind {
    /// `OnRemote`: route to the destination with `route_fun`.
    Remote {
        /// Routing function name for the packet header.
        route_fun: Arc<str>,
    },
    /// `OnNeighbor`: send directly to an adjacent node.
    Neighbor {
        /// Interface to use, if the program named one.
        dev: Option<Dev>,
    },
    /// `RetransOnRemote`: like `Remote`, retransmitted until acknowledged.
    Retrans {
        /// Routing function name.
        route_fun: Arc<str>,
        /// Number of retransmissions requested.
        retries: i64,
        /// Retransmission timeout requested (milliseconds).
        timeout_ms: i64,
    },
}

/// A packet the program asked the node to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Outgoing {
    /// Which primitive.
    pub kind: SendKind,
    /// Evaluation destination.
    pub dest: SocketAddr,
    /// Resource bound donated to the child packet.
    pub rb: u32,
    /// The chunk to evaluate there.
    pub chunk: Arc<Chunk>,
}

/// The node side of service routines. See the module documentation.
pub trait Services {
    /// `thisHost()`: the addresses of this node's interfaces.
    fn this_host(&mut self) -> Vec<SocketAddr>;

    /// `thisHostIs(h)`: whether `h` names this node.
    fn this_host_is(&mut self, h: &SocketAddr) -> bool {
        self.this_host().contains(h)
    }

    /// `getNeighbors()`: adjacent nodes and the interface to reach each.
    fn get_neighbors(&mut self) -> Vec<(SocketAddr, Dev)>;

    /// `defaultRoute(h)`: next hop and interface towards `h`.
    fn default_route(&mut self, dest: &SocketAddr) -> Result<(SocketAddr, Dev), ServiceError>;

    /// `OnRemote` / `OnNeighbor` / `RetransOnRemote`: send a child packet.
    /// The resource bound has already been deducted from the current packet.
    fn send(&mut self, out: Outgoing) -> Result<(), ServiceError>;

    /// `print(v)`: output for the packet's host application.
    fn print(&mut self, text: &str);

    /// `deliver(port, v)`: hand a value to a host application.
    fn deliver(&mut self, port: u32, value: &Value) -> Result<(), ServiceError> {
        let _ = (port, value);
        Err(ServiceError::new(
            "ServiceError",
            "deliver: this node has no host applications",
        ))
    }

    /// `getHostByName(s)`: resolve a name. The default accepts only
    /// literal addresses (`1.2.3.4[:port]`, `[v6]:port`).
    fn get_host_by_name(&mut self, name: &str) -> Result<SocketAddr, ServiceError> {
        parse_host(name).ok_or_else(|| {
            ServiceError::new(
                "UnknownHost",
                format!("getHostByName: cannot resolve {name:?}"),
            )
        })
    }

    /// `fragPiece(id, index, total, data)`: store one fragment of a
    /// marshalled chunk; returns the whole marshalled chunk once all
    /// `total` pieces of `id` have arrived. [`Reassembler`] implements the
    /// bookkeeping.
    fn reassemble(
        &mut self,
        id: i64,
        index: i64,
        total: i64,
        data: &[u8],
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        let _ = (id, index, total, data);
        Err(ServiceError::new(
            "FragmentError",
            "this node does not reassemble fragments",
        ))
    }

    /// `retransDeliver(sender, id, c)` at the destination: acknowledges `id` to `sender`
    /// and says whether this is the first time (sender, id) arrived (then `c` is evaluated).
    /// The default evaluates every copy and acknowledges nothing.
    fn retrans_deliver(&mut self, sender: &SocketAddr, id: i64) -> Result<bool, ServiceError> {
        let _ = (sender, id);
        Ok(true)
    }

    /// `retransAck(id)` at the sender: the packet `id` arrived; stop retransmitting it.
    fn retrans_acked(&mut self, id: i64) {
        let _ = id;
    }

    /// `authEval`: succeeds if `sig` is a signature of `msg` (a marshalled chunk) by public
    /// key `key` and this node trusts that key. The default trusts no key.
    fn authenticate(&mut self, key: &[u8], sig: &[u8], msg: &[u8]) -> Result<(), ServiceError> {
        let _ = (key, sig, msg);
        Err(ServiceError::new(
            "AuthFailed",
            "authEval: this node trusts no PLAN keys",
        ))
    }

    /// A service registered with [`ServiceRegistry::register`] (`id` is the
    /// value it returned). Arguments have the registered types.
    fn call(&mut self, id: u32, name: &str, args: &[Value]) -> Result<Value, ServiceError> {
        let _ = (id, args);
        Err(ServiceError::new(
            "UnknownService",
            format!("service `{name}` is not implemented on this node"),
        ))
    }
}

/// Announced piece count and the pieces received so far.
type PieceSet = (i64, Vec<Option<Vec<u8>>>);

/// Bookkeeping for `fragPiece`: collects fragments per id, bounded in the
/// number of pending ids and bytes.
#[derive(Debug, Default)]
pub struct Reassembler {
    pending: HashMap<i64, PieceSet>,
    bytes: usize,
}

impl Reassembler {
    /// Maximum number of fragment sets kept at once.
    pub const MAX_PENDING: usize = 64;
    /// Maximum number of fragments per set.
    pub const MAX_PIECES: i64 = 4096;
    /// Maximum bytes buffered over all sets.
    pub const MAX_BYTES: usize = 1 << 22;

    /// Adds a piece; returns the concatenation once complete.
    pub fn add(
        &mut self,
        id: i64,
        index: i64,
        total: i64,
        data: &[u8],
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        if !(1..=Self::MAX_PIECES).contains(&total) || !(0..total).contains(&index) {
            return Err(ServiceError::new(
                "FragmentError",
                format!("fragment {index} of {total} is out of range"),
            ));
        }
        if !self.pending.contains_key(&id) && self.pending.len() >= Self::MAX_PENDING {
            return Err(ServiceError::new(
                "FragmentError",
                "too many pending fragment sets",
            ));
        }
        if self.bytes + data.len() > Self::MAX_BYTES {
            return Err(ServiceError::new("FragmentError", "reassembly buffer full"));
        }
        let slots = usize::try_from(total).unwrap_or(1);
        let entry = self
            .pending
            .entry(id)
            .or_insert_with(|| (total, vec![None; slots]));
        if entry.0 != total {
            return Err(ServiceError::new(
                "FragmentError",
                format!(
                    "fragment set {id} announced {} pieces, now {total}",
                    entry.0
                ),
            ));
        }
        let Some(slot) = entry.1.get_mut(usize::try_from(index).unwrap_or(0)) else {
            return Err(ServiceError::new(
                "FragmentError",
                "fragment index out of range",
            ));
        };
        if slot.is_none() {
            self.bytes += data.len();
            *slot = Some(data.to_vec());
        }
        if entry.1.iter().all(Option::is_some) {
            let (_, pieces) = self.pending.remove(&id).unwrap_or_default();
            let whole: Vec<u8> = pieces.into_iter().flatten().flatten().collect();
            self.bytes = self.bytes.saturating_sub(whole.len());
            return Ok(Some(whole));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_registry_has_every_builtin() {
        let r = ServiceRegistry::with_core();
        for (name, _, _) in BUILTINS {
            assert!(r.lookup(name).is_some(), "{name}");
        }
        assert_eq!(
            r.lookup("defaultRoute").unwrap().scheme.to_string(),
            "host -> host * dev"
        );
        assert!(r.is_exception("NotEnoughRB"));
    }

    #[test]
    fn register_extension() {
        let mut r = ServiceRegistry::with_core();
        let id = r.register("queueLength", "dev -> int").unwrap();
        assert_eq!(
            r.lookup("queueLength").unwrap().target,
            SvcTarget::Extension(id)
        );
        assert!(matches!(
            r.register("queueLength", "dev -> int"),
            Err(RegistryError::Duplicate(_))
        ));
        assert!(matches!(
            r.register("bad", "int ->"),
            Err(RegistryError::BadSignature { .. })
        ));
        assert!(matches!(
            r.register("if", "int"),
            Err(RegistryError::BadName(_))
        ));
    }

    #[test]
    fn reassembler() {
        let mut r = Reassembler::default();
        assert_eq!(r.add(7, 1, 2, b"def").unwrap(), None);
        assert_eq!(r.add(7, 0, 2, b"abc").unwrap(), Some(b"abcdef".to_vec()));
        assert!(r.add(8, 3, 2, b"x").is_err());
    }
}
