//! The report of a run: text for people ([`Report::to_text`]) and JSON for tools
//! (`serde_json::to_string_pretty(&report)`).
//!
//! Determinism contract (virtual time): a report holds no wall-clock value and no hash-map
//! iteration order; every time is an integer of microseconds of virtual time (`*_us` in JSON,
//! fixed three-decimal text); floats appear only as echoes of the file's own values. So the
//! same file and seed give a byte-identical report. Realtime reports say so in `mode`,
//! `deterministic` and `note`, and are not byte-identical.

use std::collections::BTreeMap;
use std::time::Duration;

use anode_core::{Counters, RouteKind, RoutingConfig};
use serde::Serialize;

use crate::link::DirStats;
use crate::scenario::{ReportCtx, Step, StepOutcome};
use crate::topology::{LinkSpec, NodeSpec, Topology};
use crate::track::Tracker;

/// Microseconds of a duration (for JSON).
pub fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// A duration as milliseconds with three decimals: "12.345 ms".
pub fn fmt_ms(d: Duration) -> String {
    let u = d.as_micros();
    format!("{}.{:03} ms", u / 1000, u % 1000)
}

/// A span of time for people: "12.345 ms" below a second, "1.234 s" from a second on.
pub fn fmt_span(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        fmt_ms(d)
    } else {
        fmt_time(d)
    }
}

/// A time as seconds with three decimals: "12.345 s".
pub fn fmt_time(d: Duration) -> String {
    let m = d.as_millis();
    format!("{}.{:03} s", m / 1000, m % 1000)
}

fn fmt_us_time(v: u64) -> String {
    fmt_time(Duration::from_micros(v))
}

/// A change of a link's state, as the runner logged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkChange {
    /// When.
    pub at: Duration,
    /// Which link.
    pub link: usize,
    /// Restored (true) or failed (false).
    pub up: bool,
    /// Whether the up links left the network split in two or more parts.
    pub partitions: bool,
}

/// How traffic of the send steps fared after a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrafficImpact {
    /// Datagrams sent from the failure until the next link change (or the end).
    pub sent: u64,
    /// Of those, lost or refused.
    pub lost: u64,
    /// When the first of the lost was sent.
    pub first_loss_at_us: Option<u64>,
    /// Send time of the first datagram delivered after the last loss: traffic flowed again.
    pub resumed_at_us: Option<u64>,
    /// `resumed_at_us` minus the failure time.
    pub resumed_after_us: Option<u64>,
}

/// What a link failure did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureReport {
    /// "a-b".
    pub link: String,
    /// Index of the link.
    #[serde(skip)]
    pub link_index: usize,
    /// When it failed.
    pub failed_at_us: u64,
    /// When it came back, if it did.
    pub restored_at_us: Option<u64>,
    /// Whether the failure split the network.
    pub partitions: bool,
    /// When every node again reached every other (before the restore), if it did.
    pub routes_repaired_at_us: Option<u64>,
    /// `routes_repaired_at_us` minus the failure time.
    pub routes_repaired_after_us: Option<u64>,
    /// Send-step traffic after the failure; `None` if no step sent in that window.
    pub traffic: Option<TrafficImpact>,
}

impl FailureReport {
    /// Text lines for people.
    pub fn text_lines(&self) -> Vec<String> {
        let mut v = Vec::new();
        match (self.routes_repaired_after_us, self.partitions) {
            (Some(0), _) => v.push("no route used it: every node still reaches every other".into()),
            (Some(d), _) => v.push(format!(
                "routing repaired after {} (every node reaches every other again at {})",
                fmt_span(Duration::from_micros(d)),
                fmt_us_time(self.routes_repaired_at_us.unwrap_or(0))
            )),
            (None, true) => {
                v.push("the failure splits the network: some nodes cannot reach others".into())
            }
            (None, false) => v.push(if self.restored_at_us.is_some() {
                "routing had not repaired every route when the link came back".into()
            } else {
                "routing had not repaired every route by the end of the run".into()
            }),
        }
        if let Some(t) = &self.traffic {
            match (t.lost, t.resumed_after_us) {
                (0, _) => v.push(format!(
                    "traffic: none of the {} datagrams sent afterwards was lost",
                    t.sent
                )),
                (l, Some(d)) => v.push(format!(
                    "traffic: {l} of {} datagrams sent afterwards lost; traffic resumed {} after the failure",
                    t.sent,
                    fmt_span(Duration::from_micros(d))
                )),
                (l, None) => v.push(format!(
                    "traffic: {l} of {} datagrams sent afterwards lost; traffic did not resume",
                    t.sent
                )),
            }
        }
        v
    }
}

