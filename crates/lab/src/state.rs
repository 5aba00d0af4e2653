//! The state file of a lab, `LABS/LAB/state.json`: everything `up` made or is about to make,
//! so `down` can remove it, also after a crash.
//!
//! Contract: `up` writes the state *before* it creates anything (every namespace it will make
//! is listed), and again when node processes have started (their pids and start times);
//! writes are atomic (a temporary file renamed over the old one), so a crash leaves either
//! the old or the new state, never half of one. `down` removes the state directory only when
//! nothing of the lab is left.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::LabError;
use crate::netem::Netem;
use crate::plan::{Impair, LabPlan};

/// The state file's name in the lab directory.
pub const STATE_FILE: &str = "state.json";
/// The format version.
pub const VERSION: u32 = 1;

/// Where a lab is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// `up` is building it (or died doing so).
    Starting,
    /// Every node answered and routing converged.
    Up,
}

/// One node's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    /// Topology name.
    pub name: String,
    /// Namespace.
    pub netns: String,
    /// Node address (IP:PORT).
    pub address: String,
    /// Control socket.
    pub socket: PathBuf,
    /// `XDG_RUNTIME_DIR` for commands in its namespace (the socket's grandparent).
    pub runtime_dir: PathBuf,
    /// Config file.
    pub config: PathBuf,
    /// Log file.
    pub log: PathBuf,
    /// Connected component (routes are expected within it).
    pub component: usize,
    /// Process id of its `anode node`, once started.
    pub pid: Option<u32>,
    /// That process's start time (clock ticks after boot), against pid reuse.
    pub start_time: Option<u64>,
}

/// One link's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkState {
    /// End a's node.
    pub a: String,
    /// End b's node.
    pub b: String,
    /// End a's interface.
    pub a_if: String,
    /// End b's interface.
    pub b_if: String,
    /// End a's /30 address.
    pub a_ip: String,
    /// End b's /30 address.
    pub b_ip: String,
    /// The link's properties.
    pub netem: Netem,
}

/// A lab's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    /// Format version.
    pub version: u32,
    /// Lab name.
    pub lab: String,
    /// Namespace prefix.
    pub prefix: String,
    /// The topology file.
    pub topology: String,
    /// How links are emulated.
    pub impair: Impair,
    /// Where the lab is.
    pub phase: Phase,
    /// The `anode` binary the nodes run.
    pub bin: PathBuf,
    /// When `up` began (Unix seconds).
    pub created_unix: u64,
    /// The nodes.
    pub nodes: Vec<NodeState>,
    /// The links.
    pub links: Vec<LinkState>,
}

impl LabState {
    /// The state of `plan`, nothing started yet.
    pub fn from_plan(plan: &LabPlan, topology: &str, bin: &Path, now: u64) -> LabState {
        let name = |i: usize| plan.nodes.get(i).map_or(String::new(), |n| n.name.clone());
        LabState {
            version: VERSION,
            lab: plan.lab.clone(),
            prefix: plan.prefix.clone(),
            topology: topology.to_string(),
            impair: plan.impair,
            phase: Phase::Starting,
            bin: bin.to_path_buf(),
            created_unix: now,
            nodes: plan
                .nodes
                .iter()
                .map(|n| NodeState {
                    name: n.name.clone(),
                    netns: n.netns.clone(),
                    address: n.address.to_string(),
                    socket: n.socket.clone(),
                    runtime_dir: n.runtime_dir.clone(),
                    config: n.config_path.clone(),
                    log: n.log.clone(),
                    component: n.component,
                    pid: None,
                    start_time: None,
                })
                .collect(),
            links: plan
                .links
                .iter()
                .map(|l| LinkState {
                    a: name(l.a),
                    b: name(l.b),
                    a_if: l.a_if.clone(),
                    b_if: l.b_if.clone(),
                    a_ip: l.a_ip.to_string(),
                    b_ip: l.b_ip.to_string(),
                    netem: l.netem,
                })
                .collect(),
        }
    }

    /// Reads the state of the lab in `dir`.
    pub fn load(dir: &Path) -> Result<LabState, LabError> {
        let path = dir.join(STATE_FILE);
        let text =
            std::fs::read_to_string(&path).map_err(|e| LabError::io(&path, "cannot read", e))?;
        serde_json::from_str(&text).map_err(|e| LabError::State {
            path: path.clone(),
            why: e.to_string(),
            prefix_hint: "^al".into(),
        })
    }

    /// Writes the state into `dir` atomically.
    pub fn save(&self, dir: &Path) -> Result<(), LabError> {
        let path = dir.join(STATE_FILE);
        let tmp = dir.join(format!("{STATE_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self).map_err(|e| LabError::State {
            path: path.clone(),
            why: e.to_string(),
            prefix_hint: self.prefix.clone(),
        })?;
        std::fs::write(&tmp, text + "\n").map_err(|e| LabError::io(&tmp, "cannot write", e))?;
        std::fs::rename(&tmp, &path).map_err(|e| LabError::io(&path, "cannot replace", e))
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeState> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// The labs with a directory under `labs`, sorted by name.
pub fn list(labs: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(labs)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The lab to act on: `name`, else the only lab under `labs`.
pub fn pick(labs: &Path, name: Option<&str>) -> Result<String, LabError> {
    if let Some(n) = name {
        return Ok(n.to_string());
    }
    let all = list(labs);
    match all.as_slice() {
        [] => Err(LabError::NoLabs),
        [one] => Ok(one.clone()),
        many => Err(LabError::WhichLab(many.join(", "))),
    }
}
