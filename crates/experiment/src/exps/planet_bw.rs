//! `planet-bandwidth-hops`: PLANet Fig. 5. Bandwidth of maximal packets over lines of 1..4
//! hops: kernel routers (UDP, as the paper's ttcp over IP routers), anode nodes forwarding
//! datagrams on their fast path, and anode nodes running a capsule's code at every hop.

use std::time::Duration;

use super::common::PORT;
use super::fwd::{put_forward, unthrottled_capsules};
use crate::harness::netns::Line;
use crate::harness::procs::{self, Node};
use crate::harness::traffic::{self, Path};
use crate::paper::PaperExperiment;
use crate::report::num;
use crate::{Ctx, ExpError, Outcome, Plot, Role, Row, Series};

/// UDP payload of the maximal packets (1500 B IP).
const SIZE: usize = 1472;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Kernel,
    Anode,
    Capsule,
}

/// Starts anode nodes in the routers of `line` (capsule code and policy with `capsule`).
fn routers(ctx: &Ctx<'_>, line: &Line, capsule: bool) -> Result<Vec<Node>, ExpError> {
    let n = line.len();
    let addr = |i: usize| format!("{}:{PORT}", line.addr(i));
    let extra = if capsule {
        unthrottled_capsules(ctx)?
    } else {
        String::new()
    };
    let mut nodes = Vec::new();
    for i in 1..n - 1 {
        let (l, r) = (addr(i - 1), addr(i + 1));
        let name = format!("b{i}");
        let cfg = procs::node_config(ctx, &name, &addr(i), &[&l, &r], &extra);
        let node = procs::start_node(ctx, Some(line.ns(i)), &name, &addr(i), &cfg)?;
        if capsule {
            put_forward(ctx, &node)?;
        }
        nodes.push(node);
    }
    // Routes along the chain come from the routing protocol: wait until the first router
    // routes to the sink's host (the last router's neighbor).
    let d = addr(n - 1);
    if let Some(first) = nodes.first()
        && !procs::wait_until(Duration::from_secs(20), || first.has_route(ctx, &d))
    {
        return Err(ExpError::Measure {
            what: format!("route {} -> {d}", first.addr),
            why: format!("none within 20 s; node log:\n{}", first.child.log_tail()),
        });
    }
    Ok(nodes)
}

fn point(ctx: &Ctx<'_>, hops: usize, via: Via, secs: f64) -> Result<f64, ExpError> {
    let line = Line::up("w", hops - 1)?;
    line.forwarding(via == Via::Kernel)?;
    let last = line.len() - 1;
    let d = format!("{}:{PORT}", line.addr(last));
    let _nodes = if via == Via::Kernel || hops == 1 {
        Vec::new()
    } else {
        routers(ctx, &line, via == Via::Capsule)?
    };
    let dst = if via == Via::Kernel || hops == 1 {
        d.clone()
    } else {
        format!("{}:{PORT}", line.addr(1))
    };
    let path = Path {
        line: &line,
        dst,
        to: d,
        capsule: via == Via::Capsule && hops > 1,
    };
    // The first probe also settles routes; the second is the measurement.
    let _ = traffic::probe(ctx, &path, SIZE, 0.0, 0.5)?;
    let p = traffic::probe(ctx, &path, SIZE, 0.0, secs)?;
    Ok(p.delivered_pps * SIZE as f64 * 8.0 / 1e6)
}

