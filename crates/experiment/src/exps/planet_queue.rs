//! `planet-queue-swap`: PLANet Fig. 7. In the emulator (virtual time, deterministic):
//! `topologies/planet-qdisc.toml`, S sends 15 Mbit/s to D through R1, a misbehaving source MS
//! floods 40 Mbit/s through the same R1 -> R2 link; R1's FCFS queue module is swapped for a
//! round-robin one while traffic runs, and back. Bandwidth at D and MD per phase, beside the
//! paper's per-interval values.

use crate::paper::PaperExperiment;
use crate::plot::NO_PAPER_SERIES;
use crate::report::num;
use crate::{Ctx, ExpError, Outcome, Plot, Role, Row, Series};

const TOPOLOGY: &str = include_str!("../../../../topologies/planet-qdisc.toml");

/// A phase of the scenario: (name, from s, to s, the paper's S and MS for the matching
/// interval of Fig. 7).
type Phase = (&'static str, f64, f64, Option<f64>, Option<f64>);

/// The scenario's phases (S alone, FCFS with MS, round robin, S stopped, FCFS again).
const PHASES: [Phase; 5] = [
    ("S alone (FCFS)", 3.0, 6.0, Some(15.0), None),
    ("FCFS, MS on", 7.0, 12.0, Some(10.0), Some(30.0)),
    ("round robin installed", 13.0, 22.0, Some(13.0), Some(20.0)),
    ("round robin, S stopped", 23.0, 25.0, Some(0.0), Some(38.0)),
    ("FCFS reinstalled", 26.0, 30.0, None, Some(40.0)),
];

/// Runs it.
pub fn run(ctx: &Ctx<'_>, _p: &PaperExperiment) -> Result<Outcome, ExpError> {
    ctx.say("emulating topologies/planet-qdisc.toml (30 s of virtual time)");
    let r =
        anode_modules::planet::run(TOPOLOGY, "topologies/planet-qdisc.toml").map_err(|why| {
            ExpError::Measure {
                what: "the planet-qdisc scenario".into(),
                why,
            }
        })?;
    if !r.passed {
        return Err(ExpError::Measure {
            what: "the planet-qdisc scenario".into(),
            why: "a step's check failed".into(),
        });
    }
    let mut rows = Vec::new();
    let (mut ps, mut pm) = (Vec::new(), Vec::new());
    for (name, a, b, s_paper, ms_paper) in PHASES {
        let (s, m) = (
            anode_modules::planet::mean(&r.s, a, b),
            anode_modules::planet::mean(&r.ms, a, b),
        );
        ctx.say(&format!("{name}: S {s:.1} Mbit/s, MS {m:.1} Mbit/s"));
        let mid = (a + b) / 2.0;
        if let Some(v) = s_paper {
            ps.push([mid, v]);
        }
        if let Some(v) = ms_paper {
            pm.push([mid, v]);
        }
        rows.push(Row {
            quantity: format!("S -> D, {name} ({a:.0}-{b:.0} s)"),
            unit: "Mbit/s".into(),
            paper: s_paper,
            paper_ref: "Fig. 7".into(),
            anode: Some(s),
            baseline: "-".into(),
        });
        rows.push(Row {
            quantity: format!("MS -> MD, {name} ({a:.0}-{b:.0} s)"),
            unit: "Mbit/s".into(),
            paper: ms_paper,
            paper_ref: "Fig. 7".into(),
            anode: Some(m),
            baseline: "-".into(),
        });
    }
    let share = |a: f64, b: f64| {
        let (s, m) = (
            anode_modules::planet::mean(&r.s, a, b),
            anode_modules::planet::mean(&r.ms, a, b),
        );
        if s + m > 0.0 { s / (s + m) } else { 0.0 }
    };
    let (fcfs, rr) = (share(7.0, 12.0), share(13.0, 22.0));
    rows.push(Row {
        quantity: "S's share of R1 under FCFS with MS on".into(),
        unit: "fraction".into(),
        paper: Some(10.0 / 40.0),
        paper_ref: "Fig. 7, computed".into(),
        anode: Some(fcfs),
        baseline: "-".into(),
    });
    rows.push(Row {
        quantity: "S's share of R1 under round robin".into(),
        unit: "fraction".into(),
        paper: Some(13.0 / 33.0),
        paper_ref: "Fig. 7, computed".into(),
        anode: Some(rr),
        baseline: "-".into(),
    });
    let s_rr = anode_modules::planet::mean(&r.s, 13.0, 22.0);
    let headline = format!(
        "S's share of the congested router: paper 0.25 under FCFS -> 0.39 after the live swap to round robin; anode {} -> {}, S back to {} of its 15 Mbit/s (paper 13); {}",
        num(fcfs),
        num(rr),
        num(s_rr),
        if s_rr >= 13.0 {
            "better: the round-robin module gives S all it offers"
        } else {
            "worse: S does not get back what the paper's did"
        }
    );
    let pts = |v: &[(f64, f64)]| v.iter().map(|p| [p.0, p.1]).collect::<Vec<_>>();
    Ok(Outcome {
        headline,
        method: "the emulator in virtual time (deterministic); queue modules are the real WebAssembly modules installed at run time by the scenario's install-module steps".into(),
        setup: vec![
            "topologies/planet-qdisc.toml: S -> R1 -> R2 -> D and MS -> R1 -> R2 -> MD; R1 -> R2 limited to 40 Mbit/s (PLANet's R1 switching capacity)".into(),
            "S sends 15 Mbit/s from 2 s, MS 40 Mbit/s from 6 s; the round-robin module replaces FCFS at 12 s, S stops at 22 s, FCFS returns at 25 s (the paper's events at 0, 33, 64, 97, 129 s, compressed)".into(),
            "bandwidth sampled at D (port 7) and MD (port 8) every 500 ms; phase means skip the first second after each event".into(),
            "the paper's per-interval values are drawn at the middle of the matching phase".into(),
        ],
        series: vec![
            Series::new("S -> D at D (anode, emulated)", "Mbit/s", Role::Anode, pts(&r.s)),
            Series::new("MS -> MD at MD (anode, emulated)", "Mbit/s", Role::Anode, pts(&r.ms)),
            Series::new("S -> D per interval (Fig. 7)", "Mbit/s", Role::Paper, ps),
            Series::new("MS -> MD per interval (Fig. 7)", "Mbit/s", Role::Paper, pm),
        ],
        rows,
        findings: vec![
            "the swap is live: the install-module step replaces R1's queue discipline while both flows run, no packet path restarts (PLANet linked its queueing code in 30 ms)".into(),
            "under round robin the paper's S got 13 of its 15 Mbit/s; anode's per-input-link queues give S all of it, because S's 15 Mbit/s is under its fair half of the 40 Mbit/s link".into(),
            "there is no same-run baseline: the experiment compares two queue disciplines of one node, as the paper's does".into(),
        ],
        plot: Plot { title: "PLANet Fig. 7: FCFS swapped for round robin under a misbehaving source".into(), x_label: "virtual time (s)".into(), y_label: "Mbit/s".into(), unit: "Mbit/s".into(), log_x: false, log_y: false, paper_series: vec![NO_PAPER_SERIES.into()] },
    })
}
