//! What can go wrong running an experiment.

use std::path::PathBuf;

/// An experiment that could not run or could not write its report.
#[derive(Debug, thiserror::Error)]
pub enum ExpError {
    /// No experiment has this name.
    #[error("no experiment named '{0}' (see `anode experiment list`)")]
    Unknown(String),
    /// The experiment builds network namespaces, which needs root.
    #[error(
        "{0} needs root: it builds network namespaces and measures kernel forwarding in the same run (run it with sudo)"
    )]
    NotRoot(String),
    /// A program the experiment runs is not there.
    #[error("{what} not found at {path}: {hint}")]
    Missing {
        /// What it is.
        what: String,
        /// Where it was looked for.
        path: PathBuf,
        /// How to get it.
        hint: String,
    },
    /// A command (namespace set-up, a node, a client) failed.
    #[error("{0}")]
    Command(String),
    /// A measurement came out unusable (no reply, nothing delivered).
    #[error("{what}: {why}")]
    Measure {
        /// The measurement.
        what: String,
        /// Why it is unusable.
        why: String,
    },
    /// The paper values file does not parse.
    #[error("docs/experiments/paper-values.toml: {0}")]
    PaperValues(String),
    /// Writing a report file failed.
    #[error("cannot write {path}: {err}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// Drawing the figure failed.
    #[error("cannot draw {path}: {why}")]
    Plot {
        /// The figure's file.
        path: PathBuf,
        /// The plotting library's error.
        why: String,
    },
}

impl From<anode_lab::LabError> for ExpError {
    fn from(e: anode_lab::LabError) -> ExpError {
        ExpError::Command(e.to_string())
    }
}
