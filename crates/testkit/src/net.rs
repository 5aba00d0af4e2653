//! [`Net`]: sans-IO nodes wired by hand and driven in virtual time.
//!
//! Every link is a wire between two nodes' link ids with a fixed one-way delay (zero by
//! default: a packet sent at `now` arrives at `now`). The driver is the four calls of the
//! node core: `handle_packet`, `handle_timeout`, `poll_transmit`, `poll_timeout`; nothing
//! else touches the nodes, so a test reads their events itself (`poll_event`, or the helpers
//! here). A tap may change or drop every packet put on a wire, and a wire can be cut.
//!
//! Invariants: packets arrive in (arrival time, send order); virtual time never goes back;
//! [`Net::pump`] panics if zero-delay traffic never quiesces (a forwarding loop), so a test
//! cannot hang.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use anode_core::{Delivery, DropReason, Event, LinkConfig, LinkId, Node, NodeConfig};

use crate::fixtures::addr;

/// A tap on the wires: sees every packet from node `from` to node `to` and may change it;
/// returning false drops it.
pub type Tap = Box<dyn FnMut(usize, usize, &mut Vec<u8>) -> bool>;

/// How a [`Net`] is built.
#[derive(Debug, Clone, Copy)]
pub struct NetOptions {
    /// One-way delay of every wire.
    pub delay: Duration,
    /// Link MTU (`None`: the default of [`LinkConfig::new`]).
    pub mtu: Option<usize>,
    /// Virtual time to run after building (for neighbors and routes to come up).
    pub settle: Duration,
}

impl Default for NetOptions {
    fn default() -> NetOptions {
        NetOptions {
            delay: Duration::ZERO,
            mtu: None,
            settle: Duration::ZERO,
        }
    }
}

/// A packet on a wire: arrival, send order, destination node and link, bytes.
type Flight = Reverse<(Instant, u64, usize, u32, Vec<u8>)>;

/// A network of nodes in virtual time; see the module docs.
pub struct Net {
    /// The nodes, node `i` at [`addr`]`(i)`.
    pub nodes: Vec<Node>,
    /// Virtual time now.
    pub now: Instant,
    /// One-way delay of every wire (may be changed between runs).
    pub delay: Duration,
    /// The tap, if any.
    pub tap: Option<Tap>,
    /// Packets put on wires so far.
    pub moved: u64,
    wires: Vec<((usize, u32), (usize, u32))>,
    ends: HashMap<(usize, u32), (usize, u32, usize)>,
    cut: Vec<bool>,
    flights: BinaryHeap<Flight>,
    seq: u64,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net")
            .field("nodes", &self.nodes.len())
            .field("wires", &self.wires)
            .field("in_flight", &self.flights.len())
            .finish()
    }
}

impl Net {
    /// `n` nodes (node `i` at [`addr`]`(i)`) wired by `edges`; `setup(i, node)` runs on each
    /// node after its links are added (register EEs, hooks, routes), then the network runs
    /// for `opts.settle`.
    pub fn new(
        n: usize,
        edges: &[(usize, usize)],
        opts: NetOptions,
        setup: impl FnMut(usize, &mut Node),
    ) -> Net {
        let now = Instant::now();
        let nodes = (0..n)
            .map(|i| Node::new(NodeConfig::new(addr(i)), now).unwrap())
            .collect();
        Net::with_nodes(nodes, edges, opts, setup)
    }

    /// A line 0 - 1 - ... - n-1.
    pub fn line(n: usize, opts: NetOptions, setup: impl FnMut(usize, &mut Node)) -> Net {
        let edges: Vec<(usize, usize)> = (1..n).map(|i| (i - 1, i)).collect();
        Net::new(n, &edges, opts, setup)
    }

    /// [`Net::new`] over nodes the test made itself (other configs or addresses).
    pub fn with_nodes(
        mut nodes: Vec<Node>,
        edges: &[(usize, usize)],
        opts: NetOptions,
        mut setup: impl FnMut(usize, &mut Node),
    ) -> Net {
        let now = Instant::now();
        let mut wires = Vec::new();
        for &(a, b) in edges {
            let link = |to: &Node| {
                let mut l = LinkConfig::new(to.address());
                if let Some(m) = opts.mtu {
                    l.mtu = m;
                }
                l
            };
            let (la, lb) = (link(&nodes[b]), link(&nodes[a]));
            let ia = nodes[a].add_link(la, now);
            let ib = nodes[b].add_link(lb, now);
            wires.push(((a, ia.0), (b, ib.0)));
        }
        for (i, node) in nodes.iter_mut().enumerate() {
            setup(i, node);
        }
        let mut ends = HashMap::new();
        for (w, &(x, y)) in wires.iter().enumerate() {
            ends.insert(x, (y.0, y.1, w));
            ends.insert(y, (x.0, x.1, w));
        }
        let mut net = Net {
            nodes,
            now,
            delay: opts.delay,
            tap: None,
            moved: 0,
            cut: vec![false; wires.len()],
            wires,
            ends,
            flights: BinaryHeap::new(),
            seq: 0,
        };
        if !opts.settle.is_zero() {
            net.run_for(opts.settle);
        }
        net
    }

