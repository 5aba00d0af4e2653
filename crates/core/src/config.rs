//! Node and link configuration (the sans-IO part; drivers add sockets and files).

use anode_routing::RoutingConfig;
use anode_wire::NodeAddr;

/// Configuration of one node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// The node's address (its underlay IP and UDP port).
    pub address: NodeAddr,
    /// Resource bound given to packets this node originates when the caller does not say.
    #[serde(default = "default_rb")]
    pub default_rb: u16,
    /// Most packets waiting for the driver to send.
    #[serde(default = "default_queue")]
    pub max_tx_queue: usize,
    /// Most events waiting for the driver to collect.
    #[serde(default = "default_queue")]
    pub max_events: usize,
    /// Routing timers.
    #[serde(default)]
    pub routing: RoutingConfig,
}

fn default_rb() -> u16 {
    32
}

fn default_queue() -> usize {
    65536
}

impl NodeConfig {
    /// A configuration with defaults for `address`.
    pub fn new(address: NodeAddr) -> Self {
        NodeConfig {
            address,
            default_rb: default_rb(),
            max_tx_queue: default_queue(),
            max_events: default_queue(),
            routing: RoutingConfig::default(),
        }
    }

    /// Checks the values make sense; the message says what to change.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.address.is_unspecified() || self.address.port() == 0 {
            return Err(ConfigError(format!(
                "address '{}' is not a usable node address: give an IP and a port, e.g. 198.18.0.1:3322",
                self.address
            )));
        }
        if self.default_rb == 0 {
            return Err(ConfigError(
                "default_rb must be at least 1 (hops a packet may travel)".into(),
            ));
        }
        if self.max_tx_queue == 0 || self.max_events == 0 {
            return Err(ConfigError(
                "max_tx_queue and max_events must be at least 1".into(),
            ));
        }
        self.routing
            .validate()
            .map_err(|e| ConfigError(format!("routing: {e}")))
    }
}

/// A configuration value that does not make sense, with how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Configuration of one point-to-point link.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    /// A name for reports ("to-b", "eth0", ...).
    #[serde(default)]
    pub name: String,
    /// The node at the other end (for UDP links: where datagrams go).
    pub peer: NodeAddr,
    /// Largest ANEP packet the link carries.
    #[serde(default = "default_mtu")]
    pub mtu: usize,
    /// Routing cost of the link.
    #[serde(default = "default_cost")]
    pub cost: u16,
    /// Treat the peer as an up neighbor without hellos (a statically configured neighbor,
    /// e.g. a plain UDP host or a peer that does not run neighbor discovery). Hellos and
    /// routing updates are still sent to it.
    #[serde(default, rename = "static")]
    pub static_neighbor: bool,
}

fn default_mtu() -> usize {
    1472
}

fn default_cost() -> u16 {
    1
}

impl LinkConfig {
    /// A link to `peer` with default MTU and cost.
    pub fn new(peer: NodeAddr) -> Self {
        LinkConfig {
            name: String::new(),
            peer,
            mtu: default_mtu(),
            cost: default_cost(),
            static_neighbor: false,
        }
    }
}
