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
//!
//! [[route]]                    # optional static routes
//! dest = "127.0.0.1:4003"
//! via = "127.0.0.1:4002"       # must be a [[link]] peer
//! # metric = 1
//!
//! [control]
//! # socket = "/path/to/node.sock"   # default: see anode_ctl::path
//!
//! [capsule]
//! # cache_dir = "code"         # capsule code cache (relative to this file); default:
//! #                            # $XDG_STATE_HOME/anode/code-PORT (or ~/.local/state/...)
//!
//! [modules]                    # service modules: see `modules.rs`
//! # trusted_keys = ["HEX"]     # publisher keys; none: the node hosts no modules
//! # [[module]] package = "FILE.amod" (or repo, name, version), start, [module.config]
//!
//! [nodeos]                     # the EEs under the NodeOS: see `nodeos.rs`
//! # enabled = true, policy = "policies.toml", memory_bytes = 268435456,
//! # terminate = true, cpu_percent = 50
//! ```
//!
//! ## Contract
//! [`load`] / [`parse`] either return a [`NodeFile`] that `Node::new` accepts and whose links
//! and routes make sense together, or a [`ConfigFileError`] whose text is
//! `FILE:LINE:COL: what is wrong; how to fix it` — for syntax and type errors (from the TOML
//! parser's span) and for semantic ones (a link to itself, a route via a non-neighbor, timers
//! that do not fit together).

mod check;
mod locate;
pub mod modules;
pub mod nodeos;
mod raw;

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
    /// Static routes.
    pub routes: Vec<StaticRoute>,
    /// The control socket's path.
    pub socket: PathBuf,
    /// Where to serve Prometheus metrics (`[metrics] listen`, loopback only); `None`: off.
    pub metrics: Option<SocketAddr>,
    /// The capsule EE's disk code cache (`[capsule] cache_dir`).
    pub code_cache: PathBuf,
    /// Trusted publisher keys and startup service modules (`[modules]`, `[[module]]`).
    pub modules: modules::ModulesConfig,
    /// The EEs under the NodeOS: domains, policies, memory bound (`[nodeos]`).
    pub nodeos: nodeos::NodeOsFile,
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

pub use check::default_code_cache;

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
