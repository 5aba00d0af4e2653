//! `anode plan`: tools for PLAN programs.
//!
//! * `anode plan check FILE [--json]`: parse and type-check; print `FILE: OK` and every
//!   top-level function with its type, or each error as a compiler shows it (the source line,
//!   a caret under the offending range, the expected and found types, a hint) on stderr with
//!   exit status 1. `--json`: the same facts as one JSON object on stdout.
//! * `anode plan run FILE --entry 'f(args)' [--hops N] [--json]`: evaluate the entry call.
//!   By default locally, on one node in this process with no network: the program's output,
//!   then `=> value` (unless `()`), then any uncaught exception. With `--hops N` the packet
//!   runs on a built-in line of N+1 nodes (virtual time, the PLAN execution environment on
//!   real node cores) and what came back is printed per node.
//! * `anode plan sign FILE --chunk 'f(args)' --key BASE.key`: the ed25519 signature
//!   `authEval(|f|(args), key, signature)` checks, for nodes whose `[plan] trusted_keys`
//!   hold the public key.
//! * `anode plan inject FILE --entry 'f(args)' --rb N`: through a running node
//!   (`plan_inject.rs`).

use std::io::IsTerminal as _;

use anode_plan::diagnostic::Diagnostic;
use anode_plan::ee::sim::{self, LineSpec, RunLineError};
use anode_plan::ee::{BuildError, PlanEe};
use anode_plan::{CompileError, Limits};

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
    /// Sign a chunk of a PLAN program for authEval (the auth package).
    Sign(SignArgs),
}

/// Arguments of `anode plan sign`.
#[derive(Debug, clap::Args)]
pub struct SignArgs {
    /// The PLAN source file.
    pub file: String,
    /// The chunk to sign, as the program builds it: `f(args)` for `|f|(args)`.
    #[arg(long)]
    pub chunk: String,
    /// The secret key (`anode keygen --out BASE` writes BASE.key).
    #[arg(long)]
    pub key: std::path::PathBuf,
    /// Where the chunk's arguments are evaluated (matters only if they call thisHost()).
    #[arg(long, default_value = "127.0.0.1:3322")]
    pub at: std::net::SocketAddr,
    /// Print the signature and the public key as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `anode plan check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The PLAN source file.
    pub file: String,
    /// Print the result (functions and types, or the errors with their ranges, expected and
    /// found types and hints) as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `anode plan run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The PLAN source file.
    pub file: String,
    /// The entry call, e.g. 'ping(198.18.0.1, 198.18.0.3)'.
    #[arg(long)]
    pub entry: String,
    /// Hops in the line (it has N+1 nodes, node i at 198.18.0.(i+1):3322); 0 (the
    /// default): evaluate locally, no network.
    #[arg(long, default_value_t = 0)]
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
Without --hops the entry call is evaluated locally (one node, 198.18.0.1:3322, no network)
and the program's output and the call's value are printed:
  anode plan run prog.plan --entry 'fact(5)'
With --hops N the line is built in this process: node 0 (198.18.0.1:3322) is the source,
node i is 198.18.0.(i+1):3322, links have no delay and routes converge before the packet
is injected at node 0. Host literals in --entry may be written 198.18.0.3 (port 3322
implied). Example: anode plan run crates/plan/programs/ping/noeval.plan --hops 3 \\
           --entry 'ping(198.18.0.1, 198.18.0.4)'";

/// Runs `anode plan ...`.
pub fn run(cmd: PlanCommand) -> super::CmdResult {
    match cmd {
        PlanCommand::Check(a) => check(&a),
        PlanCommand::Run(a) => run_line(&a),
        PlanCommand::Inject(a) => super::plan_inject::run(a),
        PlanCommand::Sign(a) => sign(&a),
    }
}

fn sign(a: &SignArgs) -> super::CmdResult {
    use ed25519_dalek::Signer as _;
    let text = read(&a.file)?;
    let key = anode_modules::read_key(&a.key).map_err(|e| e.to_string())?;
    let ee = node_ee();
    let msg = match anode_plan::ee::chunk_signing_bytes(ee.interp(), &text, &a.chunk, a.at) {
        Ok(m) => m,
        Err(BuildError::Program(c)) => {
            eprint!("{}", render(&a.file, &text, &c));
            return Err(format!("{} does not type-check", a.file));
        }
        Err(e) => return Err(format!("{}: {e}", a.file)),
    };
    let sig = hex::encode(key.sign(&msg).to_bytes());
    let public = hex::encode(key.verifying_key().to_bytes());
    if a.json {
        println!("{}", serde_json::json!({"signature": sig, "key": public}));
    } else {
        println!("signature {sig}");
        println!("key       {public}");
    }
    Ok(())
}

fn read(file: &str) -> Result<String, String> {
    std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))
}

