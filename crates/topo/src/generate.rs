//! Synthetic graphs, deterministic for a seed (ChaCha8, which gives the same stream on every
//! platform and version of the crate).
//!
//! | kind | nodes | links | delay |
//! |---|---|---|---|
//! | `ring` | `n0`..: n ≥ 3 in a cycle | n | `--delay-ms` |
//! | `grid` | `n<row>_<col>`: rows × cols, 4-neighbour mesh | r(c-1) + c(r-1) | `--delay-ms` |
//! | `waxman` | `n0`..: uniform in a square of `region_km` | P(u,v) = β·exp(−d/(α·L)) | from the distance |
//! | `ba` | `n0`..: Barabási–Albert, m links per new node | ≈ m·n | `--delay-ms` |
//! | `fat-tree` | k-ary: (k/2)² `core-i`, k pods of k/2 `agg-p-i` and k/2 `edge-p-i`, optional k³/4 `host-p-e-h` | | `--delay-ms` |
//!
//! Waxman follows Waxman (1988) and networkx's `waxman_graph`: β scales the probability, α
//! the distance over which it decays; L is the square's diagonal. A Waxman graph need not
//! be connected: each smaller component is joined to its nearest node among those already
//! joined (a [`Warning::ComponentsJoined`] says how many links that took), so the node count
//! is always the one asked for. Pairs are drawn cell by cell with geometric skipping, which
//! samples exactly the same distribution as trying every pair but visits far-apart pairs in
//! bulk: 10,000 nodes take milliseconds, not the 50 million pair draws of the direct method.
//!
//! Barabási–Albert starts from a clique of m + 1 nodes; each further node links to m
//! distinct earlier nodes drawn with probability proportional to their degree.
//!
//! Contract: [`generate`] refuses parameters out of range ([`ParamError`]) before allocating
//! anything, and every graph it returns is connected with exactly the node count the kind
//! states.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

use crate::build::{Source, build};
use crate::error::{ParamError, TopoError};
use crate::graph::{Csr, Edge, Graph, Node, components};
use crate::warning::Warning;
use crate::{MAX_NODES, Options, Output};

/// The most links a generated graph may have.
pub const MAX_LINKS: usize = 5_000_000;

/// A synthetic graph and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A cycle of `nodes` nodes.
    Ring {
        /// At least 3.
        nodes: u64,
    },
    /// A rows × cols mesh.
    Grid {
        /// Rows, at least 1.
        rows: u64,
        /// Columns, at least 1 (rows × cols at least 2).
        cols: u64,
    },
    /// Waxman's random geometric graph.
    Waxman {
        /// At least 2.
        nodes: u64,
        /// Distance decay, > 0 (larger: more long links).
        alpha: f64,
        /// Probability scale, in (0, 1] (larger: more links).
        beta: f64,
        /// Side of the square the nodes are placed in, km.
        region_km: f64,
    },
    /// Barabási–Albert preferential attachment.
    Ba {
        /// More than `m`.
        nodes: u64,
        /// Links per new node, at least 1.
        m: u64,
    },
    /// A k-ary fat tree.
    FatTree {
        /// Even, at least 2.
        k: u64,
        /// Add the k³/4 hosts, k/2 under each edge switch.
        hosts: bool,
    },
}

impl Kind {
    /// The command line that makes this graph.
    pub fn command(&self, seed: u64) -> String {
        let args = match self {
            Kind::Ring { nodes } => format!("ring --nodes {nodes}"),
            Kind::Grid { rows, cols } => format!("grid --rows {rows} --cols {cols}"),
            Kind::Waxman {
                nodes,
                alpha,
                beta,
                region_km,
            } => format!(
                "waxman --nodes {nodes} --alpha {alpha} --beta {beta} --region-km {region_km}"
            ),
            Kind::Ba { nodes, m } => format!("ba --nodes {nodes} --m {m}"),
            Kind::FatTree { k, hosts } => {
                format!("fat-tree --k {k}{}", if *hosts { " --hosts" } else { "" })
            }
        };
        format!("anode topo gen {args} --seed {seed}")
    }

