//! Route scouting (PLANet's flow-based adaptive routing, `crates/plan/programs/scout.plan`)
//! on five live `anode node` processes over UDP on loopback:
//!
//! ```text
//!     a --- b --- d          short path a-b-d (2 hops)
//!      \         /
//!       c ----- e            long path  a-c-e-d (3 hops)
//! ```
//!
//! An application at `a` sends scouts every 200 ms and a flow of small PLAN packets (one
//! every 20 ms) to `d` by `flowRoute` along the best flow the last round found; `d` tells
//! which neighbor each packet came from. While `b`'s link to `d` is congested by 2000
//! datagrams per second the flow must take the long path, before and after it the short
//! one. Everything the node needs is its own: the scouting services are installed by the
//! node's EE assembly, the device load comes from the links' transmit rates, and a scout
//! fits the default 1472-byte MTU. The application is `anode_experiment::scouting`, shared
//! with the `planet-route-scouts` experiment.

mod node_util;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anode_ctl::Client;
use anode_experiment::scouting::{App, Arrival, PORT, collect_arrivals, congest};
use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_PLAN;
use node_util::*;

fn node_addr(s: &str) -> NodeAddr {
    s.parse().expect("a node address")
}

/// Share of `arrivals` in `[from, to)` that came from `via`, and how many there were.
fn share(arrivals: &[Arrival], from: Duration, to: Duration, via: &str) -> (f64, usize) {
    let w: Vec<&Arrival> = arrivals
        .iter()
        .filter(|(t, _, _)| *t >= from && *t < to)
        .collect();
    let n = w.iter().filter(|(_, _, h)| h == via).count();
    #[expect(clippy::cast_precision_loss, reason = "counts of a few hundred")]
    let s = if w.is_empty() {
        0.0
    } else {
        n as f64 / w.len() as f64
    };
    (s, w.len())
}

fn start(dir: &TestDir, name: &str, me: &str, peers: &[(&str, &str)]) -> NodeProc {
    let cfg = node_config(me, peers, &dir.0.join(format!("{name}.sock")));
    anode().start_node(dir, name, me, &cfg)
}

#[test]
fn flow_moves_off_the_congested_path_and_back() {
    let ip: IpAddr = "127.0.0.1".parse().expect("loopback");
    let dir = TestDir::new("scouting");
    let [aa, ba, ca, da, ea] = [(); 5].map(|()| addr(ip, free_port(ip)));
    let a = start(&dir, "a", &aa, &[("to-b", &ba), ("to-c", &ca)]);
    let b = start(&dir, "b", &ba, &[("to-a", &aa), ("to-d", &da)]);
    let _c = start(&dir, "c", &ca, &[("to-a", &aa), ("to-e", &ea)]);
    let d = start(&dir, "d", &da, &[("to-b", &ba), ("to-e", &ea)]);
    let _e = start(&dir, "e", &ea, &[("to-c", &ca), ("to-d", &da)]);
    let ok = wait_until(Duration::from_secs(20), || {
        a.has_route(&da) && a.has_route(&ea) && d.has_route(&aa) && d.has_route(&ca)
    });
    assert!(ok, "routes did not converge\na:\n{}", a.log_text());

    let connect = |n: &NodeProc| Client::connect(&n.socket, "scouting-test").expect("connect");
    let mut ca_client = connect(&a);
    ca_client.bind_app(TYPE_PLAN, PORT).expect("bind at a");
    let mut cd_client = connect(&d);
    cd_client.bind_app(TYPE_PLAN, PORT).expect("bind at d");

    let stop = Arc::new(AtomicBool::new(false));
    let on = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let arrivals = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || collect_arrivals(cd_client, t0, stop))
    };
    let congestion = {
        let (stop, on) = (Arc::clone(&stop), Arc::clone(&on));
        let cb = connect(&b);
        let (bn, dn) = (node_addr(&ba), node_addr(&da));
        std::thread::spawn(move || congest(cb, bn, dn, 2000, on, stop))
    };
    let mut app = App::new(ca_client, node_addr(&aa), node_addr(&da));
    // Phases: 0-1.6 s quiet, 1.6-3.6 s b-d congested, 3.6-5.6 s quiet again.
    let (c_on, c_off, end) = (
        Duration::from_millis(1600),
        Duration::from_millis(3600),
        Duration::from_millis(5600),
    );
    let mut k = 0;
    let (mut on_at, mut off_at) = (None, None);
    while t0.elapsed() < end {
        let now = t0.elapsed();
        let congested = now >= c_on && now < c_off;
        if congested != on.load(Ordering::Relaxed) {
            on.store(congested, Ordering::Relaxed);
            *if congested { &mut on_at } else { &mut off_at } = Some(now);
        }
        if k % 10 == 0 {
            app.scout(Duration::from_millis(20), t0)
                .expect("a scout round");
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
        app.send(k).expect("a flow packet");
        k += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let arrivals = arrivals.join().expect("the collector");
    congestion.join().expect("the congestion thread");
    let links_b = b.json(&["links"]);

    let ms = |d: Duration| d.as_millis();
    println!(
        "switches (ms, round, metric, flow): {:?}",
        app.switches
            .iter()
            .map(|(t, r, m, f)| (ms(*t), r, m, f))
            .collect::<Vec<_>>()
    );
    println!("congestion from {on_at:?} to {off_at:?}; b's links: {links_b}");
    let first_after = |from: Duration, via: &str| {
        arrivals
            .iter()
            .find(|(t, _, h)| *t >= from && h == via)
            .map(|(t, _, _)| ms(*t - from))
    };
    let moved_off = first_after(c_on, &ea);
    let moved_back = first_after(c_off, &ba);
    println!(
        "first arrival via e after congestion began: +{moved_off:?} ms; via b after it ended: +{moved_back:?} ms"
    );
    // Arrivals per 400 ms: (start ms, via b, via e).
    let timeline: Vec<(u128, usize, usize)> = (0..14u32)
        .map(|i| {
            let (from, to) = (
                Duration::from_millis(400) * i,
                Duration::from_millis(400) * (i + 1),
            );
            let n = |via: &str| {
                arrivals
                    .iter()
                    .filter(|(t, _, h)| *t >= from && *t < to && h == via)
                    .count()
            };
            (ms(from), n(&ba), n(&ea))
        })
        .collect();
    println!("arrivals per 400 ms (start ms, via b, via e): {timeline:?}");
    let second = Duration::from_millis(400);
    let phases = [
        ("quiet", Duration::from_millis(800), c_on, &ba),
        ("congested", c_on + second, c_off, &ea),
        ("quiet again", c_off + second, end, &ba),
    ];
    let mut report = Vec::new();
    for (name, from, to, via) in phases {
        let (s, n) = share(&arrivals, from, to, via);
        let who = if via == &ba { "b" } else { "e" };
        report.push(format!("{name}: {n} packets, {:.0}% via {who}", s * 100.0));
        assert!(n >= 10, "{name}: only {n} packets arrived");
        assert!(s >= 0.9, "{name}: {:.0}% via {who}; {report:?}", s * 100.0);
    }
    println!("{}", report.join("; "));
    assert!(
        arrivals.len() >= 200,
        "{} of {k} packets arrived",
        arrivals.len()
    );
}
