//! [`NodeBuilder`]: a node with its links, static routes, execution environments and service
//! modules, from a config file ([`NodeBuilder::from_file`]) or set up in code (the emulator,
//! the benchmark forwarder, tests).
//!
//! Order of assembly (the same for every program): `Node::new` with the node's config, the
//! links in order (link ids follow it), the static routes, the EEs ([`crate::ees`]: PLAN and
//! capsules, under the NodeOS unless it is off), capsule code objects to pre-install, then
//! the service modules (`[modules]` of the file, [`crate::modules::setup_node`], and
//! built-in ones signed with a throwaway key the node trusts). A step that fails stops the
//! build with a [`BuildError`] that names the file and the setting to change.

use std::time::Instant;

use anode_core::{LinkConfig, Node, NodeConfig};
use anode_wire::NodeAddr;

use crate::config::NodeFile;
pub use crate::ees::EeOptions;
use crate::ees::{self, EeSetupError};

/// Why a node could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `Node::new` refused the node's config.
    #[error("{file}: {reason}")]
    Node {
        /// The config file (or what stood for it).
        file: String,
        /// Why.
        reason: String,
    },
    /// The capsule EE could not start (its runtime or disk cache).
    #[error("{source} (capsule code cache {cache}; set [capsule] cache_dir in {file})")]
    Capsule {
        /// The config file.
        file: String,
        /// The cache directory.
        cache: String,
        /// Why.
        source: EeSetupError,
    },
    /// The NodeOS refused an EE's own policy.
    #[error("{source} ([nodeos] in {file}, policy file {policy})")]
    NodeOs {
        /// The config file.
        file: String,
        /// The policy file, or "none".
        policy: String,
        /// Why.
        source: EeSetupError,
    },
    /// A pre-installed capsule code object was refused.
    #[error("cannot pre-install a capsule code object: {0}")]
    Code(String),
    /// A capsule code object was given but the node runs no capsule EE.
    #[error("capsule code to pre-install, but the node runs no EEs; give it EeOptions")]
    NoCapsuleEe,
    /// A service module could not be set up (the message names the entry and the fix).
    #[error("{0}")]
    Modules(String),
}

/// A node to build; see the module docs for the order of assembly.
#[derive(Debug, Clone)]
pub struct NodeBuilder {
    config: NodeConfig,
    origin: String,
    links: Vec<LinkConfig>,
    routes: Vec<(NodeAddr, NodeAddr, u16)>,
    ees: Option<EeOptions>,
    code: Vec<Vec<u8>>,
    file: Option<NodeFile>,
    builtin_modules: Vec<String>,
}

impl NodeBuilder {
    /// A node with `config`, no links, routes, EEs or modules yet.
    pub fn new(config: NodeConfig) -> NodeBuilder {
        NodeBuilder {
            origin: format!("node {}", config.address),
            config,
            links: Vec::new(),
            routes: Vec::new(),
            ees: None,
            code: Vec::new(),
            file: None,
            builtin_modules: Vec::new(),
        }
    }

    /// The node a config file describes: its links, static routes, both EEs with the file's
    /// code cache and `[nodeos]`, and its `[modules]`.
    pub fn from_file(file: &NodeFile) -> NodeBuilder {
        let mut b = NodeBuilder::new(file.node.clone())
            .ees(EeOptions {
                cache_dir: Some(file.code_cache.clone()),
                cache_max_bytes: file.code_cache_max_bytes,
                max_code_bytes: file.code_max_bytes,
                files: file.capsule_files,
                workers: file.capsule_workers,
                runtime: None,
                nodeos: file.nodeos.clone(),
                plan: file.plan.clone(),
                plan_key_seed: os_random_seed(),
            })
            .links(file.links.iter().cloned());
        for r in &file.routes {
            b = b.route(r.dest, r.via, r.metric);
        }
        b.origin = file.path.display().to_string();
        b.file = Some(file.clone());
        b
    }

    /// Adds a link (its id is its position among the links).
    pub fn link(mut self, link: LinkConfig) -> NodeBuilder {
        self.links.push(link);
        self
    }

    /// Adds a link to a builder held in place; returns the id the link will have.
    pub fn push_link(&mut self, link: LinkConfig) -> anode_core::LinkId {
        self.links.push(link);
        anode_core::LinkId(self.links.len() as u32 - 1)
    }

    /// Adds links in order.
    pub fn links(mut self, links: impl IntoIterator<Item = LinkConfig>) -> NodeBuilder {
        self.links.extend(links);
        self
    }

    /// Adds a static route to `dest` via the link peer `via`.
    pub fn route(mut self, dest: NodeAddr, via: NodeAddr, metric: u16) -> NodeBuilder {
        self.routes.push((dest, via, metric));
        self
    }

