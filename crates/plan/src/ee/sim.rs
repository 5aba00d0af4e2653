//! A small in-process line of anode nodes running [`PlanEe`], in virtual time: the network
//! behind `anode plan run` (a line of one node, no network, by default: the program runs
//! locally). Node `i` is `198.18.0.(i+1):3322`; links have zero delay; routes converge before
//! anything is injected. Deterministic and bounded: [`SimLine::inject`] moves packets until
//! the network is quiet or [`SimLine::MAX_MOVES`] packets have moved. [`LineRun::to_text`] and
//! [`LineRun::to_json`] are what the command prints.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anode_core::wire::NodeAddr;
use anode_core::wire::addr::v4;
use anode_core::wire::anep::TYPE_PLAN;
use anode_core::{DropReason, LinkConfig, LinkId, Node, NodeConfig};
use thiserror::Error;

use super::{EvalReport, EvalResult, PlanEe, PlanEeConfig};

/// Why a simulated line could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SimError {
    /// Too few or too many nodes.
    #[error("a line needs 1 to {max} nodes, not {n}")]
    Size {
        /// Asked for.
        n: usize,
        /// Most supported.
        max: usize,
    },
    /// The node core refused the configuration.
    #[error("node configuration rejected: {0}")]
    Config(String),
}

/// A line of nodes `0 - 1 - ... - n-1`.
#[derive(Debug)]
pub struct SimLine {
    nodes: Vec<Node>,
    now: Instant,
    report: EvalReport,
    moved: u64,
}

impl SimLine {
    /// Most nodes in a line.
    pub const MAX_NODES: usize = 64;
    /// Most packets moved by one injection.
    pub const MAX_MOVES: u64 = 1_000_000;

    /// Address of node `i`.
    pub fn addr(i: usize) -> NodeAddr {
        v4(198, 18, 0, u8::try_from(i + 1).unwrap_or(255), 3322)
    }

    /// `n` nodes in a line, each with a [`PlanEe`] (configuration `cfg`, the standard service
    /// packages installed) and links of MTU `mtu`; routes converged.
    pub fn new(n: usize, cfg: PlanEeConfig, mtu: usize) -> Result<SimLine, SimError> {
        if n == 0 || n > Self::MAX_NODES {
            return Err(SimError::Size {
                n,
                max: Self::MAX_NODES,
            });
        }
        let now = Instant::now();
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            let mut node = Node::new(NodeConfig::new(Self::addr(i)), now)
                .map_err(|e| SimError::Config(e.to_string()))?;
            for peer in [i.checked_sub(1), (i + 1 < n).then_some(i + 1)]
                .into_iter()
                .flatten()
            {
                let mut l = LinkConfig::new(Self::addr(peer));
                l.mtu = mtu;
                node.add_link(l, now);
            }
            node.register_ee(Box::new(PlanEe::new(cfg)));
            nodes.push(node);
        }
        let mut s = SimLine {
            nodes,
            now,
            report: EvalReport::default(),
            moved: 0,
        };
        s.run_for(Duration::from_secs(5));
        s.report = EvalReport::default();
        s.moved = 0;
        Ok(s)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the line has no nodes (never, once built).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The PLAN EE of node `i`.
    pub fn ee(&mut self, i: usize) -> Option<&mut PlanEe> {
        self.nodes
            .get_mut(i)?
            .ee_mut(TYPE_PLAN)?
            .as_any_mut()
            .downcast_mut::<PlanEe>()
    }

    /// Packets moved between nodes since routes converged (no timers run afterwards, so this
    /// counts only what was injected and what it caused).
    pub fn moved(&self) -> u64 {
        self.moved
    }

    /// What PLAN packets left at the nodes since the line was built.
    pub fn report(&self) -> &EvalReport {
        &self.report
    }

    /// The link of node `i` leading to node `j` (links are added lower neighbor first).
    fn link_to(&self, i: usize, j: usize) -> LinkId {
        if j < i || i == 0 {
            LinkId(0)
        } else {
            LinkId(1)
        }
    }

