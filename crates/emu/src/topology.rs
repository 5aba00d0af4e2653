//! The topology file: nodes, links and scenario steps in TOML, parsed and validated into a
//! [`Topology`].
//!
//! ```toml
//! [network]
//! seed = 42              # seeds every random draw (link loss); same seed, same run
//! duration_ms = 20000    # virtual time the run covers
//! ipv6 = false           # default addresses 2001:2::N instead of 198.18.0.N
//! description = "..."    # optional, shown in the report
//!
//! [routing]              # optional: anode_routing::RoutingConfig, every key optional
//! hello_interval_ms = 200
//! dead_interval_ms = 700
//!
//! [[node]]
//! name = "a"
//! address = "198.18.0.1:3322"   # optional
//!
//! [[link]]
//! a = "a"
//! b = "b"
//! delay_ms = 2.5         # propagation delay, default 1
//! bandwidth_mbps = 100   # default 100; 0 = unlimited (no serialization delay, no queue)
//! loss = 0.01            # Bernoulli loss per packet, 0..=1, default 0
//! mtu = 1472             # largest packet, default 1472
//! queue_bytes = 65536    # transmit queue per direction, default 65536
//! cost = 1               # routing cost, default 1
//!
//! [[step]]
//! at_ms = 3000
//! action = "send"        # see scenario.rs for the actions and their keys
//! from = "a"
//! to = "*"
//! ```
//!
//! Contract: [`Topology::parse`] either returns a topology whose every name, index and value
//! is valid (node indices in links and steps are in range, no self or duplicate links, loss in
//! 0..=1, steps within the run), or an [`EmuError::Invalid`] naming the file, line, column and
//! the fix. It never panics on any input.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;
use std::time::Duration;

use anode_core::RoutingConfig;
use anode_wire::{DEFAULT_PORT, NodeAddr};
use serde::Deserialize;
use toml::Spanned;

use crate::error::{EmuError, SpanError};
use crate::scenario::{Registry, Step, StepArgs};

/// Default link propagation delay.
pub const DEFAULT_DELAY_MS: f64 = 1.0;
/// Default link bandwidth.
pub const DEFAULT_BANDWIDTH_MBPS: f64 = 100.0;
/// Default link MTU (the node core's default).
pub const DEFAULT_MTU: usize = 1472;
/// Default transmit queue per link direction.
pub const DEFAULT_QUEUE_BYTES: u64 = 65536;

/// A node of the topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Its name in the file and in reports.
    pub name: String,
    /// Its address (given or default).
    pub address: NodeAddr,
}

/// A link of the topology (both directions have the same parameters).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    /// Index of one end in [`Topology::nodes`].
    pub a: usize,
    /// Index of the other end.
    pub b: usize,
    /// Propagation delay.
    pub delay: Duration,
    /// Bits per second; `None` means unlimited (no serialization delay, no queue).
    pub bandwidth_bps: Option<u64>,
    /// Loss probability per packet, 0..=1.
    pub loss: f64,
    /// Largest packet carried, in bytes.
    pub mtu: usize,
    /// Transmit queue per direction, in bytes (includes the packet being serialized).
    pub queue_bytes: u64,
    /// Routing cost.
    pub cost: u16,
}

/// A parsed, validated topology file.
#[derive(Debug)]
pub struct Topology {
    /// The file name as given (used in messages and the report).
    pub file: String,
    /// Optional description.
    pub description: Option<String>,
    /// Seed of every random draw.
    pub seed: u64,
    /// How long the run lasts.
    pub duration: Duration,
    /// Whether default addresses are IPv6.
    pub ipv6: bool,
    /// Routing timers of every node.
    pub routing: RoutingConfig,
    /// The nodes, in file order.
    pub nodes: Vec<NodeSpec>,
    /// The links, in file order.
    pub links: Vec<LinkSpec>,
    /// The scenario steps, sorted by time (file order within the same time).
    pub steps: Vec<Step>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    network: Spanned<RawNetwork>,
    #[serde(default)]
    routing: Option<Spanned<RoutingConfig>>,
    #[serde(default)]
    node: Vec<Spanned<RawNode>>,
    #[serde(default)]
    link: Vec<Spanned<RawLink>>,
    #[serde(default)]
    step: Vec<Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    #[serde(default)]
    seed: u64,
    duration_ms: Spanned<u64>,
    #[serde(default)]
    ipv6: bool,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Spanned<String>,
    #[serde(default)]
    address: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    a: Spanned<String>,
    b: Spanned<String>,
    #[serde(default)]
    delay_ms: Option<Spanned<f64>>,
    #[serde(default)]
    bandwidth_mbps: Option<Spanned<f64>>,
    #[serde(default)]
    loss: Option<Spanned<f64>>,
    #[serde(default)]
    mtu: Option<Spanned<u64>>,
    #[serde(default)]
    queue_bytes: Option<Spanned<u64>>,
    #[serde(default)]
    cost: Option<Spanned<u16>>,
}

