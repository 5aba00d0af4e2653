//! `planet-route-scouts`: PLANet Fig. 8. Five real `anode node` processes on loopback,
//!
//! ```text
//!     a --- b --- d          short path a-b-d
//!      \         /
//!       c ----- e            long path  a-c-e-d
//! ```
//!
//! An application at `a` sends route scouts (`crates/plan/programs/scout.plan`) every tenth
//! flow packet and a flow of small PLAN packets to `d` routed by `flowRoute` along the best
//! flow the last round found; `d` reports which neighbor each packet came through. While
//! `b`'s link to `d` is loaded by a datagram flood, the scouts must find the long path and
//! the flow must move to it, and back when the load stops. Measured: scout round trips,
//! when the flow moved, the flow's rate at `d` and the share on each path per phase.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anode_ctl::Client;
use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_PLAN;

use crate::harness::procs::{self, Node};
use crate::paper::PaperExperiment;
use crate::report::num;
use crate::scouting::{App, Arrival, PORT, collect_arrivals, congest};
use crate::{Ctx, ExpError, Outcome, Plot, Role, Row, Series};

/// Milliseconds between flow packets.
const TICK_MS: u64 = 20;

fn fail(what: &str) -> impl Fn(anode_ctl::ClientError) -> ExpError + '_ {
    move |e| ExpError::Command(format!("{what}: {e}"))
}

fn free_addr() -> Result<String, ExpError> {
    let s = UdpSocket::bind("127.0.0.1:0")
        .map_err(|e| ExpError::Command(format!("no free UDP port: {e}")))?;
    let a: SocketAddr = s
        .local_addr()
        .map_err(|e| ExpError::Command(e.to_string()))?;
    Ok(a.to_string())
}

fn node_addr(s: &str) -> Result<NodeAddr, ExpError> {
    s.parse()
        .map_err(|_| ExpError::Command(format!("not a node address: {s}")))
}

/// The five nodes: a, b, c, d, e.
fn start(ctx: &Ctx<'_>) -> Result<Vec<Node>, ExpError> {
    let addrs: Vec<String> = (0..5).map(|_| free_addr()).collect::<Result<_, _>>()?;
    let links: [&[usize]; 5] = [&[1, 2], &[0, 3], &[0, 4], &[1, 4], &[2, 3]];
    let mut nodes = Vec::new();
    for (i, name) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        let peers: Vec<&str> = links[i].iter().map(|&j| addrs[j].as_str()).collect();
        let cfg = procs::node_config(ctx, name, &addrs[i], &peers, "");
        nodes.push(procs::start_node(ctx, None, name, &addrs[i], &cfg)?);
    }
    let ok = procs::wait_until(Duration::from_secs(20), || {
        nodes[0].has_route(ctx, &addrs[3])
            && nodes[0].has_route(ctx, &addrs[4])
            && nodes[3].has_route(ctx, &addrs[0])
            && nodes[3].has_route(ctx, &addrs[2])
    });
    if !ok {
        return Err(ExpError::Measure {
            what: "routes among the five nodes".into(),
            why: format!(
                "not converged in 20 s; a's log:\n{}",
                nodes[0].child.log_tail()
            ),
        });
    }
    Ok(nodes)
}

/// What a run measured.
struct Run {
    arrivals: Vec<(f64, String)>,
    scout_rtts: Vec<f64>,
    switches: Vec<(f64, i64)>,
    phases: [f64; 3],
    ticks: i64,
}

