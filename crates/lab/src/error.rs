//! The errors of planning, exporting and running a lab: each says what failed and what to do.

use std::path::PathBuf;

/// A topology (or export request) that cannot become a lab.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The lab name is not usable.
    #[error(
        "lab name '{0}' is not valid: use 1 to 32 letters, digits, '-' and '_', starting with a letter or digit"
    )]
    LabName(String),
    /// More nodes than a lab takes.
    #[error("the topology has {nodes} nodes; a lab takes at most {max} (one process each)")]
    TooManyNodes {
        /// Nodes in the topology.
        nodes: usize,
        /// The bound.
        max: usize,
    },
    /// More links than the link address range holds.
    #[error(
        "the topology has {links} links; a lab addresses at most {max} (one /30 each from 198.18.128.0/17)"
    )]
    TooManyLinks {
        /// Links in the topology.
        links: usize,
        /// The bound.
        max: usize,
    },
    /// The routing settings could not be written.
    #[error("cannot write the topology's [routing] settings: {0}")]
    Routing(String),
    /// `--format hosts` without hosts.
    #[error("--format hosts needs --hosts IP,IP,... (the machines the nodes run on)")]
    NoHosts,
    /// A host that is not an IP address.
    #[error("host '{0}' is not an IP address: give the address the other hosts reach it at")]
    Host(String),
    /// Hosts of both IP versions.
    #[error(
        "the hosts mix IPv4 and IPv6 addresses: a node reaches only peers of its own IP version"
    )]
    MixedHosts,
    /// A host has more nodes than ports above the base.
    #[error("host {host} would run {nodes} nodes: more than the UDP ports above {base}")]
    Ports {
        /// The host.
        host: String,
        /// Its nodes.
        nodes: usize,
        /// The first port.
        base: u16,
    },
}

/// Why a lab command failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Not privileged.
    #[error(
        "anode lab needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): it creates network namespaces, veth pairs and netem qdiscs and runs commands inside the namespaces; run it as root, e.g. `sudo anode lab ...`"
    )]
    NotRoot,
    /// The plan failed.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A lab of this name exists.
    #[error(
        "lab '{name}' already exists (state in {}); use it, take it down with `anode lab down --name {name}`, or pick another --name",
        .dir.display()
    )]
    Exists {
        /// The lab.
        name: String,
        /// Its state directory.
        dir: PathBuf,
    },
    /// Another lab (or leftover namespaces) uses the same namespace prefix.
    #[error(
        "namespaces starting with '{prefix}' already exist ({what}); pick another --name, or remove them (`anode lab down --all`, or `ip netns del NAME`)"
    )]
    PrefixTaken {
        /// The prefix.
        prefix: String,
        /// Who has it.
        what: String,
    },
    /// No such lab.
    #[error("no lab named '{name}' (no state in {}); `anode lab status` lists the labs", .dir.display())]
    NoLab {
        /// The lab.
        name: String,
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// Several labs and none named.
    #[error("several labs are up ({0}); pick one with --name")]
    WhichLab(String),
    /// No lab at all.
    #[error("no lab is up; start one with `anode lab up TOPOLOGY.toml`")]
    NoLabs,
    /// No such node in the lab.
    #[error("lab '{lab}' has no node '{node}'; its nodes: {nodes}")]
    NoNode {
        /// The lab.
        lab: String,
        /// The name given.
        node: String,
        /// The names it has.
        nodes: String,
    },
    /// The node binary is unusable.
    #[error("--bin {}: {why}; give the path of an `anode` binary", .path.display())]
    Bin {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A system command failed.
    #[error("{what} failed: `{cmd}`: {output}")]
    Command {
        /// What it was for.
        what: String,
        /// The command line.
        cmd: String,
        /// Its exit status and stderr.
        output: String,
    },
    /// A file or directory could not be used.
    #[error("{}: {what}: {source}", .path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The state file is unreadable.
    #[error(
        "{}: the lab's state file is damaged ({why}); remove what is left by hand: `ip netns list | grep {prefix_hint}`, then `ip netns del NAME` and delete the directory",
        .path.display()
    )]
    State {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        why: String,
        /// What its namespaces start with, if known.
        prefix_hint: String,
    },
    /// A node process exited during `up`.
    #[error("node {node} exited during start-up ({status}); its log ({}) ends:\n{tail}", .log.display())]
    NodeExited {
        /// The node.
        node: String,
        /// Its exit status.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// The log's last lines.
        tail: String,
    },
    /// Waited too long.
    #[error("{what} did not happen within {secs:.0} s: {detail}")]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// The bound.
        secs: f64,
        /// What was missing.
        detail: String,
    },
    /// Ctrl-C (SIGINT or SIGTERM) during `up`.
    #[error("interrupted (SIGINT/SIGTERM) while {0}")]
    Interrupted(String),
    /// `up` failed, and so did parts of its clean-up.
    #[error(
        "{first}\nthe clean-up after it was incomplete: {cleanup}; run `anode lab down --name {lab}`"
    )]
    Cleanup {
        /// The lab.
        lab: String,
        /// The original error.
        first: Box<LabError>,
        /// What is left.
        cleanup: String,
    },
    /// `down` could not remove everything.
    #[error(
        "lab '{lab}' is not fully removed: {left}; the state is kept, so `anode lab down --name {lab}` can retry"
    )]
    Leftovers {
        /// The lab.
        lab: String,
        /// What is left.
        left: String,
    },
    /// `exec` could not run the command.
    #[error("cannot run `{cmd}` in namespace {netns}: {source}")]
    Exec {
        /// The command.
        cmd: String,
        /// The namespace.
        netns: String,
        /// Why.
        source: std::io::Error,
    },
}

impl LabError {
    /// An [`LabError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, what: &'static str, source: std::io::Error) -> LabError {
        LabError::Io {
            path: path.into(),
            what,
            source,
        }
    }
}
