//! # anode service modules
//!
//! Contract: Signed service modules: a package is installed only if its signature verifies
//! against a trusted key and its manifest checks; a faulting module is stopped, never the node.
//!
//! Signed, versioned WebAssembly modules installed, upgraded and removed while the node runs
//! (NetServ, Openet ORE, PLANet active extensions). See `docs/modules.md`.
//!
//! Layout:
//! - `manifest.rs`: the manifest (name, version, summary, kind, services, resources, filters,
//!   configuration schema);
//! - `package.rs`: the package file, publisher keys, signing and trust;
//! - `runtime.rs`: the wasmtime engine and the guest ABI (`anode_mod`);
//! - `files.rs`: modules' files (the `file_*` imports, quotas from the manifest);
//! - `host.rs`: [`ModuleHost`], lifecycle, service registry, the node's packet processors;
//! - `qdisc.rs`: [`WasmQdisc`], queue disciplines run by modules;
//! - `node.rs`: attaching the host to a node, queue disciplines on links;
//! - `route.rs`: routing-function modules as the PLAN and capsule EEs' routing functions;
//! - `builtin.rs`: the modules of `guest/modules/`, embedded.
//! - `deploy/`: deploying modules along a path (signed requests, soft state, packages fetched
//!   from the previous hop), the deployment service of Type ID `TYPE_DEPLOY`.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
#![forbid(unsafe_code)]

pub mod builtin;
pub mod deploy;
pub mod emu;
pub mod emu_deploy;
mod error;
pub mod files;
mod host;
mod manifest;
mod node;
mod package;
pub mod planet;
mod qdisc;
mod route;
mod runtime;
pub mod svg;

pub use error::ModuleError;
pub use host::{ModuleHost, ModuleInfo, Prepared, ServiceInfo, State};
pub use manifest::{
    Category, ConfigField, ConfigValues, FieldType, Filter, FilterKey, Kind, Manifest, Provides,
    Requires, Resources,
};
pub use node::{attach, attach_qdisc, host, host_mut};
pub use package::{Package, Trust, generate_key, parse_public, read_key, write_key};
pub use qdisc::WasmQdisc;
pub use route::sync_routes;
pub use runtime::{Code, IMPORT_MODULE, Instance, MAX_CLASSES, ModRuntime};