    /// The far end of `node`'s `link`, unless its wire is cut.
    pub fn peer(&self, node: usize, link: LinkId) -> Option<(usize, LinkId)> {
        let &(j, l, w) = self.ends.get(&(node, link.0))?;
        (!self.cut[w]).then_some((j, LinkId(l)))
    }

    /// `a`'s link toward `b`, if they are wired.
    pub fn link_between(&self, a: usize, b: usize) -> Option<LinkId> {
        self.wires.iter().find_map(|&(x, y)| {
            if x.0 == a && y.0 == b {
                Some(LinkId(x.1))
            } else if y.0 == a && x.0 == b {
                Some(LinkId(y.1))
            } else {
                None
            }
        })
    }

    /// Cuts (`up = false`) or mends wire `w` (its index in the edge list); packets already
    /// on it still arrive.
    pub fn set_wire_up(&mut self, w: usize, up: bool) {
        self.cut[w] = !up;
    }

    /// Puts every queued transmit on its wire (through the tap).
    fn launch(&mut self) -> bool {
        let mut any = false;
        for i in 0..self.nodes.len() {
            while let Some(mut t) = self.nodes[i].poll_transmit() {
                any = true;
                self.moved += 1;
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
                    .push(Reverse((self.now + self.delay, self.seq, j, l.0, t.buf)));
            }
        }
        any
    }

    /// Hands every packet due by `now` to its node.
    fn arrive(&mut self) -> bool {
        let mut any = false;
        while self
            .flights
            .peek()
            .is_some_and(|Reverse(f)| f.0 <= self.now)
        {
            let Some(Reverse((_, _, j, l, buf))) = self.flights.pop() else {
                break;
            };
            self.nodes[j].handle_packet(self.now, LinkId(l), buf);
            any = true;
        }
        any
    }

    /// Moves packets at the current time until nothing more is sent or arrives; panics if
    /// that never happens.
    pub fn pump(&mut self) {
        for _ in 0..1_000_000 {
            let sent = self.launch();
            if !self.arrive() && !sent {
                return;
            }
        }
        panic!("network did not quiesce (a forwarding loop?)");
    }

    /// Runs until `end`, or until `stop` says so (checked whenever the network is quiet at
    /// the current time). Returns whether `stop` did.
    pub fn run_until(&mut self, end: Instant, mut stop: impl FnMut(&mut Net) -> bool) -> bool {
        loop {
            self.pump();
            if stop(self) {
                return true;
            }
            let t_flight = self.flights.peek().map(|Reverse(f)| f.0);
            let t_timer = self.nodes.iter().filter_map(Node::poll_timeout).min();
            let Some(next) = t_flight.into_iter().chain(t_timer).min() else {
                self.now = end;
                return false;
            };
            if next > end {
                self.now = end;
                self.pump();
                return false;
            }
            self.now = self.now.max(next);
            self.arrive();
            let now = self.now;
            for n in &mut self.nodes {
                if n.poll_timeout().is_some_and(|d| d <= now) {
                    n.handle_timeout(now);
                }
            }
        }
    }

    /// Runs for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        self.run_until(end, |_| false);
    }

    /// Injects `pkt` at node `i` as if a local application sent it, then pumps.
    pub fn inject(&mut self, i: usize, pkt: Vec<u8>) -> Result<(), DropReason> {
        let r = self.nodes[i].inject(self.now, pkt);
        self.pump();
        r
    }

    /// Node `i`'s pending events.
    pub fn events(&mut self, i: usize) -> Vec<Event> {
        std::iter::from_fn(|| self.nodes[i].poll_event()).collect()
    }

    /// Node `i`'s pending deliveries (its other events are dropped).
    pub fn deliveries(&mut self, i: usize) -> Vec<Delivery> {
        self.events(i)
            .into_iter()
            .filter_map(|e| match e {
                Event::Delivered(d) => Some(d),
                _ => None,
            })
            .collect()
    }

    /// Runs until node `i` has a delivery (returned with the time it took) or `limit`
    /// passes; node `i`'s other events on the way are dropped.
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
}
