//! `anode emulate TOPOLOGY.toml [--json] [--realtime]`: runs the network a topology file
//! describes and prints the report. Exit status 1 if the file is wrong (the message names
//! file, line and the fix) or if any `expect` step failed.

use std::path::PathBuf;

use anode_emu::{Report, Topology};

/// Arguments of `anode emulate`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = HELP)]
pub struct Args {
    /// The topology file (TOML): [network], optional [routing], [[node]], [[link]], [[step]].
    /// Examples: topologies/ring5.toml, topologies/line4.toml.
    pub topology: PathBuf,
    /// Print the report as JSON (for tools) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Run every node over real UDP sockets on 127.0.0.1 instead of in virtual time. Takes as
    /// long as [network] duration_ms says; the report is not reproducible.
    #[arg(long)]
    pub realtime: bool,
}

const HELP: &str = "\
A topology file describes a network and a scenario:

  [network]
  seed = 42              # seeds link loss: same file + seed = same report
  duration_ms = 20000    # virtual time the run covers

  [[node]]
  name = \"a\"             # address optional (default 198.18.0.N:3322)

  [[link]]
  a = \"a\"
  b = \"b\"
  delay_ms = 2           # also bandwidth_mbps, loss (0..1), mtu, queue_bytes, cost

  [[step]]
  at_ms = 3000
  action = \"send\"        # send | fail-link | restore-link | expect
  from = \"a\"
  to = \"*\"               # every other node

  [[step]]
  at_ms = 9000
  action = \"expect\"      # check = reachable | unreachable | route | delivered
  check = \"reachable\"
  from = \"*\"
  to = \"*\"

The report tells when routing converged, what each step did (delivered, lost, latency,
path), how long each link failure took to repair, each check's verdict, and every node's
counters and routes. Exit status: 0 if every check held, 1 otherwise.";

/// Runs the command.
pub fn run(args: Args) -> super::CmdResult {
    let registry = anode_node::steps::registry()?;
    let topo = Topology::load_with(&args.topology, &registry).map_err(|e| e.to_string())?;
    let report = if args.realtime {
        anode_node::realtime::run(topo, &registry)
    } else {
        anode_emu::run_with(topo, &registry)
    }
    .map_err(|e| e.to_string())?;
    print_report(&report, args.json);
    verdict(&report)
}

/// Prints a report as text or JSON.
pub fn print_report(report: &Report, json: bool) {
    if json {
        print!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
}

/// Ok if every check held, else the message for exit status 1.
pub fn verdict(report: &Report) -> super::CmdResult {
    if report.passed() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} expect checks failed",
            report.checks.failed,
            report.checks.failed + report.checks.passed
        ))
    }
}
