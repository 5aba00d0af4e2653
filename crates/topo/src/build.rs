//! From a neutral graph to the topology file: clean, name, give every link a delay and a
//! bandwidth, size the routing infinity and the run, and write the TOML.
//!
//! Contract: [`build`] either fails with [`GraphError::TooFewNodes`] /
//! [`GraphError::TooManyNodes`] or returns text the emulator accepts (see the crate docs);
//! the text depends only on its inputs.

use std::collections::HashSet;
use std::fmt::Write as _;

use serde::Serialize;

use crate::error::{GraphError, TopoError};
use crate::graph::{self, Csr, Graph, Node};
use crate::warning::Warning;
use crate::{
    DEFAULT_INFINITY, MAX_INFINITY, MAX_NODES, Options, default_duration_ms, fibre_delay_ms,
    haversine_km,
};

/// Work the diameter search may do (edge visits) before it settles for an upper bound.
const DIAMETER_BUDGET: u64 = 50_000_000;
/// The longest name the emulator takes.
const MAX_NAME: usize = 32;
/// Largest and smallest bandwidth the emulator takes, in bit/s.
const MAX_BPS: f64 = 1e12;
const MIN_BPS: f64 = 1e3;

/// Where a graph came from, and what the reader or generator noticed.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    /// One line for the header: how the file was made.
    pub origin: String,
    /// The input file, or the generator's command line.
    pub source: String,
    /// `gml`, `node-link-json` or `generated`.
    pub format: &'static str,
    /// The graph's own name.
    pub name: Option<String>,
    pub directed: bool,
    pub warnings: Vec<Warning>,
    /// A generator that knows its diameter says so (no search needed).
    pub known_diameter: Option<u32>,
    /// How links got their delay, for the header (`None`: the importers' model).
    pub delay_model: Option<String>,
}

/// The result: the topology text, what it holds and what was changed on the way.
#[derive(Debug, Clone)]
pub struct Output {
    /// The topology file (TOML).
    pub toml: String,
    /// Counts.
    pub summary: Summary,
    /// What was changed or assumed, in the order it happened.
    pub warnings: Vec<Warning>,
}

/// Counts of an import or generation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The input file, or the generator's command line.
    pub source: String,
    /// `gml`, `node-link-json` or `generated`.
    pub format: &'static str,
    /// The graph's own name, if it has one.
    pub name: Option<String>,
    /// Nodes in the input.
    pub input_nodes: usize,
    /// Edges in the input.
    pub input_edges: usize,
    /// Nodes written (the kept component).
    pub nodes: usize,
    /// Links written.
    pub links: usize,
    /// Self-loops dropped.
    pub self_loops_dropped: usize,
    /// Parallel edges merged into another.
    pub duplicates_merged: usize,
    /// Connected components in the input (after dropping self-loops).
    pub components: usize,
    /// Nodes dropped with the smaller components.
    pub dropped_nodes: usize,
    /// Links dropped with the smaller components.
    pub dropped_links: usize,
    /// Links that got the default delay (no length, no coordinates).
    pub default_delay_links: usize,
    /// Links that got the default bandwidth (no speed given).
    pub default_bandwidth_links: usize,
    /// Hops across the graph (an upper bound if `diameter_exact` is false).
    pub diameter_hops: u32,
    /// Whether `diameter_hops` is exact.
    pub diameter_exact: bool,
    /// The routing infinity the run uses.
    pub infinity: u16,
    /// `[network] duration_ms`.
    pub duration_ms: u64,
}

impl Output {
    /// The summary with the warnings (`{"kind", "message"}`) and the output file, for `--json`.
    pub fn summary_json(&self, out: Option<&str>) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.summary).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("kept_nodes".into(), self.summary.nodes.into());
            let w: Vec<serde_json::Value> = self
                .warnings
                .iter()
                .map(|w| serde_json::json!({"kind": w.kind(), "message": w.to_string()}))
                .collect();
            o.insert("warnings".into(), w.into());
            o.insert("out".into(), out.map(String::from).into());
        }
        v
    }
}

