//! Service modules from a node's config: a node whose `[modules]` trusts publisher keys gets
//! a module host before it starts, and its `[[module]]` list is installed and started.
//!
//! Contract of [`setup_node`]: every `[[module]]` is read (a package file, or fetched from a
//! repository, [`crate::repo`]), verified, installed and (unless `start = false`) started,
//! or the node does not start and the message says which entry failed, where
//! (`FILE:LINE:COL`) and why. Every entry is installed before any starts, so the list's
//! order need not follow the service dependencies. Then the modules the [`journal`] kept
//! from run time come back in their order, configuration and state, so nothing installed
//! is lost across a restart.

use std::sync::Arc;

use anode_core::Node;
use anode_modules::{ModRuntime, Package, Trust};

use anode_modules::State;

use crate::config::NodeFile;
use crate::config::modules::{ModuleSource, ModuleSpec, config_table};
use crate::repo::fetch;

pub mod journal;

use journal::{Entry, Origin};

/// Live module instances a node's runtime has room for.
pub const MAX_INSTANCES: u32 = 64;

/// Gives `node` a module host if `file` trusts publisher keys, installs and starts its
/// `[[module]]` list, and restores what the module journal kept (see the module docs and
/// [`journal`]).
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
    // The modules' files live beside the journal (read back now, before any module starts).
    if let Some(h) = anode_modules::host_mut(node) {
        h.set_file_dir(m.state_dir.join("files"));
    }
    // The deployment service (`anode module deploy`) comes with the module host; its
    // `[deploy]` keys say who may use it (none: every request is refused as disabled).
    node.register_ee(Box::new(anode_modules::deploy::DeployEe::new(
        file.deploy.clone(),
        anode_modules::deploy::UnixClock::system(),
    )));
    let store = journal::Store::new(&m.state_dir);
    let kept = store.load().map_err(|e| e.to_string())?;
    let stopped_ees = kept.stopped_ees.clone();
    let packages = read_startup(file)?;
    let digest = journal::config_digest_with(m, &packages);
    let restored = if !kept.entries.is_empty() && kept.config_digest == digest {
        // The config says what it said when the journal was written: the journal is the
        // truth, run-time changes to config modules included.
        restore(node, &store, &kept.entries)
    } else {
        install_startup(node, file, &packages)?;
        let runtime: Vec<Entry> = kept
            .entries
            .into_iter()
            .filter(|e| e.origin == Origin::Runtime)
            .collect();
        restore(node, &store, &runtime)
    };
    anode_modules::sync_routes(node).map_err(|e| format!("{cfg}: {e}"))?;
    let stopped = stop_ees(node, &stopped_ees);
    record_startup(node, &store, (&packages, &digest), &restored, stopped)
}

/// Stops the built-in EEs the journal says the operator stopped; returns the names it
/// stopped (a name no EE has any more is dropped with a warning).
fn stop_ees(node: &mut Node, names: &[String]) -> Vec<String> {
    let mut stopped = Vec::new();
    for name in names {
        let ee = node
            .ees()
            .into_iter()
            .find(|e| e.name.split('+').next() == Some(name.as_str()));
        match ee {
            Some(e) => {
                node.set_ee_running(e.type_id, false);
                tracing::info!(ee = %name, "execution environment stopped, as before the restart (`anode module start {name}` starts it)");
                stopped.push(name.clone());
            }
            None => {
                tracing::warn!(ee = %name, "the module journal names a stopped EE this node does not have; forgotten")
            }
        }
    }
    stopped
}

/// The `[[module]]` list's packages: read from their files or fetched from repositories.
fn read_startup(file: &NodeFile) -> Result<Vec<(Vec<u8>, &ModuleSpec)>, String> {
    let cfg = file.path.display();
    let mut out = Vec::new();
    for spec in &file.modules.startup {
        let at = |what: String, fix: &str| {
            format!(
                "{cfg}:{}:{}: [[module]] {}: {what}; {fix}",
                spec.pos.0, spec.pos.1, spec.source
            )
        };
        let bytes = match &spec.source {
            ModuleSource::File(p) => std::fs::read(p).map_err(|e| {
                at(
                    e.to_string(),
                    "check the path (relative to the config file) or make the package with `anode module pack` and `sign`",
                )
            })?,
            ModuleSource::Repo { url, name, version } => fetch(url, name, version)
                .map_err(|e| at(e, "start the repository (`anode repo serve DIR`) or fix the URL"))?,
        };
        out.push((bytes, spec));
    }
    Ok(out)
}

