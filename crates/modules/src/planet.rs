//! Running the PLANet §V-A reproduction (`topologies/planet-qdisc.toml`) and turning its
//! samples into bandwidth series and a figure.

use crate::svg::{Series, line_chart};

/// The bandwidth series of a run: (seconds, Mbps) for S→D and MS→MD.
#[derive(Debug, Clone, Default)]
pub struct PlanetRun {
    /// S→D (port 7) at D.
    pub s: Vec<(f64, f64)>,
    /// MS→MD (port 8) at MD.
    pub ms: Vec<(f64, f64)>,
    /// Whether every step's check passed.
    pub passed: bool,
}

/// Runs a topology with the module steps; returns the sampled series.
pub fn run(src: &str, file: &str) -> Result<PlanetRun, String> {
    let reg = crate::emu::registry();
    let topo = anode_emu::Topology::parse_with(src, file, &reg).map_err(|e| e.to_string())?;
    let report = anode_emu::run_with(topo, &reg).map_err(|e| e.to_string())?;
    let mut out = PlanetRun {
        passed: report.passed(),
        ..PlanetRun::default()
    };
    for st in &report.steps {
        if st.action != "sample" {
            continue;
        }
        let d = &st.outcome.data;
        let t = d["t_ms"].as_array().cloned().unwrap_or_default();
        let m = d["mbps"].as_array().cloned().unwrap_or_default();
        let pts: Vec<(f64, f64)> = t
            .iter()
            .zip(&m)
            .filter_map(|(t, m)| Some((t.as_f64()? / 1000.0, m.as_f64()?)))
            .collect();
        match d["port"].as_u64() {
            Some(7) => out.s = pts,
            Some(8) => out.ms = pts,
            _ => {}
        }
    }
    Ok(out)
}

/// Mean of the series over `[from, to)` seconds.
pub fn mean(series: &[(f64, f64)], from: f64, to: f64) -> f64 {
    let v: Vec<f64> = series
        .iter()
        .filter(|(t, _)| *t > from && *t <= to)
        .map(|p| p.1)
        .collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The figure.
pub fn figure(r: &PlanetRun) -> String {
    line_chart(
        "PLANet §V-A in the anode emulator: queue discipline at R1 swapped at run time",
        "time (s)",
        "delivered bandwidth (Mbps, payload)",
        &[
            Series {
                label: "S → D".into(),
                color: "#1f77b4".into(),
                points: r.s.clone(),
            },
            Series {
                label: "MS → MD".into(),
                color: "#d62728".into(),
                points: r.ms.clone(),
            },
        ],
        &[
            (6.0, "MS starts".into()),
            (12.0, "RR installed".into()),
            (22.0, "S stops".into()),
            (25.0, "FCFS reinstalled".into()),
        ],
    )
}
