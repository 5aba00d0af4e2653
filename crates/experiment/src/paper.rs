//! The papers' values (`docs/experiments/paper-values.toml`, transcribed from
//! `../shared/seeds/`), compiled into the binary so a report can always quote them.
//!
//! Contract: [`values`] parses the embedded file once per call and fails only if the file in
//! the repository is malformed (a test parses it); [`PaperValues::experiment`] finds one
//! experiment's entry by name.

use serde::{Deserialize, Serialize};

use crate::ExpError;

const TEXT: &str = include_str!("../../../docs/experiments/paper-values.toml");

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
pub struct PaperValues {
    /// Schema version (1).
    pub version: u32,
    /// One entry per experiment.
    pub experiment: Vec<PaperExperiment>,
}

/// What one paper says about one experiment.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct PaperExperiment {
    /// The experiment's name (as `anode experiment list` shows it).
    pub name: String,
    /// Authors and title.
    pub paper: String,
    /// The seed file.
    pub paper_file: String,
    /// Figures and tables.
    pub figure: String,
    /// Where in the paper (sections; the text files have no page numbers).
    pub page: String,
    /// The paper's setup.
    pub setup: String,
    /// Why the setup cannot be rebuilt and what is compared instead.
    pub reproduce_note: String,
    /// The figure's x axis.
    pub x_label: String,
    /// The figure's y axis.
    pub y_label: String,
    /// What the paper does not give.
    #[serde(default)]
    pub missing: Option<String>,
    /// Short quotes.
    #[serde(default)]
    pub claims: Vec<String>,
    /// Curves (or the points of them the text states).
    #[serde(default)]
    pub series: Vec<PaperSeries>,
    /// Single numbers.
    #[serde(default)]
    pub scalar: Vec<PaperScalar>,
}

/// A curve of the paper.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct PaperSeries {
    /// Its label.
    pub label: String,
    /// Figure.
    pub figure: String,
    /// Unit of y.
    pub unit: String,
    /// text, table or figure-caption.
    pub source: String,
    /// The paper qualifies the numbers ("about").
    pub approx: bool,
    /// Section.
    #[serde(rename = "where")]
    pub location: String,
    /// (x, y) points.
    pub points: Vec<[f64; 2]>,
    /// A remark.
    #[serde(default)]
    pub note: Option<String>,
}

/// A single number of the paper.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct PaperScalar {
    /// Its label.
    pub label: String,
    /// The number.
    pub value: f64,
    /// Unit.
    pub unit: String,
    /// text, table or figure-caption.
    pub source: String,
    /// Qualified ("about", a bound).
    pub approx: bool,
    /// Section.
    #[serde(rename = "where")]
    pub location: String,
    /// A remark.
    #[serde(default)]
    pub note: Option<String>,
}

/// Parses the embedded file.
pub fn values() -> Result<PaperValues, ExpError> {
    toml::from_str(TEXT).map_err(|e| ExpError::PaperValues(e.to_string()))
}

impl PaperValues {
    /// The entry for `name`.
    pub fn experiment(&self, name: &str) -> Result<&PaperExperiment, ExpError> {
        self.experiment
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| ExpError::PaperValues(format!("no [[experiment]] named {name}")))
    }
}

impl PaperExperiment {
    /// The series whose label contains `part`.
    pub fn series(&self, part: &str) -> Option<&PaperSeries> {
        self.series.iter().find(|s| s.label.contains(part))
    }

    /// The scalar whose label contains `part`.
    pub fn scalar(&self, part: &str) -> Option<&PaperScalar> {
        self.scalar.iter().find(|s| s.label.contains(part))
    }

    /// The y of the series labelled `part` at `x`.
    pub fn point(&self, part: &str, x: f64) -> Option<f64> {
        let s = self.series(part)?;
        s.points.iter().find(|p| p[0] == x).map(|p| p[1])
    }
}
