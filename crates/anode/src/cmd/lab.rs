//! `anode lab up|exec|status|down|export`: a topology file run as real `anode node`
//! processes, one per network namespace, wired by veth pairs with the links' delay, rate,
//! loss and queue (the work is in `anode_lab`; this module parses arguments and prints).

use std::path::PathBuf;
use std::time::Duration;

use anode_emu::Topology;
use anode_ether::signals;
use anode_lab::{Dirs, ImpairChoice, LabStatus, UpOptions, UpReport};

use super::client::table::Table;

/// What to do with labs.
#[derive(Debug, clap::Subcommand)]
pub enum LabCommand {
    /// Build a topology as network namespaces joined by veth pairs (with netem) and start one
    /// `anode node` in each; wait until every node routes to every other.
    #[command(after_long_help = UP_HELP)]
    Up(UpArgs),
    /// Run a command in a lab node's network namespace (like `ip netns exec`); `anode` client
    /// commands there talk to that node without flags.
    #[command(after_help = "\
Examples:
  anode lab exec a anode status
  anode lab exec a anode ping 198.18.0.2:3322 -c 3
  anode lab exec a -- ip -br addr
  anode lab exec --name ring5 b bash")]
    Exec(ExecArgs),
    /// Show labs: their nodes' processes, control sockets, neighbors and routes.
    Status(StatusArgs),
    /// Stop a lab's nodes, delete its namespaces (and veths), remove its state; also after a
    /// crash.
    Down(DownArgs),
    /// Write the topology for containerlab (`--format containerlab`) or for bare hosts
    /// (`--format hosts --hosts IP,IP,...`).
    #[command(after_long_help = EXPORT_HELP)]
    Export(ExportArgs),
}

const UP_HELP: &str = "\
What it makes (docs/lab.md has the details):
  - a namespace al<hash>-<node> per node, a veth pair per link (ethK in each namespace);
  - node addresses 198.18.0.N:3322 on each namespace's lo (or the topology's, if they lie in
    198.18.0.0/17), a /30 per link from 198.18.128.0/17, /32 routes to the neighbors;
  - link delay, bandwidth, loss and queue as tc netem on each veth end, or, where the
    kernel has no netem, in the nodes' UDP drivers (--impair node);
  - one `anode node --config` per namespace; configs, logs and state under
    $XDG_STATE_HOME/anode/labs/LAB/ (~/.local/state/...), sockets under
    $XDG_RUNTIME_DIR/anode/lab/ (or /tmp/anode-UID/lab/).

Needs root (network namespaces). If anything fails, or on Ctrl-C, everything made so far is
removed again. The topology's [[step]]s are not run: use the nodes with `anode lab exec`.

Example:
  sudo anode lab up topologies/ring5.toml
  sudo anode lab exec a anode ping 198.18.0.3:3322 -c 3
  sudo anode lab down";

const EXPORT_HELP: &str = "\
--format containerlab writes DIR/NAME.clab.yml, DIR/configs/NODE.toml, DIR/Dockerfile:
  docker build -f DIR/Dockerfile -t anode:latest .     # from the anode repository's root
  sudo containerlab deploy -t DIR/NAME.clab.yml
--format hosts --hosts 10.0.0.1,10.0.0.2 spreads the nodes over the hosts round-robin:
  DIR/hosts/HOST/NODE.toml (nodes at HOST:3322, HOST:3323, ...) and DIR/README.txt, which
  says what to start where.";

/// How links are emulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImpairArg {
    /// netem if the kernel has it, else the nodes.
    Auto,
    /// tc netem qdiscs on the veths (needs the kernel's sch_netem).
    Netem,
    /// Each node's UDP driver ([[link]] impair in its config).
    Node,
}

/// `anode lab up`.
#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// The topology file (the emulator's TOML: [[node]]s and [[link]]s).
    pub topology: PathBuf,
    /// The lab's name (letters, digits, '-', '_'; default: the file's name without .toml).
    #[arg(long)]
    pub name: Option<String>,
    /// The `anode` binary the nodes run (default: this one).
    #[arg(long, value_name = "PATH")]
    pub bin: Option<PathBuf>,
    /// How link delay, bandwidth, loss and queue are emulated.
    #[arg(long, value_enum, default_value_t = ImpairArg::Auto)]
    pub impair: ImpairArg,
    /// Seconds to wait for routing to converge (every node with a route to every other).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub timeout: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `anode lab exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The lab (default: the only one up).
    #[arg(long)]
    pub name: Option<String>,
    /// The node's name in the topology.
    pub node: String,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// `anode lab status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The lab (default: every lab).
    #[arg(long)]
    pub name: Option<String>,
    /// Print JSON (one object per lab, one per line).
    #[arg(long)]
    pub json: bool,
}

