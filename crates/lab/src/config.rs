//! The `anode node` config text of one lab (or exported) node.
//!
//! Contract: [`render`] writes a file `anode_node::config::parse` accepts for any input the
//! planner makes: `[node] address`, the topology's `[routing]` keys that differ from the
//! defaults (so the file states only what the topology set), the control socket and state
//! directories when given (else the node's defaults), and one `[[link]]` per topology link of
//! the node (name, peer, mtu, cost, and `impair` when the node itself emulates the link).
//! Strings are TOML-quoted, so any path is written correctly.

use std::path::Path;

use anode_core::RoutingConfig;
use anode_wire::NodeAddr;

use crate::error::PlanError;

/// One `[[link]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConf {
    /// Its name (the interface name, e.g. `eth1`).
    pub name: String,
    /// The neighbor's node address.
    pub peer: NodeAddr,
    /// The neighbor's name (a comment).
    pub peer_name: String,
    /// Largest ANEP packet.
    pub mtu: usize,
    /// Routing cost.
    pub cost: u16,
    /// `impair = { ... }` text, when the node emulates the link.
    pub impair: Option<String>,
}

/// Everything one node file says.
#[derive(Debug, Clone)]
pub struct NodeConf<'a> {
    /// Comment lines at the top (without `# `).
    pub header: Vec<String>,
    /// The node address.
    pub address: NodeAddr,
    /// The topology's routing settings.
    pub routing: &'a RoutingConfig,
    /// `[control] socket`; `None`: the node's default.
    pub socket: Option<&'a Path>,
    /// Where the node keeps its state (`[capsule] cache_dir` = DIR/code, `[modules]
    /// state_dir` = DIR/modules); `None`: the node's defaults.
    pub state_dir: Option<&'a Path>,
    /// The links.
    pub links: Vec<LinkConf>,
}

/// `s` as a TOML basic string.
pub fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// `key = value` lines for the routing settings that differ from the defaults, by key.
pub fn routing_lines(r: &RoutingConfig) -> Result<Vec<String>, PlanError> {
    let table = |r: &RoutingConfig| match toml::Value::try_from(r) {
        Ok(toml::Value::Table(t)) => Ok(t),
        Ok(_) => Err(PlanError::Routing("not a table".into())),
        Err(e) => Err(PlanError::Routing(e.to_string())),
    };
    let given = table(r)?;
    let default = table(&RoutingConfig::default())?;
    Ok(given
        .iter()
        .filter(|(k, v)| default.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k} = {v}"))
        .collect())
}

/// The config file text.
pub fn render(c: &NodeConf<'_>) -> Result<String, PlanError> {
    let mut s = String::new();
    for h in &c.header {
        s.push_str(&format!("# {h}\n"));
    }
    if !c.header.is_empty() {
        s.push('\n');
    }
    s.push_str(&format!(
        "[node]\naddress = {}\n",
        toml_str(&c.address.to_string())
    ));
    let routing = routing_lines(c.routing)?;
    if !routing.is_empty() {
        s.push_str("\n[routing]\n");
        for l in routing {
            s.push_str(&l);
            s.push('\n');
        }
    }
    if let Some(sock) = c.socket {
        s.push_str(&format!(
            "\n[control]\nsocket = {}\n",
            toml_str(&sock.display().to_string())
        ));
    }
    if let Some(dir) = c.state_dir {
        s.push_str(&format!(
            "\n[capsule]\ncache_dir = {}\n\n[modules]\nstate_dir = {}\n",
            toml_str(&dir.join("code").display().to_string()),
            toml_str(&dir.join("modules").display().to_string())
        ));
    }
    for l in &c.links {
        s.push_str(&format!(
            "\n[[link]]\nname = {}\npeer = {}   # {}\nmtu = {}\ncost = {}\n",
            toml_str(&l.name),
            toml_str(&l.peer.to_string()),
            l.peer_name,
            l.mtu,
            l.cost
        ));
        if let Some(i) = &l.impair {
            s.push_str(&format!("impair = {i}\n"));
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn routing_only_what_differs() {
        assert!(routing_lines(&RoutingConfig::default()).unwrap().is_empty());
        let r = RoutingConfig {
            hello_interval: Duration::from_millis(250),
            dead_interval: Duration::from_millis(800),
            ..RoutingConfig::default()
        };
        assert_eq!(
            routing_lines(&r).unwrap(),
            vec!["dead_interval_ms = 800", "hello_interval_ms = 250"]
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(toml_str("a"), "\"a\"");
        for s in ["a\"b\\c", "it's", "/tmp/x y/z.sock", "a'b\"c\n"] {
            let v: toml::Table = toml::from_str(&format!("k = {}", toml_str(s))).unwrap();
            assert_eq!(v["k"].as_str(), Some(s));
        }
    }
}