/// Runs it.
pub fn run(ctx: &Ctx<'_>, p: &PaperExperiment) -> Result<Outcome, ExpError> {
    let hops: Vec<usize> = ctx.pick(vec![1, 2, 3, 4], vec![1, 3]);
    let secs = ctx.pick(2.0, 1.0);
    let mut curves: Vec<(Via, Vec<[f64; 2]>)> = Vec::new();
    for via in [Via::Kernel, Via::Anode, Via::Capsule] {
        let mut pts = Vec::new();
        for &h in &hops {
            let mbps = point(ctx, h, via, secs)?;
            ctx.say(&format!(
                "{via:?} {h} hops: {mbps:.0} Mbit/s of UDP payload"
            ));
            pts.push([h as f64, mbps]);
        }
        curves.push((via, pts));
    }
    let get = |v: Via, h: f64| {
        curves
            .iter()
            .find(|c| c.0 == v)
            .and_then(|c| c.1.iter().find(|q| q[0] == h))
            .map(|q| q[1])
    };
    let hmax = *hops.last().unwrap_or(&1) as f64;
    let frac = |v: Via| match (get(v, hmax), get(Via::Kernel, hmax)) {
        (Some(a), Some(k)) if k > 0.0 => Some(a / k),
        _ => None,
    };
    let base = |h: f64| {
        get(Via::Kernel, h).map_or("-".into(), |k| format!("kernel routers {} Mbit/s", num(k)))
    };
    let rows = vec![
        Row { quantity: "UDP over kernel IP routers, 1 hop".into(), unit: "Mbit/s".into(), paper: p.point("UDP over in-kernel IP routers", 1.0), paper_ref: "Fig. 5".into(), anode: get(Via::Kernel, 1.0), baseline: "this is the baseline".into() },
        Row { quantity: "active routers, 2-4 hops (paper: PLAN/Ether bytecode with PLAN routers; anode: capsule code at every router)".into(), unit: "Mbit/s".into(), paper: p.scalar("2-4 hops").map(|s| s.value), paper_ref: "Fig. 5, V".into(), anode: get(Via::Capsule, hmax), baseline: base(hmax) },
        Row { quantity: format!("active routers / kernel routers at {hmax} hops (paper: PLAN routers 48.3 / IP 95.6)"), unit: "ratio".into(), paper: Some(48.3 / 95.6), paper_ref: "Fig. 5, computed".into(), anode: frac(Via::Capsule), baseline: base(hmax) },
        Row { quantity: format!("anode fast path / kernel routers at {hmax} hops"), unit: "ratio".into(), paper: None, paper_ref: "-".into(), anode: frac(Via::Anode), baseline: base(hmax) },
    ];
    let f = frac(Via::Capsule);
    let headline = format!(
        "bandwidth of maximal packets through active routers relative to IP routers: paper 0.51 (PLAN routers 48.3 vs 95.6 Mbit/s) -> anode {} (capsule routers {} vs kernel {} Mbit/s at {hmax} hops); {}",
        f.map_or("-".into(), |v| format!("{v:.2}")),
        get(Via::Capsule, hmax).map_or("-".into(), num),
        get(Via::Kernel, hmax).map_or("-".into(), num),
        if f.unwrap_or(0.0) >= 0.505 {
            "better"
        } else {
            "worse: the kernel routes 1500 B packets at several Gbit/s on veth, a user-space router pays two socket crossings per packet; the paper's 100 Mbit/s link capped IP"
        }
    );
    let series = curves
        .iter()
        .map(|(v, pts)| {
            let (label, role) = match v {
                Via::Kernel => ("UDP over kernel IP routers", Role::Baseline),
                Via::Anode => ("anode routers, fast path (ANEP datagrams)", Role::Anode),
                Via::Capsule => ("anode routers, capsule code at every hop", Role::Anode),
            };
            Series::new(label, "Mbit/s", role, pts.clone())
        })
        .collect();
    Ok(Outcome {
        headline,
        method: "lines of 1..4 hops of network namespaces on veth; anode-blast at full speed in the first host, anode-sink in the last, kernel or anode routers between".into(),
        setup: vec![
            format!("maximal packets: {SIZE} B UDP payload (1500 B IP); {secs} s at full speed per point after a 0.5 s settling probe; Mbit/s of UDP payload at the receiver"),
            "1 hop = sender and receiver directly connected (no router): the sender's own limit".into(),
            "anode routers are the real `anode node` with static links to their neighbours; the capsule rows put protocols::FORWARD in every router's cache and lift the per-protocol bandwidth cap".into(),
        ],
        series,
        rows,
        findings: vec![
            "the paper's curves flatten at the 100 Mbit/s link; veth has no line rate, so every curve here is CPU-bound and the sender, the routers and the receiver share two cores: more hops means more processes per core, which the paper's one machine per router did not have".into(),
        ],
        plot: Plot { title: "PLANet Fig. 5: bandwidth vs hops, maximal packets".into(), x_label: "hops".into(), y_label: "Mbit/s".into(), unit: "Mbit/s".into(), log_x: false, log_y: true, paper_series: vec![] },
    })
}
