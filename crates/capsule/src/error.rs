//! Errors of the capsule EE's API (per-capsule failures are counted drops, not errors).

use std::path::PathBuf;

/// An error from the runtime, the code cache or the EE's API.
#[derive(Debug, thiserror::Error)]
pub enum CapsuleError {
    /// wasmtime refused the engine configuration.
    #[error("cannot configure the WebAssembly engine: {0}")]
    Engine(String),
    /// The bytes are not a valid WebAssembly module, or wasmtime could not compile them.
    #[error("code object does not compile: {0}")]
    Compile(String),
    /// The module compiles but does not follow the capsule ABI.
    #[error("code object breaks ABI v{version}: {reason}", version = crate::abi::ABI_VERSION)]
    Abi {
        /// What is wrong.
        reason: String,
    },
    /// Instantiation (or the `init` export) failed.
    #[error("code object does not instantiate: {0}")]
    Instantiate(String),
    /// Every instance slot of the runtime's pooling allocator is taken.
    #[error("no free instance slot in the runtime's pool")]
    NoInstanceSlot,
    /// The code object is larger than the configured bound.
    #[error("code object is {len} bytes, more than the {max}-byte limit")]
    TooBig {
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The code cache directory could not be used.
    #[error("code cache {path}: {reason}")]
    Disk {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No such code object is held.
    #[error("no code object {0}")]
    NoSuchCode(String),
    /// A capsule could not be built.
    #[error("cannot build capsule: {0}")]
    Packet(String),
    /// A routing function cannot be registered under this name.
    #[error("routing function name {name:?}: {reason}")]
    RouteName {
        /// The name (cut to the longest allowed).
        name: String,
        /// Why.
        reason: String,
    },
}
