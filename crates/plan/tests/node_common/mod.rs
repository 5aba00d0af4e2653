//! PLAN nodes on the test kit's virtual-time network: zero-delay links, pumped until quiet.
#![allow(dead_code)]

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use anode_core::wire::anep::TYPE_PLAN;
use anode_plan::ee::{EvalReport, PacketSpec, PlanEe, PlanEeConfig, build_packet};
use anode_testkit::NetOptions;
pub use anode_testkit::addr;

pub fn program(name: &str) -> String {
    std::fs::read_to_string(format!("{}/programs/{name}", env!("CARGO_MANIFEST_DIR")))
        .expect("program file")
}

/// PLAN nodes (every one with the scout services) on the test kit's virtual-time network,
/// zero-delay wires, settled for 5 s; each node's events are gathered into its
/// [`EvalReport`] after every step.
pub struct Net {
    pub net: anode_testkit::Net,
    pub report: Vec<EvalReport>,
}

impl Deref for Net {
    type Target = anode_testkit::Net;
    fn deref(&self) -> &anode_testkit::Net {
        &self.net
    }
}

impl DerefMut for Net {
    fn deref_mut(&mut self) -> &mut anode_testkit::Net {
        &mut self.net
    }
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
        let opts = NetOptions {
            mtu,
            ..NetOptions::default()
        };
        let net = anode_testkit::Net::new(n, edges, opts, |_, node| {
            node.register_ee(Box::new(PlanEe::new(cfg)));
        });
        let mut net = Net {
            net,
            report: vec![EvalReport::default(); n],
        };
        net.run_for(Duration::from_secs(5));
        net
    }

    pub fn line(n: usize) -> Net {
        let edges: Vec<(usize, usize)> = (1..n).map(|i| (i - 1, i)).collect();
        Net::new(n, &edges)
    }

    fn collect(&mut self) {
        for i in 0..self.net.nodes.len() {
            let a = self.net.nodes[i].address();
            while let Some(e) = self.net.nodes[i].poll_event() {
                self.report[i].add_event(a, &e);
            }
        }
    }

    /// Moves all queued packets (zero delay) until quiet; panics if it never gets quiet.
    pub fn pump(&mut self) {
        self.net.pump();
        self.collect();
    }

    pub fn run_for(&mut self, d: Duration) {
        let end = self.net.now + d;
        self.net.run_until(end, |_| false);
        self.collect();
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
        let _ = self.net.inject(at, pkt);
        self.collect();
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
