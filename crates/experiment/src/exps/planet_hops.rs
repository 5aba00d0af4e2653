//! `planet-switching` (PLANet Fig. 3, Table I) and `planet-eval-overhead` (PLANet Fig. 4):
//! round trips over lines of 1..4 hops of network namespaces: ICMP ping through kernel
//! routers, and through anode nodes a capsule ping (its code runs at every hop), PLAN
//! ping/noeval (evaluated only at the destination and back at the source, routed passively
//! in between) and ping/eval (evaluated at every hop); each with a small and a padded
//! packet, so the fit of round trip over hops and size gives the per-router-traversal cost
//! per packet and per byte, as Table I does.

use std::time::Duration;

use super::common::{NodeLine, Routers, ping_median};
use super::fwd::Fwd;
use super::service;
use crate::harness::netns::Line;
use crate::paper::PaperExperiment;
use crate::report::num;
use crate::{Ctx, ExpError, Outcome, Plot, Role, Row, Series, stats};

/// ping/noeval with a padding argument (crates/plan/programs/ping/noeval.plan plus `pad`).
const NOEVAL: &str = "fun ack(pad : string) : unit = print(\"Success\")\n\
fun ping(source : host, destination : host, pad : string) : unit =\n  \
if thisHostIs(destination) then OnRemote(|ack|(pad), source, getRB(), defaultRoute)\n  \
else OnRemote(|ping|(source, destination, pad), destination, getRB(), defaultRoute)\n";

/// ping/eval with a padding argument (crates/plan/programs/ping/eval.plan plus `pad`).
const EVAL: &str = "fun back(source : host, pad : string) : unit =\n  \
if thisHostIs(source) then print(\"Success\")\n  \
else let val next = defaultRoute(source) in OnNeighbor(|back|(source, pad), fst next, getRB(), snd next) end\n\
fun ping(source : host, destination : host, pad : string) : unit =\n  \
if thisHostIs(destination) then back(source, pad)\n  \
else let val next = defaultRoute(destination) in OnNeighbor(|ping|(source, destination, pad), fst next, getRB(), snd next) end\n";

/// Padding bytes of the large packets.
pub const PAD: usize = 1000;

/// Median round trips (us) by hop count: (hops, small, padded).
#[derive(Debug, Default, Clone)]
pub struct Curve(pub Vec<(f64, f64, f64)>);

/// Every curve of one run.
#[derive(Debug, Default)]
pub struct Hops {
    /// ICMP ping through kernel routers (56 and 56 + PAD bytes of data).
    pub ip: Curve,
    /// `anode ping` capsules through anode nodes (code at every hop).
    pub capsule: Curve,
    /// PLAN ping/noeval.
    pub noeval: Curve,
    /// PLAN ping/eval.
    pub eval: Curve,
}

fn icmp(line: &Line, size: usize, count: u32) -> Result<f64, ExpError> {
    let dst = line.addr(line.len() - 1);
    let (c, s) = (count.to_string(), size.to_string());
    let out = anode_lab::sys::run(
        "ip",
        &[
            "netns",
            "exec",
            line.ns(0),
            "ping",
            "-q",
            "-n",
            "-c",
            &c,
            "-i",
            "0.01",
            "-s",
            &s,
            &dst,
        ],
        None,
        "ping",
        Duration::from_secs(30),
    )?;
    // rtt min/avg/max/mdev = 0.030/0.045/0.090/0.010 ms
    let avg = out
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').nth(1))
        .and_then(|v| v.parse::<f64>().ok());
    avg.map(|ms| ms * 1000.0).ok_or_else(|| ExpError::Measure {
        what: "ICMP ping".into(),
        why: format!("no round trip in: {out}"),
    })
}

