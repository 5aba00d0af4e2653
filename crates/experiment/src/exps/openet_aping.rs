//! `openet-aping`: Openet Fig. 4, Table 1 and Fig. 5. Active ping (anode's ping capsules)
//! through an active router against regular ICMP ping through a kernel router, at send
//! intervals from back-to-back to 1 s: the first capsule with its code loaded hop by hop,
//! then cached; first and average delay, rate; and the delay split between the source, the
//! router and the rest of the round trip.

use std::time::{Duration, Instant};

use super::common::{NodeLine, PING_OVERHEAD, Routers, ping_median, ping_summary};
use crate::harness::procs::Node;
use crate::paper::PaperExperiment;
use crate::report::num;
use crate::{Ctx, ExpError, Outcome, Plot, Role, Row, Series, stats};

/// One test: (interval ms, first delay ms, average delay ms, per second).
type Test = (f64, f64, f64, f64);

/// `anode ping -c COUNT -i INTERVAL`: (first, average, rate, code was cached).
fn aping(
    ctx: &Ctx<'_>,
    from: &Node,
    dest: &str,
    count: u32,
    interval_ms: f64,
) -> Result<(f64, f64, f64, bool), ExpError> {
    let t = Instant::now();
    let interval = interval_ms / 1000.0;
    let limit = Duration::from_secs_f64(20.0 + f64::from(count) * (interval + 0.05));
    let (sum, rtts) = ping_summary(
        ctx,
        from,
        dest,
        (PING_OVERHEAD, count, interval, 5.0),
        limit,
    )?;
    let wall = t.elapsed().as_secs_f64();
    let first = sum["rtt_ms"].get(0).and_then(|v| v.as_f64());
    let (Some(first), Some(avg)) = (first, sum["avg_ms"].as_f64()) else {
        return Err(ExpError::Measure {
            what: format!("anode ping {dest}"),
            why: "no reply".into(),
        });
    };
    let cached = sum["code_was_cached"].as_bool().unwrap_or(true);
    Ok((first, avg, rtts.len() as f64 / wall.max(1e-6), cached))
}

/// ICMP ping from host 0 to the last host of `nl`: (first, average, rate).
fn icmp(nl: &NodeLine, count: u32, interval_ms: f64) -> Result<(f64, f64, f64), ExpError> {
    let dst = nl.line().addr(nl.line().len() - 1);
    let i = format!("{}", (interval_ms / 1000.0).max(0.002));
    let t = Instant::now();
    let out = anode_lab::sys::run(
        "ip",
        &[
            "netns",
            "exec",
            nl.line().ns(0),
            "ping",
            "-n",
            "-c",
            &count.to_string(),
            "-i",
            &i,
            &dst,
        ],
        None,
        "ping",
        Duration::from_secs_f64(10.0 + f64::from(count) * (interval_ms / 1000.0 + 0.01)),
    )?;
    let wall = t.elapsed().as_secs_f64();
    let times: Vec<f64> = out
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|v| v.split_whitespace().next()?.parse().ok())
        .collect();
    let first = times.first().copied();
    let avg =
        stats::percentile(&times, 50.0).map(|_| times.iter().sum::<f64>() / times.len() as f64);
    match (first, avg) {
        (Some(f), Some(a)) => Ok((f, a, times.len() as f64 / wall.max(1e-6))),
        _ => Err(ExpError::Measure {
            what: "ICMP ping".into(),
            why: format!("no reply: {out}"),
        }),
    }
}