fn drive(ctx: &Ctx<'_>, nodes: &[Node], phase_s: f64) -> Result<Run, ExpError> {
    let connect = |n: &Node| {
        Client::connect(&n.socket, "anode-experiment").map_err(fail("connect to a node"))
    };
    let mut ca = connect(&nodes[0])?;
    ca.bind_app(TYPE_PLAN, PORT).map_err(fail("bind at a"))?;
    let mut cd = connect(&nodes[3])?;
    cd.bind_app(TYPE_PLAN, PORT).map_err(fail("bind at d"))?;
    let (stop, on) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let t0 = Instant::now();
    let collector = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || collect_arrivals(cd, t0, stop))
    };
    let loader = {
        let (stop, on, cb) = (Arc::clone(&stop), Arc::clone(&on), connect(&nodes[1])?);
        let (b, d) = (node_addr(&nodes[1].addr)?, node_addr(&nodes[3].addr)?);
        std::thread::spawn(move || congest(cb, b, d, 2000, on, stop))
    };
    let mut app = App::new(ca, node_addr(&nodes[0].addr)?, node_addr(&nodes[3].addr)?);
    let phases = [phase_s, 2.0 * phase_s, 3.0 * phase_s];
    let mut k = 0;
    let result = (|| {
        while t0.elapsed().as_secs_f64() < phases[2] {
            let now = t0.elapsed().as_secs_f64();
            on.store(now >= phases[0] && now < phases[1], Ordering::Relaxed);
            if k % 10 == 0 {
                app.scout(Duration::from_millis(TICK_MS), t0)?;
            } else {
                std::thread::sleep(Duration::from_millis(TICK_MS));
            }
            app.send(k)?;
            k += 1;
        }
        Ok::<(), ExpError>(())
    })();
    stop.store(true, Ordering::Relaxed);
    let arrivals: Vec<Arrival> = collector.join().unwrap_or_default();
    let arrivals: Vec<(f64, String)> = arrivals
        .into_iter()
        .map(|(t, _, h)| (t.as_secs_f64(), h))
        .collect();
    let _ = loader.join();
    result?;
    ctx.say(&format!(
        "{k} flow packets sent, {} arrived, {} scout rounds",
        arrivals.len(),
        app.round
    ));
    Ok(Run {
        arrivals,
        scout_rtts: app.scout_rtts,
        switches: app
            .switches
            .iter()
            .map(|(t, _, m, _)| (t.as_secs_f64(), *m))
            .collect(),
        phases,
        ticks: k,
    })
}

/// Runs it.
pub fn run(ctx: &Ctx<'_>, p: &PaperExperiment) -> Result<Outcome, ExpError> {
    let phase_s = ctx.pick(3.0, 1.6);
    let nodes = start(ctx)?;
    ctx.say("five nodes up; scouting while b -> d is loaded in the middle phase");
    let r = drive(ctx, &nodes, phase_s)?;
    let (b, e) = (nodes[1].addr.clone(), nodes[4].addr.clone());
    outcome(ctx, p, &r, &b, &e, phase_s)
}

