//! `anode experiment list | run NAME | run --all`: the seed papers' experiments rerun on this
//! machine with the paper's values beside anode's (the work is in `anode_experiment`; this
//! module parses arguments, prints progress and the outcome).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anode_experiment::{Ctx, Experiment, report};

use super::client::table::Table;

/// What to do with experiments.
#[derive(Debug, clap::Subcommand)]
pub enum ExperimentCommand {
    /// List the experiments: paper, figure, how each measures (emulator, loopback, netns).
    List {
        /// Print JSON (one object per line).
        #[arg(long)]
        json: bool,
    },
    /// Run one experiment (or all) and write NAME.md, NAME.svg and NAME.json.
    #[command(after_long_help = RUN_HELP)]
    Run(RunArgs),
    /// Redraw NAME.md, NAME.svg and the index from the NAME.json files of a directory
    /// (after a change to the report's layout, without measuring again).
    Report {
        /// The directory of reports.
        #[arg(long, default_value = "docs/experiments")]
        out: PathBuf,
    },
}

const RUN_HELP: &str = "\
Each run writes into --out (default docs/experiments/): NAME.md (setup, the paper's values
beside anode's with ratios and the same-run baselines, findings), NAME.svg (the paper's plot
redrawn with anode's series) and NAME.json (raw points), and rebuilds the index README.md.
Experiments measured in network namespaces need root; progress goes to stderr.

Examples:
  anode experiment list
  sudo anode experiment run pan-ping-latency --quick --out /tmp/exp
  sudo anode experiment run --all";

/// `anode experiment run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The experiment (see `anode experiment list`).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    name: Option<String>,
    /// Run every experiment, one after the other.
    #[arg(long)]
    all: bool,
    /// A shortened run: fewer sizes, shorter periods (what CI runs).
    #[arg(long)]
    quick: bool,
    /// Where the reports go.
    #[arg(long, default_value = "docs/experiments")]
    out: PathBuf,
    /// The directory of the C baselines (default: ../shared/baselines from the current
    /// directory, if it is there).
    #[arg(long)]
    baselines: Option<PathBuf>,
}

/// Runs `anode experiment ...`.
pub fn run(c: ExperimentCommand) -> super::CmdResult {
    match c {
        ExperimentCommand::List { json } => {
            list(json);
            Ok(())
        }
        ExperimentCommand::Run(a) => run_args(a),
        ExperimentCommand::Report { out } => {
            let done = report::redraw(&out).map_err(|e| e.to_string())?;
            if done.is_empty() {
                return Err(format!(
                    "no experiment report (NAME.json) in {}",
                    out.display()
                ));
            }
            println!(
                "redrew {} in {}: {}",
                done.len(),
                out.display(),
                done.join(", ")
            );
            Ok(())
        }
    }
}

fn list(json: bool) {
    let all = anode_experiment::catalogue();
    if json {
        for e in &all {
            let v = serde_json::json!({
                "name": e.name, "paper": e.paper, "figure": e.figure,
                "method": e.method, "needs_root": e.method == anode_experiment::Method::Netns,
                "summary": e.summary,
            });
            println!("{v}");
        }
        return;
    }
    let mut t = Table::new(&["name", "paper", "figure", "measured by", "what it shows"]);
    for e in &all {
        t.row(vec![
            e.name.into(),
            e.paper.into(),
            e.figure.into(),
            format!("{:?}", e.method).to_lowercase(),
            e.summary.into(),
        ]);
    }
    print!("{}", t.render());
}

fn run_args(a: RunArgs) -> super::CmdResult {
    super::install_signals()?;
    let chosen: Vec<Experiment> = match &a.name {
        Some(n) => vec![anode_experiment::find(n).map_err(|e| e.to_string())?],
        None => anode_experiment::catalogue(),
    };
    let anode =
        std::env::current_exe().map_err(|e| format!("cannot find the anode binary: {e}"))?;
    let baselines = a.baselines.clone().or_else(|| {
        let p = Path::new("../shared/baselines");
        p.join("fwd.c").is_file().then(|| p.to_path_buf())
    });
    let mut failed = Vec::new();
    let total = chosen.len();
    for (i, e) in chosen.iter().enumerate() {
        if anode_ether::signals::stop_requested() {
            return Err("interrupted".into());
        }
        let tag = format!("[{}/{total}] {}", i + 1, e.name);
        eprintln!("{tag}: {} {}, {}", e.paper, e.figure, e.method.describe());
        let started = Instant::now();
        let say =
            |line: &str| eprintln!("{tag} ({:.0} s): {line}", started.elapsed().as_secs_f64());
        let work =
            std::env::temp_dir().join(format!("anode-exp-{}-{}", std::process::id(), e.name));
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).map_err(|err| format!("{}: {err}", work.display()))?;
        let ctx = Ctx {
            anode: anode.clone(),
            baselines: baselines.clone(),
            quick: a.quick,
            work: work.clone(),
            progress: &say,
        };
        let result = anode_experiment::run(e, &ctx, &a.out);
        let _ = std::fs::remove_dir_all(&work);
        match result {
            Ok((o, files)) => {
                println!("{}: {}", e.name, o.headline);
                let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
                println!(
                    "  wrote {} ({:.0} s)",
                    names.join(", "),
                    started.elapsed().as_secs_f64()
                );
            }
            Err(err) => {
                eprintln!("{tag}: failed: {err}");
                failed.push(e.name);
            }
        }
    }
    let idx = report::index(&a.out).map_err(|e| e.to_string())?;
    println!("index: {}", idx.display());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {total} experiments failed: {}",
            failed.len(),
            failed.join(", ")
        ))
    }
}
