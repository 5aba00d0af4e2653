//! The neutral graph every importer and generator produces, and the algorithms the builder
//! runs on it: cleaning (self-loops, parallel edges, largest connected component) and the
//! hop diameter.
//!
//! Invariants: edge ends are indices into `nodes` (importers check ids before building an
//! edge). After [`clean`], there are no self-loops or parallel edges and the graph is
//! connected; node order is the input order restricted to the kept nodes.

/// Latitude and longitude in degrees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Geo {
    pub lat: f64,
    pub lon: f64,
}

impl Geo {
    /// A position if both values are finite and within range.
    pub fn new(lat: f64, lon: f64) -> Option<Geo> {
        ((-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon))
            .then_some(Geo { lat, lon })
    }
}

/// A node as read or generated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    /// Its id in the input (decimal for numbers).
    pub id: String,
    /// Its label or name, if any.
    pub label: Option<String>,
    /// Where it is, if known.
    pub geo: Option<Geo>,
}

/// An edge as read or generated.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Edge {
    pub a: usize,
    pub b: usize,
    /// Length in km, if the input gives it.
    pub length_km: Option<f64>,
    /// A delay fixed by a generator.
    pub delay_ms: Option<f64>,
    /// Bits per second, if the input gives it.
    pub bandwidth_bps: Option<f64>,
    /// How many input edges this one stands for (parallel edges merged).
    pub parallel: u32,
    /// How many of those had no bandwidth (each gets the default).
    pub unknown_bandwidth: u32,
}

/// A graph as read or generated.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Graph {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

/// What [`clean`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Cleaning {
    pub self_loops: usize,
    /// Edges folded into another between the same two nodes.
    pub merged: usize,
    /// Distinct node pairs that had parallel edges.
    pub merged_pairs: usize,
    pub components: usize,
    pub dropped_nodes: usize,
    pub dropped_links: usize,
}

/// Drops self-loops, merges parallel edges (bandwidths add up, the shortest length and
/// delay win; in a `directed` graph the edges between two nodes are the directions of one
/// link, so the largest bandwidth wins) and keeps the largest connected component (the
/// first in node order on a tie).
pub(crate) fn clean(g: Graph, directed: bool) -> (Graph, Cleaning) {
    let mut c = Cleaning::default();
    let total = g.edges.len();
    let mut edges: Vec<Edge> = g.edges.into_iter().filter(|e| e.a != e.b).collect();
    c.self_loops = total - edges.len();
    let edges = merge_parallel(&mut edges, directed, &mut c);
    let n = g.nodes.len();
    let adj = Csr::new(n, edges.iter().map(|e| (e.a, e.b)));
    let (comp, sizes) = components(&adj);
    c.components = sizes.len();
    let Some(keep) = largest(&sizes) else {
        return (
            Graph {
                nodes: g.nodes,
                edges,
            },
            c,
        );
    };
    if sizes.len() == 1 {
        return (
            Graph {
                nodes: g.nodes,
                edges,
            },
            c,
        );
    }
    // Renumber the kept nodes in input order.
    let mut new_index = vec![usize::MAX; n];
    let mut nodes = Vec::new();
    for (i, node) in g.nodes.into_iter().enumerate() {
        if comp.get(i) == Some(&keep)
            && let Some(slot) = new_index.get_mut(i)
        {
            *slot = nodes.len();
            nodes.push(node);
        }
    }
    c.dropped_nodes = n - nodes.len();
    let before = edges.len();
    let edges: Vec<Edge> = edges
        .into_iter()
        .filter_map(|mut e| {
            let a = *new_index.get(e.a)?;
            let b = *new_index.get(e.b)?;
            (a != usize::MAX && b != usize::MAX).then(|| {
                e.a = a;
                e.b = b;
                e
            })
        })
        .collect();
    c.dropped_links = before - edges.len();
    (Graph { nodes, edges }, c)
}

/// Folds every edge into the first one between the same two nodes (input order kept);
/// sorting the node pairs finds them without hashing.
fn merge_parallel(edges: &mut [Edge], directed: bool, c: &mut Cleaning) -> Vec<Edge> {
    let mut keys: Vec<(usize, usize, usize)> = edges
        .iter()
        .enumerate()
        .map(|(i, e)| (e.a.min(e.b), e.a.max(e.b), i))
        .collect();
    keys.sort_unstable();
    // For every edge: the index of the edge it is folded into (itself if kept).
    let mut into: Vec<usize> = (0..edges.len()).collect();
    for group in keys.chunk_by(|x, y| (x.0, x.1) == (y.0, y.1)) {
        if let [(_, _, first), rest @ ..] = group
            && !rest.is_empty()
        {
            c.merged_pairs += 1;
            c.merged += rest.len();
            for &(_, _, j) in rest {
                if let Some(slot) = into.get_mut(j) {
                    *slot = *first;
                }
            }
        }
    }
    for (j, &target) in into.iter().enumerate() {
        if target != j {
            let e = edges.get_mut(j).map(std::mem::take).unwrap_or_default();
            if let Some(m) = edges.get_mut(target) {
                merge(m, e, directed);
            }
        }
    }
    edges
        .iter_mut()
        .zip(&into)
        .enumerate()
        .filter(|&(j, (_, &t))| t == j)
        .map(|(_, (e, _))| std::mem::take(e))
        .collect()
}