    /// Moves queued packets until quiet (bounded).
    fn pump(&mut self) -> bool {
        let mut budget = Self::MAX_MOVES;
        loop {
            let mut moved = false;
            for i in 0..self.nodes.len() {
                let n = self.nodes.len();
                let mut out = Vec::new();
                if let Some(node) = self.nodes.get_mut(i) {
                    while let Some(t) = node.poll_transmit() {
                        out.push(t);
                    }
                    let a = node.address();
                    while let Some(e) = node.poll_event() {
                        self.report.add_event(a, &e);
                    }
                }
                for t in out {
                    moved = true;
                    self.moved += 1;
                    budget = budget.saturating_sub(1);
                    let j = match t.link.0 {
                        0 if i > 0 => i - 1,
                        _ => i + 1,
                    };
                    if j < n {
                        let l = self.link_to(j, i);
                        let now = self.now;
                        if let Some(peer) = self.nodes.get_mut(j) {
                            peer.handle_packet(now, l, t.buf);
                        }
                    }
                }
            }
            if !moved {
                return true;
            }
            if budget == 0 {
                return false;
            }
        }
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            self.pump();
            let next = self.nodes.iter().filter_map(Node::poll_timeout).min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    for n in &mut self.nodes {
                        if n.poll_timeout().is_some_and(|d| d <= self.now) {
                            n.handle_timeout(self.now);
                        }
                    }
                }
                _ => {
                    self.now = end;
                    return;
                }
            }
        }
    }

    /// Injects a whole PLAN packet at node `at` as a local application would, and runs the
    /// network until it is quiet. `Ok(false)` if it was still busy after
    /// [`SimLine::MAX_MOVES`] packets.
    pub fn inject(&mut self, at: usize, pkt: Vec<u8>) -> Result<bool, DropReason> {
        let now = self.now;
        let node = self.nodes.get_mut(at).ok_or(DropReason::NoRoute)?;
        let r = node.inject(now, pkt);
        let quiet = self.pump();
        r.map(|()| quiet)
    }
}

/// One packet's run on a [`SimLine`] (`anode plan run`): the line, what to send.
#[derive(Debug, Clone)]
pub struct LineSpec {
    /// Hops in the line (it has `hops + 1` nodes).
    pub hops: usize,
    /// The node where the packet is evaluated first (node 0 is the source).
    pub eval_at: usize,
    /// Resource bound.
    pub rb: u16,
    /// Flow id.
    pub flow: u64,
    /// Session (the source application's PLAN port).
    pub session: u32,
    /// Routing function named in the packet.
    pub route_fun: String,
    /// Error handler named in the packet.
    pub handler: String,
    /// Step budget of one evaluation.
    pub steps: u64,
    /// Link MTU.
    pub mtu: usize,
}

/// What a [`run_line`] did.
#[derive(Debug)]
pub struct LineRun {
    /// The nodes' addresses, by index.
    pub nodes: Vec<NodeAddr>,
    /// The packet's size.
    pub packet_bytes: usize,
    /// The source's answer to the injection: whether the network went quiet, or the drop.
    pub injected: Result<bool, DropReason>,
    /// Packets moved between nodes.
    pub moved: u64,
    /// Evaluations per node.
    pub evaluations: Vec<u64>,
    /// Prints, deliveries and errors seen at the nodes.
    pub report: EvalReport,
    /// Every evaluation's value or uncaught exception, by node index, in order.
    pub results: Vec<(usize, EvalResult)>,
    /// The node evaluated first.
    pub eval_at: usize,
}

impl LineRun {
    /// The index of the node at `addr` (0 if none).
    pub fn index_of(&self, addr: &NodeAddr) -> usize {
        self.nodes.iter().position(|a| a == addr).unwrap_or(0)
    }

    /// The outcome of the entry call: the first evaluation at the node evaluated first.
    pub fn entry_result(&self) -> Option<&EvalResult> {
        self.results
            .iter()
            .find(|(i, _)| *i == self.eval_at)
            .map(|(_, r)| r)
    }

    /// Whether the packet ran without an error anywhere.
    pub fn clean(&self) -> bool {
        self.report.errors.is_empty() && self.injected.is_ok()
    }