/// Runs it.
pub fn run(ctx: &Ctx<'_>, p: &PaperExperiment) -> Result<Outcome, ExpError> {
    let intervals: Vec<f64> = ctx.pick(vec![0.0, 10.0, 100.0, 1000.0], vec![0.0, 10.0, 100.0]);
    let count = |iv: f64| {
        if iv >= 1000.0 {
            ctx.pick(20, 5)
        } else {
            ctx.pick(100, 30)
        }
    };
    ctx.say("active: s - r - d with anode nodes everywhere, nothing cached");
    let nl = NodeLine::cold(ctx, "o", 1, Routers::Anode, &|_| String::new())?;
    let dst = nl.dst().addr.clone();
    let (load_first, _, _, cached) = aping(ctx, nl.src(), &dst, 1, 0.0)?;
    ctx.say(&format!(
        "first capsule, code loaded hop by hop: {load_first:.2} ms (cached before: {cached})"
    ));
    let mut ap: Vec<Test> = Vec::new();
    for &iv in &intervals {
        let (f, a, r, _) = aping(ctx, nl.src(), &dst, count(iv), iv)?;
        ctx.say(&format!(
            "APing every {iv} ms: first {f:.3} ms, average {a:.3} ms, {r:.0}/s"
        ));
        ap.push((iv, f, a, r));
    }
    let active_us = ping_median(ctx, nl.src(), &dst, PING_OVERHEAD, ctx.pick(300, 100))?;
    drop(nl);
    ctx.say("passive: s - r - d with kernel forwarding in r");
    let pl = NodeLine::up(ctx, "q", 1, Routers::Kernel, &|_| String::new())?;
    let passive_us = ping_median(
        ctx,
        pl.src(),
        &pl.dst().addr,
        PING_OVERHEAD,
        ctx.pick(300, 100),
    )?;
    let mut ip: Vec<Test> = Vec::new();
    for &iv in &intervals {
        let (f, a, r) = icmp(&pl, count(iv), iv)?;
        ctx.say(&format!(
            "Ping every {iv} ms: first {f:.3} ms, average {a:.3} ms, {r:.0}/s"
        ));
        ip.push((iv, f, a, r));
    }
    let router_ms = ((active_us - passive_us) / 2.0).max(0.0) / 1000.0;
    outcome(ctx, p, &ap, &ip, load_first, router_ms, active_us / 1000.0)
}

