//! Running a lab: `up` (plan, state, namespaces, veths, configs, one `anode node` per
//! namespace, wait for the control sockets and for routing), `down` (stop the processes,
//! delete the namespaces, remove the state), `status`, and `exec` in a node's namespace.
//!
//! Contract:
//! - `up` records its state before it creates anything; if any step fails, or
//!   [`UpOptions::stop`] turns true (Ctrl-C), it removes everything it made (processes,
//!   namespaces with their veths, sockets, files) before it returns the error; if even that
//!   fails, the error says what is left and the state stays for `down`.
//! - `up` succeeds only when every node's control socket answers and every node has a
//!   reachable route to every other node of its connected component, within
//!   [`UpOptions::timeout`].
//! - `down` stops the recorded node processes (SIGTERM, SIGKILL after [`TERM_WAIT`]) and any
//!   other process left in the lab's namespaces, deletes the namespaces (their veth ends go
//!   with them), and removes the sockets and the state; it is idempotent and works from any
//!   state `up` left, also after a crash. The state stays if something could not be removed.
//! - Processes are signalled by pid only while their start time matches the recorded one.

use std::collections::BTreeSet;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anode_ctl::{Client, RouteOrigin};
use anode_emu::Topology;
use anode_wire::NodeAddr;
use serde::Serialize;

use crate::apply;
use crate::error::LabError;
use crate::names;
use crate::plan::{self, Impair, LabPlan, Layout};
use crate::state::{LabState, NodeState, Phase};
use crate::sys;

/// How long stopped nodes get to exit before SIGKILL.
pub const TERM_WAIT: Duration = Duration::from_secs(5);
/// How long every node gets to open its control socket.
pub const SOCKET_WAIT: Duration = Duration::from_secs(30);
/// The client name nodes see.
const CLIENT: &str = "anode-lab";

/// Where labs live.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// The labs' state directories (`$XDG_STATE_HOME/anode/labs`).
    pub labs: PathBuf,
    /// The labs' control sockets (`$XDG_RUNTIME_DIR/anode/lab`).
    pub sockets: PathBuf,
}

/// How to emulate links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImpairChoice {
    /// netem if the kernel has it, else the nodes.
    Auto,
    /// netem (an error if the kernel lacks it).
    Netem,
    /// The nodes' UDP drivers.
    Node,
}

/// Options of `up`.
pub struct UpOptions<'a> {
    /// The lab's name.
    pub name: String,
    /// The `anode` binary to run.
    pub bin: PathBuf,
    /// How to emulate links.
    pub impair: ImpairChoice,
    /// The bound on routing convergence.
    pub timeout: Duration,
    /// True once the user asked to stop (Ctrl-C).
    pub stop: &'a dyn Fn() -> bool,
    /// Progress lines for a person.
    pub progress: &'a mut dyn FnMut(&str),
}

impl std::fmt::Debug for UpOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpOptions")
            .field("name", &self.name)
            .field("bin", &self.bin)
            .field("impair", &self.impair)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What `up` made.
#[derive(Debug, Clone, Serialize)]
pub struct UpReport {
    /// The lab.
    pub lab: String,
    /// Its namespace prefix.
    pub prefix: String,
    /// How links are emulated.
    pub impair: Impair,
    /// Its state directory.
    pub state_dir: PathBuf,
    /// True if the topology's node addresses were replaced by 198.18.0.N.
    pub assigned_addresses: bool,
    /// The nodes.
    pub nodes: Vec<NodeState>,
    /// Number of links (veth pairs).
    pub links: usize,
    /// Namespaces, veths, addresses, qdiscs: milliseconds.
    pub setup_ms: u64,
    /// Starting the nodes until every control socket answered.
    pub start_ms: u64,
    /// Then until routing converged.
    pub converge_ms: u64,
    /// All of `up`.
    pub total_ms: u64,
}

/// What `down` removed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DownReport {
    /// The lab.
    pub lab: String,
    /// Processes that exited on SIGTERM.
    pub stopped: usize,
    /// Processes that needed SIGKILL.
    pub killed: usize,
    /// Namespaces deleted.
    pub namespaces: usize,
    /// Milliseconds it took.
    pub ms: u64,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Checks that `bin` is an executable file; returns its absolute path.