/// A PLAN EE as the nodes have it (core services, flowRoute, defHandler, the scouting
/// services and the service packages), so programs are checked against what they will find.
fn node_ee() -> PlanEe {
    PlanEe::with_defaults()
}

/// `err` in `text` as a compiler shows it (colored when stderr is a terminal).
pub(crate) fn render(file: &str, text: &str, err: &CompileError) -> String {
    Diagnostic::new(text, err).render(file, text, std::io::stderr().is_terminal())
}

/// The JSON form of a diagnostic.
fn diagnostic_json(d: &Diagnostic) -> serde_json::Value {
    serde_json::json!({
        "phase": d.phase.name(),
        "message": d.message,
        "line": d.start.line,
        "column": d.start.col,
        "end_line": d.end.line,
        "end_column": d.end.col,
        "expected": d.expected,
        "found": d.found,
        "hint": d.hint,
    })
}

fn check(a: &CheckArgs) -> super::CmdResult {
    let text = read(&a.file)?;
    let ee = node_ee();
    match ee.interp().compile(&text) {
        Ok(prog) => {
            let mut names: Vec<&str> = prog.function_names().collect();
            names.sort_unstable();
            let typed: Vec<(&str, String)> = names
                .into_iter()
                .filter_map(|n| prog.function_type(n).map(|t| (n, t.to_string())))
                .collect();
            if a.json {
                let fns: Vec<_> = typed
                    .iter()
                    .map(|(n, t)| serde_json::json!({"name": n, "type": t}))
                    .collect();
                let out = serde_json::json!({"file": a.file, "ok": true, "functions": fns});
                println!("{out:#}");
            } else {
                println!("{}: OK", a.file);
                for (n, t) in typed {
                    println!("  {n} : {t}");
                }
            }
            Ok(())
        }
        Err(e) => {
            if a.json {
                let d = Diagnostic::new(&text, &e);
                let out = serde_json::json!({
                    "file": a.file, "ok": false, "errors": [diagnostic_json(&d)],
                });
                println!("{out:#}");
            } else {
                eprint!("{}", render(&a.file, &text, &e));
            }
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
    let run = match sim::run_line(&text, &a.entry, &spec) {
        Ok(r) => r,
        Err(RunLineError::Build(BuildError::Program(c))) => {
            if a.json {
                let d = Diagnostic::new(&text, &c);
                let out = serde_json::json!({
                    "file": a.file, "ok": false, "errors": [diagnostic_json(&d)],
                });
                println!("{out:#}");
            } else {
                eprint!("{}", render(&a.file, &text, &c));
            }
            return Err(format!("{} does not type-check", a.file));
        }
        Err(e) => return Err(e.to_string()),
    };
    if a.json {
        println!("{:#}", run.to_json());
    } else {
        print!("{}", run.to_text());
    }
    if run.clean() {
        Ok(())
    } else if a.hops == 0 {
        Err("the entry call raised an exception (see above)".to_string())
    } else {
        Err("the packet did not run cleanly (see the errors above)".to_string())
    }
}
