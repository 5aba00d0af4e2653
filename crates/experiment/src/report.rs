//! Writing a run's report: NAME.md (setup, the table beside the paper's values with ratios
//! and same-run baselines, findings, the paper's claims), NAME.svg (the figure, see
//! [`crate::plot`]) and NAME.json (raw points and rows), and the index README.md of a
//! directory of reports.
//!
//! Contract: [`write`] writes the three files or fails naming the one it could not write;
//! [`index`] rebuilds README.md from every NAME.json in the directory that belongs to an
//! experiment of the catalogue, so running one experiment keeps the index whole.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::paper::PaperExperiment;
use crate::{ExpError, Experiment, Method, Outcome};

/// The JSON file's content.
#[derive(Debug, Serialize)]
struct Json<'a> {
    name: &'a str,
    paper: &'a str,
    figure: &'a str,
    method: Method,
    quick: bool,
    wall_s: f64,
    machine: Machine,
    outcome: &'a Outcome,
    paper_values: &'a PaperExperiment,
}

/// Where it ran.
#[derive(Debug, Serialize)]
struct Machine {
    kernel: String,
    cpus: usize,
}

fn machine() -> Machine {
    Machine {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

fn put(path: PathBuf, text: &str) -> Result<PathBuf, ExpError> {
    std::fs::write(&path, text).map_err(|err| ExpError::Write {
        path: path.clone(),
        err,
    })?;
    Ok(path)
}

/// A number with about four significant digits, no trailing noise.
pub fn num(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let s = if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), num)
}

/// Writes DIR/NAME.{md,svg,json}; returns their paths.
pub fn write(
    dir: &Path,
    e: &Experiment,
    p: &PaperExperiment,
    o: &Outcome,
    quick: bool,
    wall_s: f64,
) -> Result<Vec<PathBuf>, ExpError> {
    std::fs::create_dir_all(dir).map_err(|err| ExpError::Write {
        path: dir.to_path_buf(),
        err,
    })?;
    let svg_path = dir.join(format!("{}.svg", e.name));
    let svg = crate::plot::svg(o, p).map_err(|why| ExpError::Plot {
        path: svg_path.clone(),
        why,
    })?;
    let json = Json {
        name: e.name,
        paper: e.paper,
        figure: e.figure,
        method: e.method,
        quick,
        wall_s,
        machine: machine(),
        outcome: o,
        paper_values: p,
    };
    let json = serde_json::to_string_pretty(&json).map_err(|err| ExpError::Write {
        path: dir.join(format!("{}.json", e.name)),
        err: std::io::Error::other(err),
    })?;
    Ok(vec![
        put(
            dir.join(format!("{}.md", e.name)),
            &markdown(e, p, o, quick, wall_s),
        )?,
        put(svg_path, &svg)?,
        put(dir.join(format!("{}.json", e.name)), &(json + "\n"))?,
    ])
}

fn markdown(e: &Experiment, p: &PaperExperiment, o: &Outcome, quick: bool, wall_s: f64) -> String {
    let m = machine();
    let mut s = format!("# {}: {} {}\n\n", e.name, e.paper, e.figure);
    let _ = writeln!(s, "{}\n", o.headline);
    let _ = writeln!(s, "- Paper: {} ({}; {})", p.paper, p.paper_file, p.page);
    let _ = writeln!(s, "- Measured by: {} ({})", e.method.describe(), o.method);
    let _ = writeln!(
        s,
        "- Run: `anode experiment run {}{}` on {} CPUs, Linux {}, {:.0} s{}\n",
        e.name,
        if quick { " --quick" } else { "" },
        m.cpus,
        m.kernel,
        wall_s,
        if quick {
            " (quick: fewer sizes, shorter periods)"
        } else {
            ""
        }
    );
    let _ = writeln!(s, "![{} beside the paper]({}.svg)\n", e.name, e.name);
    s.push_str("## Results\n\n| quantity | paper | anode | anode / paper | same-run baseline |\n|---|---|---|---|---|\n");
    for r in &o.rows {
        let _ = writeln!(
            s,
            "| {} ({}) | {}{} | {} | {} | {} |",
            r.quantity,
            r.unit,
            opt(r.paper),
            if r.paper_ref.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.paper_ref)
            },
            opt(r.anode),
            r.ratio().map_or("-".into(), |x| format!("{x:.2}")),
            if r.baseline.is_empty() {
                "-"
            } else {
                &r.baseline
            }
        );
    }
    s.push_str("\n## Findings\n\n");
    for f in &o.findings {
        let _ = writeln!(s, "- {f}");
    }
    s.push_str("\n## Setup\n\nanode's run:\n\n");
    for l in &o.setup {
        let _ = writeln!(s, "- {l}");
    }
    let _ = writeln!(s, "\nThe paper's setup: {}\n", p.setup);
    let _ = writeln!(s, "Why it is not rebuilt as it was: {}\n", p.reproduce_note);
    if let Some(m) = &p.missing {
        let _ = writeln!(s, "What the paper does not give: {m}\n");
    }
    s.push_str("## Measured series\n\n");
    for se in &o.series {
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|p| format!("({}, {})", num(p[0]), num(p[1])))
            .collect();
        let _ = writeln!(s, "- {} [{}]: {}", se.label, se.unit, pts.join(" "));
    }
    s.push_str("\n## The paper's words\n\n");
    for c in &p.claims {
        let _ = writeln!(s, "> {c}\n");
    }
    let _ = writeln!(s, "Raw points: [{}.json]({}.json).", e.name, e.name);
    s
}

