//! A small in-process line of anode nodes running [`PlanEe`], in virtual time: the network
//! behind `anode plan run`. Node `i` is `198.18.0.(i+1):3322`; links have zero delay; routes
//! converge before anything is injected. Deterministic and bounded: [`SimLine::inject`]
//! moves packets until the network is quiet or [`SimLine::MAX_MOVES`] packets have moved.

use std::time::{Duration, Instant};

use anode_core::wire::NodeAddr;
use anode_core::wire::addr::v4;
use anode_core::wire::anep::TYPE_PLAN;
use anode_core::{DropReason, LinkConfig, LinkId, Node, NodeConfig};
use thiserror::Error;

use super::{EvalReport, PlanEe, PlanEeConfig, scout};

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
    /// A service could not be installed.
    #[error("installing the scouting services failed: {0}")]
    Services(String),
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

    /// `n` nodes in a line, each with a [`PlanEe`] (configuration `cfg`, scouting services
    /// installed) and links of MTU `mtu`; routes converged.
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
            let mut ee = PlanEe::new(cfg);
            scout::install(&mut ee).map_err(|e| SimError::Services(e.to_string()))?;
            node.register_ee(Box::new(ee));
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
