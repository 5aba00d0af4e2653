//! # anode capsule execution environment
//!
//! Capsules (ANEP Type ID `TYPE_CAPSULE`) carry the name of a code object: the SHA-256 of a
//! WebAssembly module. Every node a capsule passes (it normally carries the transit flag
//! `FLAG_EVAL_EVERY_HOP`) runs that module's `accept` export on it, inside wasmtime with a fuel
//! budget and a memory limit (PAN §III, ANTS). A node lacking the code parks the capsule and
//! demand-loads the code from the previous hop in MTU-sized chunks, verifies its hash,
//! compiles it, caches it in memory and on disk, and serves it to its own neighbors.
//!
//! Layout:
//! - `abi.rs`: the guest ABI v1 constants (normative text: `ABI.md`);
//! - `runtime.rs`: engines (Winch and Cranelift tiers), pooling allocator, compilation and ABI
//!   check, instances;
//! - `worker.rs`: the code worker thread: tier-ups, and new code built off the node thread
//!   (the EE's half: `ee/build.rs`);
//! - `host.rs`: the node interface as host imports;
//! - `softstate.rs`: per-code-object soft state with TTL and byte budgets;
//! - `cache.rs`: memory LRU and disk cache of compiled code;
//! - `loader.rs`: demand loading with retries and bounds;
//! - `ee.rs`: [`CapsuleEe`], the `ExecutionEnvironment`;
//! - `route.rs`: named routing functions capsules ask for with `forward_by`;
//! - `report.rs`: [`RunReport`]s, the fuel each run of guest code used and how it ended;
//! - `packet.rs`: building capsules for applications;
//! - `protocols.rs`: the protocols of `guest/`, built by `build.rs` and embedded.
//!
//! Contract: network input and guest code are hostile. No input bytes and no guest behavior
//! make the node panic, block, or exceed the configured CPU, memory and state bounds; every
//! capsule that is not forwarded or delivered is counted with a reason.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod abi;
mod cache;
mod ee;
mod error;
pub mod files;
mod host;
mod loader;
mod packet;
pub mod protocols;
mod report;
mod route;
mod runtime;
mod serve;
mod softstate;
mod worker;

pub use anode_wire::capsule::CodeHash;

/// The NodeOS principal (domain name) of a capsule protocol: `capsule/<SHA-256 hex of its
/// code>`. The NodeOS guard names the protocol's domain so, and cut-through channels the code
/// opens are owned by it.
pub fn principal_of_code(code: &CodeHash) -> String {
    format!("capsule/{}", hex::encode(code))
}
/// A code object's module bytes from a file: WebAssembly as it is, or WebAssembly text
/// (`.wat`, or any file not starting with the wasm magic), assembled. For tools: `anode code
/// put`, `anode capsule send --code`, the benchmark's blaster.
pub fn read_code_file(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.starts_with(b"\0asm") {
        return Ok(bytes);
    }
    wat::parse_bytes(&bytes)
        .map(std::borrow::Cow::into_owned)
        .map_err(|e| {
            format!(
                "{} is neither WebAssembly nor WebAssembly text: {e}",
                path.display()
            )
        })
}

pub use cache::{DiskCache, DiskStats};
pub use ee::{
    BuiltCode, CapsuleConfig, CapsuleEe, CapsuleStats, CodeInfo, CodeInstaller, CodeListing,
    MAX_BATCH,
};
pub use error::CapsuleError;
pub use loader::LoaderConfig;
pub use packet::capsule_packet;
pub use report::{RunOutcome, RunReport};
pub use route::CapsuleRouteFn;
pub use runtime::{
    CodeObject, CodeTier, Runtime, RuntimeConfig, Tiering, code_hash, protocol_name,
};
pub use serve::ServeConfig;
pub use softstate::{PutError, SoftEntry, SoftState};

/// Application ports code objects may deliver to.
pub type PortTable = std::collections::HashSet<u16>;
