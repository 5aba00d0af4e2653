//! Shortest paths over a link-state database (Dijkstra): origins get dense ids in address
//! order and the graph is laid out flat (one edge array and an offset per origin, CSR), so a
//! run allocates nothing once its buffers have grown. A node keeps no `Spf` of its own (a node
//! of an n-node network would keep O(n) buffers, and an emulator runs n such nodes): the
//! routing service reuses one per thread, so an emulated network's SPF runs share one set
//! of buffers instead of allocating and freeing O(n) each (a fifth of the emulator's time
//! went to the allocator on 3,815 nodes).
//!
//! Contract: a link u -> v is used only when v's LSAs list u too (the two-way check); our
//! own links come from the caller's neighbor table, not from our stored LSA; ties between
//! equal-cost paths break by origin address (ids are in address order and the queue pops
//! the lowest (distance, id) first), so identical databases give identical results.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use super::Raw;
use super::db::Db;
use crate::NextHop;

/// Metric reported for a path whose cost does not fit (never reached in practice).
const METRIC_MAX: u16 = u16::MAX - 1;

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct Spf {
    /// Origin -> dense id; `raws[id]` is the origin.
    ids: FxHashMap<Raw, u32>,
    raws: Vec<Raw>,
    /// CSR: origin u's links are `edges[start[u]..start[u + 1]]`, sorted by neighbor id.
    start: Vec<u32>,
    edges: Vec<(u32, u16)>,
    dist: Vec<u32>,
    first: Vec<u32>,
    done: Vec<bool>,
    heap: BinaryHeap<Reverse<(u32, u32)>>,
    /// Result of the last run, beside `raws`: (metric, first hop) where reachable.
    best: Vec<Option<(u16, NextHop)>>,
}

impl Spf {
    /// Every origin of the last run, in address order.
    pub(super) fn origins(&self) -> &[Raw] {
        &self.raws
    }

    /// The last run's result for each of [`Spf::origins`].
    pub(super) fn best(&self) -> &[Option<(u16, NextHop)>] {
        &self.best
    }

    /// Computes shortest paths from `me` over `db`; `mine` are our up links (neighbor,
    /// next hop, cost), in address order.
    pub(super) fn run(&mut self, db: &Db, me: &Raw, mine: &[(Raw, NextHop, u16)]) {
        self.index(db);
        self.layout(db);
        let n = self.raws.len();
        self.best.clear();
        self.best.resize(n, None);
        let Some(&me) = self.ids.get(me) else {
            return;
        };
        self.dist.clear();
        self.dist.resize(n, u32::MAX);
        self.first.clear();
        self.first.resize(n, u32::MAX);
        self.done.clear();
        self.done.resize(n, false);
        self.heap.clear();
        let mut hops: Vec<NextHop> = Vec::with_capacity(mine.len());
        for (a, hop, c) in mine {
            let Some(&v) = self.ids.get(a) else {
                continue;
            };
            let d = u32::from(*c);
            if !self.two_way(me, v) {
                continue;
            }
            if let (Some(dv), Some(fv)) = (
                self.dist.get_mut(v as usize),
                self.first.get_mut(v as usize),
            ) && d < *dv
            {
                *dv = d;
                *fv = hops.len() as u32;
                hops.push(*hop);
                self.heap.push(Reverse((d, v)));
            }
        }
        if let Some(x) = self.dist.get_mut(me as usize) {
            *x = 0;
        }
        if let Some(x) = self.done.get_mut(me as usize) {
            *x = true;
        }
        self.dijkstra();
        for (i, slot) in self.best.iter_mut().enumerate() {
            let (Some(&d), Some(&f)) = (self.dist.get(i), self.first.get(i)) else {
                continue;
            };
            if let (true, Some(h)) = (d != u32::MAX && i != me as usize, hops.get(f as usize)) {
                let m = u16::try_from(d).unwrap_or(METRIC_MAX).min(METRIC_MAX);
                *slot = Some((m, *h));
            }
        }
    }

    fn dijkstra(&mut self) {
        while let Some(Reverse((d, u))) = self.heap.pop() {
            let ui = u as usize;
            if self.done.get(ui).copied().unwrap_or(true) || self.dist.get(ui) != Some(&d) {
                continue;
            }
            if let Some(x) = self.done.get_mut(ui) {
                *x = true;
            }
            let f = self.first.get(ui).copied().unwrap_or(u32::MAX);
            let (a, b) = self.span(u);
            for k in a..b {
                let Some(&(v, c)) = self.edges.get(k) else {
                    break;
                };
                let vi = v as usize;
                if self.done.get(vi).copied().unwrap_or(true) || !self.two_way(u, v) {
                    continue;
                }
                let nd = d.saturating_add(u32::from(c));
                if let (Some(dv), Some(fv)) = (self.dist.get_mut(vi), self.first.get_mut(vi))
                    && nd < *dv
                {
                    *dv = nd;
                    *fv = f;
                    self.heap.push(Reverse((nd, v)));
                }
            }
        }
    }