fn plan_rtt(
    ctx: &Ctx<'_>,
    nl: &NodeLine,
    prog: &std::path::Path,
    pad: usize,
    count: u32,
) -> Result<f64, ExpError> {
    let (src, dst) = (&nl.src().addr, &nl.dst().addr);
    let entry = format!("ping({src}, {dst}, \"{}\")", "x".repeat(pad));
    let p = prog.to_string_lossy().into_owned();
    let mut v = Vec::new();
    for _ in 0..count {
        let out = nl.src().json(
            ctx,
            &[
                "plan",
                "inject",
                &p,
                "--entry",
                &entry,
                "--expect",
                "1",
                "--timeout",
                "2",
                "--rb",
                "64",
            ],
            Duration::from_secs(10),
        )?;
        if let Some(ms) = out.last().and_then(|r| r["last_ms"].as_f64()) {
            v.push(ms * 1000.0);
        }
    }
    stats::median(&v).ok_or_else(|| ExpError::Measure {
        what: format!("PLAN ping {src} -> {dst}"),
        why: "nothing came back".into(),
    })
}

/// Measures every curve at `hops` (links between source and destination).
pub fn measure(ctx: &Ctx<'_>, hops: &[usize], eval: bool) -> Result<Hops, ExpError> {
    let (noeval_p, eval_p) = (ctx.work.join("noeval.plan"), ctx.work.join("eval.plan"));
    for (p, t) in [(&noeval_p, NOEVAL), (&eval_p, EVAL)] {
        std::fs::write(p, t).map_err(|err| ExpError::Write {
            path: p.clone(),
            err,
        })?;
    }
    let n = ctx.pick(40, 12);
    let mut h = Hops::default();
    for &k in hops {
        let x = k as f64;
        {
            let line = Line::up("i", k - 1)?;
            line.forwarding(true)?;
            let (a, b) = (icmp(&line, 56, n * 5)?, icmp(&line, 56 + PAD, n * 5)?);
            ctx.say(&format!("{k} hops: ICMP ping {a:.1} / {b:.1} us"));
            h.ip.0.push((x, a, b));
        }
        let nl = NodeLine::up(ctx, "h", k - 1, Routers::Anode, &|_| String::new())?;
        let dst = nl.dst().addr.clone();
        let small = super::common::PING_OVERHEAD;
        let c = (
            ping_median(ctx, nl.src(), &dst, small, n * 5)?,
            ping_median(ctx, nl.src(), &dst, small + PAD, n * 5)?,
        );
        h.capsule.0.push((x, c.0, c.1));
        let ne = (
            plan_rtt(ctx, &nl, &noeval_p, 0, n)?,
            plan_rtt(ctx, &nl, &noeval_p, PAD, n)?,
        );
        h.noeval.0.push((x, ne.0, ne.1));
        let mut line = format!(
            "{k} hops: capsule ping {:.1} / {:.1} us, PLAN noeval {:.1} / {:.1} us",
            c.0, c.1, ne.0, ne.1
        );
        if eval {
            let ev = (
                plan_rtt(ctx, &nl, &eval_p, 0, n)?,
                plan_rtt(ctx, &nl, &eval_p, PAD, n)?,
            );
            h.eval.0.push((x, ev.0, ev.1));
            line.push_str(&format!(", PLAN eval {:.1} / {:.1} us", ev.0, ev.1));
        }
        ctx.say(&line);
    }
    Ok(h)
}

impl Curve {
    /// (small, padded) points in ms for plotting.
    pub fn small_ms(&self) -> Vec<[f64; 2]> {
        self.0.iter().map(|p| [p.0, p.1 / 1000.0]).collect()
    }

    /// Per router traversal: (us per packet, us per byte), from the slope over hops (two
    /// traversals per added hop in a round trip); None with one hop count only.
    pub fn switching(&self) -> Option<(f64, f64)> {
        let small: Vec<(f64, f64)> = self.0.iter().map(|p| (p.0, p.1)).collect();
        let big: Vec<(f64, f64)> = self.0.iter().map(|p| (p.0, p.2)).collect();
        let (_, s) = stats::fit_line(&small)?;
        let (_, b) = stats::fit_line(&big)?;
        Some((s / 2.0, ((b - s) / 2.0 / PAD as f64).max(0.0)))
    }
}