pub fn check_bin(bin: &Path) -> Result<PathBuf, LabError> {
    use std::os::unix::fs::PermissionsExt;
    let bad = |why: String| LabError::Bin {
        path: bin.to_path_buf(),
        why,
    };
    let abs = std::fs::canonicalize(bin).map_err(|e| bad(e.to_string()))?;
    let meta = std::fs::metadata(&abs).map_err(|e| bad(e.to_string()))?;
    if !meta.is_file() {
        return Err(bad("not a file".into()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(bad("not executable".into()));
    }
    Ok(abs)
}

/// Refuses a prefix another lab or leftover namespaces use.
fn check_prefix(dirs: &Dirs, plan: &LabPlan) -> Result<(), LabError> {
    for other in crate::state::list(&dirs.labs) {
        if other == plan.lab {
            continue;
        }
        if let Ok(st) = LabState::load(&dirs.labs.join(&other))
            && st.prefix == plan.prefix
        {
            return Err(LabError::PrefixTaken {
                prefix: plan.prefix.clone(),
                what: format!("lab '{other}'"),
            });
        }
    }
    let taken: Vec<String> = apply::netns_list()?
        .into_iter()
        .filter(|n| n.starts_with(&plan.prefix))
        .collect();
    if taken.is_empty() {
        Ok(())
    } else {
        Err(LabError::PrefixTaken {
            prefix: plan.prefix.clone(),
            what: taken.join(", "),
        })
    }
}

/// Builds and starts the lab `opts.name` of `topo`.
pub fn up(topo: &Topology, dirs: &Dirs, mut opts: UpOptions<'_>) -> Result<UpReport, LabError> {
    let t0 = Instant::now();
    sys::require_privileges()?;
    let bin = check_bin(&opts.bin)?;
    if !names::valid_lab_name(&opts.name) {
        return Err(crate::error::PlanError::LabName(opts.name.clone()).into());
    }
    let lab_dir = dirs.labs.join(&opts.name);
    let layout = Layout {
        state_dir: lab_dir.clone(),
        socket_dir: dirs.sockets.clone(),
    };
    let first = match opts.impair {
        ImpairChoice::Node => Impair::Node,
        ImpairChoice::Auto | ImpairChoice::Netem => Impair::Netem,
    };
    let plan = plan::plan(topo, &opts.name, &layout, first)?;
    if lab_dir.exists() {
        return Err(LabError::Exists {
            name: opts.name.clone(),
            dir: lab_dir,
        });
    }
    check_prefix(dirs, &plan)?;
    std::fs::create_dir_all(&dirs.labs)
        .map_err(|e| LabError::io(&dirs.labs, "cannot create the labs directory", e))?;
    std::fs::create_dir(&lab_dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            LabError::Exists {
                name: opts.name.clone(),
                dir: lab_dir.clone(),
            }
        } else {
            LabError::io(&lab_dir, "cannot create the lab directory", e)
        }
    })?;
    let mut st = LabState::from_plan(&plan, &topo.file, &bin, sys::now_unix());
    if let Err(e) = st.save(&lab_dir) {
        let _ = std::fs::remove_dir_all(&lab_dir);
        return Err(e);
    }
    let mut children: Vec<(usize, Child)> = Vec::new();
    opts.bin = bin;
    let made = build(topo, plan, &mut st, &layout, &mut children, &mut opts, t0);
    match made {
        Ok(r) => Ok(r),
        Err(first) => {
            (opts.progress)(&format!(
                "lab {}: up failed; removing what was made",
                opts.name
            ));
            match teardown(&st, &lab_dir, &mut children) {
                Ok(_) => Err(first),
                Err(left) => Err(LabError::Cleanup {
                    lab: opts.name.clone(),
                    first: Box::new(first),
                    cleanup: left,
                }),
            }
        }
    }
}

fn interrupted(opts: &UpOptions<'_>, doing: &str) -> Result<(), LabError> {
    if (opts.stop)() {
        Err(LabError::Interrupted(doing.to_string()))
    } else {
        Ok(())
    }
}

