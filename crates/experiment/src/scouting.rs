//! PLANet's route scouting as an application of live nodes (`crates/plan/programs/scout.plan`,
//! PLANet §V-B): the controlling application at the source sends scout rounds and a flow of
//! small PLAN packets routed by `flowRoute` along the best flow the last round found; the
//! destination reports which neighbor each flow packet came through; a loader injects
//! datagrams at a router to load one of its links. Used by the `planet-route-scouts`
//! experiment and by the node's scouting test (crates/anode/tests/plan_scouting.rs).
//!
//! Contract: everything goes through the nodes' control sockets (`anode_ctl::Client`); the
//! loops stop when their `stop` flag is set and never panic on what a node sends back.

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

use crate::ExpError;

/// The scout program.
pub const SCOUT: &str = include_str!("../../plan/programs/scout.plan");
/// PLAN port of the application at the source (scout results) and at the destination
/// (arrivals).
pub const PORT: u16 = 7;
/// The data program: the destination delivers (sequence number, the neighbor it came
/// through).
pub const ARRIVE: &str = "\
fun via(a : host, n : host * dev) : host = if snd n = getSrcDev() then fst n else a
fun arrive(k : int) : unit =
  deliver(getImplicitPort(), (k, foldl(via, hd(thisHost()), getNeighbors())))
";

/// A flow packet at the destination: (time since the start, sequence number, previous hop).
pub type Arrival = (Duration, i64, String);

fn fail(what: &str) -> impl Fn(anode_ctl::ClientError) -> ExpError + '_ {
    move |e| ExpError::Command(format!("{what}: {e}"))
}

/// The two items of a PLAN pair.
pub fn pair(v: &Value) -> Option<(&Value, &Value)> {
    match v {
        Value::Tuple(t) => match t.items() {
            [x, y] => Some((x, y)),
            _ => None,
        },
        _ => None,
    }
}

/// A value delivered to [`PORT`], decoded.
pub fn delivered(item: StreamItem) -> Option<Value> {
    match item {
        StreamItem::Delivery(d) if d.type_id == TYPE_PLAN && d.port == PORT => {
            anode_plan::marshal::decode_value(d.payload.as_bytes()).ok()
        }
        _ => None,
    }
}

/// Collects the flow's arrivals at the destination (a client bound to [`PORT`]) until `stop`.
pub fn collect_arrivals(mut c: Client, t0: Instant, stop: Arc<AtomicBool>) -> Vec<Arrival> {
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let Ok(item) = c.next_item(Some(Instant::now() + Duration::from_millis(50))) else {
            continue;
        };
        if let Some(v) = delivered(item)
            && let Some((Value::Int(k), Value::Host(h))) = pair(&v)
        {
            out.push((t0.elapsed(), *k, h.to_string()));
        }
    }
    out
}

/// Injects `pps` datagrams of 200 B a second at `b` toward its neighbor `d` while `on`
/// (they load `b`'s link to `d`), until `stop` or an injection fails.
pub fn congest(
    mut c: Client,
    b: NodeAddr,
    d: NodeAddr,
    pps: u32,
    on: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) {
    let transit = TransitRepr {
        flags: 0,
        rb: 8,
        flow: 0,
        src: b,
        dst: d,
        prev_hop: b,
    };
    let Ok(pkt) = (Datagram {
        transit,
        port: 9,
        payload: vec![0; 200],
    })
    .to_packet() else {
        return;
    };
    let per_5ms = (pps / 200).max(1);
    while !stop.load(Ordering::Relaxed) {
        if on.load(Ordering::Relaxed) && c.inject_many(pkt.clone(), false, per_5ms).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The controlling application at the source.
pub struct App {
    c: Client,
    ee: PlanEe,
    a: NodeAddr,
    d: NodeAddr,
    /// The last scouting round.
    pub round: i64,
    /// The flow in use and its metric.
    pub flow: Option<(u64, i64)>,
    /// Round trip of each round's first answer, ms.
    pub scout_rtts: Vec<f64>,
    /// (time since start, round, metric, flow) of every switch of flow.
    pub switches: Vec<(Duration, i64, i64, u64)>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("a", &self.a)
            .field("d", &self.d)
            .field("round", &self.round)
            .field("flow", &self.flow)
            .finish_non_exhaustive()
    }
}

impl App {
    /// The application at `a` (a client bound to [`PORT`] there) for flows to `d`.
    pub fn new(c: Client, a: NodeAddr, d: NodeAddr) -> App {
        App {
            c,
            ee: PlanEe::with_defaults(),
            a,
            d,
            round: 0,
            flow: None,
            scout_rtts: Vec::new(),
            switches: Vec::new(),
        }
    }

    /// Sends the next scout round (the scout fits a 1472-byte MTU or this fails), reads
    /// its answers for `window` and switches to the best flow they offer.
    pub fn scout(&mut self, window: Duration, t0: Instant) -> Result<(), ExpError> {
        self.round += 1;
        let mut sp = PacketSpec::new(self.a, self.a, 40);
        sp.session = u32::from(PORT);
        let entry = format!(
            "scout({a}, {d}, {k}, 0, [{a}])",
            a = self.a,
            d = self.d,
            k = self.round
        );
        let pkt = build_packet(self.ee.interp(), SCOUT, &entry, &sp)
            .map_err(|e| ExpError::Command(format!("scout packet: {e}")))?;
        if pkt.len() > 1472 {
            return Err(ExpError::Command(format!(
                "a scout is {} bytes, over a 1472-byte MTU",
                pkt.len()
            )));
        }
        let sent = Instant::now();
        self.c.inject(pkt, false).map_err(fail("inject a scout"))?;
        let mut best: Option<(i64, u64)> = None;
        while let Ok(item) = self.c.next_item(Some(sent + window)) {
            let Some(v) = delivered(item) else { continue };
            if let Some((Value::Int(f), Value::Int(m))) = pair(&v)
                && let Ok(f) = u64::try_from(*f)
            {
                if best.is_none() {
                    self.scout_rtts.push(sent.elapsed().as_secs_f64() * 1000.0);
                }
                if best.is_none_or(|(bm, _)| *m < bm) {
                    best = Some((*m, f));
                }
            }
        }
        if let Some((m, f)) = best {
            if self.flow.is_none_or(|(_, old)| old != m) {
                self.switches.push((t0.elapsed(), self.round, m, f));
            }
            self.flow = Some((f, m));
        }
        Ok(())
    }

    /// Sends flow packet `k` along the current flow (nothing before the first round found one).
    pub fn send(&mut self, k: i64) -> Result<(), ExpError> {
        let Some((flow, _)) = self.flow else {
            return Ok(());
        };
        let mut sp = PacketSpec::new(self.a, self.d, 8);
        sp.session = u32::from(PORT);
        sp.route_fun = FLOW_ROUTE.to_string();
        sp.flow = flow;
        let pkt = build_packet(self.ee.interp(), ARRIVE, &format!("arrive({k})"), &sp)
            .map_err(|e| ExpError::Command(format!("flow packet: {e}")))?;
        self.c
            .inject(pkt, false)
            .map_err(fail("inject a flow packet"))
    }
}
