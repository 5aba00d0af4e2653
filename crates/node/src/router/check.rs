//! `anode router --config FILE --check`: reads a router config without opening interfaces or
//! loading eBPF (no root needed) and checks what the router cannot fix at run time, the
//! peering rule among it.
//!
//! The peering rule: the router's filters divert ANEP over UDP addressed to one of the
//! router's own interface addresses at the node's port, so
//! - `[node] address` must be one of the interface addresses (else nothing reaches the node);
//! - a UDP `[[node.link]]` peer must be on a connected subnet of an interface or behind a
//!   static route (else the node's packets to it have no route), and not the node itself;
//! - an Ethernet `[[node.link]]` names a listed interface and a MAC;
//! - a node behind the router names, as its own `[[link]]` peer, the router's address on the
//!   interface they share, at the node's port; [`RouterCheck::peering`] lists those addresses.
//!
//! Every problem is collected (not only the first), each naming the key and the fix.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use anode_ip::IpCidr;
use anode_ip::wire::{Ipv4Cidr, Ipv6Cidr};
use serde::Serialize;

use super::FileConfig;

/// What a router config sets up, as `--check` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct RouterCheck {
    /// Interfaces and their addresses (CIDR).
    pub interfaces: Vec<(String, Vec<String>)>,
    /// Static routes: prefix via next hop (metric).
    pub routes: Vec<String>,
    /// The local node's address, if there is a `[node]`.
    pub node: Option<String>,
    /// The node's links (peer and carrier: "udp" or "ether IF MAC").
    pub node_links: Vec<(String, String)>,
    /// Per interface: the address a node behind the router on that interface peers with.
    pub peering: Vec<(String, String)>,
    /// Service modules and IP filters configured.
    pub modules: usize,
    /// IP filters configured.
    pub ip_filters: usize,
    /// What is wrong (empty when the config is good).
    pub problems: Vec<String>,
}

/// Checks the router config at `path`. `Err` only when the file cannot be read or parsed.
pub fn check(path: &Path) -> Result<RouterCheck, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let cfg: FileConfig = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut problems = Vec::new();
    if cfg.interfaces.is_empty() {
        problems.push("no [[interface]]: name at least one interface to route between".into());
    }
    let mut connected: Vec<(String, IpCidr)> = Vec::new();
    let mut interfaces = Vec::new();
    for i in &cfg.interfaces {
        let mut addrs = Vec::new();
        for s in i.ipv4.iter().chain(&i.ipv6) {
            let parsed = if s.contains(':') {
                s.parse::<Ipv6Cidr>()
                    .map(IpCidr::V6)
                    .map_err(|e| e.to_string())
            } else {
                s.parse::<Ipv4Cidr>()
                    .map(IpCidr::V4)
                    .map_err(|e| e.to_string())
            };
            match parsed {
                Ok(c) => {
                    connected.push((i.name.clone(), c));
                    addrs.push(c.to_string());
                }
                Err(e) => problems.push(format!(
                    "interface {}: address '{s}': {e} (write ADDRESS/PREFIX, e.g. 198.18.1.2/24)",
                    i.name
                )),
            }
        }
        if let Some(m) = &i.mac
            && let Err(e) = super::parse_mac(m)
        {
            problems.push(format!("interface {}: mac '{m}': {e}", i.name));
        }
        interfaces.push((i.name.clone(), addrs));
    }
    let mut routes = Vec::new();
    let mut static_prefixes = Vec::new();
    for r in &cfg.routes {
        match r.prefix.parse::<IpCidr>() {
            Ok(p) => {
                if !connected.iter().any(|(_, c)| c.network().contains(r.via)) {
                    problems.push(format!(
                        "route {}: next hop {} is on no interface's subnet; give a neighbor on a connected subnet",
                        r.prefix, r.via
                    ));
                }
                static_prefixes.push(p);
                routes.push(format!("{} via {} (metric {})", r.prefix, r.via, r.metric));
            }
            Err(e) => problems.push(format!(
                "route {}: {e} (write PREFIX/LEN, e.g. 198.19.0.0/16)",
                r.prefix
            )),
        }
    }
    let mut out = RouterCheck {
        interfaces,
        routes,
        node: None,
        node_links: Vec::new(),
        peering: Vec::new(),
        modules: cfg.module_list.len(),
        ip_filters: cfg.ip_filters.len(),
        problems,
    };
    if let Some(n) = &cfg.node {
        check_node(n, &connected, &static_prefixes, &cfg, &mut out);
    }
    Ok(out)
}