/// A link ready to write.
struct Link {
    a: usize,
    b: usize,
    delay_ms: f64,
    km: Option<f64>,
    mbps: f64,
}

/// Builds the topology text from a graph.
pub(crate) fn build(g: Graph, mut src: Source, opts: &Options) -> Result<Output, TopoError> {
    let (input_nodes, input_edges) = (g.nodes.len(), g.edges.len());
    let mut warnings = Vec::new();
    if src.directed {
        warnings.push(Warning::Directed);
    }
    warnings.append(&mut src.warnings);
    let (g, c) = graph::clean(g, src.directed);
    if c.self_loops > 0 {
        warnings.push(Warning::SelfLoopsDropped {
            count: c.self_loops,
        });
    }
    if c.merged > 0 {
        warnings.push(Warning::ParallelMerged {
            edges: c.merged,
            pairs: c.merged_pairs,
            directed: src.directed,
        });
    }
    if c.components > 1 {
        warnings.push(Warning::ComponentsDropped {
            components: c.components,
            kept_nodes: g.nodes.len(),
            dropped_nodes: c.dropped_nodes,
            dropped_links: c.dropped_links,
        });
    }
    let n = g.nodes.len();
    let fail = |reason| TopoError::Graph {
        file: src.source.clone(),
        at: String::new(),
        reason,
    };
    if n < 2 {
        return Err(fail(GraphError::TooFewNodes { nodes: n }));
    }
    if n > MAX_NODES {
        return Err(fail(GraphError::TooManyNodes {
            nodes: n,
            max: MAX_NODES,
        }));
    }
    let names = name_nodes(&g.nodes, &mut warnings);
    let (links, default_delay, default_bw) = make_links(&g, &names, opts, &mut warnings);
    let (diameter, exact) = match src.known_diameter {
        Some(d) => (d, true),
        None => {
            let adj = Csr::new(n, links.iter().map(|l| (l.a, l.b)));
            // Below the default infinity, a bound will do: nothing changes with the exact value.
            graph::diameter(&adj, DIAMETER_BUDGET, u32::from(DEFAULT_INFINITY) - 2)
        }
    };
    let need = diameter.saturating_add(2);
    let infinity = if need > u32::from(DEFAULT_INFINITY) {
        u16::try_from(need)
            .unwrap_or(MAX_INFINITY)
            .min(MAX_INFINITY)
    } else {
        DEFAULT_INFINITY
    };
    if need > u32::from(MAX_INFINITY) {
        warnings.push(Warning::DiameterBeyondInfinity { diameter, infinity });
    }
    let duration_ms = opts
        .duration_ms
        .unwrap_or_else(|| default_duration_ms(n, diameter));
    let summary = Summary {
        source: src.source.clone(),
        format: src.format,
        name: src.name.clone(),
        input_nodes,
        input_edges,
        nodes: n,
        links: links.len(),
        self_loops_dropped: c.self_loops,
        duplicates_merged: c.merged,
        components: c.components,
        dropped_nodes: c.dropped_nodes,
        dropped_links: c.dropped_links,
        default_delay_links: default_delay,
        default_bandwidth_links: default_bw,
        diameter_hops: diameter,
        diameter_exact: exact,
        infinity,
        duration_ms,
    };
    let toml = render(&src, &summary, &names, &links, &warnings, opts);
    Ok(Output {
        toml,
        summary,
        warnings,
    })
}

/// Valid emulator names: 1-32 of ASCII letters, digits, `-`, `_`, `.`.
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

/// `s` with every run of other characters turned into one '-' (none at either end),
/// at most 32 characters.
fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_NAME));
    let mut pending_dash = false;
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
            if pending_dash && !out.is_empty() {
                out.push('-');
            }
            pending_dash = false;
            out.push(c);
        } else {
            pending_dash = true;
        }
        if out.len() >= MAX_NAME {
            break;
        }
    }
    out.truncate(MAX_NAME);
    out
}