    /// How many nodes the graph has (checked against the limit before anything is made).
    pub fn node_count(&self) -> u128 {
        match *self {
            Kind::Ring { nodes } | Kind::Waxman { nodes, .. } | Kind::Ba { nodes, .. } => {
                u128::from(nodes)
            }
            Kind::Grid { rows, cols } => u128::from(rows) * u128::from(cols),
            Kind::FatTree { k, hosts } => {
                let k = u128::from(k);
                5 * k * k / 4 + if hosts { k * k * k / 4 } else { 0 }
            }
        }
    }

    fn check(&self) -> Result<(), ParamError> {
        let range = |param, value: String, want| Err(ParamError::Range { param, value, want });
        match *self {
            Kind::Ring { nodes } if nodes < 3 => {
                return range("--nodes", nodes.to_string(), "at least 3 for a ring");
            }
            Kind::Grid { rows, cols } if rows == 0 || cols == 0 || self.node_count() < 2 => {
                return range(
                    "--rows x --cols",
                    format!("{rows} x {cols}"),
                    "at least 1 each and 2 nodes in all",
                );
            }
            Kind::Waxman { nodes, .. } if nodes < 2 => {
                return range("--nodes", nodes.to_string(), "at least 2");
            }
            Kind::Waxman { alpha, .. } if !(alpha > 0.0 && alpha <= 1e6) => {
                return range("--alpha", alpha.to_string(), "a number above 0 (e.g. 0.1)");
            }
            Kind::Waxman { beta, .. } if !(beta > 0.0 && beta <= 1.0) => {
                return range("--beta", beta.to_string(), "a number in (0, 1] (e.g. 0.4)");
            }
            Kind::Waxman { region_km, .. } if !(0.001..=40_000.0).contains(&region_km) => {
                return range("--region-km", region_km.to_string(), "0.001 to 40000 km");
            }
            Kind::Ba { nodes, m } if m == 0 || nodes <= m => {
                return Err(ParamError::BaM { m, nodes });
            }
            Kind::FatTree { k, .. } if k < 2 || k % 2 == 1 => return Err(ParamError::OddK(k)),
            _ => {}
        }
        let nodes = self.node_count();
        if nodes > MAX_NODES as u128 {
            return Err(ParamError::TooManyNodes {
                what: self.command(0),
                nodes,
                max: MAX_NODES,
            });
        }
        if let Kind::Ba { nodes, m } = *self {
            let links = u128::from(m) * u128::from(nodes);
            if links > MAX_LINKS as u128 {
                return Err(ParamError::TooManyLinks {
                    what: format!("ba --nodes {nodes} --m {m}"),
                    links,
                    max: MAX_LINKS,
                });
            }
        }
        Ok(())
    }
}

/// Generates a graph of `kind` from `seed` and builds its topology.
pub fn generate(kind: &Kind, seed: u64, opts: &Options) -> Result<Output, TopoError> {
    opts.validate()?;
    kind.check()?;
    let mut rng = Rng(ChaCha8Rng::seed_from_u64(seed));
    let mut warnings = Vec::new();
    let (graph, diameter, name) = match *kind {
        Kind::Ring { nodes } => (ring(nodes as usize), Some((nodes / 2) as u32), "ring"),
        Kind::Grid { rows, cols } => (
            grid(rows as usize, cols as usize),
            Some((rows + cols - 2) as u32),
            "grid",
        ),
        Kind::Waxman {
            nodes,
            alpha,
            beta,
            region_km,
        } => {
            let g = waxman(
                nodes as usize,
                alpha,
                beta,
                region_km,
                &mut rng,
                &mut warnings,
            )?;
            (g, None, "waxman")
        }
        Kind::Ba { nodes, m } => (ba(nodes as usize, m as usize, &mut rng), None, "ba"),
        Kind::FatTree { k, hosts } => (
            fat_tree(k as usize, hosts),
            Some(if hosts { 6 } else { 4 }),
            "fat-tree",
        ),
    };
    let mut graph = graph;
    if !matches!(kind, Kind::Waxman { .. }) {
        for e in &mut graph.edges {
            e.delay_ms = Some(opts.delay_ms);
        }
    }
    let command = kind.command(seed);
    let source = Source {
        origin: format!("made by `{command}`"),
        source: command,
        format: "generated",
        name: Some(format!("{name} of {} nodes", graph.nodes.len())),
        directed: false,
        warnings,
        known_diameter: diameter,
        delay_model: Some(if matches!(kind, Kind::Waxman { .. }) {
            "the distance between its ends in the plane at 200,000 km/s in fibre (1 ms per\n# 200 km), at least 0.01 ms".to_string()
        } else {
            format!("{} ms on every link (--delay-ms)", opts.delay_ms)
        }),
    };
    build(graph, source, opts)
}