/// Installs the `[[module]]` list and starts the entries that ask for it, lowest category of
/// the service hierarchy first (system, standard, function, user; the list's order within
/// one); every entry is installed before any starts, so the list's order need not follow
/// the dependencies.
fn install_startup(
    node: &mut Node,
    file: &NodeFile,
    packages: &[(Vec<u8>, &ModuleSpec)],
) -> Result<(), String> {
    let cfg = file.path.display();
    let mut to_start = Vec::new();
    for (bytes, spec) in packages {
        let at = |what: String, fix: &str| {
            format!(
                "{cfg}:{}:{}: [[module]] {}: {what}; {fix}",
                spec.pos.0, spec.pos.1, spec.source
            )
        };
        let pkg = Package::decode(bytes).map_err(|e| {
            at(
                e.to_string(),
                "make the package with `anode module pack` and `sign`",
            )
        })?;
        let name = pkg.manifest.name.clone();
        let category = pkg.manifest.category();
        let host = anode_modules::host(node).map_err(|e| e.to_string())?;
        host.install(pkg, &config_table(&spec.config)).map_err(|e| {
            at(
                e.to_string(),
                "sign the package with a key listed in [modules] trusted_keys, or fix [module.config]",
            )
        })?;
        if spec.start {
            to_start.push((category, spec, name));
        }
    }
    // A stable sort: the list's order within a category.
    to_start.sort_by_key(|(c, _, _)| *c);
    for (category, spec, name) in to_start {
        tracing::info!(module = %name, category = category.name(), "starting startup module");
        let host = anode_modules::host(node).map_err(|e| e.to_string())?;
        host.start(&name).map_err(|e| {
            format!(
                "{cfg}:{}:{}: [[module]] {}: did not start: {e}; add a [[module]] that provides what it misses, or set start = false",
                spec.pos.0, spec.pos.1, spec.source
            )
        })?;
    }
    Ok(())
}

/// Installs the journal's `entries` (verifying each package as any install does), then
/// starts those that were started; returns the entries restored. An entry that fails is
/// skipped with a warning naming it.
fn restore(node: &mut Node, store: &journal::Store, entries: &[Entry]) -> Vec<Entry> {
    let mut done = Vec::new();
    for e in entries {
        let r = store.package(e).and_then(|b| {
            let pkg = Package::decode(&b).map_err(|err| err.to_string())?;
            let host = anode_modules::host(node).map_err(|err| err.to_string())?;
            let installed = host.info(&e.name).is_ok();
            if installed {
                host.upgrade(pkg, &config_table(&e.config))
            } else {
                host.install(pkg, &config_table(&e.config)).map(|_| ())
            }
            .map_err(|err| err.to_string())
        });
        match r {
            Ok(()) => done.push(e.clone()),
            Err(why) => tracing::warn!(
                module = %e.name,
                version = %e.version,
                "module from the journal not restored: {why}"
            ),
        }
    }
    for e in &done {
        if let Ok(host) = anode_modules::host(node) {
            let r = if e.started {
                host.start(&e.name)
            } else {
                host.stop(&e.name)
            };
            if let Err(err) = r {
                tracing::warn!(module = %e.name, "restored module not started/stopped: {err}");
            }
        }
    }
    done
}

/// Writes the journal as the node now is: the config's modules (their packages stored) and
/// the restored run-time ones, under the config's digest.
fn record_startup(
    node: &mut Node,
    store: &journal::Store,
    (packages, digest): (&[(Vec<u8>, &ModuleSpec)], &str),
    restored: &[Entry],
    stopped_ees: Vec<String>,
) -> Result<(), String> {
    let host = anode_modules::host(node).map_err(|e| e.to_string())?;
    let mut j = journal::Journal {
        version: 1,
        config_digest: digest.to_string(),
        entries: Vec::new(),
        stopped_ees,
    };
    for (bytes, spec) in packages {
        let Ok(pkg) = Package::decode(bytes) else {
            continue;
        };
        let (name, version) = (pkg.manifest.name.clone(), pkg.manifest.version.to_string());
        // Restored from the journal (kept with its origin below), or removed at run time.
        if restored.iter().any(|e| e.name == name) || host.info(&name).is_err() {
            continue;
        }
        let (package, sha256) = store
            .put_package(&name, &version, bytes)
            .map_err(|e| e.to_string())?;
        let started = host.info(&name).is_ok_and(|i| i.state == State::Active);
        j.put(Entry {
            name,
            version,
            package,
            sha256,
            config: spec.config.clone(),
            started,
            origin: Origin::Config,
        });
    }
    for e in restored {
        let mut e = e.clone();
        e.started = host.info(&e.name).is_ok_and(|i| i.state == State::Active);
        j.put(e);
    }
    store.save(&j).map_err(|e| e.to_string())
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