/// `anode lab down`.
#[derive(Debug, clap::Args)]
pub struct DownArgs {
    /// The lab (default: the only one up).
    #[arg(long, conflicts_with = "all")]
    pub name: Option<String>,
    /// Take down every lab of this user.
    #[arg(long)]
    pub all: bool,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// A containerlab topology, node configs and a Dockerfile for the image.
    Containerlab,
    /// Node configs for bare hosts and a README of what to start where.
    Hosts,
}

/// `anode lab export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The topology file.
    pub topology: PathBuf,
    /// What to write.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// The directory to write into (default: ./NAME-FORMAT).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The lab's name (default: the file's name without .toml).
    #[arg(long)]
    pub name: Option<String>,
    /// containerlab: the image the nodes run.
    #[arg(long, default_value = "anode:latest")]
    pub image: String,
    /// hosts: the hosts' IP addresses, comma-separated (nodes go round-robin).
    #[arg(long, value_delimiter = ',', value_name = "IP,...")]
    pub hosts: Vec<String>,
    /// hosts: the nodes emulate the links' delay, rate and loss ([[link]] impair).
    #[arg(long)]
    pub impair: bool,
}

/// Where labs live: `$XDG_STATE_HOME/anode/labs` and `$XDG_RUNTIME_DIR/anode/lab`.
fn dirs() -> Dirs {
    Dirs {
        labs: anode_node::config::default_state_dir("labs"),
        sockets: anode_ctl::path::default_socket_dir().join("lab"),
    }
}

/// Runs `anode lab ...`.
pub fn run(c: LabCommand) -> super::CmdResult {
    match c {
        LabCommand::Up(a) => up(a),
        LabCommand::Exec(a) => exec(a),
        LabCommand::Status(a) => status(a),
        LabCommand::Down(a) => down(a),
        LabCommand::Export(a) => export(a),
    }
}

fn load(path: &std::path::Path) -> Result<Topology, String> {
    let registry = anode_node::steps::registry()?;
    Topology::load_with(path, &registry).map_err(|e| e.to_string())
}

fn up(a: UpArgs) -> super::CmdResult {
    if !(1.0..=3600.0).contains(&a.timeout) {
        return Err("--timeout must be 1 to 3600 seconds".into());
    }
    anode_lab::sys::require_privileges().map_err(|e| e.to_string())?;
    let topo = load(&a.topology)?;
    let bin = match a.bin {
        Some(b) => b,
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this program's path ({e}); give --bin PATH"))?,
    };
    super::install_signals()?;
    let name = a
        .name
        .unwrap_or_else(|| anode_lab::names::default_lab_name(&a.topology));
    let mut progress = |line: &str| eprintln!("{line}");
    let opts = UpOptions {
        name,
        bin,
        impair: match a.impair {
            ImpairArg::Auto => ImpairChoice::Auto,
            ImpairArg::Netem => ImpairChoice::Netem,
            ImpairArg::Node => ImpairChoice::Node,
        },
        timeout: Duration::from_secs_f64(a.timeout),
        stop: &signals::stop_requested,
        progress: &mut progress,
    };
    let report = anode_lab::run::up(&topo, &dirs(), opts).map_err(|e| e.to_string())?;
    if a.json {
        let v = serde_json::to_string(&report).map_err(|e| e.to_string())?;
        println!("{v}");
    } else {
        print!("{}", up_text(&report));
    }
    Ok(())
}

fn up_text(r: &UpReport) -> String {
    let mut s = format!(
        "lab {} is up: {} nodes, {} links (emulated by {}), routes converged in {:.1} s, up in {:.1} s\n",
        r.lab,
        r.nodes.len(),
        r.links,
        r.impair.as_str(),
        r.converge_ms as f64 / 1000.0,
        r.total_ms as f64 / 1000.0
    );
    if r.assigned_addresses {
        s.push_str("(the topology's node addresses are not in 198.18.0.0/17: nodes have 198.18.0.N:3322)\n");
    }
    let mut t = Table::new(&["NODE", "NAMESPACE", "ADDRESS", "PID", "CONTROL SOCKET"]);
    for n in &r.nodes {
        t.row(vec![
            n.name.clone(),
            n.netns.clone(),
            n.address.clone(),
            n.pid.map_or("-".into(), |p| p.to_string()),
            n.socket.display().to_string(),
        ]);
    }
    s.push_str(&t.render());
    let (first, second) = (r.nodes.first(), r.nodes.get(1));
    if let (Some(x), Some(y)) = (first, second) {
        s.push_str(&format!(
            "\nUse it:\n  anode lab exec {x} anode status                    # any command in {x}'s namespace; anode finds {x}'s node\n  \
             anode lab exec {x} anode ping {ya} -c 3    # capsule ping {x} -> {y}\n  \
             anode routes --socket {sock}    # client commands from here\n  \
             anode lab status --name {lab}\n  anode lab down --name {lab}\n",
            x = x.name,
            y = y.name,
            ya = y.address,
            sock = x.socket.display(),
            lab = r.lab
        ));
    }
    s
}

