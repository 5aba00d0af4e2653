//! `netserv-mlffr`: NetServ Fig. 3. The maximum loss-free forwarding rate of the middle host
//! of `s - r - d` at minimum size (and at 1500 B): kernel forwarding, the C forwarder, the
//! real `anode node` without modules, and with the null module in its packet path.

use super::fwd::{self, Fwd};
use crate::harness::traffic;
use crate::paper::PaperExperiment;
use crate::report::num;
use crate::{Ctx, ExpError, Outcome, Plot, Role, Row, Series};

/// Runs it.
pub fn run(ctx: &Ctx<'_>, p: &PaperExperiment) -> Result<Outcome, ExpError> {
    let sizes: Vec<usize> = ctx.pick(vec![84, 1472], vec![84]);
    let mut fwds = vec![Fwd::Kernel, Fwd::Anode, Fwd::AnodeModule];
    if ctx.baselines.is_some() {
        fwds.insert(1, Fwd::Cfwd);
    }
    let (rates, limited) = fwd::mlffr_all(ctx, "m", &fwds, &|_| sizes.clone())?;
    let at = |f: Fwd| {
        rates
            .iter()
            .find(|r| r.0 == f)
            .and_then(|r| r.1.first())
            .map(|p| p[1])
    };
    let (kernel, none, module) = (at(Fwd::Kernel), at(Fwd::Anode), at(Fwd::AnodeModule));
    let cfwd = at(Fwd::Cfwd);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let base = format!(
        "kernel {} pps{}",
        kernel.map_or("-".into(), num),
        cfwd.map_or(String::new(), |c| format!(", C forwarder {} pps", num(c)))
    );
    let paper = |part: &str| p.point(part, 64.0);
    let rows = vec![
        Row {
            quantity: "MLFFR, kernel IP forwarding (Bare Linux), min size".into(),
            unit: "packets/s".into(),
            paper: paper("Bare Linux"),
            paper_ref: "Fig. 3, 4.2".into(),
            anode: kernel,
            baseline: "this is the baseline".into(),
        },
        Row {
            quantity: "MLFFR, forwarder without modules (paper: Plain Click; anode: anode node)"
                .into(),
            unit: "packets/s".into(),
            paper: paper("Plain Click"),
            paper_ref: "Fig. 3, 4.2".into(),
            anode: none,
            baseline: base.clone(),
        },
        Row {
            quantity: "MLFFR, forwarder with a null module (paper: Click with NetServ)".into(),
            unit: "packets/s".into(),
            paper: paper("Click with NetServ"),
            paper_ref: "Fig. 3, 4.2".into(),
            anode: module,
            baseline: base.clone(),
        },
        Row {
            quantity: "with module / without".into(),
            unit: "ratio".into(),
            paper: Some(27_900.0 / 36_500.0),
            paper_ref: "computed from Fig. 3".into(),
            anode: ratio(module, none),
            baseline: "-".into(),
        },
        Row {
            quantity: "without modules / kernel".into(),
            unit: "ratio".into(),
            paper: Some(36_500.0 / 115_000.0),
            paper_ref: "computed from Fig. 3".into(),
            anode: ratio(none, kernel),
            baseline: cfwd.zip(kernel).map_or("-".into(), |(c, k)| {
                format!("C forwarder / kernel {:.2}", c / k)
            }),
        },
    ];
    let cost = ratio(module, none).map(|r| 100.0 * (1.0 - r));
    let headline = format!(
        "module cost at min size: paper 24 % (27,900 vs 36,500 pps) -> anode {} % ({} vs {} pps); anode without modules at {} of kernel forwarding (paper's Click: 0.32); {}",
        cost.map_or("-".into(), num),
        module.map_or("-".into(), num),
        none.map_or("-".into(), num),
        ratio(none, kernel).map_or("-".into(), |r| format!("{r:.2}")),
        if cost.unwrap_or(100.0) <= 23.6 {
            "better: the module layer costs less"
        } else {
            "worse: each module call crosses into WebAssembly per packet"
        }
    );
    let mut findings = vec![format!(
        "ordering kernel > forwarder > forwarder with module, as in the paper: {}",
        if kernel >= none && none >= module {
            "kept"
        } else {
            "not kept in this run (see the table)"
        }
    )];
    if let Some(c) = cost {
        findings.push(format!(
            "the null module costs {} % of the rate (paper 23.6 %); the paper's point, that the module layer costs much less than the kernel-to-user crossing, {}",
            num(c),
            if ratio(none, kernel).is_some_and(|r| 1.0 - r > c / 100.0) { "holds" } else { "does not hold here" }
        ));
    }
    for (f, size) in &limited {
        findings.push(format!(
            "{} forwarded everything the blaster offered at {size} B (full speed was loss-free): its MLFFR is at least the figure shown; the sender, not the forwarder, was the limit",
            f.label()
        ));
    }
    findings.push("sizes are UDP payloads of ANEP datagrams: the smallest is 84 B (8 ANEP + 72 transit + 4 datagram header), 112 B as an IP packet, where the paper sent 64 B frames; x in the plot is the IP packet size".into());
    findings.push("the paper's 100 Mbit/s line capped 64 B at 148,800 pps and 1500 B at ~8,200 pps; veth has no line rate, so here the 1500 B point is CPU-bound too and the forwarders do not converge as the paper's did".into());
    let series = rates
        .iter()
        .map(|(f, pts)| {
            let role = if matches!(f, Fwd::Kernel | Fwd::Cfwd) {
                Role::Baseline
            } else {
                Role::Anode
            };
            Series::new(f.label(), "packets/s", role, pts.clone())
        })
        .collect();
    Ok(Outcome {
        headline,
        method: "line s - r - d of network namespaces on veth; anode-blast in s, anode-sink in d, the forwarder in r; MLFFR by bisection (< 0.1 % loss)".into(),
        setup: vec![
            format!("forwarders in r: {}", fwds.iter().map(|f| f.label()).collect::<Vec<_>>().join("; ")),
            "anode rows run the real `anode node --config` (links to s and d static); the module row adds `[modules]` with a fresh publisher key and `[[module]] package = null.amod` (built with `anode module pack --builtin null` and signed), a WebAssembly packet processor whose filter matches every packet".into(),
            format!("each rate probe sends for {} s; a full-speed probe, then {} bisection steps between 0 and the full-speed rate; loss-free = under {} % lost", ctx.pick(2, 1), ctx.pick(7, 5), traffic::LOSS_FREE_PCT),
        ],
        series,
        rows,
        findings,
        plot: Plot {
            title: "NetServ Fig. 3: maximum loss-free forwarding rate".into(),
            x_label: "IP packet size (bytes)".into(),
            y_label: "packets/s".into(),
            unit: "packets/s".into(),
            log_x: false,
            log_y: true,
            paper_series: vec![],
        },
    })
}
