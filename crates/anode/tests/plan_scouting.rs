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
//! fits the default 1472-byte MTU.

mod node_util;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anode_ctl::{Client, StreamItem};
use anode_plan::Value;
use anode_plan::ee::{FLOW_ROUTE, PacketSpec, PlanEe, build_packet};
use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_PLAN;
use anode_wire::datagram::Datagram;
use anode_wire::transit::TransitRepr;
use node_util::*;

/// PLAN port of the application at `a` (scout results) and at `d` (arrivals).
const PORT: u16 = 7;
/// The data program: `d` delivers (sequence number, the neighbor it came from).
const ARRIVE: &str = "\
fun via(a : host, n : host * dev) : host = if snd n = getSrcDev() then fst n else a
fun arrive(k : int) : unit =
  deliver(getImplicitPort(), (k, foldl(via, hd(thisHost()), getNeighbors())))
";

fn scout_program() -> String {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../plan/programs/scout.plan");
    std::fs::read_to_string(p).expect("scout.plan")
}

fn node_addr(s: &str) -> NodeAddr {
    s.parse().expect("a node address")
}

/// A value delivered to a PLAN port, decoded.
fn delivered(item: StreamItem) -> Option<Value> {
    match item {
        StreamItem::Delivery(d) if d.type_id == TYPE_PLAN && d.port == PORT => {
            anode_plan::marshal::decode_value(d.payload.as_bytes()).ok()
        }
        _ => None,
    }
}

fn pair(v: &Value) -> Option<(&Value, &Value)> {
    match v {
        Value::Tuple(t) => match t.items() {
            [x, y] => Some((x, y)),
            _ => None,
        },
        _ => None,
    }
}

/// What `d` saw: (time since the flow started, sequence number, previous hop).
type Arrival = (Duration, i64, String);

/// Collects the arrivals at `d` until `stop`.
fn collect_arrivals(mut c: Client, t0: Instant, stop: Arc<AtomicBool>) -> Vec<Arrival> {
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let deadline = Instant::now() + Duration::from_millis(50);
        let Ok(item) = c.next_item(Some(deadline)) else {
            continue;
        };
        let Some(v) = delivered(item) else { continue };
        if let Some((Value::Int(k), Value::Host(h))) = pair(&v) {
            out.push((t0.elapsed(), *k, h.to_string()));
        }
    }
    out
}

/// Sends 2000 datagrams per second from `b` to `d` while `on` (they load `b`'s link to `d`).
fn congest(mut c: Client, b: NodeAddr, d: NodeAddr, on: Arc<AtomicBool>, stop: Arc<AtomicBool>) {
    let dg = Datagram {
        transit: TransitRepr {
            flags: 0,
            rb: 8,
            flow: 0,
            src: b,
            dst: d,
            prev_hop: b,
        },
        port: 9,
        payload: vec![0; 200],
    };
    let pkt = dg.to_packet().expect("a datagram");
    while !stop.load(Ordering::Relaxed) {
        if on.load(Ordering::Relaxed) {
            c.inject_many(pkt.clone(), false, 10).expect("inject at b");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The controlling application at `a`: scout rounds, the flow, the flow id in use.
struct App {
    c: Client,
    ee: PlanEe,
    a: NodeAddr,
    d: NodeAddr,
    round: i64,
    /// The flow in use and its metric.
    flow: Option<(u64, i64)>,
    /// (time, round, metric, flow) of every switch.
    switches: Vec<(Duration, i64, i64, u64)>,
}

impl App {
    fn scout(&mut self) {
        self.round += 1;
        let mut sp = PacketSpec::new(self.a, self.a, 40);
        sp.session = u32::from(PORT);
        let entry = format!(
            "scout({a}, {d}, {k}, 0, [{a}])",
            a = self.a,
            d = self.d,
            k = self.round
        );
        let pkt = build_packet(self.ee.interp(), &scout_program(), &entry, &sp).expect("scout");
        assert!(pkt.len() <= 1472, "a scout is {} bytes", pkt.len());
        self.c.inject(pkt, false).expect("inject the scout");
    }

    /// Reads the round's results for `window` and switches to its best flow.
    fn settle(&mut self, window: Duration, t0: Instant) {
        let end = Instant::now() + window;
        let mut best: Option<(i64, u64)> = None;
        while let Ok(item) = self.c.next_item(Some(end)) {
            let Some(v) = delivered(item) else { continue };
            if let Some((Value::Int(f), Value::Int(m))) = pair(&v)
                && let Ok(f) = u64::try_from(*f)
                && best.is_none_or(|(bm, _)| *m < bm)
            {
                best = Some((*m, f));
            }
        }
        if let Some((m, f)) = best
            && self.flow.is_none_or(|(_, old)| old != m)
        {
            self.switches.push((t0.elapsed(), self.round, m, f));
        }
        if let Some((m, f)) = best {
            self.flow = Some((f, m));
        }
    }

    fn send(&mut self, k: i64) {
        let Some((flow, _)) = self.flow else { return };
        let mut sp = PacketSpec::new(self.a, self.d, 8);
        sp.session = u32::from(PORT);
        sp.route_fun = FLOW_ROUTE.to_string();
        sp.flow = flow;
        let pkt = build_packet(self.ee.interp(), ARRIVE, &format!("arrive({k})"), &sp)
            .expect("data packet");
        self.c.inject(pkt, false).expect("inject data");
    }
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
        std::thread::spawn(move || congest(cb, bn, dn, on, stop))
    };
    let mut app = App {
        c: ca_client,
        ee: PlanEe::with_defaults(),
        a: node_addr(&aa),
        d: node_addr(&da),
        round: 0,
        flow: None,
        switches: Vec::new(),
    };
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
            app.scout();
            app.settle(Duration::from_millis(20), t0);
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
        app.send(k);
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