impl Topology {
    /// Reads and parses a topology file with the built-in step actions.
    pub fn load(path: &std::path::Path) -> Result<Topology, EmuError> {
        Self::load_with(path, &Registry::builtin())
    }

    /// Reads and parses a topology file with the step actions of `registry`.
    pub fn load_with(path: &std::path::Path, registry: &Registry) -> Result<Topology, EmuError> {
        let file = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|source| EmuError::Read {
            file: file.clone(),
            source,
        })?;
        Self::parse_with(&src, &file, registry)
    }

    /// Parses topology text with the built-in step actions; `file` names it in messages.
    pub fn parse(src: &str, file: &str) -> Result<Topology, EmuError> {
        Self::parse_with(src, file, &Registry::builtin())
    }

    /// Parses topology text with the step actions of `registry`.
    pub fn parse_with(src: &str, file: &str, registry: &Registry) -> Result<Topology, EmuError> {
        parse_inner(src, file, registry).map_err(|e| e.in_file(file, src))
    }

    /// The node index of `name`.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// The link between nodes `x` and `y` (either order).
    pub fn link_between(&self, x: usize, y: usize) -> Option<usize> {
        self.links
            .iter()
            .position(|l| (l.a == x && l.b == y) || (l.a == y && l.b == x))
    }

    /// "a-b" for link `i`.
    pub fn link_name(&self, i: usize) -> String {
        match self.links.get(i) {
            Some(l) => format!("{}-{}", self.node_name(l.a), self.node_name(l.b)),
            None => format!("link{i}"),
        }
    }

    /// The name of node `i`.
    pub fn node_name(&self, i: usize) -> &str {
        self.nodes.get(i).map_or("?", |n| n.name.as_str())
    }
}

fn parse_inner(src: &str, file: &str, registry: &Registry) -> Result<Topology, SpanError> {
    let raw: RawFile = toml::from_str(src).map_err(|e| toml_error(&e, file))?;
    let net = raw.network.get_ref();
    if *net.duration_ms.get_ref() == 0 {
        return Err(SpanError::new(
            net.duration_ms.span(),
            "duration_ms is 0: the run would cover no time",
            "give the virtual time the run covers, e.g. duration_ms = 20000",
        ));
    }
    let routing = match &raw.routing {
        Some(r) => {
            let cfg = *r.get_ref();
            cfg.validate()
                .map_err(|m| SpanError::new(r.span(), format!("[routing]: {m}"), m.clone()))?;
            cfg
        }
        None => RoutingConfig::default(),
    };
    let nodes = parse_nodes(&raw, net.ipv6)?;
    let links = parse_links(&raw, &nodes)?;
    let duration = Duration::from_millis(*net.duration_ms.get_ref());
    let mut steps = Vec::with_capacity(raw.step.len());
    for (i, s) in raw.step.iter().enumerate() {
        let mut args = StepArgs::new(i, s.span(), s.get_ref(), &nodes, &links);
        let step = registry.parse(&mut args)?;
        if step.at > duration {
            return Err(SpanError::new(
                args.span_of("at_ms"),
                format!(
                    "step at {} ms is after the end of the run (duration_ms = {})",
                    step.at.as_millis(),
                    duration.as_millis()
                ),
                "raise [network] duration_ms or move the step earlier",
            ));
        }
        steps.push(step);
    }
    // Stable: same time keeps file order.
    steps.sort_by_key(|s| s.at);
    Ok(Topology {
        file: file.to_string(),
        description: net.description.clone(),
        seed: net.seed,
        duration,
        ipv6: net.ipv6,
        routing,
        nodes,
        links,
        steps,
    })
}

/// The default address of the node at `index` (0-based).
pub fn default_address(index: usize, ipv6: bool) -> NodeAddr {
    let n = index + 1;
    if ipv6 {
        let ip = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, (n >> 16) as u16, n as u16);
        NodeAddr::new(IpAddr::V6(ip), DEFAULT_PORT)
    } else {
        // 198.18.0.0/15 (benchmarking range); the node limit keeps this within 198.18.0.0/16.
        let hi = (n / 254) as u8;
        let lo = (n % 254) as u8;
        let (c, d) = if lo == 0 {
            (hi.saturating_sub(1), 254)
        } else {
            (hi, lo)
        };
        NodeAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, c, d)), DEFAULT_PORT)
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