/// ChaCha8 with the two draws the generators need.
struct Rng(ChaCha8Rng);

impl Rng {
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (n > 0; multiply-shift, bias below 2^-32 for our n).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.0.next_u64()) * n as u128) >> 64) as usize
    }
}

fn named(names: impl Iterator<Item = String>) -> Vec<Node> {
    names
        .map(|name| Node {
            id: name.clone(),
            label: Some(name),
            geo: None,
        })
        .collect()
}

fn link(a: usize, b: usize) -> Edge {
    Edge {
        a,
        b,
        parallel: 1,
        unknown_bandwidth: 1,
        ..Edge::default()
    }
}

fn ring(n: usize) -> Graph {
    Graph {
        nodes: named((0..n).map(|i| format!("n{i}"))),
        edges: (0..n).map(|i| link(i, (i + 1) % n)).collect(),
    }
}

fn grid(rows: usize, cols: usize) -> Graph {
    let nodes = named((0..rows * cols).map(|i| format!("n{}_{}", i / cols, i % cols)));
    let mut edges = Vec::with_capacity(2 * rows * cols);
    for r in 0..rows {
        for c in 0..cols {
            let i = r * cols + c;
            if c + 1 < cols {
                edges.push(link(i, i + 1));
            }
            if r + 1 < rows {
                edges.push(link(i, i + cols));
            }
        }
    }
    Graph { nodes, edges }
}

fn ba(n: usize, m: usize, rng: &mut Rng) -> Graph {
    let mut edges = Vec::with_capacity(n * m);
    // Every link's two ends: drawing from it is drawing in proportion to degree.
    let mut ends: Vec<usize> = Vec::with_capacity(2 * n * m);
    for a in 0..=m {
        for b in a + 1..=m {
            edges.push(link(a, b));
            ends.extend([a, b]);
        }
    }
    let mut chosen: Vec<usize> = Vec::with_capacity(m);
    for v in m + 1..n {
        chosen.clear();
        while chosen.len() < m {
            let t = ends.get(rng.below(ends.len())).copied().unwrap_or(0);
            if !chosen.contains(&t) {
                chosen.push(t);
            }
        }
        for &t in &chosen {
            edges.push(link(v, t));
            ends.extend([v, t]);
        }
    }
    Graph {
        nodes: named((0..n).map(|i| format!("n{i}"))),
        edges,
    }
}

fn fat_tree(k: usize, hosts: bool) -> Graph {
    let h = k / 2;
    let mut names: Vec<String> = (0..h * h).map(|i| format!("core-{i}")).collect();
    let mut edges = Vec::new();
    for p in 0..k {
        let agg0 = names.len();
        names.extend((0..h).map(|i| format!("agg-{p}-{i}")));
        let edge0 = names.len();
        names.extend((0..h).map(|i| format!("edge-{p}-{i}")));
        for i in 0..h {
            // Aggregation switch i of every pod reaches core switches i*h .. i*h + h.
            for j in 0..h {
                edges.push(link(agg0 + i, i * h + j));
                edges.push(link(edge0 + j, agg0 + i));
            }
        }
        if hosts {
            for e in 0..h {
                for x in 0..h {
                    edges.push(link(edge0 + e, names.len()));
                    names.push(format!("host-{p}-{e}-{x}"));
                }
            }
        }
    }
    Graph {
        nodes: named(names.into_iter()),
        edges,
    }
}

/// Nodes bucketed into a square grid of cells.
struct Cells {
    side: usize,
    size_km: f64,
    start: Vec<usize>,
    nodes: Vec<usize>,
}