/// Builds the failure analyses from the link log, the all-pairs reachability changes and the
/// tracked traffic.
pub(crate) fn analyze_failures(
    log: &[LinkChange],
    reach: &[ReachChange],
    tracker: &Tracker,
    end: Duration,
    link_name: &dyn Fn(usize) -> String,
) -> Vec<FailureReport> {
    let mut out = Vec::new();
    for (i, c) in log.iter().enumerate() {
        if c.up {
            continue;
        }
        let later = log.get(i + 1..).unwrap_or(&[]);
        let restored = later
            .iter()
            .find(|x| x.link == c.link && x.up)
            .map(|x| x.at);
        let window_end = later.first().map_or(end, |x| x.at);
        let tf = us(c.at);
        let limit = restored.map_or(u64::MAX, us);
        // The reachability state right after the failure, then the first change to true.
        let state_at = reach
            .iter()
            .rev()
            .find(|r| r.at_us <= tf)
            .is_some_and(|r| r.all_pairs);
        let repaired = if state_at {
            Some(tf)
        } else {
            reach
                .iter()
                .find(|r| r.at_us > tf && r.all_pairs)
                .map(|r| r.at_us)
                .filter(|t| *t < limit)
        };
        let flows: Vec<_> = tracker
            .all()
            .iter()
            .filter(|f| f.sent_at >= c.at && f.sent_at < window_end)
            .collect();
        let traffic = (!flows.is_empty()).then(|| {
            let lost_idx: Vec<usize> = flows
                .iter()
                .enumerate()
                .filter(|(_, f)| f.arrival.is_none())
                .map(|(i, _)| i)
                .collect();
            let first_loss = lost_idx
                .first()
                .and_then(|i| flows.get(*i))
                .map(|f| us(f.sent_at));
            let resumed = match lost_idx.last() {
                None => Some(tf),
                Some(&last) => flows
                    .get(last + 1..)
                    .unwrap_or(&[])
                    .iter()
                    .find(|f| f.arrival.is_some())
                    .map(|f| us(f.sent_at)),
            };
            TrafficImpact {
                sent: flows.len() as u64,
                lost: lost_idx.len() as u64,
                first_loss_at_us: first_loss,
                resumed_at_us: resumed,
                resumed_after_us: resumed.map(|r| r - tf),
            }
        });
        out.push(FailureReport {
            link: link_name(c.link),
            link_index: c.link,
            failed_at_us: tf,
            restored_at_us: restored.map(us),
            partitions: c.partitions,
            routes_repaired_at_us: repaired,
            routes_repaired_after_us: repaired.map(|r| r - tf),
            traffic,
        });
    }
    out
}

/// A change of "every node reaches every other".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReachChange {
    /// When.
    pub at_us: u64,
    /// Whether every node now reaches every other.
    pub all_pairs: bool,
}

/// One step's entry in the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    /// Position in the file, from 1.
    pub number: usize,
    /// When it ran.
    pub at_us: u64,
    /// The action.
    pub action: String,
    /// What it did.
    #[serde(flatten)]
    pub outcome: StepOutcome,
}

/// One link's entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkReport {
    /// "a-b".
    pub name: String,
    /// Propagation delay.
    pub delay_us: u64,
    /// Bandwidth, `None` if unlimited.
    pub bandwidth_bps: Option<u64>,
    /// Loss probability.
    pub loss: f64,
    /// MTU.
    pub mtu: usize,
    /// Queue per direction.
    pub queue_bytes: u64,
    /// State at the end.
    pub up_at_end: bool,
    /// Counters a -> b (virtual time only).
    pub a_to_b: Option<DirStats>,
    /// Counters b -> a (virtual time only).
    pub b_to_a: Option<DirStats>,
}

/// A routing-table entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteReport {
    /// Destination (node name, or address if not a node of the topology).
    pub dest: String,
    /// Metric (>= infinity: unreachable).
    pub metric: u16,
    /// Next hop's name.
    pub next_hop: Option<String>,
    /// How the route was made.
    pub kind: RouteKind,
}

/// One node's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeReport {
    /// Name.
    pub name: String,
    /// Address in this run.
    pub address: String,
    /// Up neighbors at the end.
    pub neighbors: Vec<String>,
    /// Counters.
    pub counters: Counters,
    /// Routes in the final table (the node itself included).
    pub route_count: usize,
    /// Final routing table, by destination address; listed for networks of at most
    /// [`ROUTE_TABLES_MAX_NODES`] nodes (a 3,815-node run would list 14.5 million routes).
    pub routes: Vec<RouteReport>,
    /// The routing protocol's own counters at the end (`Node::routing_stats`: digests,
    /// requests, LSAs, SPF runs, ...), by name.
    pub routing: BTreeMap<String, u64>,
}

