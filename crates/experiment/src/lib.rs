//! The seed papers' experiments, rerun on anode: `anode experiment list | run NAME | run --all`.
//!
//! Each [`Experiment`] names its paper and figure, says how it measures (the emulator in
//! virtual time, real processes on loopback, or real kernels in network namespaces as root),
//! runs the real `anode` binary the user runs, and returns an [`Outcome`]: anode's series
//! and the same-run baselines (kernel forwarding, the C forwarder), a table beside the
//! paper's values (transcribed in `docs/experiments/paper-values.toml`) and findings.
//! [`report`] writes NAME.md, NAME.svg (plotters) and NAME.json, and the index README.md.
//!
//! Contract: an experiment starts its processes and namespaces through [`harness`], so all
//! of them are gone when it returns, also on error; a `--quick` run measures the same
//! quantities with fewer sizes and shorter periods; nothing is sent outside loopback and the
//! experiment's own namespaces (198.18.0.0/15).

pub mod error;
pub mod exps;
pub mod harness;
pub mod outcome;
pub mod paper;
pub mod plot;
pub mod report;
pub mod scouting;
pub mod stats;

use std::path::PathBuf;

pub use error::ExpError;
pub use outcome::{Outcome, Plot, Role, Row, Series};

/// How an experiment measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// The deterministic emulator, in virtual time.
    Emulator,
    /// Real `anode node` processes on loopback.
    Loopback,
    /// Real `anode node` processes and kernels in network namespaces (root).
    Netns,
}

impl Method {
    /// In words, for the output.
    pub fn describe(self) -> &'static str {
        match self {
            Method::Emulator => "emulator, virtual time (deterministic)",
            Method::Loopback => "real anode node processes on loopback",
            Method::Netns => "real kernels and anode node processes in network namespaces (root)",
        }
    }
}

/// What an experiment runs with.
pub struct Ctx<'a> {
    /// The `anode` binary (the command users run).
    pub anode: PathBuf,
    /// `../shared/baselines` (the C forwarder), if found.
    pub baselines: Option<PathBuf>,
    /// Shortened run (fewer sizes, shorter periods).
    pub quick: bool,
    /// A scratch directory (configs, sockets, logs), removed by the caller.
    pub work: PathBuf,
    /// Progress lines (to stderr).
    pub progress: &'a dyn Fn(&str),
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("anode", &self.anode)
            .field("quick", &self.quick)
            .field("work", &self.work)
            .finish_non_exhaustive()
    }
}

impl Ctx<'_> {
    /// Reports progress.
    pub fn say(&self, line: &str) {
        (self.progress)(line);
    }

    /// `full` normally, `quick` with `--quick`.
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick { quick } else { full }
    }
}

/// One of the papers' experiments.
#[derive(Debug, Clone, Copy)]
pub struct Experiment {
    /// Its name (`anode experiment run NAME`).
    pub name: &'static str,
    /// The paper, short.
    pub paper: &'static str,
    /// Figures and tables.
    pub figure: &'static str,
    /// How it measures.
    pub method: Method,
    /// One line: what it shows.
    pub summary: &'static str,
    /// Runs it.
    pub run: fn(&Ctx<'_>, &paper::PaperExperiment) -> Result<Outcome, ExpError>,
}

/// Every experiment, in the order of the issue that asked for them.
pub fn catalogue() -> Vec<Experiment> {
    exps::all()
}

/// The experiment called `name`.
pub fn find(name: &str) -> Result<Experiment, ExpError> {
    catalogue()
        .into_iter()
        .find(|e| e.name == name)
        .ok_or_else(|| ExpError::Unknown(name.to_string()))
}

/// Runs `e` (checking root first where it needs it) and writes its report into `out`
/// ([`report::write`]): the outcome and the files written.
pub fn run(
    e: &Experiment,
    ctx: &Ctx<'_>,
    out: &std::path::Path,
) -> Result<(Outcome, Vec<PathBuf>), ExpError> {
    if e.method == Method::Netns && !anode_lab::sys::privileged() {
        return Err(ExpError::NotRoot(e.name.to_string()));
    }
    let started = std::time::Instant::now();
    let pv = paper::values()?;
    let p = pv.experiment(e.name)?;
    let o = (e.run)(ctx, p)?;
    let files = report::write(out, e, p, &o, ctx.quick, started.elapsed().as_secs_f64())?;
    Ok((o, files))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ten_experiments_each_with_the_papers_values() {
        let all = super::catalogue();
        assert_eq!(all.len(), 10);
        let pv = super::paper::values().unwrap();
        let mut names: Vec<&str> = all.iter().map(|e| e.name).collect();
        for e in &all {
            let p = pv.experiment(e.name).unwrap();
            assert!(!p.claims.is_empty(), "{}: no claims", e.name);
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 10, "names are unique");
        assert!(matches!(
            super::find("nope"),
            Err(super::ExpError::Unknown(_))
        ));
    }
}
