//! Service modules from a node's config: a node whose `[modules]` trusts publisher keys gets
//! a module host before it starts, and its `[[module]]` list is installed and started.
//!
//! Contract of [`setup_node`]: every `[[module]]` is read (a package file, or fetched from a
//! repository, [`crate::repo`]), verified, installed and (unless `start = false`) started,
//! or the node does not start and the message says which entry failed, where
//! (`FILE:LINE:COL`) and why. Every entry is installed before any starts, so the list's
//! order need not follow the service dependencies.

use std::path::Path;
use std::sync::Arc;

use anode_core::Node;
use anode_modules::{ModRuntime, Package, Trust};

use crate::config::NodeFile;
use crate::config::modules::{ModuleSource, config_table};
use crate::repo::fetch;

/// Live module instances a node's runtime has room for.
pub const MAX_INSTANCES: u32 = 64;

/// Gives `node` a module host if `file` trusts publisher keys, and installs and starts its
/// `[[module]]` list (see the module docs).
pub fn setup_node(node: &mut Node, file: &NodeFile) -> Result<(), String> {
    let m = &file.modules;
    if m.trusted_keys.is_empty() {
        return Ok(());
    }
    let cfg = file.path.display();
    let trust = Trust::from_hex(&m.trusted_keys).map_err(|e| format!("{cfg}: {e}"))?;
    let rt = ModRuntime::new(MAX_INSTANCES)
        .map_err(|e| format!("cannot start the module runtime: {e}"))?;
    anode_modules::attach(node, Arc::clone(&rt), trust);
    let mut to_start = Vec::new();
    for spec in &m.startup {
        let at = |what: String, fix: &str| {
            format!(
                "{cfg}:{}:{}: [[module]] {}: {what}; {fix}",
                spec.pos.0, spec.pos.1, spec.source
            )
        };
        let pkg = match &spec.source {
            ModuleSource::File(p) => read_package(p).map_err(|e| {
                at(
                    e,
                    "check the path (relative to the config file) or make the package with `anode module pack` and `sign`",
                )
            })?,
            ModuleSource::Repo { url, name, version } => fetch(url, name, version)
                .and_then(|b| Package::decode(&b).map_err(|e| e.to_string()))
                .map_err(|e| at(e, "start the repository (`anode repo serve DIR`) or fix the URL"))?,
        };
        let name = pkg.manifest.name.clone();
        let host = anode_modules::host(node).map_err(|e| e.to_string())?;
        host.install(pkg, &config_table(&spec.config)).map_err(|e| {
            at(
                e.to_string(),
                "sign the package with a key listed in [modules] trusted_keys, or fix [module.config]",
            )
        })?;
        if spec.start {
            to_start.push((spec, name));
        }
    }
    // Every entry is installed before any starts, so the list's order need not follow the
    // service dependencies.
    for (spec, name) in to_start {
        let host = anode_modules::host(node).map_err(|e| e.to_string())?;
        host.start(&name).map_err(|e| {
            format!(
                "{cfg}:{}:{}: [[module]] {}: did not start: {e}; add a [[module]] that provides what it misses, or set start = false",
                spec.pos.0, spec.pos.1, spec.source
            )
        })?;
    }
    anode_modules::sync_routes(node).map_err(|e| format!("{cfg}: {e}"))?;
    Ok(())
}

fn read_package(p: &Path) -> Result<Package, String> {
    Package::read(p).map_err(|e| e.to_string())
}

/// Installs and starts the built-in module `name` (`anode_modules::builtin`), signed with a
/// throwaway key that only this node trusts (the benchmark forwarder's module layer).
pub fn install_builtin(node: &mut Node, name: &str) -> Result<(), String> {
    let mut pkg = anode_modules::builtin::package(name).ok_or_else(|| {
        let names: Vec<&str> = anode_modules::builtin::BUILTIN
            .iter()
            .map(|(n, _, _)| *n)
            .collect();
        format!(
            "no built-in module '{name}'; the built-in modules are: {}",
            names.join(", ")
        )
    })?;
    let key = anode_modules::generate_key();
    pkg.sign(&key);
    let rt = ModRuntime::new(MAX_INSTANCES).map_err(|e| e.to_string())?;
    anode_modules::attach(node, rt, Trust::new(vec![key.verifying_key()]));
    let h = anode_modules::host(node).map_err(|e| e.to_string())?;
    h.install(pkg, &toml::Table::new())
        .and_then(|_| h.start(name))
        .map_err(|e| e.to_string())
}
