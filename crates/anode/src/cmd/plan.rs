//! `anode plan`: tools for PLAN programs.
//!
//! * `anode plan check FILE`: parse and type-check; print `FILE: OK` and every top-level
//!   function with its type, or the errors as `FILE:LINE:COL: message` (exit status 1).
//! * `anode plan run FILE --entry 'f(args)' [--hops N] [--rb N] [--json]`: build the PLAN
//!   packet and run it on a built-in line of N+1 nodes in this process (virtual time, the
//!   PLAN execution environment on real node cores), then print what came back: `print`
//!   output, deliveries and errors, per node.
//! * `anode plan inject FILE --entry 'f(args)' --rb N`: through a running node
//!   (`plan_inject.rs`).

use std::fmt::Write as _;

use anode_plan::ee::sim::{self, LineRun, LineSpec, RunLineError};
use anode_plan::ee::{BuildError, PlanEe};
use anode_plan::{CompileError, Limits};
use anode_wire::NodeAddr;

/// `anode plan ...`
#[derive(Debug, clap::Subcommand)]
pub enum PlanCommand {
    /// Parse and type-check a PLAN program; print its functions and their types.
    Check(CheckArgs),
    /// Run a PLAN packet on a built-in in-process line of nodes and print what came back.
    #[command(after_long_help = RUN_HELP)]
    Run(RunArgs),
    /// Send a PLAN packet through a running node and print what comes back.
    Inject(super::plan_inject::InjectArgs),
}

/// Arguments of `anode plan check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The PLAN source file.
    pub file: String,
}

/// Arguments of `anode plan run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The PLAN source file.
    pub file: String,
    /// The entry call, e.g. 'ping(198.18.0.1, 198.18.0.3)'.
    #[arg(long)]
    pub entry: String,
    /// Hops in the line (it has N+1 nodes, node i at 198.18.0.(i+1):3322).
    #[arg(long, default_value_t = 2)]
    pub hops: usize,
    /// Resource bound of the packet.
    #[arg(long, default_value_t = 32)]
    pub rb: u16,
    /// Node (index) where the packet is evaluated first; the source is node 0.
    #[arg(long, default_value_t = 0)]
    pub eval_at: usize,
    /// Error handler function named in the packet (e.g. defHandler).
    #[arg(long, default_value = "")]
    pub handler: String,
    /// Routing function named in the packet.
    #[arg(long, default_value = "defaultRoute")]
    pub route_fun: String,
    /// Session (the source application's PLAN port, `getImplicitPort`).
    #[arg(long, default_value_t = 0)]
    pub session: u32,
    /// Flow id.
    #[arg(long, default_value_t = 0)]
    pub flow: u64,
    /// Step budget of one evaluation.
    #[arg(long, default_value_t = Limits::default().steps)]
    pub steps: u64,
    /// Link MTU in bytes (programs travel as text; large ones need more than 1472).
    #[arg(long, default_value_t = 9000)]
    pub mtu: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

const RUN_HELP: &str = "\
The line is built in this process: node 0 (198.18.0.1:3322) is the source, node i is
198.18.0.(i+1):3322, links have no delay and routes converge before the packet is injected
at node 0. Host literals in --entry may be written 198.18.0.3 (port 3322 implied).
Example: anode plan run crates/plan/programs/ping/noeval.plan --hops 3 \\
           --entry 'ping(198.18.0.1, 198.18.0.4)'";

/// Runs `anode plan ...`.
pub fn run(cmd: PlanCommand) -> super::CmdResult {
    match cmd {
        PlanCommand::Check(a) => check(&a),
        PlanCommand::Run(a) => run_line(&a),
        PlanCommand::Inject(a) => super::plan_inject::run(a),
    }
}

fn read(file: &str) -> Result<String, String> {
    std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))
}

/// A PLAN EE as the nodes of this tool have it (core services, flowRoute, defHandler and the
/// scouting services), so programs are checked against what they will find.
fn node_ee() -> Result<PlanEe, String> {
    Ok(PlanEe::with_defaults())
}

fn located(file: &str, e: &CompileError) -> String {
    let p = e.pos();
    let msg = match e {
        CompileError::Syntax(s) => format!("syntax error: {}", s.msg),
        CompileError::Type(t) => format!("type error: {}", t.msg),
    };
    format!("{file}:{}:{}: {msg}", p.line, p.col)
}

