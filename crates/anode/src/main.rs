//! `anode`: run a node, emulate a network, run the demo, and talk to a running node.
//!
//! Each subcommand lives in its own module under `cmd/`; `main` only parses arguments and
//! maps errors to a message and exit status 1 (2 for usage errors, from clap).

use clap::{CommandFactory, Parser, Subcommand};

mod cmd;

/// anode: a programmable ("active") network node.
///
/// Start here: `anode demo` runs a small emulated network end to end and tells what
/// happened. `anode emulate FILE.toml` runs your own topology; `anode node --config FILE`
/// runs a real node over UDP; the other commands talk to a running node (on this host by its
/// control socket, or remotely: `anode --node HOST:PORT --key BASE.key status`).
#[derive(Debug, Parser)]
#[command(name = "anode", version, propagate_version = true)]
struct Cli {
    /// Log filter (e.g. `info`, `anode_core=debug`); also read from RUST_LOG.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a small built-in emulated network end to end and tell what happened.
    Demo(cmd::demo::Args),
    /// Run the network described by a topology file (nodes, links, scenario steps).
    Emulate(cmd::emulate::Args),
    /// Run one node over real UDP, with a control socket for tools and applications.
    Node(cmd::node::Args),
    /// PLAN programs: check them, run them on a built-in line of nodes, inject them at a node.
    #[command(subcommand)]
    Plan(cmd::plan::PlanCommand),
    /// Route IPv4/IPv6 between real interfaces (AF_PACKET), with an optional local node.
    Router(cmd::router::Args),
    /// Make a publisher key for signing service modules.
    Keygen(cmd::module::KeygenArgs),
    /// Service modules: pack, sign, verify, show, fetch; install, list, upgrade... at a node.
    #[command(subcommand)]
    Module(cmd::module::ModuleCommand),
    /// NodeOS policies signed with a key: sign, verify.
    #[command(subcommand)]
    Policy(cmd::policy::PolicyCommand),
    /// A module repository over HTTP.
    #[command(subcommand)]
    Repo(cmd::module::RepoCommand),
    /// Active ping with capsules (the first one loads its code hop by hop).
    Ping(cmd::tools::PingArgs),
    /// Trace the path to a node with hop-limited capsule probes (or one route record).
    Traceroute(cmd::tools::TraceArgs),
    /// Flood a node with capsules counted at the receiver; report rate and loss.
    Flood(cmd::tools::FloodArgs),
    /// Start your own protocol: `anode new protocol NAME` writes a crate to build and emulate.
    #[command(subcommand)]
    New(cmd::new::NewCommand),
    /// Topology files from real graphs (Topology Zoo GML, topohub JSON) and synthetic ones.
    #[command(subcommand)]
    Topo(cmd::topo::TopoCommand),
    /// Run a topology as real nodes in network namespaces (veth, netem); export it for
    /// containerlab or bare hosts.
    #[command(subcommand)]
    Lab(cmd::lab::LabCommand),
    /// The seed papers' experiments rerun on anode, the paper's values beside anode's
    /// (`list`, `run NAME`, `run --all`; reports in docs/experiments/).
    #[command(subcommand)]
    Experiment(cmd::experiment::ExperimentCommand),
    /// Capsules of your own code: send them from a running node (the code loads hop by hop).
    #[command(subcommand)]
    Capsule(cmd::capsule::CapsuleCommand),
    /// Multicast groups over capsules: join a group toward its root, send from the root.
    #[command(subcommand)]
    Multicast(cmd::multicast::MulticastCommand),
    /// The portmapper over capsules: hold a service number at a node, send to it.
    #[command(subcommand)]
    Ports(cmd::ports::PortsCommand),
    /// A key-value store kept in a node's files, over capsules: get, put, delete.
    #[command(subcommand)]
    Store(cmd::store::StoreCommand),
    /// Capture a running node's packets: pcap for Wireshark (-w FILE, -w -) or one line each.
    Capture(cmd::capture::Args),
    /// The capsule code cache of a running node: list, show, put, evict.
    #[command(subcommand)]
    Code(cmd::code::CodeCommand),
    /// A live web page of a running node: links and rates, routes, domains, code cache.
    View(cmd::view::Args),
    /// Print a shell completion script (e.g. `anode completions bash > ~/.local/share/bash-completion/completions/anode`).
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Write man pages for anode and every subcommand into DIR (then `man -l DIR/anode.1`).
    Man {
        /// The directory (made if missing).
        #[arg(long, default_value = "man")]
        dir: std::path::PathBuf,
    },
    #[command(flatten)]
    Client(cmd::client::ClientCommand),
}