/// Table I's rows for the service times from throughput, beside the paper's routers.
fn service_rows(costs: &service::Costs, p: &PaperExperiment) -> Vec<Row> {
    let sc = |l: &str| p.scalar(l).map(|s| s.value);
    let kernel = costs.iter().find(|c| c.0 == Fwd::Kernel);
    let base = kernel.map_or("-".into(), |k| {
        format!("kernel {} us + {} us/B per packet", num(k.1), num(k.2))
    });
    let mut rows = Vec::new();
    for (f, pkt, byte) in costs {
        let (pp, pb) = match f {
            Fwd::Kernel => (
                "per-packet switching cost, IP router",
                "per-byte switching cost, IP router",
            ),
            Fwd::Cfwd => (
                "per-packet switching cost, C bridge",
                "per-byte switching cost, C bridge",
            ),
            Fwd::AnodeCapsule => (
                "per-packet switching cost, PLAN router",
                "per-byte switching cost, PLAN router",
            ),
            _ => ("", ""),
        };
        let paper = |l: &str| if l.is_empty() { None } else { sc(l) };
        let name = format!(
            "{} (paper: {})",
            f.label(),
            if pp.is_empty() {
                "-"
            } else {
                pp.trim_start_matches("per-packet switching cost, ")
            }
        );
        rows.push(Row {
            quantity: format!("service time from throughput, per packet, {name}"),
            unit: "us".into(),
            paper: paper(pp),
            paper_ref: "Table I".into(),
            anode: Some(*pkt),
            baseline: base.clone(),
        });
        rows.push(Row {
            quantity: format!("service time from throughput, per byte, {name}"),
            unit: "us/byte".into(),
            paper: paper(pb),
            paper_ref: "Table I".into(),
            anode: Some(*byte),
            baseline: base.clone(),
        });
    }
    rows
}

fn hop_list(ctx: &Ctx<'_>) -> Vec<usize> {
    ctx.pick(vec![1, 2, 3, 4], vec![1, 3])
}

const SETUP: &str = "lines of 1..4 hops (links) of network namespaces on veth: kernel routers (ip_forward) for ICMP ping, anode nodes in every host otherwise (the real `anode node`, static links)";

fn cost_rows(h: &Hops, p: &PaperExperiment) -> Vec<Row> {
    let sc = |l: &str| p.scalar(l).map(|s| s.value);
    let ip = h.ip.switching();
    let base = ip.map_or("-".into(), |(a, b)| {
        format!("kernel router {} us + {} us/B", num(a), num(b))
    });
    let mut rows = Vec::new();
    for (name, paper_pkt, paper_byte, c) in [
        (
            "IP router (kernel)",
            "per-packet switching cost, IP router",
            "per-byte switching cost, IP router",
            &h.ip,
        ),
        (
            "PLAN router, ping/noeval (anode: routed passively)",
            "per-packet switching cost, PLAN router",
            "per-byte switching cost, PLAN router",
            &h.noeval,
        ),
        (
            "active router, code at every hop (anode: capsule ping)",
            "",
            "",
            &h.capsule,
        ),
    ] {
        let sw = c.switching();
        rows.push(Row {
            quantity: format!("per-packet switching cost, {name}"),
            unit: "us".into(),
            paper: if paper_pkt.is_empty() {
                None
            } else {
                sc(paper_pkt)
            },
            paper_ref: "Table I".into(),
            anode: sw.map(|s| s.0),
            baseline: base.clone(),
        });
        rows.push(Row {
            quantity: format!("per-byte switching cost, {name}"),
            unit: "us/byte".into(),
            paper: if paper_byte.is_empty() {
                None
            } else {
                sc(paper_byte)
            },
            paper_ref: "Table I".into(),
            anode: sw.map(|s| s.1),
            baseline: base.clone(),
        });
    }
    rows
}

