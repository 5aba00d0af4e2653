//! A hand-wired network of nodes with capsule EEs, driven in virtual time (after
//! crates/core/src/tests.rs), with a fixed one-way delay per link so latencies mean something.

#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anode_capsule::{CapsuleConfig, CapsuleEe, Runtime, RuntimeConfig};
use anode_core::wire::NodeAddr;
use anode_core::wire::addr::v4;
use anode_core::wire::anep::TYPE_CAPSULE;
use anode_core::{Delivery, Event, LinkConfig, LinkId, Node, NodeConfig};

pub fn addr(i: usize) -> NodeAddr {
    v4(198, 18, 0, i as u8 + 1, 3322)
}

/// A packet on a wire.
type Flight = Reverse<(Instant, u64, usize, u32, Vec<u8>)>;

/// A filter the test puts on the wires: may change or drop a packet from `from` to `to`.
pub type Tap = Box<dyn FnMut(usize, usize, &mut Vec<u8>) -> bool>;

pub struct Net {
    pub nodes: Vec<Node>,
    wires: Vec<((usize, u32), (usize, u32))>,
    pub now: Instant,
    pub delay: Duration,
    flights: BinaryHeap<Flight>,
    seq: u64,
    pub tap: Option<Tap>,
}

pub fn runtime() -> Arc<Runtime> {
    Runtime::new(RuntimeConfig {
        max_instances: 64,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

impl Net {
    /// `n` nodes with the given edges; every node gets a capsule EE made by `cfg(i)`.
    pub fn new(
        n: usize,
        edges: &[(usize, usize)],
        rt: &Arc<Runtime>,
        mut cfg: impl FnMut(usize) -> CapsuleConfig,
    ) -> Net {
        let now = Instant::now();
        let mut nodes: Vec<Node> = (0..n)
            .map(|i| Node::new(NodeConfig::new(addr(i)), now).unwrap())
            .collect();
        let mut wires = Vec::new();
        for &(a, b) in edges {
            let la = nodes[a].add_link(LinkConfig::new(addr(b)), now);
            let lb = nodes[b].add_link(LinkConfig::new(addr(a)), now);
            wires.push(((a, la.0), (b, lb.0)));
        }
        for (i, node) in nodes.iter_mut().enumerate() {
            let ee = CapsuleEe::with_runtime(rt.clone(), cfg(i)).unwrap();
            node.register_ee(Box::new(ee));
        }
        let mut net = Net {
            nodes,
            wires,
            now,
            delay: Duration::from_millis(1),
            flights: BinaryHeap::new(),
            seq: 0,
            tap: None,
        };
        net.run_for(Duration::from_secs(3));
        net
    }

    pub fn line(n: usize, rt: &Arc<Runtime>) -> Net {
        let edges: Vec<(usize, usize)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        Net::new(n, &edges, rt, |_| CapsuleConfig::default())
    }

    pub fn ee(&mut self, i: usize) -> &mut CapsuleEe {
        self.nodes[i]
            .ee_mut(TYPE_CAPSULE)
            .unwrap()
            .as_any_mut()
            .downcast_mut::<CapsuleEe>()
            .unwrap()
    }

    fn peer(&self, node: usize, link: LinkId) -> Option<(usize, u32)> {
        self.wires.iter().find_map(|&(x, y)| {
            if x == (node, link.0) {
                Some(y)
            } else if y == (node, link.0) {
                Some(x)
            } else {
                None
            }
        })
    }

    /// Puts every queued transmit on its wire.
    fn launch(&mut self) {
        for i in 0..self.nodes.len() {
            while let Some(mut t) = self.nodes[i].poll_transmit() {
                let Some((j, l)) = self.peer(i, t.link) else {
                    continue;
                };
                if let Some(tap) = self.tap.as_mut()
                    && !tap(i, j, &mut t.buf)
                {
                    continue;
                }
                self.seq += 1;
                self.flights
                    .push(Reverse((self.now + self.delay, self.seq, j, l, t.buf)));
            }
        }
    }

    /// Runs until `end`, or until `stop` says so (checked after every step).
    pub fn run_until(&mut self, end: Instant, mut stop: impl FnMut(&mut Net) -> bool) -> bool {
        loop {
            self.launch();
            if stop(self) {
                return true;
            }
            let t_flight = self.flights.peek().map(|Reverse(f)| f.0);
            let t_timer = self.nodes.iter().filter_map(|n| n.poll_timeout()).min();
            let next = match (t_flight, t_timer) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => {
                        self.now = end;
                        return false;
                    }
                },
            };
            if next > end {
                self.now = end;
                return false;
            }
            self.now = self.now.max(next);
            while self
                .flights
                .peek()
                .is_some_and(|Reverse(f)| f.0 <= self.now)
            {
                let Reverse((_, _, j, l, buf)) = self.flights.pop().unwrap();
                self.nodes[j].handle_packet(self.now, LinkId(l), buf);
            }
            let now = self.now;
            for n in &mut self.nodes {
                if n.poll_timeout().is_some_and(|d| d <= now) {
                    n.handle_timeout(now);
                }
            }
        }
    }

    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        self.run_until(end, |_| false);
    }

    /// Runs until node `i` has a delivery (returned with the time it took) or `limit` passes.
    pub fn wait_delivery(&mut self, i: usize, limit: Duration) -> Option<(Delivery, Duration)> {
        let start = self.now;
        let mut got = None;
        self.run_until(start + limit, |net| {
            while let Some(e) = net.nodes[i].poll_event() {
                if let Event::Delivered(d) = e {
                    got = Some(d);
                    return true;
                }
            }
            false
        });
        let at = self.now;
        got.map(|d| (d, at - start))
    }

    pub fn deliveries(&mut self, i: usize) -> Vec<Delivery> {
        let mut v = Vec::new();
        while let Some(e) = self.nodes[i].poll_event() {
            if let Event::Delivered(d) = e {
                v.push(d);
            }
        }
        v
    }

    pub fn drops(&self, i: usize, reason: &str) -> u64 {
        self.nodes[i]
            .counters()
            .ee_drops
            .get(&format!("capsule/{reason}"))
            .copied()
            .unwrap_or(0)
    }
}

/// A ping request payload (see guest/protocols/ping).
pub fn ping_payload(port: u16) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[2..4].copy_from_slice(&port.to_be_bytes());
    p
}

/// The round-trip time a ping reply carries.
pub fn ping_rtt(d: &Delivery) -> Duration {
    let p = d.payload();
    Duration::from_nanos(u64::from_be_bytes(p[12..20].try_into().unwrap()))
}