/// A node's name, and its label when that had to change.
struct Named {
    name: String,
    was: Option<String>,
}

/// Node names: the label if it is valid and not taken (reserved first, so a renamed node
/// never takes a valid label's name), else its sanitized form or `n<id>`, with `-2`, `-3`..
/// until unique.
fn name_nodes(nodes: &[Node], warnings: &mut Vec<Warning>) -> Vec<Named> {
    let mut used: HashSet<String> = HashSet::with_capacity(nodes.len());
    let mut names: Vec<Option<String>> = nodes
        .iter()
        .map(|n| {
            let l = n.label.as_deref()?;
            (valid_name(l) && used.insert(l.to_string())).then(|| l.to_string())
        })
        .collect();
    let (mut renamed, mut unnamed) = (0usize, 0usize);
    let mut examples = Vec::new();
    for (slot, node) in names.iter_mut().zip(nodes) {
        if slot.is_some() {
            continue;
        }
        let from_label = node.label.as_deref().map(sanitize).unwrap_or_default();
        let base = if from_label.is_empty() {
            sanitize(&format!("n{}", node.id))
        } else {
            from_label
        };
        let base = if base.is_empty() {
            "n".to_string()
        } else {
            base
        };
        let mut name = base.clone();
        let mut k = 2u64;
        while used.contains(&name) {
            let suffix = format!("-{k}");
            let keep = MAX_NAME.saturating_sub(suffix.len()).min(base.len());
            name = format!("{}{suffix}", base.get(..keep).unwrap_or(&base));
            k += 1;
        }
        used.insert(name.clone());
        match &node.label {
            Some(l) => {
                renamed += 1;
                if examples.len() < 5 {
                    examples.push((l.clone(), name.clone()));
                }
            }
            None => unnamed += 1,
        }
        *slot = Some(name);
    }
    if renamed > 0 {
        warnings.push(Warning::Renamed {
            count: renamed,
            examples,
        });
    }
    if unnamed > 0 {
        warnings.push(Warning::Unnamed { count: unnamed });
    }
    names
        .into_iter()
        .zip(nodes)
        .map(|(name, node)| {
            let name = name.unwrap_or_default();
            let was = node.label.clone().filter(|l| *l != name);
            Named { name, was }
        })
        .collect()
}

/// Delay and bandwidth of every link; also how many got the default delay and bandwidth.
fn make_links(
    g: &Graph,
    names: &[Named],
    opts: &Options,
    warnings: &mut Vec<Warning>,
) -> (Vec<Link>, usize, usize) {
    let default_bps = opts.bandwidth_mbps * 1e6;
    let mut links = Vec::with_capacity(g.edges.len());
    let (mut default_delay, mut default_bw, mut clamped) = (0, 0, 0);
    let mut no_geo: Vec<usize> = Vec::new();
    for e in &g.edges {
        let ga = g.nodes.get(e.a).and_then(|n| n.geo);
        let gb = g.nodes.get(e.b).and_then(|n| n.geo);
        let km = e.length_km.or_else(|| {
            let (x, y) = (ga?, gb?);
            Some(haversine_km(x.lat, x.lon, y.lat, y.lon))
        });
        let delay_ms = match (e.delay_ms, km) {
            (Some(d), _) => d,
            (None, Some(km)) => fibre_delay_ms(km),
            (None, None) => {
                default_delay += 1;
                for (end, geo) in [(e.a, ga), (e.b, gb)] {
                    if geo.is_none() {
                        no_geo.push(end);
                    }
                }
                opts.delay_ms
            }
        };
        let mut bps = e.bandwidth_bps.unwrap_or(0.0);
        if e.unknown_bandwidth > 0 {
            default_bw += 1;
            bps = if default_bps == 0.0 {
                0.0
            } else {
                bps + f64::from(e.unknown_bandwidth) * default_bps
            };
        }
        if bps > MAX_BPS {
            clamped += 1;
        }
        let bps = if bps == 0.0 {
            0.0
        } else {
            bps.clamp(MIN_BPS, MAX_BPS)
        };
        links.push(Link {
            a: e.a,
            b: e.b,
            delay_ms: delay_ms.min(3_600_000.0),
            km: if e.delay_ms.is_some() { None } else { km },
            mbps: bps / 1e6,
        });
    }
    if default_delay > 0 {
        no_geo.sort_unstable();
        no_geo.dedup();
        let shown: Vec<String> = no_geo
            .iter()
            .take(8)
            .filter_map(|&i| names.get(i))
            .map(|n| n.name.clone())
            .collect();
        warnings.push(Warning::DefaultDelay {
            links: default_delay,
            delay_ms: opts.delay_ms,
            more: no_geo.len().saturating_sub(shown.len()),
            nodes: shown,
        });
    }
    if clamped > 0 {
        warnings.push(Warning::BandwidthClamped { links: clamped });
    }
    (links, default_delay, default_bw)
}