/// The steps of `up` after the state exists; `st` follows what was made.
fn build(
    topo: &Topology,
    mut plan: LabPlan,
    st: &mut LabState,
    layout: &Layout,
    children: &mut Vec<(usize, Child)>,
    opts: &mut UpOptions<'_>,
    t0: Instant,
) -> Result<UpReport, LabError> {
    interrupted(opts, "starting")?;
    let lab_dir = layout.state_dir.as_path();
    apply::create_namespaces(&plan)?;
    let probe = plan
        .nodes
        .first()
        .map(|n| n.netns.clone())
        .unwrap_or_default();
    if opts.impair != ImpairChoice::Node && !apply::netem_available(&probe) {
        if opts.impair == ImpairChoice::Netem {
            return Err(LabError::Command {
                what: "adding a netem qdisc".into(),
                cmd: format!("tc -n {probe} qdisc add dev lo root netem delay 0ms"),
                output: "this kernel has no netem (CONFIG_NET_SCH_NETEM, module sch_netem); use --impair node (the nodes emulate the links) or --impair auto".into(),
            });
        }
        plan = plan::plan(topo, &plan.lab, layout, Impair::Node)?;
        st.impair = Impair::Node;
        st.save(lab_dir)?;
    }
    interrupted(opts, "creating the namespaces")?;
    apply::wire(&plan)?;
    let setup = t0.elapsed();
    (opts.progress)(&format!(
        "lab {}: {} namespaces, {} veth pairs, links emulated by {} ({} ms)",
        plan.lab,
        plan.nodes.len(),
        plan.links.len(),
        plan.impair.as_str(),
        ms(setup)
    ));
    interrupted(opts, "wiring the namespaces")?;
    write_files(&plan)?;
    let t_start = Instant::now();
    start_nodes(&plan, st, lab_dir, children, &opts.bin)?;
    wait_sockets(st, children, opts)?;
    let start = t_start.elapsed();
    (opts.progress)(&format!(
        "lab {}: {} nodes answer on their control sockets ({} ms)",
        plan.lab,
        plan.nodes.len(),
        ms(start)
    ));
    let t_conv = Instant::now();
    wait_converged(st, children, opts)?;
    let converge = t_conv.elapsed();
    st.phase = Phase::Up;
    st.save(lab_dir)?;
    Ok(UpReport {
        lab: plan.lab.clone(),
        prefix: plan.prefix.clone(),
        impair: plan.impair,
        state_dir: lab_dir.to_path_buf(),
        assigned_addresses: plan.assigned,
        nodes: st.nodes.clone(),
        links: plan.links.len(),
        setup_ms: ms(setup),
        start_ms: ms(start),
        converge_ms: ms(converge),
        total_ms: ms(t0.elapsed()),
    })
}

/// Writes the node configs and makes the node and socket directories.
fn write_files(plan: &LabPlan) -> Result<(), LabError> {
    for n in &plan.nodes {
        std::fs::create_dir_all(&n.state_dir)
            .map_err(|e| LabError::io(&n.state_dir, "cannot create the node directory", e))?;
        std::fs::write(&n.config_path, &n.config)
            .map_err(|e| LabError::io(&n.config_path, "cannot write the node config", e))?;
        let sock_dir = n.runtime_dir.join("anode");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&sock_dir)
            .map_err(|e| LabError::io(&sock_dir, "cannot create the socket directory", e))?;
    }
    Ok(())
}

/// Starts one `anode node` per namespace, each in its own process group (a Ctrl-C at the
/// terminal reaches only `up`, which then stops them itself); records pids in the state.
fn start_nodes(
    plan: &LabPlan,
    st: &mut LabState,
    lab_dir: &Path,
    children: &mut Vec<(usize, Child)>,
    bin: &Path,
) -> Result<(), LabError> {
    for (i, n) in plan.nodes.iter().enumerate() {
        let log = std::fs::File::create(&n.log)
            .map_err(|e| LabError::io(&n.log, "cannot create the node log", e))?;
        let log2 = log
            .try_clone()
            .map_err(|e| LabError::io(&n.log, "cannot open the node log", e))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &n.netns])
            .arg(bin)
            .args(["--log", "info", "node", "--config"])
            .arg(&n.config_path)
            .env("XDG_RUNTIME_DIR", &n.runtime_dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0)
            .spawn()
            .map_err(|e| LabError::Command {
                what: format!("starting node {}", n.name),
                cmd: format!(
                    "ip netns exec {} {} node --config {}",
                    n.netns,
                    bin.display(),
                    n.config_path.display()
                ),
                output: e.to_string(),
            })?;
        let pid = child.id();
        children.push((i, child));
        if let Some(rec) = st.nodes.get_mut(i) {
            rec.pid = Some(pid);
            rec.start_time = sys::start_time(pid);
        }
    }
    st.save(lab_dir)
}