/// `planet-switching`.
pub fn switching(ctx: &Ctx<'_>, p: &PaperExperiment) -> Result<Outcome, ExpError> {
    let h = measure(ctx, &hop_list(ctx), false)?;
    let mut rows = vec![
        Row {
            quantity: "ping/IP round trip, 1 hop, minimum size".into(),
            unit: "ms".into(),
            paper: p.point("ping/IP", 1.0),
            paper_ref: "Fig. 3".into(),
            anode: h.ip.0.first().map(|c| c.1 / 1000.0),
            baseline: "this is the baseline".into(),
        },
        Row {
            quantity: "ping/noeval round trip, 1 hop, minimum size".into(),
            unit: "ms".into(),
            paper: p.point("ping/noeval", 1.0),
            paper_ref: "Fig. 3".into(),
            anode: h.noeval.0.first().map(|c| c.1 / 1000.0),
            baseline: h
                .ip
                .0
                .first()
                .map_or("-".into(), |c| format!("ICMP {} ms", num(c.1 / 1000.0))),
        },
    ];
    rows.extend(cost_rows(&h, p));
    let mut fwds = vec![Fwd::Kernel, Fwd::Anode, Fwd::AnodeCapsule];
    if ctx.baselines.is_some() {
        fwds.insert(1, Fwd::Cfwd);
    }
    let costs = service::measure(ctx, &fwds)?;
    rows.extend(service_rows(&costs, p));
    let ratio = |c: &Curve| match (c.switching(), h.ip.switching()) {
        (Some(a), Some(k)) if k.0 > 0.0 => Some(a.0 / k.0),
        _ => None,
    };
    rows.push(Row {
        quantity: "PLAN router / IP router, per packet".into(),
        unit: "ratio".into(),
        paper: Some(259.0 / 36.0),
        paper_ref: "Table I, computed".into(),
        anode: ratio(&h.noeval),
        baseline: "-".into(),
    });
    let r = ratio(&h.noeval);
    let headline = format!(
        "per-packet switching cost of a PLAN router over an IP router: paper 7.2x (259 vs 36 us) -> anode {}x ({} vs {} us per traversal); {}",
        r.map_or("-".into(), |v| format!("{v:.1}")),
        h.noeval.switching().map_or("-".into(), |s| num(s.0)),
        h.ip.switching().map_or("-".into(), |s| num(s.0)),
        if r.unwrap_or(f64::MAX) <= 7.2 {
            "better"
        } else {
            "worse: anode's routers are user-space processes (a socket receive and send per traversal), the kernel router is not"
        }
    );
    Ok(Outcome {
        headline,
        method: SETUP.into(),
        setup: setup_lines(ctx),
        series: vec![
            Series::new("ping/IP (ICMP, kernel routers)", "ms", Role::Baseline, h.ip.small_ms()),
            Series::new("PLAN ping/noeval through anode nodes", "ms", Role::Anode, h.noeval.small_ms()),
            Series::new("capsule ping through anode nodes (code at every hop)", "ms", Role::Anode, h.capsule.small_ms()),
        ],
        rows,
        findings: vec![
            "the C forwarder and the anode fast path have no round-trip probe of their own (the C forwarder is one-way; anode's datagrams have no echo), so Table I's per-packet and per-byte costs are also measured from throughput for every forwarder: one over the rate it delivers when flooded with 84 B and 1472 B packets (136 B for the capsule EE) is the time it spends per packet, as PLANet derived its router's 240 us per large packet; the capsule EE row stands beside the paper's PLAN router (code run per packet)".into(),
            format!("per-byte costs come from a {PAD}-byte string argument carried in the packet; on veth they are copies, so they are small beside the per-packet costs, as in Table I"),
            "the absolute round trips include the client's control-socket hop at the source (`anode plan inject`, `anode ping`), which the kernel's ICMP ping does not pay; the slopes over hops do not include it".into(),
        ],
        plot: Plot { title: "PLANet Fig. 3: round trip of minimum-size pings vs hops".into(), x_label: "hops".into(), y_label: "round trip (ms)".into(), unit: "ms".into(), log_x: false, log_y: true, paper_series: vec![] },
    })
}

fn setup_lines(ctx: &Ctx<'_>) -> Vec<String> {
    vec![
        format!("hops: {:?}; per point the median of {} PLAN injections (`anode plan inject --expect 1`, round trip from injection to the print at the source) and of {} capsule pings; ICMP: mean of {} pings (`ping -i 0.01`)", hop_list(ctx), ctx.pick(40, 12), ctx.pick(200, 60), ctx.pick(200, 60)),
        format!("small packets: ping with no padding (ICMP 56 data bytes); padded: a {PAD}-character string argument (ICMP {} data bytes, capsule {PAD} extra payload bytes)", 56 + PAD),
        "ping/noeval and ping/eval are crates/plan/programs/ping/*.plan with a padding argument added".into(),
    ]
}