    /// What `anode plan run` prints. On one node (local evaluation): the program's output,
    /// then the entry's value (`=> v`) unless it is `()`, then the errors. On a line: the
    /// nodes, the packet, and per node its prints, deliveries and errors.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if self.nodes.len() == 1 {
            for (_, s) in &self.report.prints {
                out.push_str(s);
            }
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            if let Some(Ok(v)) = self.entry_result().map(|r| &r.result)
                && *v != crate::Value::Unit
            {
                let _ = writeln!(out, "=> {}", v.to_display_string());
            }
            for (_, d) in &self.report.deliveries {
                let v = d.value.to_display_string();
                let _ = writeln!(out, "deliver port {}: {v}", d.port);
            }
            for (_, s) in &self.report.errors {
                let _ = writeln!(out, "error: {s}");
            }
            return out;
        }
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{i}={n}"))
            .collect();
        let _ = writeln!(
            out,
            "line of {} nodes: {}",
            self.nodes.len(),
            nodes.join(" ")
        );
        let _ = writeln!(
            out,
            "packet: {} bytes, evaluated first at node {}",
            self.packet_bytes, self.eval_at
        );
        match &self.injected {
            Ok(true) => {}
            Ok(false) => out.push_str("warning: the network was still busy when the run stopped\n"),
            Err(e) => {
                let _ = writeln!(out, "the source refused the packet: {e}");
            }
        }
        for (addr, s) in &self.report.prints {
            let i = self.index_of(addr);
            let _ = writeln!(out, "node {i} print: {}", s.trim_end_matches('\n'));
        }
        for (addr, d) in &self.report.deliveries {
            let v = d.value.to_display_string();
            let _ = writeln!(
                out,
                "node {} deliver port {}: {v}",
                self.index_of(addr),
                d.port
            );
        }
        for (addr, s) in &self.report.errors {
            let _ = writeln!(out, "node {} error: {s}", self.index_of(addr));
        }
        let _ = writeln!(
            out,
            "{} packets moved; evaluations per node: {:?}",
            self.moved, self.evaluations
        );
        out
    }

    /// The run as JSON (`anode plan run --json`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let idx = |a: &NodeAddr| self.index_of(a);
        let rep = &self.report;
        let value = self.entry_result().map(|r| match &r.result {
            Ok(v) => json!({"value": v.to_display_string()}),
            Err(e) => json!({"exception": e.exn.to_string(), "message": e.msg}),
        });
        json!({
            "nodes": self.nodes.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "packet_bytes": self.packet_bytes,
            "injected": match &self.injected { Ok(_) => "ok".to_string(), Err(e) => e.to_string() },
            "quiet": matches!(self.injected, Ok(true)),
            "packets_moved": self.moved,
            "evaluations": self.evaluations,
            "entry": value,
            "output": rep.prints.iter().map(|(_, s)| s.as_str()).collect::<String>(),
            "prints": rep.prints.iter().map(|(a, s)| json!({"node": idx(a), "text": s})).collect::<Vec<_>>(),
            "deliveries": rep.deliveries.iter().map(|(a, d)| json!({
                "node": idx(a), "port": d.port, "src": d.src.to_string(), "flow": d.flow,
                "value": d.value.to_display_string(),
            })).collect::<Vec<_>>(),
            "errors": rep.errors.iter().map(|(a, s)| json!({"node": idx(a), "message": s})).collect::<Vec<_>>(),
        })
    }
}

/// Why [`run_line`] could not run the packet.
#[derive(Debug, Error)]
pub enum RunLineError {
    /// The spec does not describe a line (evaluation node past its end).
    #[error("--eval-at {eval_at} is not a node of a {hops}-hop line (nodes 0..={hops})")]
    EvalAt {
        /// Asked for.
        eval_at: usize,
        /// The line's hops.
        hops: usize,
    },
    /// The line could not be built.
    #[error("{0}")]
    Line(#[from] SimError),
    /// The packet could not be built (the program or the entry call).
    #[error("{0}")]
    Build(#[from] super::BuildError),
}

/// Builds a line, sends the packet for `entry` of `text` from node 0 and runs it until quiet.
pub fn run_line(text: &str, entry: &str, spec: &LineSpec) -> Result<LineRun, RunLineError> {
    let n = spec.hops.saturating_add(1);
    if spec.eval_at >= n {
        return Err(RunLineError::EvalAt {
            eval_at: spec.eval_at,
            hops: spec.hops,
        });
    }
    let cfg = PlanEeConfig {
        limits: crate::Limits {
            steps: spec.steps,
            ..crate::Limits::default()
        },
        ..PlanEeConfig::default()
    };
    let mut line = SimLine::new(n, cfg, spec.mtu)?;
    for i in 0..n {
        if let Some(ee) = line.ee(i) {
            ee.record_results();
        }
    }
    let packet = super::PacketSpec {
        src: SimLine::addr(0),
        eval_dest: SimLine::addr(spec.eval_at),
        rb: spec.rb,
        flow: spec.flow,
        session: spec.session,
        route_fun: spec.route_fun.clone(),
        handler: spec.handler.clone(),
    };
    let pkt = {
        let ee = line
            .ee(0)
            .ok_or(SimError::Config("the line has no PLAN EE".into()))?;
        super::build_packet(ee.interp(), text, entry, &packet)?
    };
    let packet_bytes = pkt.len();
    let injected = line.inject(0, pkt);
    let evaluations = (0..n)
        .map(|i| line.ee(i).map_or(0, |e| e.stats().evaluations))
        .collect();
    let mut results = Vec::new();
    for i in 0..n {
        if let Some(ee) = line.ee(i) {
            results.extend(ee.take_results().into_iter().map(|r| (i, r)));
        }
    }
    Ok(LineRun {
        nodes: (0..n).map(SimLine::addr).collect(),
        packet_bytes,
        injected,
        moved: line.moved(),
        evaluations,
        report: line.report().clone(),
        results,
        eval_at: spec.eval_at,
    })
}