impl Cells {
    fn new(pos: &[(f64, f64)], region_km: f64) -> Cells {
        let side = ((pos.len() as f64 / 4.0).sqrt() as usize).max(1);
        let size_km = region_km / side as f64;
        let cell_of = |&(x, y): &(f64, f64)| {
            let cx = ((x / size_km) as usize).min(side - 1);
            let cy = ((y / size_km) as usize).min(side - 1);
            cy * side + cx
        };
        let mut count = vec![0usize; side * side + 1];
        for p in pos {
            if let Some(c) = count.get_mut(cell_of(p) + 1) {
                *c += 1;
            }
        }
        for i in 1..count.len() {
            let prev = count.get(i - 1).copied().unwrap_or(0);
            if let Some(c) = count.get_mut(i) {
                *c += prev;
            }
        }
        let start = count.clone();
        let mut fill = count;
        let mut nodes = vec![0usize; pos.len()];
        for (i, p) in pos.iter().enumerate() {
            if let Some(f) = fill.get_mut(cell_of(p)) {
                if let Some(slot) = nodes.get_mut(*f) {
                    *slot = i;
                }
                *f += 1;
            }
        }
        Cells {
            side,
            size_km,
            start,
            nodes,
        }
    }

    fn members(&self, cell: usize) -> &[usize] {
        let (Some(&s), Some(&e)) = (self.start.get(cell), self.start.get(cell + 1)) else {
            return &[];
        };
        self.nodes.get(s..e).unwrap_or(&[])
    }

    fn cell_of(&self, (x, y): (f64, f64)) -> (usize, usize) {
        let c = |v: f64| ((v / self.size_km) as usize).min(self.side - 1);
        (c(x), c(y))
    }
}

fn dist(pos: &[(f64, f64)], a: usize, b: usize) -> f64 {
    match (pos.get(a), pos.get(b)) {
        (Some(p), Some(q)) => ((p.0 - q.0).powi(2) + (p.1 - q.1).powi(2)).sqrt(),
        _ => f64::INFINITY,
    }
}

fn waxman(
    n: usize,
    alpha: f64,
    beta: f64,
    region_km: f64,
    rng: &mut Rng,
    warnings: &mut Vec<Warning>,
) -> Result<Graph, TopoError> {
    let pos: Vec<(f64, f64)> = (0..n)
        .map(|_| (rng.unit() * region_km, rng.unit() * region_km))
        .collect();
    let cells = Cells::new(&pos, region_km);
    let scale = alpha * region_km * std::f64::consts::SQRT_2;
    let side = cells.side;
    // The bound of P for two cells dx, dy apart (their closest points' distance).
    let bound: Vec<(f64, f64)> = (0..side * side)
        .map(|i| {
            let (dx, dy) = ((i % side).saturating_sub(1), (i / side).saturating_sub(1));
            let dmin = cells.size_km * ((dx * dx + dy * dy) as f64).sqrt();
            let p = beta * (-dmin / scale).exp();
            // ln(1 - p), accurate when p is tiny (where 1 - p rounds to 1).
            (p, (-p).ln_1p())
        })
        .collect();
    let mut edges = Vec::new();
    // Keeps the pair with probability P(a, b) / p_bound.
    let try_pair = |edges: &mut Vec<Edge>, a: usize, b: usize, p_bound: f64, rng: &mut Rng| {
        let d = dist(&pos, a, b);
        if rng.unit() * p_bound < beta * (-d / scale).exp() {
            let mut e = link(a, b);
            e.length_km = Some(d);
            edges.push(e);
        }
    };
    for c1 in 0..side * side {
        let m1 = cells.members(c1);
        for c2 in c1..side * side {
            let m2 = cells.members(c2);
            let (dx, dy) = (
                (c1 % side).abs_diff(c2 % side),
                (c1 / side).abs_diff(c2 / side),
            );
            let (p, ln_q) = bound.get(dy * side + dx).copied().unwrap_or((0.0, 0.0));
            if p <= 0.0 || m1.is_empty() || m2.is_empty() {
                continue;
            }
            if c1 == c2 {
                for (i, &a) in m1.iter().enumerate() {
                    for &b in m1.get(i + 1..).unwrap_or(&[]) {
                        try_pair(&mut edges, a, b, 1.0, rng);
                    }
                }
                continue;
            }
            // Geometric skipping over the m1 x m2 pairs with the cells' bound, then thinning.
            let total = m1.len() * m2.len();
            let mut idx = 0usize;
            loop {
                if p < 1.0 {
                    // No pair of these cells can be drawn (p underflows): skip them all.
                    if ln_q >= 0.0 || ln_q.is_nan() {
                        break;
                    }
                    // ln of a draw in (0, 1] over a finite negative: a finite skip >= 0.
                    let skip = ((1.0 - rng.unit()).ln() / ln_q).floor();
                    if skip >= total as f64 {
                        break;
                    }
                    idx += skip as usize;
                }
                if idx >= total {
                    break;
                }
                let (a, b) = (m1.get(idx / m2.len()), m2.get(idx % m2.len()));
                if let (Some(&a), Some(&b)) = (a, b) {
                    try_pair(&mut edges, a, b, p, rng);
                }
                idx += 1;
            }
            if edges.len() > MAX_LINKS {
                return Err(ParamError::TooManyLinks {
                    what: format!("waxman --nodes {n} --alpha {alpha} --beta {beta}"),
                    links: edges.len() as u128,
                    max: MAX_LINKS,
                }
                .into());
            }
        }
    }
    join_components(&pos, &cells, &mut edges, warnings);
    Ok(Graph {
        nodes: named((0..n).map(|i| format!("n{i}"))),
        edges,
    })
}

