//! Test doubles: a recording [`Services`] implementation and a simulated
//! line of nodes.
//!
//! [`FakeServices`] records prints, deliveries and sent packets and answers
//! routing queries from a table. [`LineNet`] simulates `n` nodes in a line
//! (`10.0.0.1:3322` — `10.0.0.2:3322` — ...), forwarding packets hop by hop
//! with their routing function (passively, one resource-bound unit per
//! hop) and evaluating them at their evaluation destination. They are used
//! by this crate's tests and can serve node integrators as a reference.

use crate::eval::{EvalContext, EvalError, Interpreter, Limits};
use crate::services::{Outgoing, Reassembler, SendKind, ServiceError, Services};
use crate::value::{Chunk, Dev, Value};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

/// A recording implementation of [`Services`].
#[derive(Debug, Default)]
pub struct FakeServices {
    /// Addresses of this node.
    pub hosts: Vec<SocketAddr>,
    /// Neighbors and the device leading to each.
    pub neighbors: Vec<(SocketAddr, Dev)>,
    /// Routing table: destination -> (next hop, device).
    pub routes: HashMap<SocketAddr, (SocketAddr, Dev)>,
    /// Packets sent by OnRemote/OnNeighbor/RetransOnRemote.
    pub sent: Vec<Outgoing>,
    /// Output of `print`.
    pub printed: Vec<String>,
    /// Values passed to `deliver`.
    pub delivered: Vec<(u32, Value)>,
    /// Extension service calls (id, name, args).
    pub calls: Vec<(u32, String, Vec<Value>)>,
    /// Implementations of extension services by name; services without
    /// one return `()`.
    pub ext: HashMap<String, ExtFn>,
    /// Node-resident state available to `ext` implementations.
    pub state: HashMap<String, Value>,
    reassembler: Reassembler,
}

/// An extension service implementation for [`FakeServices`].
pub type ExtFn = fn(&mut HashMap<String, Value>, &[Value]) -> Result<Value, ServiceError>;

impl FakeServices {
    /// A node with one address and no neighbors.
    pub fn at(host: SocketAddr) -> Self {
        FakeServices {
            hosts: vec![host],
            ..Self::default()
        }
    }

    /// All printed text concatenated.
    pub fn output(&self) -> String {
        self.printed.concat()
    }
}

impl Services for FakeServices {
    fn this_host(&mut self) -> Vec<SocketAddr> {
        self.hosts.clone()
    }

    fn get_neighbors(&mut self) -> Vec<(SocketAddr, Dev)> {
        self.neighbors.clone()
    }

    fn default_route(&mut self, dest: &SocketAddr) -> Result<(SocketAddr, Dev), ServiceError> {
        if let Some(r) = self.routes.get(dest) {
            return Ok(*r);
        }
        if let Some((h, d)) = self.neighbors.iter().find(|(h, _)| h == dest) {
            return Ok((*h, *d));
        }
        Err(ServiceError::new("NoRoute", format!("no route to {dest}")))
    }

    fn send(&mut self, out: Outgoing) -> Result<(), ServiceError> {
        if let SendKind::Neighbor { .. } = out.kind
            && !self.neighbors.iter().any(|(h, _)| *h == out.dest)
        {
            return Err(ServiceError::new(
                "NotANeighbor",
                format!("{} is not adjacent", out.dest),
            ));
        }
        self.sent.push(out);
        Ok(())
    }

    fn print(&mut self, text: &str) {
        self.printed.push(text.to_string());
    }

    fn deliver(&mut self, port: u32, value: &Value) -> Result<(), ServiceError> {
        self.delivered.push((port, value.clone()));
        Ok(())
    }

    fn reassemble(
        &mut self,
        id: i64,
        index: i64,
        total: i64,
        data: &[u8],
    ) -> Result<Option<Vec<u8>>, ServiceError> {
        self.reassembler.add(id, index, total, data)
    }

    fn call(&mut self, id: u32, name: &str, args: &[Value]) -> Result<Value, ServiceError> {
        self.calls.push((id, name.to_string(), args.to_vec()));
        match self.ext.get(name) {
            Some(f) => f(&mut self.state, args),
            None => Ok(Value::Unit),
        }
    }
}