/// `anode completions` and `anode man`: generated from the command line definition.
fn docs(c: Command) -> cmd::CmdResult {
    match c {
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "anode", &mut script);
            use std::io::Write;
            match std::io::stdout().write_all(&script) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.to_string()),
                _ => Ok(()),
            }
        }
        Command::Man { dir } => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            clap_mangen::generate_to(Cli::command(), &dir)
                .map_err(|e| format!("cannot write man pages into {}: {e}", dir.display()))?;
            println!(
                "man pages written into {} (man -l {}/anode.1)",
                dir.display(),
                dir.display()
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Commands that print a report and hold no sockets: when their output goes to a pipe that
/// closes (`anode emulate big.toml | head`), they end quietly like other Unix tools instead
/// of failing on the write. (Not for nodes or clients: their sockets must see EPIPE.)
fn quiet_on_closed_pipe(c: &Command) -> bool {
    match c {
        // --realtime runs nodes with control sockets, --view a web server: not those.
        Command::Emulate(a) => !a.realtime && a.view.is_none(),
        Command::Topo(_) => true,
        _ => false,
    }
}

/// `anode --node HOST:PORT --key FILE [--ttl S] COMMAND ...` is `anode COMMAND ... --node
/// HOST:PORT --key FILE [--ttl S]`: the connection flags written before the command move
/// after it, where the client commands take them.
fn hoist_connection_flags(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    const WITH_VALUE: [&str; 3] = ["--node", "--key", "--ttl"];
    let mut front = Vec::new();
    let mut hoisted = Vec::new();
    let mut it = args.into_iter();
    front.extend(it.next());
    let mut it = it.peekable();
    while let Some(a) = it.peek() {
        let s = a.to_string_lossy();
        if WITH_VALUE.contains(&s.as_ref()) {
            hoisted.extend(it.next());
            hoisted.extend(it.next());
        } else if WITH_VALUE.iter().any(|f| s.starts_with(&format!("{f}="))) {
            hoisted.extend(it.next());
        } else if s == "--log" {
            front.extend(it.next());
            front.extend(it.next());
        } else if s.starts_with("--log=") {
            front.extend(it.next());
        } else {
            break;
        }
    }
    front.extend(it);
    front.extend(hoisted);
    front
}

fn main() {
    let cli = Cli::parse_from(hoist_connection_flags(std::env::args_os().collect()));
    if quiet_on_closed_pipe(&cli.command) {
        // SAFETY: restores the default disposition of SIGPIPE before any thread starts; no
        // handler runs, the process just ends when it writes to a closed pipe.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| cli.log.clone());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        // Colour only on a terminal: log files and pipes get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let r = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Emulate(a) => cmd::emulate::run(a),
        Command::Node(a) => cmd::node::run(a),
        Command::Plan(c) => cmd::plan::run(c),
        Command::Router(a) => cmd::router::run(a),
        Command::Keygen(a) => cmd::module::keygen(a),
        Command::Module(c) => cmd::module::run(c),
        Command::Repo(c) => cmd::module::repo(c),
        Command::Policy(c) => cmd::policy::run(c),
        Command::Ping(a) => cmd::tools::ping(a),
        Command::Traceroute(a) => cmd::tools::traceroute(a),
        Command::Flood(a) => cmd::tools::flood(a),
        Command::New(c) => cmd::new::run(c),
        Command::Topo(c) => cmd::topo::run(c),
        Command::Lab(c) => cmd::lab::run(c),
        Command::Experiment(c) => cmd::experiment::run(c),
        Command::Capsule(c) => cmd::capsule::run(c),
        Command::Capture(a) => cmd::capture::run(a),
        Command::Multicast(c) => cmd::multicast::run(c),
        Command::Ports(c) => cmd::ports::run(c),
        Command::Store(c) => cmd::store::run(c),
        Command::Code(c) => cmd::code::run(c),
        Command::View(a) => cmd::view::run(a),
        Command::Client(c) => cmd::client::run(c),
        c @ (Command::Completions { .. } | Command::Man { .. }) => docs(c),
    };
    if let Err(e) = r {
        eprintln!("anode: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::hoist_connection_flags;

    fn hoist(args: &[&str]) -> Vec<String> {
        hoist_connection_flags(args.iter().map(Into::into).collect())
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn connection_flags_before_the_command_move_after_it() {
        assert_eq!(
            hoist(&[
                "anode", "--node", "h:1", "--log", "info", "--key=k", "module", "list"
            ]),
            [
                "anode", "--log", "info", "module", "list", "--node", "h:1", "--key=k"
            ]
        );
        // After the command, and with nothing to move, the arguments stay as they are.
        for args in [
            &["anode", "status", "--node", "h:1", "--key", "k"][..],
            &["anode", "--log=debug", "demo"][..],
            &["anode"][..],
        ] {
            assert_eq!(hoist(args), args);
        }
    }
}