    /// Dense ids for the database's origins, in address order.
    fn index(&mut self, db: &Db) {
        self.ids.clear();
        self.raws.clear();
        for (origin, _) in db.keys() {
            if self.raws.last() != Some(origin) {
                self.ids.insert(*origin, self.raws.len() as u32);
                self.raws.push(*origin);
            }
        }
    }

    /// The graph in CSR form from the current LSAs (origins in the order `index` gave them
    /// ids, so origin u's segment is the u-th).
    fn layout(&mut self, db: &Db) {
        let Spf {
            ids, start, edges, ..
        } = self;
        start.clear();
        edges.clear();
        let mut current: Option<Raw> = None;
        let mut seg = 0;
        for (k, st) in db.ordered() {
            if current != Some(k.0) {
                if let Some(s) = edges.get_mut(seg..) {
                    s.sort_unstable();
                }
                seg = edges.len();
                start.push(seg as u32);
                current = Some(k.0);
            }
            edges.extend(
                st.links
                    .iter()
                    .filter_map(|(v, c)| Some((*ids.get(&v.to_bytes())?, *c))),
            );
        }
        if let Some(s) = edges.get_mut(seg..) {
            s.sort_unstable();
        }
        start.push(edges.len() as u32);
    }

    fn span(&self, u: u32) -> (usize, usize) {
        let a = self.start.get(u as usize).copied().unwrap_or(0) as usize;
        let b = self.start.get(u as usize + 1).copied().unwrap_or(0) as usize;
        (a, b.max(a))
    }

    /// Whether v's LSAs list u.
    fn two_way(&self, u: u32, v: u32) -> bool {
        let (a, b) = self.span(v);
        self.edges
            .get(a..b)
            .is_some_and(|l| l.binary_search_by(|e| e.0.cmp(&u)).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LinkId;
    use crate::ls::db::Stored;
    use anode_wire::NodeAddr;
    use anode_wire::addr::v4;
    use std::sync::Arc;
    use std::time::Instant;

    /// Random connected graphs with random costs: every metric is the Floyd-Warshall
    /// distance, and every first hop starts a shortest path.
    #[test]
    #[allow(clippy::needless_range_loop)] // matrix code reads best with indices
    fn matches_floyd_warshall_on_random_graphs() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..20 {
            let n = 2 + rnd(30) as usize;
            let addr = |i: usize| v4(198, 18, 1, i as u8, 1);
            let mut cost = vec![vec![None::<u16>; n]; n];
            for v in 1..n {
                let u = rnd(v as u64) as usize;
                let c = 1 + rnd(9) as u16;
                cost[u][v] = Some(c);
                cost[v][u] = Some(c);
            }
            for _ in 0..n {
                let (u, v) = (rnd(n as u64) as usize, rnd(n as u64) as usize);
                if u != v {
                    let c = 1 + rnd(9) as u16;
                    cost[u][v] = Some(c);
                    cost[v][u] = Some(c);
                }
            }
            let now = Instant::now();
            let mut db = Db::new(now);
            for (u, row) in cost.iter().enumerate() {
                let links: Vec<(NodeAddr, u16)> = row
                    .iter()
                    .enumerate()
                    .filter_map(|(v, c)| Some((addr(v), (*c)?)))
                    .collect();
                let st = Stored {
                    seq: 1,
                    expires: 60,
                    links: Arc::new(links),
                };
                db.put((addr(u).to_bytes(), 0), st);
            }
            let mine: Vec<(Raw, NextHop, u16)> = (0..n)
                .filter_map(|v| {
                    let c = cost[0][v]?;
                    let hop = NextHop {
                        link: LinkId(v as u32),
                        addr: addr(v),
                    };
                    Some((addr(v).to_bytes(), hop, c))
                })
                .collect();
            let mut spf = Spf::default();
            spf.run(&db, &addr(0).to_bytes(), &mine);
            let inf = u32::MAX / 4;
            let mut d = vec![vec![inf; n]; n];
            for u in 0..n {
                d[u][u] = 0;
                for v in 0..n {
                    if let Some(c) = cost[u][v] {
                        d[u][v] = u32::from(c);
                    }
                }
            }
            for k in 0..n {
                for i in 0..n {
                    for j in 0..n {
                        d[i][j] = d[i][j].min(d[i][k] + d[k][j]);
                    }
                }
            }
            for (raw, best) in spf.origins().iter().zip(spf.best()) {
                let t = (0..n).find(|&i| addr(i).to_bytes() == *raw).unwrap();
                if t == 0 {
                    assert!(best.is_none());
                    continue;
                }
                let (m, hop) = best.expect("connected: reachable");
                assert_eq!(u32::from(m), d[0][t], "metric to {t}");
                let h = hop.link.0 as usize;
                let c = u32::from(cost[0][h].unwrap());
                assert_eq!(c + d[h][t], d[0][t], "first hop {h} toward {t}");
            }
        }
    }
}