/// What happened to a packet in a [`LineNet`].
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Evaluated `func` at node `node`; `outcome` is the value or exception.
    Eval {
        /// Node index.
        node: usize,
        /// Entry function.
        func: String,
        /// Display form of the value, or `raise E`.
        outcome: String,
    },
    /// Forwarded passively from `node` towards `dest`.
    Forward {
        /// Node index.
        node: usize,
        /// Evaluation destination.
        dest: SocketAddr,
    },
    /// Dropped at `node` for `reason`.
    Drop {
        /// Node index.
        node: usize,
        /// Why.
        reason: String,
    },
}

#[derive(Debug)]
struct InFlight {
    at: usize,
    dest: SocketAddr,
    source: SocketAddr,
    rb: u32,
    chunk: Arc<Chunk>,
    neighbor_only: bool,
    from: Option<usize>,
}

/// A simulated line of nodes.
#[derive(Debug)]
pub struct LineNet {
    /// Node addresses, in line order.
    pub hosts: Vec<SocketAddr>,
    /// Services of each node (prints etc. are recorded here).
    pub nodes: Vec<FakeServices>,
    /// The interpreter shared by all nodes.
    pub interp: Interpreter,
    /// Trace of events.
    pub events: Vec<Event>,
    /// Steps used by each evaluation, in order.
    pub steps: Vec<u64>,
    /// Evaluation limits.
    pub limits: Limits,
}

impl LineNet {
    /// `n` nodes in a line; node `i` is `10.0.0.(i+1):3322`.
    pub fn new(n: usize) -> Self {
        let edges: Vec<(usize, usize)> = (1..n).map(|i| (i - 1, i)).collect();
        Self::with_edges(n, &edges)
    }

    /// `n` nodes connected by `edges`; routes are shortest paths (BFS, ties
    /// broken by lower node index); a node's device `d` is its `d`-th
    /// neighbor.
    pub fn with_edges(n: usize, edges: &[(usize, usize)]) -> Self {
        let hosts: Vec<SocketAddr> = (0..n)
            .map(|i| SocketAddr::from(([10, 0, 0, u8::try_from(i + 1).unwrap_or(255)], 3322)))
            .collect();
        let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &(a, b) in edges {
            if a < n && b < n && a != b {
                if let Some(l) = adj.get_mut(a) {
                    l.push(b);
                }
                if let Some(l) = adj.get_mut(b) {
                    l.push(a);
                }
            }
        }
        for l in &mut adj {
            l.sort_unstable();
            l.dedup();
        }
        let mut nodes = Vec::new();
        for i in 0..n {
            let mut s = FakeServices::at(
                hosts
                    .get(i)
                    .copied()
                    .unwrap_or_else(|| SocketAddr::from(([0; 4], 0))),
            );
            let my_adj = adj.get(i).cloned().unwrap_or_default();
            for (d, j) in my_adj.iter().enumerate() {
                if let Some(h) = hosts.get(*j) {
                    s.neighbors.push((*h, Dev::try_from(d).unwrap_or(0)));
                }
            }
            // BFS from i: first hop towards every node.
            let mut first: Vec<Option<usize>> = vec![None; n];
            let mut seen = vec![false; n];
            let mut q = VecDeque::new();
            if let Some(x) = seen.get_mut(i) {
                *x = true;
            }
            for (d, j) in my_adj.iter().enumerate() {
                if let Some(x) = seen.get_mut(*j)
                    && !*x
                {
                    *x = true;
                    if let Some(f) = first.get_mut(*j) {
                        *f = Some(d);
                    }
                    q.push_back(*j);
                }
            }
            while let Some(u) = q.pop_front() {
                let fu = first.get(u).copied().flatten();
                for v in adj.get(u).cloned().unwrap_or_default() {
                    if let Some(x) = seen.get_mut(v)
                        && !*x
                    {
                        *x = true;
                        if let Some(f) = first.get_mut(v) {
                            *f = fu;
                        }
                        q.push_back(v);
                    }
                }
            }
            for (j, f) in first.iter().enumerate() {
                if let (Some(d), Some(h)) = (f, hosts.get(j))
                    && let Some(nh) = my_adj.get(*d).and_then(|k| hosts.get(*k))
                {
                    s.routes.insert(*h, (*nh, Dev::try_from(*d).unwrap_or(0)));
                }
            }
            nodes.push(s);
        }
        LineNet {
            hosts,
            nodes,
            interp: Interpreter::with_core(),
            events: Vec::new(),
            steps: Vec::new(),
            limits: Limits::default(),
        }
    }