/// `v` with at most `decimals` decimals, no trailing zeros (`5.731`, `1000`, `0.01`).
fn num(v: f64, decimals: usize) -> String {
    let mut t = String::new();
    push_num(&mut t, &mut String::new(), v, decimals);
    t
}

/// Appends [`num`]`(v, decimals)` to `t` through `buf`.
fn push_num(t: &mut String, buf: &mut String, v: f64, decimals: usize) {
    buf.clear();
    let _ = write!(buf, "{v:.decimals$}");
    let s = if buf.contains('.') {
        buf.trim_end_matches('0').trim_end_matches('.')
    } else {
        buf.as_str()
    };
    t.push_str(if s == "-0" { "0" } else { s });
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text safe inside a `#` comment (one line).
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn render(
    src: &Source,
    s: &Summary,
    names: &[Named],
    links: &[Link],
    warnings: &[Warning],
    opts: &Options,
) -> String {
    let name = |i: usize| names.get(i).map_or("", |n| n.name.as_str());
    let title = src.name.clone().unwrap_or_else(|| "graph".into());
    let mut t = String::with_capacity(64 + names.len() * 40 + links.len() * 80);
    let exact = if s.diameter_exact { "" } else { "at most " };
    let _ = writeln!(
        t,
        "# {}: {} nodes, {} links, {exact}{} hops across.",
        comment(&title),
        s.nodes,
        s.links,
        s.diameter_hops
    );
    let mut origin = comment(&src.origin);
    if let Some(first) = origin.get(..1) {
        origin = format!(
            "{}{}",
            first.to_ascii_uppercase(),
            origin.get(1..).unwrap_or("")
        );
    }
    let _ = writeln!(t, "# {origin}.");
    let delay = src.delay_model.clone().unwrap_or_else(|| {
        format!(
            "the link's length, else the great-circle distance between its ends, at\n# 200,000 km/s in fibre (1 ms per 200 km), at least 0.01 ms; else {} ms",
            num(opts.delay_ms, 3)
        )
    });
    let bw = num(opts.bandwidth_mbps, 3);
    let bandwidth = if src.format == "generated" {
        format!("{bw} Mbit/s on every link (--bandwidth-mbps)")
    } else {
        format!("the link's speed, else {bw} Mbit/s")
    };
    let _ = writeln!(t, "# Link delay: {delay}.\n# Bandwidth: {bandwidth}.");
    for w in warnings {
        let _ = writeln!(t, "# warning: {}", comment(&w.to_string()));
    }
    t.push_str(
        "# The last step checks that every node reaches every other at the end of the run.\n\n",
    );
    let desc = format!(
        "{title}: {} nodes, {} links; {}",
        s.nodes, s.links, src.origin
    );
    let _ = writeln!(
        t,
        "[network]\nseed = 1\nduration_ms = {}\ndescription = {}\n",
        s.duration_ms,
        quote(&desc)
    );
    if s.infinity != DEFAULT_INFINITY || opts.protocol.is_some() {
        t.push_str("[routing]\n");
        if let Some(p) = opts.protocol {
            let _ = writeln!(t, "protocol = {}", quote(p));
        }
        if s.infinity != DEFAULT_INFINITY {
            let _ = writeln!(
                t,
                "# hop diameter {exact}{} + 2: the default (16) would leave far nodes unreachable\ninfinity = {}",
                s.diameter_hops, s.infinity
            );
        }
        t.push('\n');
    }
    // The original names ride along as comments where they changed.
    for n in names {
        let _ = write!(t, "[[node]]\nname = {}", quote(&n.name));
        if let Some(was) = &n.was {
            let _ = write!(t, "  # {}", comment(&format!("{was:?}")));
        }
        t.push_str("\n\n");
    }
    // Names are valid (no quoting needed); numbers go through one reused buffer.
    let mut buf = String::new();
    for l in links {
        t.push_str("[[link]]\na = \"");
        t.push_str(name(l.a));
        t.push_str("\"\nb = \"");
        t.push_str(name(l.b));
        t.push_str("\"\ndelay_ms = ");
        push_num(&mut t, &mut buf, l.delay_ms, 3);
        if let Some(km) = l.km {
            t.push_str("  # ");
            push_num(&mut t, &mut buf, km, 1);
            t.push_str(" km");
        }
        t.push_str("\nbandwidth_mbps = ");
        push_num(&mut t, &mut buf, l.mbps, 3);
        t.push_str("\n\n");
    }
    let _ = writeln!(
        t,
        "[[step]]\nat_ms = {}\naction = \"expect\"\ncheck = \"reachable\"\nfrom = \"*\"\nto = \"*\"",
        s.duration_ms
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, label: Option<&str>) -> Node {
        Node {
            id: id.into(),
            label: label.map(String::from),
            geo: None,
        }
    }

    #[test]
    fn names_are_valid_unique_and_keep_valid_labels() {
        let nodes = vec![
            node("0", Some("New York")),
            node("1", Some("New-York")),
            node("2", Some("New York")),
            node("3", None),
            node("4", Some("東京")),
            node("5", Some(&"x".repeat(40))),
            node("6", Some(&"x".repeat(40))),
            node("7", Some("ok")),
        ];
        let mut w = Vec::new();
        let named = name_nodes(&nodes, &mut w);
        assert_eq!(named[0].was.as_deref(), Some("New York"));
        assert_eq!(named[1].was, None);
        let names: Vec<String> = named.into_iter().map(|n| n.name).collect();
        assert_eq!(
            names,
            [
                "New-York-2",
                "New-York",
                "New-York-3",
                "n3",
                "n4",
                "x".repeat(32).as_str(),
                &format!("{}-2", "x".repeat(30)),
                "ok"
            ]
        );
        assert!(names.iter().all(|n| valid_name(n)));
        assert!(matches!(w[0], Warning::Renamed { count: 5, .. }), "{w:?}");
        assert_eq!(w[1], Warning::Unnamed { count: 1 });
    }

    #[test]
    fn sanitize_collapses_and_trims() {
        assert_eq!(sanitize("  São Paulo, BR "), "S-o-Paulo-BR");
        assert_eq!(sanitize("a/b"), "a-b");
        assert_eq!(sanitize("-a-"), "-a-");
        assert_eq!(sanitize("!!!"), "");
    }

    #[test]
    fn numbers_and_strings_are_toml() {
        assert_eq!(num(5.7308, 3), "5.731");
        assert_eq!(num(1000.0, 3), "1000");
        assert_eq!(num(0.01, 3), "0.01");
        assert_eq!(num(-0.0001, 3), "0");
        assert_eq!(quote("a\"b\\c\nd"), "\"a\\\"b\\\\c\\u000Ad\"");
    }
}