/// Redraws DIR/NAME.md and DIR/NAME.svg of every experiment from its DIR/NAME.json (after
/// a change to the report's layout, without measuring again), then the index; returns the
/// experiments redrawn.
pub fn redraw(dir: &Path) -> Result<Vec<&'static str>, ExpError> {
    let mut done = Vec::new();
    for e in crate::catalogue() {
        let path = dir.join(format!("{}.json", e.name));
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let bad = |why: String| ExpError::Measure {
            what: path.display().to_string(),
            why,
        };
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let o: Outcome =
            serde_json::from_value(v["outcome"].clone()).map_err(|e| bad(e.to_string()))?;
        let p: PaperExperiment =
            serde_json::from_value(v["paper_values"].clone()).map_err(|e| bad(e.to_string()))?;
        let quick = v["quick"] == true;
        write(dir, &e, &p, &o, quick, v["wall_s"].as_f64().unwrap_or(0.0))?;
        done.push(e.name);
    }
    index(dir)?;
    Ok(done)
}

/// Rebuilds DIR/README.md from the reports in DIR.
pub fn index(dir: &Path) -> Result<PathBuf, ExpError> {
    let mut s = String::from(
        "# The papers' experiments, rerun\n\nEach line: the paper's figure -> anode's, better or worse, and why. \
         Rerun one with `anode experiment run NAME` (add `--quick` for the shortened version CI runs); \
         `anode experiment list` says how each is measured. The paper's values are transcribed in \
         [paper-values.toml](paper-values.toml).\n\n| experiment | paper | measured by | summary |\n|---|---|---|---|\n",
    );
    for e in crate::catalogue() {
        let path = dir.join(format!("{}.json", e.name));
        let headline = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .map(|v| {
                let quick = if v["quick"] == true {
                    " (quick run)"
                } else {
                    ""
                };
                format!(
                    "{}{quick}",
                    v["outcome"]["headline"].as_str().unwrap_or("-")
                )
            });
        let link = if headline.is_some() {
            format!("[{0}]({0}.md)", e.name)
        } else {
            e.name.to_string()
        };
        let _ = writeln!(
            s,
            "| {link} | {} {} | {} | {} |",
            e.paper,
            e.figure,
            format!("{:?}", e.method).to_lowercase(),
            headline.unwrap_or_else(|| "not run yet".into())
        );
    }
    put(dir.join("README.md"), &s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Plot, Role, Row, Series};

    fn outcome() -> Outcome {
        Outcome {
            headline: "paper 13 % -> anode 20 %; worse".into(),
            method: "a test".into(),
            setup: vec!["one line".into()],
            series: vec![
                Series::new(
                    "anode/active",
                    "us",
                    Role::Anode,
                    vec![[128.0, 30.0], [1500.0, 35.0]],
                ),
                Series::new(
                    "kernel/passive",
                    "us",
                    Role::Baseline,
                    vec![[128.0, 2.0], [1500.0, 8.0]],
                ),
            ],
            rows: vec![Row {
                quantity: "overhead".into(),
                unit: "us".into(),
                paper: Some(20.0),
                paper_ref: "Fig. 5".into(),
                anode: Some(30.0),
                baseline: "kernel 2 us".into(),
            }],
            findings: vec!["a finding".into()],
            plot: Plot {
                title: "a title".into(),
                x_label: "size".into(),
                y_label: "us".into(),
                unit: "us".into(),
                log_x: true,
                log_y: false,
                paper_series: vec!["*/passive".into()],
            },
        }
    }

    #[test]
    fn a_report_has_its_three_files_and_the_index_all_experiments() {
        let dir = std::env::temp_dir().join(format!("anode-report-test-{}", std::process::id()));
        let e = crate::find("pan-ping-latency").unwrap();
        let pv = crate::paper::values().unwrap();
        let p = pv.experiment(e.name).unwrap();
        let files = write(&dir, &e, p, &outcome(), true, 1.5).unwrap();
        assert_eq!(files.len(), 3);
        let md = std::fs::read_to_string(&files[0]).unwrap();
        assert!(
            md.contains("| overhead (us) | 20 (Fig. 5) | 30 | 1.50 | kernel 2 us |"),
            "{md}"
        );
        assert!(md.contains("![pan-ping-latency beside the paper](pan-ping-latency.svg)"));
        assert!(md.contains(&p.setup[..40]), "the paper's setup is quoted");
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("anode/active") && svg.contains("kernel/passive"));
        assert!(
            svg.contains("paper: */passive"),
            "the chosen paper series is drawn"
        );
        assert!(!svg.contains("java-GC"), "the others are not");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&files[2]).unwrap()).unwrap();
        assert_eq!(json["outcome"]["rows"][0]["anode"], 30.0);
        assert_eq!(json["paper_values"]["name"], "pan-ping-latency");
        let idx = std::fs::read_to_string(index(&dir).unwrap()).unwrap();
        for e in crate::catalogue() {
            assert!(idx.contains(e.name), "{} missing from the index", e.name);
        }
        assert!(
            idx.contains("[pan-ping-latency](pan-ping-latency.md)") && idx.contains("(quick run)")
        );
        assert!(idx.contains("not run yet"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(115_000.4), "115000");
        assert_eq!(num(12.345), "12.35");
        assert_eq!(num(0.1234), "0.123");
        assert_eq!(num(150.0), "150");
    }
}