/// `Err` if a started node has exited.
fn check_children(st: &LabState, children: &mut [(usize, Child)]) -> Result<(), LabError> {
    for (i, c) in children.iter_mut() {
        if let Ok(Some(status)) = c.try_wait() {
            let (node, log) = st
                .nodes
                .get(*i)
                .map_or((String::new(), PathBuf::new()), |n| {
                    (n.name.clone(), n.log.clone())
                });
            let tail = sys::tail(&log, 15);
            return Err(LabError::NodeExited {
                node,
                status: status.to_string(),
                tail: if tail.trim().is_empty() {
                    "(nothing: the log is empty)".into()
                } else {
                    tail
                },
                log,
            });
        }
    }
    Ok(())
}

/// A client of node `n`, if its socket answers.
fn connect(n: &NodeState) -> Option<Client> {
    let mut c = Client::connect(&n.socket, CLIENT).ok()?;
    c.set_timeout(Some(Duration::from_secs(3))).ok()?;
    Some(c)
}

fn names_of(st: &LabState, idx: &BTreeSet<usize>) -> String {
    let mut v: Vec<&str> = idx
        .iter()
        .filter_map(|i| st.nodes.get(*i).map(|n| n.name.as_str()))
        .collect();
    if v.len() > 10 {
        v.truncate(10);
        v.push("...");
    }
    v.join(", ")
}