/// Joins every component but the largest to its nearest node among those already joined
/// (components in order of their first node).
fn join_components(
    pos: &[(f64, f64)],
    cells: &Cells,
    edges: &mut Vec<Edge>,
    warnings: &mut Vec<Warning>,
) {
    let n = pos.len();
    let adj = Csr::new(n, edges.iter().map(|e| (e.a, e.b)));
    let (comp, sizes) = components(&adj);
    if sizes.len() < 2 {
        return;
    }
    let main = (0..sizes.len())
        .max_by_key(|&c| (sizes.get(c).copied().unwrap_or(0), std::cmp::Reverse(c)))
        .unwrap_or(0);
    let mut joined: Vec<bool> = comp.iter().map(|&c| c == main).collect();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); sizes.len()];
    for (v, &c) in comp.iter().enumerate() {
        if let Some(m) = members.get_mut(c) {
            m.push(v);
        }
    }
    let mut added = 0;
    for (c, nodes) in members.iter().enumerate() {
        let Some(&rep) = nodes.first() else { continue };
        if c == main {
            continue;
        }
        let Some(&p) = pos.get(rep) else { continue };
        if let Some(near) = nearest_joined(pos, cells, &joined, p) {
            let mut e = link(rep, near);
            e.length_km = Some(dist(pos, rep, near));
            edges.push(e);
            added += 1;
        }
        for &v in nodes {
            if let Some(j) = joined.get_mut(v) {
                *j = true;
            }
        }
    }
    warnings.push(Warning::ComponentsJoined {
        components: sizes.len(),
        links_added: added,
    });
}

/// The joined node nearest to `p`, searching rings of cells outward.
fn nearest_joined(
    pos: &[(f64, f64)],
    cells: &Cells,
    joined: &[bool],
    p: (f64, f64),
) -> Option<usize> {
    let (cx, cy) = cells.cell_of(p);
    let side = cells.side as isize;
    let mut best: Option<(f64, usize)> = None;
    for r in 0..side {
        // Every node in ring r is at least (r - 1) cells away.
        let reach = (r - 1).max(0) as f64 * cells.size_km;
        if best.is_some_and(|(d, _)| d <= reach) {
            break;
        }
        for y in (cy as isize - r)..=(cy as isize + r) {
            for x in (cx as isize - r)..=(cx as isize + r) {
                let on_ring = (y - cy as isize).abs() == r || (x - cx as isize).abs() == r;
                if !on_ring || x < 0 || y < 0 || x >= side || y >= side {
                    continue;
                }
                for &v in cells.members(y as usize * cells.side + x as usize) {
                    if joined.get(v) != Some(&true) {
                        continue;
                    }
                    let Some(q) = pos.get(v) else { continue };
                    let d = ((p.0 - q.0).powi(2) + (p.1 - q.1).powi(2)).sqrt();
                    if best.is_none_or(|(bd, bv)| d < bd || (d == bd && v < bv)) {
                        best = Some((d, v));
                    }
                }
            }
        }
    }
    best.map(|(_, v)| v)
}

#[cfg(test)]
mod tests;