/// `planet-eval-overhead`.
pub fn eval_overhead(ctx: &Ctx<'_>, p: &PaperExperiment) -> Result<Outcome, ExpError> {
    let h = measure(ctx, &hop_list(ctx), true)?;
    let sc = |l: &str| p.scalar(l).map(|s| s.value);
    let (ev, ne) = (h.eval.switching(), h.noeval.switching());
    let diff = ev.zip(ne).map(|(e, n)| (e.0 - n.0, e.1 - n.1));
    let base = h.ip.switching().map_or("-".into(), |(a, _)| {
        format!("kernel router {} us per traversal", num(a))
    });
    let row = |q: &str, unit: &str, paper: Option<f64>, anode: Option<f64>| Row {
        quantity: q.into(),
        unit: unit.into(),
        paper,
        paper_ref: "Fig. 4, IV-C".into(),
        anode,
        baseline: base.clone(),
    };
    let rows = vec![
        row(
            "ping/eval fixed cost per router traversal",
            "us",
            sc("ping/eval fixed cost"),
            ev.map(|e| e.0),
        ),
        row(
            "ping/noeval fixed cost per router traversal",
            "us",
            sc("ping/noeval fixed cost"),
            ne.map(|e| e.0),
        ),
        row(
            "fixed cost of one evaluation (eval - noeval)",
            "us",
            sc("fixed cost of one evaluation"),
            diff.map(|d| d.0),
        ),
        row(
            "per-byte cost of evaluation (eval - noeval)",
            "us/byte",
            sc("per-byte cost of evaluation"),
            diff.map(|d| d.1),
        ),
        row(
            "eval / noeval cost per traversal",
            "ratio",
            Some(1400.0 / 260.0),
            ev.zip(ne).and_then(|(e, n)| (n.0 > 0.0).then(|| e.0 / n.0)),
        ),
    ];
    let headline = format!(
        "one PLAN evaluation per router: paper 1,200 us (ping/eval 1,400 vs noeval 260 us per traversal) -> anode {} us ({} vs {} us); {} in the eval/noeval ratio (paper 5.4x, anode {}x)",
        diff.map_or("-".into(), |d| num(d.0)),
        ev.map_or("-".into(), |e| num(e.0)),
        ne.map_or("-".into(), |e| num(e.0)),
        if ev
            .zip(ne)
            .is_some_and(|(e, n)| n.0 > 0.0 && e.0 / n.0 <= 5.4)
        {
            "better"
        } else {
            "worse"
        },
        ev.zip(ne)
            .and_then(|(e, n)| (n.0 > 0.0).then(|| format!("{:.1}", e.0 / n.0)))
            .unwrap_or("-".into()),
    );
    Ok(Outcome {
        headline,
        method: SETUP.into(),
        setup: setup_lines(ctx),
        series: vec![
            Series::new("PLAN ping/eval (evaluated at every hop)", "ms", Role::Anode, h.eval.small_ms()),
            Series::new("PLAN ping/noeval (evaluated at the ends only)", "ms", Role::Anode, h.noeval.small_ms()),
            Series::new("ping/IP (ICMP, kernel routers)", "ms", Role::Baseline, h.ip.small_ms()),
        ],
        rows,
        findings: vec![
            "an evaluation at a router unmarshals the packet's program and arguments, runs it under its resource bound and marshals the OnNeighbor packet; PLANet's bytecode interpreter took 1.2 ms for that, anode's evaluator is compiled Rust".into(),
            "ping/eval's per-hop cost also includes the routing-table lookup (defaultRoute) the program makes at each hop".into(),
        ],
        plot: Plot { title: "PLANet Fig. 4: ping/eval vs ping/noeval".into(), x_label: "hops".into(), y_label: "round trip (ms)".into(), unit: "ms".into(), log_x: false, log_y: true, paper_series: vec![] },
    })
}
