//! The WebAssembly runtime plumbing that the capsule EE (`anode-capsule`) and service modules
//! (`anode-modules`) share; each keeps its own host imports, ABI checks and instance types.
//!
//! Contract: wasmtime plumbing shared by the capsule EE and modules: a guest-memory range is
//! checked before it is touched; a store never grows past its limits.
//!
//! - [`engine`]: the wasmtime [`Config`](wasmtime::Config) every anode engine starts from
//!   (pooling instance allocator, fuel metering, Cranelift at speed); a crate adds its own
//!   settings on top (the capsule EE chooses the compiler per tier).
//! - [`Limits`]: the resource limiter every store carries. A memory or table growth past the
//!   bound fails the growth with an error (so the guest traps) and records that it did, which
//!   tells a limit trap from other traps.
//! - [`fuel`]: the fuel a host import charges for copying guest data.
//! - [`mem`]: checked ranges of guest linear memory and the copies between it and host
//!   buffers. Guest pointers and lengths are hostile `i32`s: a negative, overflowing or
//!   out-of-range one yields `None` / [`OutOfBounds`](mem::OutOfBounds), never a panic and
//!   never a partial copy.
//!
//! No `unsafe` here.

pub mod engine;
pub mod fuel;
mod limits;
pub mod mem;

pub use engine::Pool;
pub use limits::Limits;