fn exec(a: ExecArgs) -> super::CmdResult {
    let d = dirs();
    let lab = anode_lab::state::pick(&d.labs, a.name.as_deref()).map_err(|e| e.to_string())?;
    Err(anode_lab::run::exec(&d, &lab, &a.node, &a.command).to_string())
}

fn status_text(s: &LabStatus) -> String {
    let phase = match s.phase {
        anode_lab::state::Phase::Up => "up",
        anode_lab::state::Phase::Starting => "starting, or `up` died: `anode lab down` removes it",
    };
    let mut out = format!(
        "lab {} ({phase}; links emulated by {}; from {}; state in {})\n",
        s.lab,
        s.impair.as_str(),
        s.topology,
        s.state_dir.display()
    );
    let mut t = Table::new(&[
        "NODE",
        "NAMESPACE",
        "ADDRESS",
        "PROCESS",
        "NEIGHBORS",
        "ROUTES",
        "CONTROL SOCKET",
    ]);
    for n in &s.nodes {
        let count = |v: Option<usize>| v.map_or("-".to_string(), |v| v.to_string());
        t.row(vec![
            n.node.name.clone(),
            n.node.netns.clone(),
            n.node.address.clone(),
            match (n.running, n.node.pid) {
                (true, Some(p)) => format!("{p}"),
                _ => "gone".into(),
            },
            count(n.neighbors),
            format!("{}/{}", count(n.routes), n.expected_routes),
            n.node.socket.display().to_string(),
        ]);
    }
    out.push_str(&t.render());
    out
}

fn status(a: StatusArgs) -> super::CmdResult {
    let d = dirs();
    let labs = match a.name {
        Some(n) => vec![n],
        None => anode_lab::state::list(&d.labs),
    };
    if labs.is_empty() {
        return Err(anode_lab::LabError::NoLabs.to_string());
    }
    for (i, lab) in labs.iter().enumerate() {
        let s = anode_lab::run::status(&d, lab).map_err(|e| e.to_string())?;
        if a.json {
            println!("{}", serde_json::to_string(&s).map_err(|e| e.to_string())?);
        } else {
            if i > 0 {
                println!();
            }
            print!("{}", status_text(&s));
        }
    }
    Ok(())
}

fn down(a: DownArgs) -> super::CmdResult {
    anode_lab::sys::require_privileges().map_err(|e| e.to_string())?;
    let d = dirs();
    let picked = if a.all {
        Ok(None)
    } else {
        anode_lab::state::pick(&d.labs, a.name.as_deref()).map(Some)
    };
    let reports = match picked {
        // Idempotent: a lab that is not there is already down.
        Err(e @ anode_lab::LabError::NoLabs) => {
            println!("{e}: nothing to take down");
            return Ok(());
        }
        Err(e) => return Err(e.to_string()),
        Ok(None) => anode_lab::run::down_all(&d).map_err(|e| e.to_string())?,
        Ok(Some(lab)) => match anode_lab::run::down(&d, &lab) {
            Ok(r) => vec![r],
            Err(anode_lab::LabError::NoLab { name, .. }) => {
                println!("lab {name} is not up: nothing to take down");
                return Ok(());
            }
            Err(e) => return Err(e.to_string()),
        },
    };
    for r in reports {
        println!(
            "lab {} is down: {} processes stopped ({} killed), {} namespaces deleted ({} ms)",
            r.lab,
            r.stopped + r.killed,
            r.killed,
            r.namespaces,
            r.ms
        );
    }
    Ok(())
}

fn export(a: ExportArgs) -> super::CmdResult {
    if a.format == ExportFormat::Containerlab && (a.impair || !a.hosts.is_empty()) {
        return Err(
            "--hosts and --impair are for --format hosts (containerlab nodes get tc netem)".into(),
        );
    }
    let topo = load(&a.topology)?;
    let name = a
        .name
        .unwrap_or_else(|| anode_lab::names::default_lab_name(&a.topology));
    let (files, fmt) = match a.format {
        ExportFormat::Containerlab => (
            anode_lab::export::containerlab(&topo, &name, &a.image),
            "containerlab",
        ),
        ExportFormat::Hosts => {
            let hosts = anode_lab::export::parse_hosts(&a.hosts).map_err(|e| e.to_string())?;
            (anode_lab::export::hosts(&topo, &hosts, a.impair), "hosts")
        }
    };
    let files = files.map_err(|e| e.to_string())?;
    let dir = a
        .out
        .unwrap_or_else(|| PathBuf::from(format!("{name}-{fmt}")));
    anode_lab::export::write(&dir, &files).map_err(|e| e.to_string())?;
    println!("wrote {} files to {}", files.len(), dir.display());
    match a.format {
        ExportFormat::Containerlab => println!(
            "next (from the anode repository's root):\n  docker build -f {d}/Dockerfile -t {img} .\n  sudo containerlab deploy -t {d}/{name}.clab.yml",
            d = dir.display(),
            img = a.image
        ),
        ExportFormat::Hosts => println!(
            "next: copy {} to the hosts; its README.txt says what to start where",
            dir.display()
        ),
    }
    Ok(())
}