fn outcome(
    ctx: &Ctx<'_>,
    p: &PaperExperiment,
    r: &Run,
    b: &str,
    e: &str,
    phase_s: f64,
) -> Result<Outcome, ExpError> {
    let win = 0.2;
    let n_win = (r.phases[2] / win).ceil() as usize;
    let rate = |via: &str| -> Vec<[f64; 2]> {
        (0..n_win)
            .map(|i| {
                let (from, to) = (i as f64 * win, (i + 1) as f64 * win);
                let n = r
                    .arrivals
                    .iter()
                    .filter(|(t, h)| *t >= from && *t < to && h == via)
                    .count();
                [from, n as f64 / win]
            })
            .collect()
    };
    let share = |from: f64, to: f64, via: &str| {
        let w: Vec<_> = r
            .arrivals
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .collect();
        let n = w.iter().filter(|(_, h)| h == via).count();
        if w.is_empty() {
            0.0
        } else {
            n as f64 / w.len() as f64
        }
    };
    let first_after = |from: f64, via: &str| {
        r.arrivals
            .iter()
            .find(|(t, h)| *t >= from && h == via)
            .map(|(t, _)| (t - from) * 1000.0)
    };
    let (moved_off, moved_back) = (first_after(r.phases[0], e), first_after(r.phases[1], b));
    let scout_med = crate::stats::median(&r.scout_rtts);
    let sc = |l: &str| p.scalar(l).map(|s| s.value);
    let rows = vec![
        Row {
            quantity: "scout round trip, first answer of a round (median)".into(),
            unit: "ms".into(),
            paper: sc("first scout return time"),
            paper_ref: "Fig. 8, V-B".into(),
            anode: scout_med,
            baseline: "-".into(),
        },
        Row {
            quantity: "flow moved to the uncongested path after the load began".into(),
            unit: "ms".into(),
            paper: sc("hysteresis before switching").map(|s| s * 1000.0),
            paper_ref: "Fig. 8 (5 s hysteresis)".into(),
            anode: moved_off,
            baseline: "-".into(),
        },
        Row {
            quantity: "flow moved back after the load ended".into(),
            unit: "ms".into(),
            paper: Some(5000.0),
            paper_ref: "Fig. 8 (revert 5 s after the third scout)".into(),
            anode: moved_back,
            baseline: "-".into(),
        },
        Row {
            quantity: "share of the flow on the long path while loaded (after 0.4 s)".into(),
            unit: "fraction".into(),
            paper: None,
            paper_ref: "-".into(),
            anode: Some(share(r.phases[0] + 0.4, r.phases[1], e)),
            baseline: "-".into(),
        },
        Row {
            quantity: "share of the flow on the short path once quiet again (after 0.4 s)".into(),
            unit: "fraction".into(),
            paper: None,
            paper_ref: "-".into(),
            anode: Some(share(r.phases[1] + 0.4, r.phases[2], b)),
            baseline: "-".into(),
        },
        Row {
            quantity: "flow packets delivered / sent".into(),
            unit: "fraction".into(),
            paper: None,
            paper_ref: "-".into(),
            anode: Some(r.arrivals.len() as f64 / r.ticks.max(1) as f64),
            baseline: "-".into(),
        },
    ];
    let headline = format!(
        "scouts return in {} ms (paper 36-42 ms) and the flow moves to the uncongested path {} ms after the load begins (paper: 5 s hysteresis, S down to 12 Mbit/s meanwhile), back {} ms after it ends; better: scouting every {} ms instead of every 30 s",
        scout_med.map_or("-".into(), num),
        moved_off.map_or("-".into(), num),
        moved_back.map_or("-".into(), num),
        10 * TICK_MS
    );
    ctx.say(&headline);
    Ok(Outcome {
        headline,
        method: "five real anode node processes on loopback (UDP); the application at a and the load at b are clients of the nodes' control sockets".into(),
        setup: vec![
            "topology: a-b-d (short) and a-c-e-d (long), static links, the nodes' own routing; the scouting services (queueLength, getMark, setMark, newFlowId, installFlow) and flowRoute are the PLAN EE's own".into(),
            format!("the flow: one PLAN packet every {TICK_MS} ms from a to d routed by flowRoute; a scout round every 10 packets ({} ms), results read for {TICK_MS} ms", 10 * TICK_MS),
            format!("phases of {phase_s} s: quiet, b -> d loaded with 2,000 datagrams/s of 200 B injected at b, quiet again (the paper's flows lasted 15-45 s and scouts went every 30 s)"),
            "d reports the neighbor each flow packet came through; the figure shows the flow's packets per second at d through b and through e, in 200 ms windows".into(),
        ],
        series: vec![
            Series::new("flow at d through b (short path)", "packets/s", Role::Anode, rate(b)),
            Series::new("flow at d through e (long path)", "packets/s", Role::Anode, rate(e)),
            Series::new("scout round trips by round", "ms", Role::Anode, r.scout_rtts.iter().enumerate().map(|(i, v)| [i as f64 + 1.0, *v]).collect()),
            Series::new("flow switches (time s, path metric)", "metric", Role::Anode, r.switches.iter().map(|(t, m)| [*t, *m as f64]).collect()),
        ],
        rows,
        findings: vec![
            "the paper switched flows only after a 5 s hysteresis and scouted every 30 s, so its S flow ran congested for seconds; here a round goes every 200 ms and the flow follows the best metric of the latest round, so it moves within a few rounds".into(),
            "the load is modelled, not a second PLAN flow: 2,000 datagrams/s injected at b raise the queue and transmit-rate load queueLength reports for b's link to d".into(),
            format!("measured on loopback with {} CPUs shared by five nodes and the clients; the timings are those of this machine, not a testbed", std::thread::available_parallelism().map_or(1, |n| n.get())),
        ],
        plot: Plot { title: "PLANet Fig. 8: route scouts move a flow off a loaded path and back".into(), x_label: "time (s)".into(), y_label: "flow packets/s at d".into(), unit: "packets/s".into(), log_x: false, log_y: false, paper_series: vec![] },
    })
}