fn outcome(
    ctx: &Ctx<'_>,
    p: &PaperExperiment,
    ap: &[Test],
    ip: &[Test],
    load_first: f64,
    router_ms: f64,
    rtt_ms: f64,
) -> Result<Outcome, ExpError> {
    let cached_avg = ap.iter().find(|t| t.0 == 100.0).or(ap.last()).map(|t| t.2);
    let ip_avg = ip.iter().find(|t| t.0 == 100.0).or(ip.last()).map(|t| t.2);
    let sc = |l: &str| p.scalar(l).map(|s| s.value);
    let load_ratio = cached_avg.filter(|a| *a > 0.0).map(|a| load_first / a);
    let ap_ip = cached_avg
        .zip(ip_avg)
        .filter(|(_, i)| *i > 0.0)
        .map(|(a, i)| a / i);
    let base = ip_avg.map_or("-".into(), |i| {
        format!("ICMP ping through the kernel router {} ms", num(i))
    });
    let row = |q: &str, unit: &str, paper: Option<f64>, r: &str, anode: Option<f64>| Row {
        quantity: q.into(),
        unit: unit.into(),
        paper,
        paper_ref: r.into(),
        anode,
        baseline: base.clone(),
    };
    let rows = vec![
        row(
            "first capsule, code loaded from the source (paper: Accelar 8600)",
            "ms",
            sc("APing 8600 first test with code load"),
            "Table 1",
            Some(load_first),
        ),
        row(
            "average delay, code cached, 100 ms interval (paper: Accelar 8600)",
            "ms",
            p.point("APing via Accelar 8600, code cached: average delay", 100.0),
            "Table 1",
            cached_avg,
        ),
        row(
            "first capsule with code load / cached average (paper: 8600 462 / 11 ms)",
            "ratio",
            Some(462.0 / 11.0),
            "Table 1, computed",
            load_ratio,
        ),
        row(
            "APing / Ping average delay (paper: 8600 11 / 0.1 ms)",
            "ratio",
            Some(11.0 / 0.1),
            "Table 1, computed",
            ap_ip,
        ),
        row(
            "Ping average delay, 100 ms interval",
            "ms",
            p.point("Ping (regular, 64 B): average delay", 0.0),
            "Table 1",
            ip_avg,
        ),
        row(
            "active router processing per capsule (paper: Accelar 8600)",
            "ms",
            sc("Fig. 5: Accelar 8600 processing per capsule"),
            "Fig. 5",
            Some(router_ms),
        ),
        row(
            "rest of the round trip (paper: Java network I/O, 8600)",
            "ms",
            sc("remaining round-trip time (Java network I/O), 8600"),
            "Fig. 5",
            Some((rtt_ms - 2.0 * router_ms).max(0.0)),
        ),
    ];
    let headline = format!(
        "APing vs Ping: paper 110x slower (Accelar 8600: 11 vs 0.1 ms) -> anode {}x ({} vs {} ms); first capsule with code load {}x the cached delay (paper 42x); {}",
        ap_ip.map_or("-".into(), |r| format!("{r:.1}")),
        cached_avg.map_or("-".into(), num),
        ip_avg.map_or("-".into(), num),
        load_ratio.map_or("-".into(), |r| format!("{r:.1}")),
        if ap_ip.unwrap_or(f64::MAX) <= 110.0 {
            "better: no JVM socket I/O (2-3 ms per write/read pair in the paper)"
        } else {
            "worse"
        }
    );
    let tests = |v: &[Test], k: usize, unit: &str, label: &str, role| {
        Series::new(
            label,
            unit,
            role,
            v.iter().map(|t| [t.0, [t.1, t.2, t.3][k]]).collect(),
        )
    };
    let series = vec![
        tests(
            ap,
            1,
            "ms",
            "APing (anode, code cached): average delay",
            Role::Anode,
        ),
        tests(
            ap,
            0,
            "ms",
            "APing (anode, code cached): first capsule delay",
            Role::Anode,
        ),
        tests(
            ip,
            1,
            "ms",
            "Ping (ICMP, kernel router): average delay",
            Role::Baseline,
        ),
        tests(ap, 2, "per second", "APing rate", Role::Anode),
        tests(ip, 2, "per second", "Ping rate", Role::Baseline),
    ];
    Ok(Outcome {
        headline,
        method: "line s - r - d of network namespaces: anode nodes in all three (active), or at the ends with kernel forwarding in r (passive, and ICMP ping)".into(),
        setup: vec![
            format!("send intervals {:?} ms; {} capsules (or ICMP pings) per test, {} at 1 s; `anode ping` waits for each reply before the interval starts", ctx.pick(vec![0, 10, 100, 1000], vec![0, 10, 100]), ctx.pick(100, 30), ctx.pick(20, 5)),
            "the first test is a single ping on fresh nodes: its code is loaded hop by hop (r asks s, d asks r) before it runs; every later capsule finds the code cached".into(),
            "router processing per capsule = (median round trip through the active router - through the kernel router) / 2; the rest is the two ends and the links".into(),
        ],
        series,
        rows,
        findings: vec![
            "the paper's APing delay was dominated by Java UDP socket I/O (2-3 ms per write/read pair) and the Accelar's JVM; anode's capsule path is native code over UDP sockets, so the active/regular gap is one or two orders of magnitude smaller".into(),
            format!("loading the code hop by hop costs the first capsule {} ms here: two code requests and answers and a WebAssembly compile at each node that lacked it", num(load_first)),
        ],
        plot: Plot { title: "Openet Table 1: APing vs Ping delay by send interval".into(), x_label: "send interval (ms)".into(), y_label: "delay (ms)".into(), unit: "ms".into(), log_x: false, log_y: true, paper_series: vec!["APing via Accelar 8600, code cached: average".into(), "Ping (regular, 64 B): average".into()] },
    })
}
