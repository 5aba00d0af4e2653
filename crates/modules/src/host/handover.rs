//! The module host's part of a node's handover to the process taking its place (`anode
//! upgrade`, `anode_core::handover`): the guest state of every active module instance, as
//! its `state_export` gives it (what an upgrade of the module hands over too). The successor
//! has installed the same modules from the module journal (or the deployment service
//! reinstalled its deployed ones first); each takes its state back through `state_import`
//! if it runs the same version. State comes from another process: a module that is not
//! there, has another version, or refuses its state is skipped and named.
//!
//! The modules' files go too (`files.rs`): the successor read them from the disk when it
//! started, before this process stopped changing them; the handed-over set replaces
//! them (this process also writes its last changes out before it hands over).

use anode_core::handover::hex_bytes;

use super::{ModuleHost, State};

/// One module's guest state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct ModuleState {
    name: String,
    version: String,
    #[serde(with = "hex_bytes")]
    state: Vec<u8>,
}

/// One file of a module.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct ModuleFile {
    module: String,
    path: String,
    #[serde(with = "hex_bytes")]
    data: Vec<u8>,
}

/// What the host hands over.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct HostState {
    modules: Vec<ModuleState>,
    #[serde(default)]
    files: Vec<ModuleFile>,
}

impl ModuleHost {
    /// The guest state of every active module that exports one (see the module docs).
    pub(super) fn export_states(&mut self) -> serde_json::Value {
        let mut names: Vec<String> = self.modules.keys().cloned().collect();
        names.sort();
        let mut modules = Vec::new();
        for name in names {
            let Some(e) = self.modules.get_mut(&name) else {
                continue;
            };
            if e.state != State::Active {
                continue;
            }
            let version = e.pkg.manifest.version.to_string();
            let Some(inst) = e.inst.as_mut() else {
                continue;
            };
            match inst.export_state() {
                Ok(state) if !state.is_empty() => modules.push(ModuleState {
                    name,
                    version,
                    state,
                }),
                Ok(_) => {}
                Err(err) => self.note(format!("{name}: state not handed over: {err}")),
            }
        }
        let files = {
            let f = crate::files::lock(&self.files);
            if let Some(p) = f.persist() {
                p.flush();
            }
            f.export()
                .into_iter()
                .map(|(module, path, data)| ModuleFile { module, path, data })
                .collect()
        };
        serde_json::to_value(HostState { modules, files }).unwrap_or_default()
    }

    /// Gives each module its handed-over state back (see the module docs).
    pub(super) fn import_states(&mut self, v: &serde_json::Value) -> Result<(), String> {
        let h: HostState = serde_json::from_value(v.clone())
            .map_err(|e| format!("the modules' handed-over state does not parse: {e}"))?;
        let mut refused = Vec::new();
        let files: Vec<(String, String, Vec<u8>)> = h
            .files
            .into_iter()
            .map(|f| (f.module, f.path, f.data))
            .collect();
        {
            let mut f = crate::files::lock(&self.files);
            let n = f.import(files);
            if n > 0 {
                refused.push(format!("{n} module files over this node's quotas"));
            }
            if let Some(p) = f.persist() {
                p.schedule();
            }
        }
        for m in h.modules {
            let Some(e) = self.modules.get_mut(&m.name) else {
                refused.push(format!("{} is not installed here", m.name));
                continue;
            };
            if e.pkg.manifest.version.to_string() != m.version {
                refused.push(format!(
                    "{} runs {} here, the state is of {}",
                    m.name, e.pkg.manifest.version, m.version
                ));
                continue;
            }
            let Some(inst) = e.inst.as_mut() else {
                refused.push(format!("{} is not running here", m.name));
                continue;
            };
            if let Err(err) = inst.import_state(&m.state) {
                refused.push(format!("{}: {err}", m.name));
            }
        }
        if refused.is_empty() {
            Ok(())
        } else {
            Err(refused.join("; "))
        }
    }
}