fn check(a: &CheckArgs) -> super::CmdResult {
    let text = read(&a.file)?;
    let ee = node_ee()?;
    match ee.interp().compile(&text) {
        Ok(prog) => {
            let mut names: Vec<&str> = prog.function_names().collect();
            names.sort_unstable();
            let mut out = format!("{}: OK\n", a.file);
            for n in names {
                if let Some(t) = prog.function_type(n) {
                    let _ = writeln!(out, "  {n} : {t}");
                }
            }
            print!("{out}");
            Ok(())
        }
        Err(e) => {
            eprintln!("{}", located(&a.file, &e));
            Err(format!("{} does not type-check", a.file))
        }
    }
}

fn run_line(a: &RunArgs) -> super::CmdResult {
    let text = read(&a.file)?;
    let spec = LineSpec {
        hops: a.hops,
        eval_at: a.eval_at,
        rb: a.rb,
        flow: a.flow,
        session: a.session,
        route_fun: a.route_fun.clone(),
        handler: a.handler.clone(),
        steps: a.steps,
        mtu: a.mtu,
    };
    let run = sim::run_line(&text, &a.entry, &spec).map_err(|e| match e {
        RunLineError::Build(BuildError::Program(c)) => located(&a.file, &c),
        e => e.to_string(),
    })?;
    if a.json {
        println!("{:#}", run_json(&run));
    } else {
        print!("{}", run_text(&run, a));
    }
    if run.report.errors.is_empty() && run.injected.is_ok() {
        Ok(())
    } else {
        Err("the packet did not run cleanly (see the errors above)".to_string())
    }
}

fn run_json(r: &LineRun) -> serde_json::Value {
    let idx = |a: &NodeAddr| r.index_of(a);
    let rep = &r.report;
    serde_json::json!({
        "nodes": r.nodes.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "packet_bytes": r.packet_bytes,
        "injected": match &r.injected { Ok(_) => "ok".to_string(), Err(e) => e.to_string() },
        "quiet": matches!(r.injected, Ok(true)),
        "packets_moved": r.moved,
        "evaluations": r.evaluations,
        "prints": rep.prints.iter().map(|(a, s)| serde_json::json!({"node": idx(a), "text": s})).collect::<Vec<_>>(),
        "deliveries": rep.deliveries.iter().map(|(a, d)| serde_json::json!({
            "node": idx(a), "port": d.port, "src": d.src.to_string(), "flow": d.flow,
            "value": d.value.to_display_string(),
        })).collect::<Vec<_>>(),
        "errors": rep.errors.iter().map(|(a, s)| serde_json::json!({"node": idx(a), "message": s})).collect::<Vec<_>>(),
    })
}

fn run_text(r: &LineRun, a: &RunArgs) -> String {
    let idx = |addr: &NodeAddr| r.index_of(addr);
    let mut out = String::new();
    let nodes: Vec<String> = r
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{i}={n}"))
        .collect();
    let _ = writeln!(out, "line of {} nodes: {}", r.nodes.len(), nodes.join(" "));
    let _ = writeln!(
        out,
        "packet: {} bytes, rb {}, evaluated first at node {}",
        r.packet_bytes, a.rb, a.eval_at
    );
    match &r.injected {
        Ok(true) => {}
        Ok(false) => {
            let _ = writeln!(
                out,
                "warning: the network was still busy when the run stopped"
            );
        }
        Err(e) => {
            let _ = writeln!(out, "the source refused the packet: {e}");
        }
    }
    for (addr, s) in &r.report.prints {
        let _ = writeln!(
            out,
            "node {} print: {}",
            idx(addr),
            s.trim_end_matches('\n')
        );
    }
    for (addr, d) in &r.report.deliveries {
        let v = d.value.to_display_string();
        let _ = writeln!(out, "node {} deliver port {}: {v}", idx(addr), d.port);
    }
    for (addr, s) in &r.report.errors {
        let _ = writeln!(out, "node {} error: {s}", idx(addr));
    }
    let _ = writeln!(
        out,
        "{} packets moved; evaluations per node: {:?}",
        r.moved, r.evaluations
    );
    out
}