/// The `[node]` half of [`check`]: the node's address and links against the interfaces.
fn check_node(
    n: &super::NodeSection,
    connected: &[(String, IpCidr)],
    static_prefixes: &[IpCidr],
    cfg: &FileConfig,
    out: &mut RouterCheck,
) {
    let (addr, links) = n.address_and_links();
    let port = addr.port();
    out.node = Some(addr.to_string());
    let own = |ip: IpAddr| connected.iter().any(|(_, c)| cidr_addr(c) == ip);
    if !own(addr.ip()) {
        out.problems.push(format!(
            "[node] address {addr}: not one of the router's interface addresses ({}); the router diverts to its node only the UDP packets addressed to its own addresses: give one of them with port {port}",
            connected
                .iter()
                .map(|(_, c)| cidr_addr(c).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for (name, c) in connected {
        out.peering.push((
            name.clone(),
            SocketAddr::new(cidr_addr(c), port).to_string(),
        ));
    }
    for (peer, iface, mac) in links {
        let carrier = match (iface, mac) {
            (Some(i), Some(m)) => {
                if !cfg.interfaces.iter().any(|x| &x.name == i) {
                    out.problems.push(format!(
                        "[[node.link]] {peer}: interface '{i}' is not an [[interface]] of this router"
                    ));
                }
                if let Err(e) = super::parse_mac(m) {
                    out.problems
                        .push(format!("[[node.link]] {peer}: mac '{m}': {e}"));
                }
                format!("ether {i} {m}")
            }
            (None, None) => {
                let ip = peer.ip();
                if own(ip) && peer.port() == port {
                    out.problems.push(format!(
                        "[[node.link]] {peer}: that is the router's node itself; name the node behind the router"
                    ));
                } else if !connected.iter().any(|(_, c)| c.network().contains(ip))
                    && !static_prefixes.iter().any(|p| p.contains(ip))
                {
                    out.problems.push(format!(
                        "[[node.link]] {peer}: on no interface's subnet and behind no static route, so the router has no way to it; give a peer on a connected subnet"
                    ));
                }
                "udp".to_string()
            }
            _ => {
                out.problems.push(format!(
                    "[[node.link]] {peer}: give both interface and mac (Ethernet) or neither (UDP)"
                ));
                "?".to_string()
            }
        };
        out.node_links.push((peer.to_string(), carrier));
    }
}

fn cidr_addr(c: &IpCidr) -> IpAddr {
    match c {
        IpCidr::V4(c) => IpAddr::V4(c.addr),
        IpCidr::V6(c) => IpAddr::V6(c.addr),
    }
}

impl RouterCheck {
    /// The report as text (what `--check` prints).
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (name, addrs) in &self.interfaces {
            s += &format!("interface {name}: {}\n", addrs.join(", "));
        }
        for r in &self.routes {
            s += &format!("route {r}\n");
        }
        if let Some(n) = &self.node {
            s += &format!("node {n}\n");
            for (peer, carrier) in &self.node_links {
                s += &format!("  link to {peer} ({carrier})\n");
            }
            for (iface, addr) in &self.peering {
                s += &format!("  a node on {iface} names {addr} as its [[link]] peer\n");
            }
        }
        if self.modules + self.ip_filters > 0 {
            s += &format!(
                "{} service module(s), {} IP filter(s) (checked when the router starts)\n",
                self.modules, self.ip_filters
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!(
            "anode-router-check-{}-{}.toml",
            std::process::id(),
            text.len()
        ));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn the_example_passes_and_names_the_peering_addresses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/router.toml");
        let c = check(Path::new(path)).unwrap();
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert!(
            c.peering
                .contains(&("r1".to_string(), "198.18.2.1:3322".to_string())),
            "{:?}",
            c.peering
        );
        assert!(c.text().contains("a node on r0 names 198.18.1.2:3322"));
    }

    #[test]
    fn peering_mistakes_are_all_named() {
        let p = write(
            "[[interface]]\nname = \"r0\"\nipv4 = [\"198.18.1.2/24\", \"bad\"]\n\
             [[route]]\nprefix = \"198.19.0.0/16\"\nvia = \"198.20.0.1\"\n\
             [node]\naddress = \"198.18.9.9:3322\"\n\
             [[node.link]]\npeer = \"198.21.0.1:3322\"\n\
             [[node.link]]\npeer = \"198.18.1.1:3322\"\ninterface = \"r7\"\nmac = \"02:00:00:00:00:01\"\n",
        );
        let c = check(&p).unwrap();
        let all = c.problems.join("\n");
        for want in [
            "address 'bad'",
            "next hop 198.20.0.1",
            "[node] address 198.18.9.9:3322: not one of",
            "198.21.0.1:3322: on no interface's subnet",
            "interface 'r7'",
        ] {
            assert!(all.contains(want), "{want} missing in:\n{all}");
        }
        let _ = std::fs::remove_file(p);
    }
}
