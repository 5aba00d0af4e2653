//! The `anode node` config file (TOML).
//!
//! ```toml
//! [node]
//! address = "127.0.0.1:4001"   # this node's UDP address (what peers send to)
//! # bind = "0.0.0.0:4001"      # the socket's address, if it differs (default: address)
//! # default_rb = 32            # hop budget of packets this node originates
//!
//! [routing]                    # optional; every key has a default
//! hello_interval_ms = 1000
//! dead_interval_ms = 3500      # must exceed hello_interval_ms
//!
//! [[link]]                     # one per neighbor
//! name = "to-b"
//! peer = "127.0.0.1:4002"      # the neighbor's [node] address
//! # mtu = 1472, cost = 1, static = false (up without hellos)
//! # impair = { delay_ms = 5, loss = 0.01, rate_mbps = 100, queue_bytes = 65536 }
//! #                            # an emulated link in the UDP driver: see `impair.rs`
//!
//! [[route]]                    # optional static routes
//! dest = "127.0.0.1:4003"
//! via = "127.0.0.1:4002"       # must be a [[link]] peer
//! # metric = 1
//!
//! [control]
//! # socket = "/path/to/node.sock"   # default: see anode_ctl::path
//! # max_connections = 256      # more are refused with a message
//! # idle_timeout_s = 300       # a connection waiting for nothing is closed after this
//!
//! [capsule]
//! # cache_dir = "code"         # capsule code cache (relative to this file); default:
//! #                            # $XDG_STATE_HOME/anode/code-PORT (or ~/.local/state/...)
//! # cache_max_bytes = 268435456  # disk cache bound; least recently used code goes first
//! # max_code_bytes = 1048576   # largest code object loaded or installed (1 KiB - 64 MiB)
//! # file_quota_bytes = 1048576 # each code object's files (ABI v2), bytes in all (<= 64 MiB)
//! # file_quota_count = 64      # ... and how many (<= 4096)
//! # file_max_bytes = 262144    # ... and bytes of one file (<= file_quota_bytes, 16 MiB)
//! # workers = 1                # threads running capsules, the node thread included (1 - 64);
//! #                            # more than 1: capsules of different code run in parallel
//!
//! [modules]                    # service modules: see `modules.rs`
//! # trusted_keys = ["HEX"]     # publisher keys; none: the node hosts no modules
//! # [[module]] package = "FILE.amod" (or repo, name, version), start, [module.config]
//!
//! [nodeos]                     # the EEs under the NodeOS: see `nodeos.rs`
//! # enabled = true, policy = "policies.toml", memory_bytes = 268435456,
//! # terminate = true, cpu_percent = 50
//!
//! [dataplane]
//! # mode = "auto"              # passive transit forwarded in the kernel (eBPF at TC ingress)
//! #                            # where it loads, else sockets; "tc": kernel or fail; "socket"
//! # udp_offload = true         # runs of datagrams to one peer sent as one (UDP_SEGMENT),
//! #                            # coalesced receives taken (UDP_GRO)
//! # busy_poll_us = 0           # poll the socket without sleeping this long after the last
//! #                            # packet (lower latency, a CPU spinning while idle; <= 1000000)
//!
//! [remote]                     # remote management, off unless listen is set: see `remote.rs`
//! # listen = "198.18.0.1:7100" # TCP; [[remote.key]] key = "HEX", may = ["read", "manage"]
//!
//! [deploy]                     # modules deployed along a path: see `deploy.rs`
//! # [[deploy.key]] key = "HEX", categories = ["function", "user"]
//!
//! [plan]                       # the PLAN EE: see `plan.rs`
//! # trusted_keys = ["HEX"]     # keys whose signed chunks authEval runs
//! # [plan.hosts] b = "127.0.0.1:4002"   # names getHostByName resolves
//! ```
//!
//! ## Contract
//! [`load`] / [`parse`] either return a [`NodeFile`] that `Node::new` accepts and whose links
//! and routes make sense together, or a [`ConfigFileError`] whose text is
//! `FILE:LINE:COL: what is wrong; how to fix it` — for syntax and type errors (from the TOML
//! parser's span) and for semantic ones (a link to itself, a route via a non-neighbor, timers
//! that do not fit together).

mod check;
pub mod deploy;
pub mod impair;
mod locate;
pub mod modules;
pub mod nodeos;
pub mod plan;
mod raw;
pub mod remote;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anode_core::{LinkConfig, NodeConfig};
use anode_wire::NodeAddr;