fn merge(into: &mut Edge, e: Edge, directed: bool) {
    into.parallel += e.parallel;
    if directed {
        // One link: its speed is the larger direction's; unknown only if both are.
        into.bandwidth_bps = match (into.bandwidth_bps, e.bandwidth_bps) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
        into.unknown_bandwidth = u32::from(into.bandwidth_bps.is_none());
    } else {
        into.unknown_bandwidth += e.unknown_bandwidth;
        into.bandwidth_bps = match (into.bandwidth_bps, e.bandwidth_bps) {
            (Some(x), Some(y)) => Some(x + y),
            (x, y) => x.or(y),
        };
    }
    into.length_km = min_opt(into.length_km, e.length_km);
    into.delay_ms = min_opt(into.delay_ms, e.delay_ms);
}

fn min_opt(x: Option<f64>, y: Option<f64>) -> Option<f64> {
    match (x, y) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// The index of the largest size (the first on a tie).
fn largest(sizes: &[usize]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (i, &s) in sizes.iter().enumerate() {
        if best.is_none_or(|(_, b)| s > b) {
            best = Some((i, s));
        }
    }
    best.map(|(i, _)| i)
}

/// Adjacency in compressed sparse rows: the neighbours of `v` are
/// `targets[offsets[v]..offsets[v + 1]]`.
#[derive(Debug, Clone)]
pub(crate) struct Csr {
    offsets: Vec<usize>,
    targets: Vec<u32>,
}

impl Csr {
    /// From undirected edges between nodes `0..n` (ends out of range are skipped).
    pub fn new(n: usize, edges: impl Iterator<Item = (usize, usize)> + Clone) -> Csr {
        let mut deg = vec![0usize; n + 1];
        for (a, b) in edges.clone() {
            if a < n && b < n {
                if let Some(d) = deg.get_mut(a) {
                    *d += 1;
                }
                if let Some(d) = deg.get_mut(b) {
                    *d += 1;
                }
            }
        }
        let mut offsets = Vec::with_capacity(n + 1);
        let mut sum = 0;
        for d in &deg {
            offsets.push(sum);
            sum += d;
        }
        let mut fill: Vec<usize> = offsets.clone();
        let mut targets = vec![0u32; sum];
        for (a, b) in edges {
            if a < n && b < n {
                for (x, y) in [(a, b), (b, a)] {
                    if let Some(f) = fill.get_mut(x) {
                        if let Some(t) = targets.get_mut(*f) {
                            *t = y as u32;
                        }
                        *f += 1;
                    }
                }
            }
        }
        Csr { offsets, targets }
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// The neighbours of `v` (empty if out of range).
    pub fn neighbours(&self, v: usize) -> &[u32] {
        let (Some(&s), Some(&e)) = (self.offsets.get(v), self.offsets.get(v + 1)) else {
            return &[];
        };
        self.targets.get(s..e).unwrap_or(&[])
    }

    fn degree(&self, v: usize) -> usize {
        self.neighbours(v).len()
    }
}

/// The component of every node and the size of every component (numbered in node order).
pub(crate) fn components(adj: &Csr) -> (Vec<usize>, Vec<usize>) {
    let n = adj.len();
    let mut comp = vec![usize::MAX; n];
    let mut sizes = Vec::new();
    let mut queue: Vec<usize> = Vec::new();
    for s in 0..n {
        if comp.get(s) != Some(&usize::MAX) {
            continue;
        }
        let id = sizes.len();
        let mut size = 0;
        queue.clear();
        queue.push(s);
        if let Some(c) = comp.get_mut(s) {
            *c = id;
        }
        while let Some(v) = queue.pop() {
            size += 1;
            for &w in adj.neighbours(v) {
                if let Some(c) = comp.get_mut(w as usize)
                    && *c == usize::MAX
                {
                    *c = id;
                    queue.push(w as usize);
                }
            }
        }
        sizes.push(size);
    }
    (comp, sizes)
}

/// Work (edge visits) below which the diameter search goes on to the exact value even when
/// a bound would do: a few milliseconds.
const EXACT_WORK: u64 = 2_000_000;

/// Breadth-first search state reused between searches.
struct Bfs {
    dist: Vec<u32>,
    queue: Vec<u32>,
    /// Edges and nodes visited so far (the work done).
    work: u64,
}

impl Bfs {
    fn new(n: usize) -> Bfs {
        Bfs {
            dist: vec![u32::MAX; n],
            queue: Vec::with_capacity(n),
            work: 0,
        }
    }

    /// Distances from `s` (u32::MAX: unreachable); returns the eccentricity and the last
    /// node reached (a farthest one).
    fn run(&mut self, adj: &Csr, s: usize) -> (u32, usize) {
        self.dist.iter_mut().for_each(|d| *d = u32::MAX);
        self.queue.clear();
        if let Some(d) = self.dist.get_mut(s) {
            *d = 0;
            self.queue.push(s as u32);
        }
        let (mut head, mut ecc, mut last) = (0, 0, s);
        while let Some(&v) = self.queue.get(head) {
            head += 1;
            let dv = self.dist.get(v as usize).copied().unwrap_or(0);
            ecc = ecc.max(dv);
            last = v as usize;
            let nb = adj.neighbours(v as usize);
            self.work += nb.len() as u64 + 1;
            for &w in nb {
                if let Some(d) = self.dist.get_mut(w as usize)
                    && *d == u32::MAX
                {
                    *d = dv + 1;
                    self.queue.push(w);
                }
            }
        }
        (ecc, last)
    }
}

/// The hop diameter of a connected graph and whether it is exact: iFUB (Crescenzi et al.,
/// "On computing the diameter of real-world undirected graphs", 2013) from the middle of a
/// double sweep. It usually needs a handful of searches. It stops early with its upper
/// bound (at most twice the diameter) once that bound is at most `enough` (the caller needs
/// no more) and the search is no longer cheap (`EXACT_WORK`), or once the work passes
/// `budget` edge visits.
pub(crate) fn diameter(adj: &Csr, budget: u64, enough: u32) -> (u32, bool) {
    let n = adj.len();
    if n < 2 {
        return (0, true);
    }
    let mut bfs = Bfs::new(n);
    let start = (0..n)
        .max_by_key(|&v| (adj.degree(v), std::cmp::Reverse(v)))
        .unwrap_or(0);
    let (_, a) = bfs.run(adj, start);
    let (ecc_a, b) = bfs.run(adj, a);
    // The middle of the a..b path: walk back from b along decreasing distance.
    let mut mid = b;
    let mut d = ecc_a;
    while d > ecc_a / 2 {
        let next = adj
            .neighbours(mid)
            .iter()
            .copied()
            .find(|&w| bfs.dist.get(w as usize) == Some(&(d - 1)));
        match next {
            Some(w) => mid = w as usize,
            None => break,
        }
        d -= 1;
    }
    let (ecc_u, _) = bfs.run(adj, mid);
    let levels = bfs.dist.clone();
    let mut lb = ecc_a.max(ecc_u);
    let mut ub = 2 * ecc_u;
    let mut i = ecc_u;
    while ub > lb {
        let mut bi = 0;
        for (v, _) in levels.iter().enumerate().filter(|&(_, &l)| l == i) {
            if bfs.work > budget || (ub <= enough && bfs.work > EXACT_WORK) {
                return (ub, false);
            }
            bi = bi.max(bfs.run(adj, v).0);
        }
        lb = lb.max(bi);
        let floor = 2 * i.saturating_sub(1);
        if lb > floor {
            return (lb, true);
        }
        ub = floor;
        i = i.saturating_sub(1);
        if i == 0 {
            break;
        }
    }
    (lb, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(a: usize, b: usize) -> Edge {
        Edge {
            a,
            b,
            parallel: 1,
            ..Edge::default()
        }
    }

    fn graph(n: usize, e: &[(usize, usize)]) -> Graph {
        Graph {
            nodes: (0..n)
                .map(|i| Node {
                    id: i.to_string(),
                    label: None,
                    geo: None,
                })
                .collect(),
            edges: e.iter().map(|&(a, b)| edge(a, b)).collect(),
        }
    }

    fn brute_diameter(adj: &Csr) -> u32 {
        let mut bfs = Bfs::new(adj.len());
        (0..adj.len()).map(|v| bfs.run(adj, v).0).max().unwrap_or(0)
    }

    #[test]
    fn clean_drops_loops_merges_parallels_keeps_the_largest_part() {
        let mut g = graph(
            7,
            &[
                (0, 1),
                (1, 0),
                (1, 1),
                (1, 2),
                (0, 1),
                (3, 4),
                (5, 6),
                (2, 0),
            ],
        );
        g.edges[0].bandwidth_bps = Some(1e9);
        g.edges[1].bandwidth_bps = Some(2e9);
        g.edges[1].length_km = Some(5.0);
        let (g, c) = clean(g, false);
        assert_eq!(c.self_loops, 1);
        assert_eq!(c.merged, 2);
        assert_eq!(c.merged_pairs, 1);
        assert_eq!(c.components, 3);
        assert_eq!(c.dropped_nodes, 4);
        assert_eq!(c.dropped_links, 2);
        assert_eq!(g.nodes.len(), 3);
        assert_eq!(g.edges.len(), 3);
        let e = &g.edges[0];
        assert_eq!(
            (e.parallel, e.bandwidth_bps, e.length_km),
            (3, Some(3e9), Some(5.0))
        );
    }

    #[test]
    fn directed_pairs_are_one_link_with_the_larger_speed() {
        let mut g = graph(2, &[(0, 1), (1, 0)]);
        g.edges[0].unknown_bandwidth = 1;
        g.edges[1].bandwidth_bps = Some(1e9);
        let (g, c) = clean(g, true);
        assert_eq!(c.merged, 1);
        assert_eq!(
            (g.edges[0].bandwidth_bps, g.edges[0].unknown_bandwidth),
            (Some(1e9), 0)
        );
    }

    #[test]
    fn ties_keep_the_first_component() {
        let (g, c) = clean(graph(4, &[(2, 3), (0, 1)]), false);
        assert_eq!(c.components, 2);
        assert_eq!(g.nodes[0].id, "0");
        assert_eq!(g.edges.len(), 1);
    }

    #[test]
    fn diameter_is_exact_on_known_shapes() {
        let ring: Vec<_> = (0..101).map(|i| (i, (i + 1) % 101)).collect();
        let adj = Csr::new(101, ring.iter().copied());
        assert_eq!(diameter(&adj, u64::MAX, 0), (50, true));
        let line: Vec<_> = (0..9).map(|i| (i, i + 1)).collect();
        assert_eq!(
            diameter(&Csr::new(10, line.iter().copied()), u64::MAX, 0),
            (9, true)
        );
        let star: Vec<_> = (1..10).map(|i| (0, i)).collect();
        assert_eq!(
            diameter(&Csr::new(10, star.iter().copied()), u64::MAX, 0),
            (2, true)
        );
        assert_eq!(
            diameter(&Csr::new(2, [(0, 1)].into_iter()), u64::MAX, 0),
            (1, true)
        );
    }

    #[test]
    fn diameter_matches_brute_force_on_pseudo_random_trees_and_cycles() {
        let mut x: u64 = 42;
        for n in 2..60usize {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut e: Vec<(usize, usize)> = (1..n)
                .map(|i| (i, ((x >> 33) as usize + i * 7) % i))
                .collect();
            for k in 0..(n / 5) {
                e.push((k, (k * 13 + (x >> 40) as usize) % n));
            }
            let adj = Csr::new(n, e.iter().copied());
            let (d, exact) = diameter(&adj, u64::MAX, 0);
            assert!(exact);
            assert_eq!(d, brute_diameter(&adj), "n={n} edges={e:?}");
        }
    }

    #[test]
    fn an_exhausted_budget_gives_a_safe_upper_bound() {
        let ring: Vec<_> = (0..1000).map(|i| (i, (i + 1) % 1000)).collect();
        let adj = Csr::new(1000, ring.iter().copied());
        let (d, exact) = diameter(&adj, 1, 0);
        assert!(!exact);
        assert!((500..=1000).contains(&d), "{d}");
    }

    #[test]
    fn enough_stops_at_a_bound_that_is_small_enough() {
        let star: Vec<_> = (1..10).map(|i| (0, i)).collect();
        let adj = Csr::new(10, star.iter().copied());
        // From the centre: ecc 1, bound 2 = the diameter, so exact either way.
        assert_eq!(diameter(&adj, u64::MAX, 14), (2, true));
        let line: Vec<_> = (0..9).map(|i| (i, i + 1)).collect();
        let adj = Csr::new(10, line.iter().copied());
        assert_eq!(diameter(&adj, u64::MAX, 14), (9, true));
        // Cheap searches go on to the exact value; a long one stops at a bound.
        let ring: Vec<_> = (0..21).map(|i| (i, (i + 1) % 21)).collect();
        let adj = Csr::new(21, ring.iter().copied());
        assert_eq!(diameter(&adj, u64::MAX, 40), (10, true));
        let ring: Vec<_> = (0..3000).map(|i| (i, (i + 1) % 3000)).collect();
        let adj = Csr::new(3000, ring.iter().copied());
        let (d, exact) = diameter(&adj, u64::MAX, 5000);
        assert!(!exact && (1500..=3000).contains(&d), "{d}");
    }
}