/// Largest network whose reports list every node's routing table.
pub const ROUTE_TABLES_MAX_NODES: usize = 200;

/// Pass/fail totals of the expect steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Checks {
    /// Held.
    pub passed: usize,
    /// Did not.
    pub failed: usize,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// "virtual-time" or "realtime".
    pub mode: String,
    /// Whether the same file and seed give the same report.
    pub deterministic: bool,
    /// What that means.
    pub note: String,
    /// The topology file.
    pub file: String,
    /// Its description.
    pub description: Option<String>,
    /// The seed.
    pub seed: u64,
    /// Run length.
    pub duration_us: u64,
    /// Routing timers used.
    pub routing: RoutingConfig,
    /// First time every node reached every other.
    pub converged_at_us: Option<u64>,
    /// Every change of all-pairs reachability.
    pub reachability_changes: Vec<ReachChange>,
    /// The steps, in time order.
    pub steps: Vec<StepReport>,
    /// The link failures.
    pub failures: Vec<FailureReport>,
    /// Expect totals.
    pub checks: Checks,
    /// The links.
    pub links: Vec<LinkReport>,
    /// The nodes.
    pub nodes: Vec<NodeReport>,
    /// Simulator events processed (virtual time; 0 in realtime).
    pub events: u64,
    /// The routing protocol's counters summed over every node (each node's are in
    /// `nodes[].routing`): what the protocol cost the network, e.g. digests against full
    /// tables, LSA copies received against LSAs installed.
    pub routing_totals: BTreeMap<String, u64>,
}

impl Report {
    /// Whether every expect step held.
    pub fn passed(&self) -> bool {
        self.checks.failed == 0
    }

    /// The report as pretty JSON (with a final newline).
    pub fn to_json(&self) -> String {
        match serde_json::to_string_pretty(self) {
            Ok(mut s) => {
                s.push('\n');
                s
            }
            Err(e) => format!("{{\"error\": \"report serialization failed: {e}\"}}\n"),
        }
    }

    /// The report as text for people.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let mut line = |s: String| {
            o.push_str(&s);
            o.push('\n');
        };
        line(format!(
            "{}: {} nodes, {} links, seed {}, {} of {}",
            self.file,
            self.nodes.len(),
            self.links.len(),
            self.seed,
            fmt_us_time(self.duration_us),
            if self.deterministic {
                "virtual time"
            } else {
                "real time"
            }
        ));
        if let Some(d) = &self.description {
            line(format!("  {d}"));
        }
        line(format!("  {}", self.note));
        line(String::new());
        match self.converged_at_us {
            Some(t) => line(format!(
                "Converged: every node reaches every other at {}.",
                fmt_us_time(t)
            )),
            None => line("Not converged: some node never reached some other.".into()),
        }
        let work: Vec<String> = self
            .routing_totals
            .iter()
            .filter(|(k, _)| !k.starts_with("protocol_") && *k != "routes")
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if !work.is_empty() {
            line(format!("Routing, all nodes: {}.", work.join(", ")));
        }
        line(String::new());
        if !self.steps.is_empty() {
            line("Steps:".into());
            for s in &self.steps {
                line(format!(
                    "  {:>5} {:>10}  {}",
                    format!("[{}]", s.number),
                    fmt_us_time(s.at_us),
                    s.outcome.summary
                ));
                for d in &s.outcome.details {
                    line(format!("  {:18}{d}", ""));
                }
            }
            line(String::new());
        }
        line("Links (per direction: delivered / lost / queue drops / mtu drops / dropped while down):".into());
        for l in &self.links {
            let bw = l.bandwidth_bps.map_or("unlimited".to_string(), |b| {
                format!("{} Mbit/s", b as f64 / 1e6)
            });
            let st = |d: &Option<DirStats>| match d {
                Some(d) => format!(
                    "{} / {} / {} / {} / {}",
                    d.delivered, d.lost, d.queue_drops, d.mtu_drops, d.down_drops
                ),
                None => "n/a".to_string(),
            };
            let (a, b) = l.name.split_once('-').unwrap_or((&l.name, ""));
            line(format!(
                "  {:<10} {}, {bw}, loss {}, mtu {}{}",
                l.name,
                fmt_ms(Duration::from_micros(l.delay_us)),
                l.loss,
                l.mtu,
                if l.up_at_end { "" } else { ", DOWN at the end" }
            ));
            line(format!(
                "  {:13}{a}->{b}: {}; {b}->{a}: {}",
                "",
                st(&l.a_to_b),
                st(&l.b_to_a)
            ));
        }
        line(String::new());
        line("Nodes (counters; final routes as destination:metric/next hop):".into());
        for n in &self.nodes {
            let c = &n.counters;
            line(format!(
                "  {:<10} {:<22} rx {} tx {} fast-path {} delivered {} control rx/tx {}/{} drops {}",
                n.name,
                n.address,
                c.rx_packets,
                c.tx_packets,
                c.fast_path,
                c.delivered,
                c.control_rx,
                c.control_tx,
                c.drop_summary(",")
            ));
            if n.routes.is_empty() && n.route_count > 0 {
                line(format!(
                    "  {:11}routes: {} (tables are listed for networks of at most {ROUTE_TABLES_MAX_NODES} nodes)",
                    "", n.route_count
                ));
                continue;
            }
            let dv = self.routing.protocol == anode_routing::Protocol::Dv;
            let routes: Vec<String> = n
                .routes
                .iter()
                .filter(|r| r.kind != RouteKind::Local)
                .map(|r| {
                    let hop = r.next_hop.as_deref().unwrap_or("-");
                    if dv && r.metric >= self.routing.infinity {
                        format!("{}:unreachable", r.dest)
                    } else {
                        format!("{}:{}/{hop}", r.dest, r.metric)
                    }
                })
                .collect();
            line(format!("  {:11}routes {}", "", routes.join(" ")));
        }
        line(String::new());
        let total = self.checks.passed + self.checks.failed;
        if total == 0 {
            line(
                "Checks: none (add [[step]] action = \"expect\" to state expected results).".into(),
            );
        } else if self.checks.failed == 0 {
            line(format!("Checks: all {total} passed."));
        } else {
            line(format!(
                "Checks: {} of {total} FAILED (see FAIL above).",
                self.checks.failed
            ));
        }
        o
    }
}