    /// Runs the PLAN and capsule EEs with `opts`.
    pub fn ees(mut self, opts: EeOptions) -> NodeBuilder {
        self.ees = Some(opts);
        self
    }

    /// Pre-installs a capsule code object (needs [`NodeBuilder::ees`]).
    pub fn capsule_code(mut self, wasm: Vec<u8>) -> NodeBuilder {
        self.code.push(wasm);
        self
    }

    /// Installs and starts the built-in service module `name` (`anode_modules::builtin`),
    /// signed with a throwaway key the node trusts.
    pub fn builtin_module(mut self, name: &str) -> NodeBuilder {
        self.builtin_modules.push(name.to_string());
        self
    }

    /// The node's configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// Builds the node at time `now`.
    pub fn build(self, now: Instant) -> Result<Node, BuildError> {
        let mut node = Node::new(self.config.clone(), now).map_err(|e| BuildError::Node {
            file: self.origin.clone(),
            reason: e.to_string(),
        })?;
        for l in &self.links {
            node.add_link(l.clone(), now);
        }
        for &(dest, via, metric) in &self.routes {
            node.add_static_route(dest, via, metric, now);
        }
        self.assemble(&mut node)?;
        Ok(node)
    }

    /// Puts this builder's EEs, code and modules on a node that already exists (the
    /// emulator makes its nodes and links itself).
    pub fn assemble(&self, node: &mut Node) -> Result<(), BuildError> {
        if let Some(opts) = &self.ees {
            ees::register_with(node, opts).map_err(|e| self.ee_error(opts, e))?;
        }
        if !self.code.is_empty() {
            let ee = ees::capsule_ee(node).ok_or(BuildError::NoCapsuleEe)?;
            for wasm in &self.code {
                ee.install(wasm)
                    .map_err(|e| BuildError::Code(e.to_string()))?;
            }
        }
        if let Some(file) = &self.file {
            crate::modules::setup_node(node, file).map_err(BuildError::Modules)?;
        }
        for name in &self.builtin_modules {
            crate::modules::install_builtin(node, name).map_err(BuildError::Modules)?;
        }
        Ok(())
    }

    fn ee_error(&self, opts: &EeOptions, source: EeSetupError) -> BuildError {
        let file = self.origin.clone();
        match source {
            EeSetupError::Capsule(_) => BuildError::Capsule {
                file,
                cache: opts
                    .cache_dir
                    .as_ref()
                    .map_or("none (memory only)".into(), |p| p.display().to_string()),
                source,
            },
            EeSetupError::NodeOs { .. } => BuildError::NodeOs {
                file,
                policy: opts
                    .nodeos
                    .policy_file
                    .as_ref()
                    .map_or("none".into(), |p| p.display().to_string()),
                source,
            },
        }
    }
}

/// 32 bytes of the operating system's randomness (a zero seed if it has none to give, which
/// only makes PLAN's `generateKey` keys guessable, not wrong).
fn os_random_seed() -> [u8; 32] {
    use rand::RngCore as _;
    let mut seed = [0u8; 32];
    if rand::rngs::OsRng.try_fill_bytes(&mut seed).is_err() {
        tracing::warn!("no OS randomness for PLAN generateKey; its keys can be guessed");
    }
    seed
}

#[cfg(test)]
mod tests {
    use anode_wire::addr::v4;

    use super::*;

    #[test]
    fn a_built_node_has_its_links_routes_and_ees() {
        let me = v4(198, 18, 0, 1, 3322);
        let peer = v4(198, 18, 0, 2, 3322);
        let far = v4(198, 18, 0, 3, 3322);
        let mut link = LinkConfig::new(peer);
        link.static_neighbor = true;
        let node = NodeBuilder::new(NodeConfig::new(me))
            .link(link)
            .route(far, peer, 2)
            .ees(EeOptions::default())
            .capsule_code(anode_capsule::protocols::PING.to_vec())
            .build(Instant::now())
            .unwrap();
        assert_eq!(node.links().count(), 1);
        assert!(node.routes().iter().any(|r| r.dest == far));
        let names: Vec<String> = node.domain_reports().into_iter().map(|r| r.ee).collect();
        assert_eq!(names, ["plan+nodeos", "capsule+nodeos"]);
    }

    #[test]
    fn code_without_ees_is_refused() {
        let e = NodeBuilder::new(NodeConfig::new(v4(198, 18, 0, 1, 3322)))
            .capsule_code(anode_capsule::protocols::PING.to_vec())
            .build(Instant::now())
            .unwrap_err();
        assert!(matches!(e, BuildError::NoCapsuleEe), "{e}");
    }
}
