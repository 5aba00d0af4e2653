//! What an experiment measured, in the form every report is written from.
//!
//! Contract: an [`Outcome`] holds anode's measured series and the same-run baselines (the
//! paper's values come from [`crate::paper`]; only series computed from them, such as ratios,
//! appear here, with role [`Role::Paper`]), the comparison rows of
//! the report's table, and the findings (where anode is better or worse on a ratio, by how
//! much and why). Every number is what the run measured; nothing is filled in.

use serde::{Deserialize, Serialize};

/// Who a measured series belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// anode itself.
    Anode,
    /// A yardstick measured in the same run (kernel forwarding, the C forwarder).
    Baseline,
    /// Derived from the paper's values (e.g. a path's rate relative to the system's fastest),
    /// for plotting beside anode's; the table and NAME.md say which values they come from.
    Paper,
}

/// One measured curve.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Series {
    /// Its label (configuration).
    pub label: String,
    /// The unit of y.
    pub unit: String,
    /// anode or a baseline.
    pub role: Role,
    /// (x, y) points, in x order.
    pub points: Vec<[f64; 2]>,
}

/// One row of the report's table: a quantity the paper states beside anode's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// What is compared.
    pub quantity: String,
    /// Its unit.
    pub unit: String,
    /// The paper's value (None: the paper gives none).
    pub paper: Option<f64>,
    /// Where the paper gives it (figure, section).
    pub paper_ref: String,
    /// anode's value (None: not measured in this run, the note says why).
    pub anode: Option<f64>,
    /// The same-run baseline, in words with its figure (e.g. "kernel 52.1 us").
    pub baseline: String,
}

/// The plot the report draws: anode's series and the paper's in one unit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plot {
    /// Title.
    pub title: String,
    /// x axis.
    pub x_label: String,
    /// y axis.
    pub y_label: String,
    /// The unit of every series drawn (paper series in another unit are left out).
    pub unit: String,
    /// Logarithmic x.
    pub log_x: bool,
    /// Logarithmic y.
    pub log_y: bool,
    /// Paper series to draw, by a part of their label (empty: every one in `unit`).
    pub paper_series: Vec<String>,
}

/// Everything an experiment run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    /// One line for the index: paper figure -> anode figure, better or worse, why.
    pub headline: String,
    /// How it was measured (e.g. "real kernels in network namespaces").
    pub method: String,
    /// What was run, one line each.
    pub setup: Vec<String>,
    /// Measured series (anode and baselines).
    pub series: Vec<Series>,
    /// The comparison table.
    pub rows: Vec<Row>,
    /// Where anode is better or worse and why.
    pub findings: Vec<String>,
    /// The figure.
    pub plot: Plot,
}

impl Series {
    /// A series from its parts.
    pub fn new(label: &str, unit: &str, role: Role, points: Vec<[f64; 2]>) -> Series {
        Series {
            label: label.to_string(),
            unit: unit.to_string(),
            role,
            points,
        }
    }

    /// y at `x`, if measured.
    pub fn at(&self, x: f64) -> Option<f64> {
        self.points.iter().find(|p| p[0] == x).map(|p| p[1])
    }
}

impl Row {
    /// anode / paper, when both are there and the paper's is not zero.
    pub fn ratio(&self) -> Option<f64> {
        match (self.anode, self.paper) {
            (Some(a), Some(p)) if p != 0.0 => Some(a / p),
            _ => None,
        }
    }
}