fn wait_sockets(
    st: &LabState,
    children: &mut [(usize, Child)],
    opts: &UpOptions<'_>,
) -> Result<(), LabError> {
    let t0 = Instant::now();
    let mut pending: BTreeSet<usize> = (0..st.nodes.len()).collect();
    loop {
        interrupted(opts, "waiting for the nodes' control sockets")?;
        check_children(st, children)?;
        pending.retain(|i| {
            st.nodes
                .get(*i)
                .is_none_or(|n| !n.socket.exists() || connect(n).is_none())
        });
        if pending.is_empty() {
            return Ok(());
        }
        if t0.elapsed() > SOCKET_WAIT {
            return Err(LabError::Timeout {
                what: "every node's control socket answering",
                secs: SOCKET_WAIT.as_secs_f64(),
                detail: format!("no answer from {}", names_of(st, &pending)),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The nodes `i` should have routes to: the others of its component.
fn expected(st: &LabState, i: usize) -> Vec<NodeAddr> {
    let Some(me) = st.nodes.get(i) else {
        return Vec::new();
    };
    st.nodes
        .iter()
        .enumerate()
        .filter(|(j, n)| *j != i && n.component == me.component)
        .filter_map(|(_, n)| n.address.parse().ok())
        .collect()
}

/// How many of `want` node `c` has a reachable learned or static route to.
fn routes_to(c: &mut Client, want: &[NodeAddr]) -> Option<usize> {
    let routes = c.routes().ok()?;
    let have: BTreeSet<NodeAddr> = routes
        .iter()
        .filter(|r| r.reachable && r.origin != RouteOrigin::Local)
        .map(|r| r.dest)
        .collect();
    Some(want.iter().filter(|w| have.contains(w)).count())
}

fn wait_converged(
    st: &LabState,
    children: &mut [(usize, Child)],
    opts: &UpOptions<'_>,
) -> Result<(), LabError> {
    let t0 = Instant::now();
    let mut clients: Vec<Option<Client>> = st.nodes.iter().map(|_| None).collect();
    let mut pending: BTreeSet<usize> = (0..st.nodes.len()).collect();
    let mut missing = String::new();
    loop {
        interrupted(opts, "waiting for routing to converge")?;
        check_children(st, children)?;
        let mut still = BTreeSet::new();
        for &i in &pending {
            let want = expected(st, i);
            let slot = clients.get_mut(i);
            let Some(slot) = slot else { continue };
            if slot.is_none() {
                *slot = st.nodes.get(i).and_then(connect);
            }
            let got = slot.as_mut().and_then(|c| routes_to(c, &want));
            if got.is_none() {
                *slot = None;
            }
            if got != Some(want.len()) {
                still.insert(i);
                if still.len() == 1 {
                    missing = format!(
                        "{} has routes to {} of {} nodes",
                        st.nodes.get(i).map_or("", |n| n.name.as_str()),
                        got.unwrap_or(0),
                        want.len()
                    );
                }
            }
        }
        pending = still;
        if pending.is_empty() {
            return Ok(());
        }
        if t0.elapsed() > opts.timeout {
            return Err(LabError::Timeout {
                what: "routing convergence (every node with a route to every other)",
                secs: opts.timeout.as_secs_f64(),
                detail: format!(
                    "{} nodes lack routes ({}); e.g. {missing}",
                    pending.len(),
                    names_of(st, &pending)
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A process to stop: pid and start time (`None`: our child, reaped through `Child`).
#[derive(Debug, Clone, Copy)]
struct Target {
    pid: u32,
    start: Option<u64>,
}

/// Stops `targets` (SIGTERM, then SIGKILL after [`TERM_WAIT`]); (stopped, killed, left).
fn stop_all(targets: &[Target], children: &mut Vec<(usize, Child)>) -> (usize, usize, usize) {
    let live = |children: &mut Vec<(usize, Child)>| -> Vec<Target> {
        children.retain_mut(|(_, c)| !matches!(c.try_wait(), Ok(Some(_))));
        targets
            .iter()
            .copied()
            .filter(|t| sys::alive(t.pid, t.start))
            .collect()
    };
    let wait = |children: &mut Vec<(usize, Child)>, limit: Duration| -> Vec<Target> {
        let t0 = Instant::now();
        loop {
            let left = live(children);
            if left.is_empty() || t0.elapsed() > limit {
                return left;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let first = live(children);
    for t in &first {
        sys::signal(t.pid, t.start, libc::SIGTERM);
    }
    let after_term = wait(children, TERM_WAIT);
    for t in &after_term {
        sys::signal(t.pid, t.start, libc::SIGKILL);
    }
    let after_kill = wait(children, Duration::from_secs(3));
    (
        first.len().saturating_sub(after_term.len()),
        after_term.len().saturating_sub(after_kill.len()),
        after_kill.len(),
    )
}

/// Removes everything of the lab `st` describes; keeps the state if something is left.
pub fn teardown(
    st: &LabState,
    lab_dir: &Path,
    children: &mut Vec<(usize, Child)>,
) -> Result<DownReport, String> {
    let t0 = Instant::now();
    let mut targets: Vec<Target> = st
        .nodes
        .iter()
        .filter_map(|n| {
            n.pid.map(|pid| Target {
                pid,
                start: n.start_time,
            })
        })
        .collect();
    let namespaces: Vec<String> = st.nodes.iter().map(|n| n.netns.clone()).collect();
    let existing = apply::netns_list().unwrap_or_default();
    let present = namespaces.iter().filter(|n| existing.contains(n)).count();
    for ns in namespaces.iter().filter(|n| existing.contains(n)) {
        for pid in apply::netns_pids(ns) {
            if !targets.iter().any(|t| t.pid == pid) {
                targets.push(Target {
                    pid,
                    start: sys::start_time(pid),
                });
            }
        }
    }
    let (stopped, killed, left) = stop_all(&targets, children);
    let mut problems = Vec::new();
    if left > 0 {
        problems.push(format!("{left} processes would not exit"));
    }
    if let Err(e) = apply::delete_netns(&namespaces) {
        problems.push(e);
    }
    for n in &st.nodes {
        match std::fs::remove_dir_all(&n.runtime_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => problems.push(format!("{}: {e}", n.runtime_dir.display())),
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    if let Err(e) = std::fs::remove_dir_all(lab_dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(format!("{}: {e}", lab_dir.display()));
    }
    Ok(DownReport {
        lab: st.lab.clone(),
        stopped,
        killed,
        namespaces: present,
        ms: ms(t0.elapsed()),
    })
}

/// Takes lab `name` down.
pub fn down(dirs: &Dirs, name: &str) -> Result<DownReport, LabError> {
    sys::require_privileges()?;
    let dir = dirs.labs.join(name);
    if !dir.is_dir() {
        return Err(LabError::NoLab {
            name: name.to_string(),
            dir,
        });
    }
    if !dir.join(crate::state::STATE_FILE).exists() {
        // `up` writes the state before it makes anything: nothing was made.
        std::fs::remove_dir_all(&dir)
            .map_err(|e| LabError::io(&dir, "cannot remove the lab directory", e))?;
        return Ok(DownReport {
            lab: name.to_string(),
            ..DownReport::default()
        });
    }
    let st = LabState::load(&dir)?;
    teardown(&st, &dir, &mut Vec::new()).map_err(|left| LabError::Leftovers {
        lab: name.to_string(),
        left,
    })
}

/// Takes every lab down; the first error after trying them all.
pub fn down_all(dirs: &Dirs) -> Result<Vec<DownReport>, LabError> {
    sys::require_privileges()?;
    let mut done = Vec::new();
    let mut first_err = None;
    for lab in crate::state::list(&dirs.labs) {
        match down(dirs, &lab) {
            Ok(r) => done.push(r),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

/// One node as `status` sees it.
#[derive(Debug, Clone, Serialize)]
pub struct NodeStatus {
    /// The record.
    #[serde(flatten)]
    pub node: NodeState,
    /// Its process runs.
    pub running: bool,
    /// Its control socket answers.
    pub answering: bool,
    /// Up neighbors (if it answers).
    pub neighbors: Option<usize>,
    /// Nodes of its component it has routes to (if it answers).
    pub routes: Option<usize>,
    /// Nodes of its component other than itself.
    pub expected_routes: usize,
}

/// A lab as `status` sees it.
#[derive(Debug, Clone, Serialize)]
pub struct LabStatus {
    /// The state as recorded.
    pub lab: String,
    /// Namespace prefix.
    pub prefix: String,
    /// Phase.
    pub phase: Phase,
    /// Link emulation.
    pub impair: Impair,
    /// The topology file.
    pub topology: String,
    /// The state directory.
    pub state_dir: PathBuf,
    /// Nodes.
    pub nodes: Vec<NodeStatus>,
    /// Links.
    pub links: Vec<crate::state::LinkState>,
}

/// The status of lab `name`.
pub fn status(dirs: &Dirs, name: &str) -> Result<LabStatus, LabError> {
    let dir = dirs.labs.join(name);
    if !dir.join(crate::state::STATE_FILE).exists() {
        return Err(LabError::NoLab {
            name: name.to_string(),
            dir,
        });
    }
    let st = LabState::load(&dir)?;
    let nodes = st
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let want = expected(&st, i);
            let mut client = connect(n);
            let neighbors = client
                .as_mut()
                .and_then(|c| c.neighbors().ok())
                .map(|v| v.len());
            let routes = client.as_mut().and_then(|c| routes_to(c, &want));
            NodeStatus {
                node: n.clone(),
                running: n.pid.is_some_and(|p| sys::alive(p, n.start_time)),
                answering: client.is_some(),
                neighbors,
                routes,
                expected_routes: want.len(),
            }
        })
        .collect();
    Ok(LabStatus {
        lab: st.lab.clone(),
        prefix: st.prefix.clone(),
        phase: st.phase,
        impair: st.impair,
        topology: st.topology.clone(),
        state_dir: dir,
        nodes,
        links: st.links.clone(),
    })
}

/// Runs `argv` in node `node`'s namespace of lab `lab` in place of this process (stdio
/// inherited, so the exit status is the command's). With `XDG_RUNTIME_DIR` pointing at the
/// node's runtime directory, `anode` client commands there find its control socket without
/// flags; `ANODE_LAB`, `ANODE_NODE`, `ANODE_ADDRESS` and `ANODE_SOCKET` name the lab, the
/// node, its address and its socket. Returns only on failure.
pub fn exec(dirs: &Dirs, lab: &str, node: &str, argv: &[String]) -> LabError {
    if let Err(e) = sys::require_privileges() {
        return e;
    }
    let dir = dirs.labs.join(lab);
    let st = match LabState::load(&dir) {
        Ok(s) => s,
        Err(_) if !dir.exists() => {
            return LabError::NoLab {
                name: lab.to_string(),
                dir,
            };
        }
        Err(e) => return e,
    };
    let Some(n) = st.node(node) else {
        return LabError::NoNode {
            lab: lab.to_string(),
            node: node.to_string(),
            nodes: st
                .nodes
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        };
    };
    let err = Command::new("ip")
        .args(["netns", "exec", &n.netns])
        .args(argv)
        .env("XDG_RUNTIME_DIR", &n.runtime_dir)
        .env("ANODE_LAB", &st.lab)
        .env("ANODE_NODE", &n.name)
        .env("ANODE_ADDRESS", &n.address)
        .env("ANODE_SOCKET", &n.socket)
        .exec();
    LabError::Exec {
        cmd: argv.join(" "),
        netns: n.netns.clone(),
        source: err,
    }
}
