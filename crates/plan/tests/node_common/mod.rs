//! A hand-wired network of anode nodes running the PLAN EE, in virtual time (the pattern of
//! anode-core's own tests): zero-delay links, pumped until quiet.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use anode_core::wire::NodeAddr;
use anode_core::wire::addr::v4;
use anode_core::wire::anep::TYPE_PLAN;
use anode_core::{LinkConfig, LinkId, Node, NodeConfig};
use anode_plan::ee::{EvalReport, PacketSpec, PlanEe, PlanEeConfig, build_packet, scout};

pub fn addr(i: usize) -> NodeAddr {
    v4(198, 18, 0, i as u8 + 1, 3322)
}

pub fn program(name: &str) -> String {
    std::fs::read_to_string(format!("{}/programs/{name}", env!("CARGO_MANIFEST_DIR")))
        .expect("program file")
}

pub struct Net {
    pub nodes: Vec<Node>,
    wires: Vec<((usize, u32), (usize, u32))>,
    pub now: Instant,
    pub report: Vec<EvalReport>,
    /// Packets moved between nodes.
    pub moved: u64,
}

impl Net {
    pub fn new(n: usize, edges: &[(usize, usize)]) -> Net {
        Self::with_config(n, edges, PlanEeConfig::default())
    }

    pub fn with_config(n: usize, edges: &[(usize, usize)], cfg: PlanEeConfig) -> Net {
        Self::build(n, edges, cfg, None)
    }

    /// Links with a larger MTU (for programs bigger than one default-MTU packet).
    pub fn with_mtu(n: usize, edges: &[(usize, usize)], mtu: usize) -> Net {
        Self::build(n, edges, PlanEeConfig::default(), Some(mtu))
    }

    fn build(n: usize, edges: &[(usize, usize)], cfg: PlanEeConfig, mtu: Option<usize>) -> Net {
        let now = Instant::now();
        let mut nodes: Vec<Node> = (0..n)
            .map(|i| Node::new(NodeConfig::new(addr(i)), now).unwrap())
            .collect();
        let mut wires = Vec::new();
        for &(a, b) in edges {
            let link = |p| {
                let mut l = LinkConfig::new(addr(p));
                if let Some(m) = mtu {
                    l.mtu = m;
                }
                l
            };
            let la = nodes[a].add_link(link(b), now);
            let lb = nodes[b].add_link(link(a), now);
            wires.push(((a, la.0), (b, lb.0)));
        }
        for node in &mut nodes {
            let mut ee = PlanEe::new(cfg);
            scout::install(&mut ee).unwrap();
            node.register_ee(Box::new(ee));
        }
        let mut net = Net {
            report: vec![EvalReport::default(); n],
            nodes,
            wires,
            now,
            moved: 0,
        };
        net.run_for(Duration::from_secs(5));
        net
    }

    pub fn line(n: usize) -> Net {
        let edges: Vec<(usize, usize)> = (1..n).map(|i| (i - 1, i)).collect();
        Net::new(n, &edges)
    }

    fn peer(&self, node: usize, link: LinkId) -> Option<(usize, LinkId)> {
        self.wires.iter().find_map(|&(x, y)| {
            if x == (node, link.0) {
                Some((y.0, LinkId(y.1)))
            } else if y == (node, link.0) {
                Some((x.0, LinkId(x.1)))
            } else {
                None
            }
        })
    }

    fn collect(&mut self) {
        for i in 0..self.nodes.len() {
            let a = self.nodes[i].address();
            while let Some(e) = self.nodes[i].poll_event() {
                self.report[i].add_event(a, &e);
            }
        }
    }

    /// Moves all queued packets (zero delay) until quiet; panics if it never gets quiet.
    pub fn pump(&mut self) {
        for _ in 0..100_000 {
            let mut moved = false;
            for i in 0..self.nodes.len() {
                while let Some(t) = self.nodes[i].poll_transmit() {
                    moved = true;
                    self.moved += 1;
                    if let Some((j, l)) = self.peer(i, t.link) {
                        self.nodes[j].handle_packet(self.now, l, t.buf);
                    }
                }
            }
            self.collect();
            if !moved {
                return;
            }
        }
        panic!("network did not quiesce");
    }

    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            self.pump();
            let next = self.nodes.iter().filter_map(|n| n.poll_timeout()).min();
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

    pub fn ee(&mut self, i: usize) -> &mut PlanEe {
        self.nodes[i]
            .ee_mut(TYPE_PLAN)
            .unwrap()
            .as_any_mut()
            .downcast_mut::<PlanEe>()
            .unwrap()
    }

    /// Builds the packet for `entry` of `text` with `spec` and injects it at node `at`.
    pub fn inject(&mut self, at: usize, text: &str, entry: &str, spec: &PacketSpec) {
        let pkt = build_packet(self.ee(at).interp(), text, entry, spec).unwrap();
        self.inject_raw(at, pkt);
    }

    pub fn inject_raw(&mut self, at: usize, pkt: Vec<u8>) {
        let now = self.now;
        let _ = self.nodes[at].inject(now, pkt);
        self.pump();
    }

    pub fn output(&self, i: usize) -> String {
        self.report[i].output_at(addr(i))
    }

    pub fn clear_reports(&mut self) {
        for r in &mut self.report {
            *r = EvalReport::default();
        }
    }
}