fn parse_nodes(raw: &RawFile, ipv6: bool) -> Result<Vec<NodeSpec>, SpanError> {
    if raw.node.len() < 2 {
        return Err(SpanError::new(
            raw.network.span(),
            format!(
                "the topology has {} node(s); an emulated network needs at least 2",
                raw.node.len()
            ),
            "add [[node]] tables, each with a name, e.g. [[node]] name = \"a\"",
        ));
    }
    if raw.node.len() > 60_000 {
        return Err(SpanError::new(
            raw.network.span(),
            format!(
                "{} nodes is more than the emulator supports",
                raw.node.len()
            ),
            "use at most 60000 nodes",
        ));
    }
    let mut nodes: Vec<NodeSpec> = Vec::with_capacity(raw.node.len());
    for (i, n) in raw.node.iter().enumerate() {
        let n = n.get_ref();
        let name = n.name.get_ref();
        if !valid_name(name) {
            return Err(SpanError::new(
                n.name.span(),
                format!("node name '{name}' is not usable"),
                "use 1-32 letters, digits, '-', '_' or '.', e.g. name = \"a\"",
            ));
        }
        if nodes.iter().any(|m| &m.name == name) {
            return Err(SpanError::new(
                n.name.span(),
                format!("node name '{name}' is used twice"),
                "give every [[node]] a different name",
            ));
        }
        let address = match &n.address {
            None => default_address(i, ipv6),
            Some(a) => {
                let addr: NodeAddr = a.get_ref().parse().map_err(|_| {
                    SpanError::new(
                        a.span(),
                        format!("'{}' is not a node address", a.get_ref()),
                        "write IP:PORT, e.g. \"198.18.0.1:3322\" or \"[2001:2::1]:3322\", or leave address out for a default",
                    )
                })?;
                if addr.is_unspecified() || addr.port() == 0 {
                    return Err(SpanError::new(
                        a.span(),
                        format!("'{}' is not a usable node address", a.get_ref()),
                        "give an IP and a non-zero port, e.g. \"198.18.0.1:3322\"",
                    ));
                }
                addr
            }
        };
        if let Some(m) = nodes.iter().find(|m| m.address == address) {
            let span = n.address.as_ref().map_or(n.name.span(), |a| a.span());
            return Err(SpanError::new(
                span,
                format!(
                    "node '{name}' has the same address as node '{}' ({address})",
                    m.name
                ),
                "give every node a different address (or leave address out for a default)",
            ));
        }
        nodes.push(NodeSpec {
            name: name.clone(),
            address,
        });
    }
    Ok(nodes)
}

/// Resolves a node name; the error lists the known names.
pub(crate) fn resolve_node(
    nodes: &[NodeSpec],
    name: &str,
    span: Range<usize>,
) -> Result<usize, SpanError> {
    nodes.iter().position(|n| n.name == name).ok_or_else(|| {
        let known: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        SpanError::new(
            span,
            format!("there is no node named '{name}'"),
            format!(
                "use one of the [[node]] names: {} (or add a [[node]] named '{name}')",
                known.join(", ")
            ),
        )
    })
}

