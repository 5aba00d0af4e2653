//! `anode demo [--json] [--full]`: runs the built-in topology (`topologies/demo.toml`, a
//! 5-node ring) in virtual time and tells the story of what happened: convergence, a greeting
//! to every node, a link failure and the reroute, the repair; then active code (a capsule
//! ping loading its code hop by hop, a flood, PLAN pings); the final counters. Exit status
//! 0 only if every expectation in the file held.

/// Arguments of `anode demo`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = HELP)]
pub struct Args {
    /// Print the full report as JSON (for tools) instead of the story.
    #[arg(long)]
    pub json: bool,
    /// After the story, print the full report (`anode emulate` format).
    #[arg(long)]
    pub full: bool,
}

const HELP: &str = "\
The demo emulates five anode nodes in a ring (a-b-c-d-e-a) inside this process, in virtual
time: it takes well under a second and gives the same result every time. It shows routing
converge, datagrams reach every node, a link fail and traffic reroute around the ring, and
the link come back; then a capsule ping whose code loads hop by hop (first vs cached
latency), a capsule flood, and PLAN ping/noeval and ping/eval. The topology is
topologies/demo.toml in the source tree; to change it, copy it and run
`anode emulate YOUR-COPY.toml`.";

/// Runs the command.
pub fn run(args: Args) -> super::CmdResult {
    let report = anode_node::demo::run()?;
    if args.json {
        print!("{}", report.to_json());
    } else {
        print!("{}", anode_node::demo::story(&report));
        if args.full {
            println!("\n--- full report ---\n");
            print!("{}", report.to_text());
        }
    }
    super::emulate::verdict(&report)
}