/// "a-b" for link `i`.
pub fn link_name(specs: &[NodeSpec], links: &[LinkSpec], i: usize) -> String {
    links.get(i).map_or(format!("link{i}"), |l| {
        let n = |x: usize| specs.get(x).map_or("?", |s| s.name.as_str());
        format!("{}-{}", n(l.a), n(l.b))
    })
}

/// Everything a runner hands over to build its report.
#[derive(Debug)]
pub struct Assembly<'a> {
    pub topo: &'a Topology,
    pub deterministic: bool,
    pub note: &'a str,
    pub specs: &'a [NodeSpec],
    pub link_specs: &'a [LinkSpec],
    pub steps: &'a [Step],
    pub tracker: &'a Tracker,
    pub reach: &'a [ReachChange],
    pub link_log: &'a [LinkChange],
    pub end: Duration,
    pub links: Vec<LinkReport>,
    pub nodes: Vec<NodeReport>,
    pub events: u64,
}

/// Builds the report: failure analyses, every step's outcome, check totals.
pub fn assemble(a: Assembly<'_>) -> Report {
    let name = |i: usize| link_name(a.specs, a.link_specs, i);
    let failures = analyze_failures(a.link_log, a.reach, a.tracker, a.end, &name);
    let mut steps = Vec::with_capacity(a.steps.len());
    let mut checks = Checks {
        passed: 0,
        failed: 0,
    };
    for s in a.steps {
        let ctx = ReportCtx {
            step: s.index,
            at: s.at,
            nodes: a.specs,
            links: a.link_specs,
            tracker: a.tracker,
            failures: &failures,
        };
        let outcome = s.action.report(&ctx);
        if let Some(c) = &outcome.check {
            if c.passed {
                checks.passed += 1;
            } else {
                checks.failed += 1;
            }
        }
        steps.push(StepReport {
            number: s.index + 1,
            at_us: us(s.at),
            action: s.action_name.clone(),
            outcome,
        });
    }
    Report {
        mode: if a.deterministic {
            "virtual-time"
        } else {
            "realtime"
        }
        .to_string(),
        deterministic: a.deterministic,
        note: a.note.to_string(),
        file: a.topo.file.clone(),
        description: a.topo.description.clone(),
        seed: a.topo.seed,
        duration_us: us(a.topo.duration),
        routing: a.topo.routing,
        converged_at_us: a.reach.iter().find(|r| r.all_pairs).map(|r| r.at_us),
        reachability_changes: a.reach.to_vec(),
        steps,
        failures,
        checks,
        routing_totals: a.nodes.iter().flat_map(|n| &n.routing).fold(
            BTreeMap::new(),
            |mut m, (k, v)| {
                *m.entry(k.clone()).or_insert(0) += v;
                m
            },
        ),
        links: a.links,
        nodes: a.nodes,
        events: a.events,
    }
}