fn parse_links(raw: &RawFile, nodes: &[NodeSpec]) -> Result<Vec<LinkSpec>, SpanError> {
    let mut links: Vec<LinkSpec> = Vec::with_capacity(raw.link.len());
    for l in &raw.link {
        let span = l.span();
        let l = l.get_ref();
        let a = resolve_node(nodes, l.a.get_ref(), l.a.span())?;
        let b = resolve_node(nodes, l.b.get_ref(), l.b.span())?;
        if a == b {
            return Err(SpanError::new(
                l.b.span(),
                format!("link from '{}' to itself", l.a.get_ref()),
                "a link joins two different nodes: change a or b",
            ));
        }
        if links
            .iter()
            .any(|x| (x.a == a && x.b == b) || (x.a == b && x.b == a))
        {
            return Err(SpanError::new(
                span,
                format!(
                    "a second link between '{}' and '{}'",
                    l.a.get_ref(),
                    l.b.get_ref()
                ),
                "keep one [[link]] per pair of nodes (set its bandwidth instead of adding links)",
            ));
        }
        let delay_ms = match &l.delay_ms {
            Some(d) => {
                let v = *d.get_ref();
                if !(0.0..=3_600_000.0).contains(&v) {
                    return Err(SpanError::new(
                        d.span(),
                        format!("delay_ms = {v} is out of range"),
                        "give a delay between 0 and 3600000 ms, e.g. delay_ms = 2.5",
                    ));
                }
                v
            }
            None => DEFAULT_DELAY_MS,
        };
        let bandwidth_bps = match &l.bandwidth_mbps {
            Some(bw) => {
                let v = *bw.get_ref();
                if !(0.0..=1_000_000.0).contains(&v) {
                    return Err(SpanError::new(
                        bw.span(),
                        format!("bandwidth_mbps = {v} is out of range"),
                        "give a bandwidth between 0.001 and 1000000 Mbit/s, or 0 for unlimited",
                    ));
                }
                let bps = (v * 1e6).round() as u64;
                if v > 0.0 && bps < 1000 {
                    return Err(SpanError::new(
                        bw.span(),
                        format!("bandwidth_mbps = {v} is below 1 kbit/s"),
                        "give at least 0.001 Mbit/s, or 0 for unlimited",
                    ));
                }
                (bps > 0).then_some(bps)
            }
            None => Some((DEFAULT_BANDWIDTH_MBPS * 1e6) as u64),
        };
        let loss = match &l.loss {
            Some(x) => {
                let v = *x.get_ref();
                if !(0.0..=1.0).contains(&v) {
                    return Err(SpanError::new(
                        x.span(),
                        format!("loss = {v} is not a probability"),
                        "give loss between 0 and 1 (e.g. loss = 0.01 for 1%)",
                    ));
                }
                v
            }
            None => 0.0,
        };
        let mtu = match &l.mtu {
            Some(m) => {
                let v = *m.get_ref();
                if !(128..=65535).contains(&v) {
                    return Err(SpanError::new(
                        m.span(),
                        format!("mtu = {v} is out of range"),
                        "give an MTU between 128 and 65535 bytes (anode headers alone take 80)",
                    ));
                }
                v as usize
            }
            None => DEFAULT_MTU,
        };
        let queue_bytes = match &l.queue_bytes {
            Some(q) => {
                let v = *q.get_ref();
                if (v as usize) < mtu {
                    return Err(SpanError::new(
                        q.span(),
                        format!(
                            "queue_bytes = {v} cannot hold one packet of the link's MTU ({mtu})"
                        ),
                        format!("give queue_bytes of at least {mtu}"),
                    ));
                }
                v
            }
            None => DEFAULT_QUEUE_BYTES.max(mtu as u64),
        };
        let cost = match &l.cost {
            Some(c) if *c.get_ref() == 0 => {
                return Err(SpanError::new(
                    c.span(),
                    "cost = 0: a link must cost at least 1",
                    "give cost = 1 or more",
                ));
            }
            Some(c) => *c.get_ref(),
            None => 1,
        };
        links.push(LinkSpec {
            a,
            b,
            delay: Duration::from_nanos((delay_ms * 1e6).round() as u64),
            bandwidth_bps,
            loss,
            mtu,
            queue_bytes,
            cost,
        });
    }
    Ok(links)
}

/// Maps a toml error to a span and a fix.
fn toml_error(e: &toml::de::Error, file: &str) -> SpanError {
    let msg = e.message().trim().to_string();
    let span = e.span().unwrap_or(0..0);
    let fix = if msg.contains("unknown field") {
        "remove or rename this key; the keys this table accepts are listed above".to_string()
    } else if msg.contains("missing field") {
        let field = msg.split('`').nth(1).unwrap_or("it");
        match field {
            "network" => "add a [network] table with at least duration_ms, e.g.\n       [network]\n       seed = 1\n       duration_ms = 20000".to_string(),
            f => format!("add the key `{f}` to this table"),
        }
    } else if msg.contains("invalid type") || msg.contains("invalid value") {
        "give a value of the type named above (numbers unquoted, names and addresses in \"quotes\")"
            .to_string()
    } else {
        format!("correct the TOML syntax here (see https://toml.io); {file} must be a TOML file")
    };
    SpanError::new(span, msg, fix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_addresses_are_distinct() {
        let v: Vec<NodeAddr> = (0..600).map(|i| default_address(i, false)).collect();
        let mut s = v.clone();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), v.len());
        assert_eq!(default_address(0, false).to_string(), "198.18.0.1:3322");
        assert_eq!(default_address(253, false).to_string(), "198.18.0.254:3322");
        assert_eq!(default_address(254, false).to_string(), "198.18.1.1:3322");
        assert_eq!(default_address(1, true).to_string(), "[2001:2::2]:3322");
    }
}