/// A checked node config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFile {
    /// The file it came from.
    pub path: PathBuf,
    /// The node's configuration.
    pub node: NodeConfig,
    /// The UDP address to bind.
    pub bind: SocketAddr,
    /// Links, in order (link ids follow this order).
    pub links: Vec<LinkConfig>,
    /// Emulated egress of the links that have `impair` (`[[link]] impair`), in link order.
    pub impairments: Vec<impair::LinkImpairment>,
    /// Static routes.
    pub routes: Vec<StaticRoute>,
    /// The control socket's path.
    pub socket: PathBuf,
    /// The control server's bounds (`[control] max_connections`, `idle_timeout_s`).
    pub control: crate::control::Limits,
    /// Where to serve Prometheus metrics (`[metrics] listen`, loopback only); `None`: off.
    pub metrics: Option<SocketAddr>,
    /// The capsule EE's disk code cache (`[capsule] cache_dir`).
    pub code_cache: PathBuf,
    /// The disk code cache's bound in bytes (`[capsule] cache_max_bytes`).
    pub code_cache_max_bytes: u64,
    /// The largest code object the capsule EE loads or installs (`[capsule] max_code_bytes`).
    pub code_max_bytes: u32,
    /// Each code object's files (`[capsule] file_quota_bytes`, `file_quota_count`,
    /// `file_max_bytes`).
    pub capsule_files: anode_capsule::files::FileLimits,
    /// Threads that run capsules, the node thread included (`[capsule] workers`).
    pub capsule_workers: usize,
    /// Trusted publisher keys and startup service modules (`[modules]`, `[[module]]`).
    pub modules: modules::ModulesConfig,
    /// The EEs under the NodeOS: domains, policies, memory bound (`[nodeos]`).
    pub nodeos: nodeos::NodeOsFile,
    /// The PLAN EE's trusted keys and host names (`[plan]`).
    pub plan: plan::PlanFile,
    /// Where passive transit is forwarded (`[dataplane] mode`; default auto).
    pub dataplane: anode_io::KernelTransit,
    /// UDP segmentation and receive offload on the node's socket (`[dataplane]
    /// udp_offload`; default on).
    pub udp_offload: bool,
    /// Busy polling of the node's socket (`[dataplane] busy_poll_us`; default 0: off).
    pub busy_poll: std::time::Duration,
    /// Remote management (`[remote]`); `None`: off.
    pub remote: Option<crate::control::RemoteConfig>,
    /// Who may deploy modules here along a path, and the limits (`[deploy]`).
    pub deploy: anode_modules::deploy::DeployPolicy,
}

/// A static route from the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticRoute {
    /// Destination.
    pub dest: NodeAddr,
    /// Next hop (a link peer).
    pub via: NodeAddr,
    /// Metric.
    pub metric: u16,
}

/// The default bound of the disk code cache (256 MiB).
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 256 << 20;

/// Why a config file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error(
        "{}: cannot read the node config ({source}); check the path, or start from examples/node-a.toml",
        .path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file says something wrong at a place.
    #[error("{}:{line}:{col}: {what}; {fix}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// What is wrong.
        what: String,
        /// How to fix it.
        fix: String,
    },
}

pub use check::{default_code_cache, default_state_dir};

/// Checks a `[nodeos]` table written in another config file (the router's `[node.nodeos]`):
/// the same keys and rules as a node file's, positions in `text` (the whole file at `path`).
pub fn check_nodeos(
    path: &Path,
    text: &str,
    raw: &nodeos::RawNodeOs,
) -> Result<nodeos::NodeOsFile, ConfigFileError> {
    nodeos::check(path, text, raw).map_err(|p| ConfigFileError::Invalid {
        path: path.to_path_buf(),
        line: p.pos.line,
        col: p.pos.col,
        what: p.what,
        fix: p.fix,
    })
}

/// Reads and checks the file at `path`.
pub fn load(path: &Path) -> Result<NodeFile, ConfigFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// Checks `text`, read from `path` (used in messages and to resolve a relative socket path).
pub fn parse(path: &Path, text: &str) -> Result<NodeFile, ConfigFileError> {
    let raw: raw::RawFile = toml::from_str(text).map_err(|e| {
        let pos = locate::pos_of(text, e.span().map_or(0, |s| s.start));
        let (what, fix) = locate::explain_toml_error(e.message());
        ConfigFileError::Invalid {
            path: path.to_path_buf(),
            line: pos.line,
            col: pos.col,
            what,
            fix,
        }
    })?;
    check::check(path, text, raw).map_err(|p| ConfigFileError::Invalid {
        path: path.to_path_buf(),
        line: p.pos.line,
        col: p.pos.col,
        what: p.what,
        fix: p.fix,
    })
}

#[cfg(test)]
mod tests;

/// Checks that the directories the node will need can be used: the code cache and the
/// control socket's directory exist and are writable, or can be created (their nearest
/// existing ancestor is a writable directory). Creates nothing. `Err` names the directory,
/// the setting and why.
pub fn check_dirs(file: &NodeFile) -> Result<(), String> {
    let socket_dir = file.socket.parent().unwrap_or(Path::new("."));
    for (dir, setting) in [
        (file.code_cache.as_path(), "[capsule] cache_dir"),
        (socket_dir, "[control] socket"),
    ] {
        writable_or_creatable(dir).map_err(|why| {
            format!(
                "{}: {} {} {why}; set {setting} to a writable place",
                file.path.display(),
                setting,
                dir.display()
            )
        })?;
    }
    Ok(())
}

/// `Ok` if `dir` is a writable directory, or does not exist and its nearest existing
/// ancestor is one.
fn writable_or_creatable(dir: &Path) -> Result<(), String> {
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => return Err(format!("cannot be a directory: {} is a file", at.display())),
            Err(_) => match at.parent() {
                Some(p) if !p.as_os_str().is_empty() => at = p,
                _ => return Err("has no existing parent directory".into()),
            },
        }
    }
    let probe = at.join(format!(".anode-check-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) if at == dir => Err(format!("is not writable ({e})")),
        Err(e) => Err(format!(
            "would be created in {}, which is not writable ({e})",
            at.display()
        )),
    }
}