    fn index_of(&self, h: &SocketAddr) -> Option<usize> {
        self.hosts.iter().position(|x| x == h)
    }

    /// Injects `chunk` at node `at` with evaluation destination `dest` and
    /// resource bound `rb`, then runs the network until no packets remain
    /// (or `max_packets` have been processed).
    pub fn inject(
        &mut self,
        at: usize,
        dest: SocketAddr,
        rb: u32,
        chunk: Chunk,
    ) -> Result<(), EvalError> {
        let source = self.hosts.get(at).copied().unwrap_or(dest);
        let mut q = VecDeque::new();
        q.push_back(InFlight {
            at,
            dest,
            source,
            rb,
            chunk: Arc::new(chunk),
            neighbor_only: false,
            from: None,
        });
        let mut processed = 0;
        while let Some(p) = q.pop_front() {
            processed += 1;
            if processed > 10_000 {
                break;
            }
            let Some(node) = self.nodes.get_mut(p.at) else {
                continue;
            };
            if !node.hosts.contains(&p.dest) {
                if p.neighbor_only {
                    self.events.push(Event::Drop {
                        node: p.at,
                        reason: "OnNeighbor destination is not this node".into(),
                    });
                    continue;
                }
                if p.rb == 0 {
                    self.events.push(Event::Drop {
                        node: p.at,
                        reason: "resource bound exhausted".into(),
                    });
                    continue;
                }
                match node.default_route(&p.dest) {
                    Ok((next, _)) => {
                        self.events.push(Event::Forward {
                            node: p.at,
                            dest: p.dest,
                        });
                        if let Some(ni) = self.index_of(&next) {
                            q.push_back(InFlight {
                                at: ni,
                                rb: p.rb - 1,
                                from: Some(p.at),
                                ..p
                            });
                        }
                    }
                    Err(e) => self.events.push(Event::Drop {
                        node: p.at,
                        reason: e.to_string(),
                    }),
                }
                continue;
            }
            let src_dev = p
                .from
                .and_then(|f| self.hosts.get(f))
                .and_then(|h| node.neighbors.iter().find(|(n, _)| n == h))
                .map_or(0, |(_, d)| *d);
            let ctx = EvalContext {
                source: p.source,
                src_dev,
                implicit_port: 0,
                rb: p.rb,
            };
            let ev = self.interp.eval_chunk(&p.chunk, node, ctx, self.limits)?;
            self.steps.push(ev.steps);
            self.events.push(Event::Eval {
                node: p.at,
                func: p.chunk.func.to_string(),
                outcome: match &ev.result {
                    Ok(v) => v.to_string(),
                    Err(r) => format!("raise {r}"),
                },
            });
            let sent = std::mem::take(&mut node.sent);
            for out in sent {
                let here = p.at;
                let neighbor_only = matches!(out.kind, SendKind::Neighbor { .. });
                // The packet leaves this node: one hop of resource bound.
                let next = if neighbor_only {
                    self.index_of(&out.dest)
                } else {
                    self.nodes
                        .get_mut(here)
                        .and_then(|n| n.default_route(&out.dest).ok())
                        .and_then(|(h, _)| self.index_of(&h))
                        .or(Some(here))
                };
                let Some(ni) = next else { continue };
                if ni == here {
                    q.push_back(InFlight {
                        at: ni,
                        dest: out.dest,
                        source: p.source,
                        rb: out.rb,
                        chunk: out.chunk,
                        neighbor_only,
                        from: p.from,
                    });
                } else if out.rb > 0 {
                    q.push_back(InFlight {
                        at: ni,
                        dest: out.dest,
                        source: p.source,
                        rb: out.rb - 1,
                        chunk: out.chunk,
                        neighbor_only,
                        from: Some(here),
                    });
                }
            }
        }
        Ok(())
    }

    /// Everything node `i` printed.
    pub fn output(&self, i: usize) -> String {
        self.nodes
            .get(i)
            .map(FakeServices::output)
            .unwrap_or_default()
    }
}
