//! The node config file as written, with source spans, before any semantic check.
//!
//! Every table denies unknown keys, so a typo is an error that names the key and its line.

use anode_core::RoutingConfig;
use anode_wire::NodeAddr;
use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub node: RawNode,
    #[serde(default)]
    pub routing: RoutingConfig,
    #[serde(default, rename = "link")]
    pub links: Vec<RawLink>,
    #[serde(default, rename = "route")]
    pub routes: Vec<RawRoute>,
    #[serde(default)]
    pub control: RawControl,
    #[serde(default)]
    pub metrics: RawMetrics,
    #[serde(default)]
    pub capsule: RawCapsule,
    #[serde(default)]
    pub modules: super::modules::RawModules,
    #[serde(default, rename = "module")]
    pub module_list: Vec<super::modules::RawModule>,
    #[serde(default)]
    pub nodeos: super::nodeos::RawNodeOs,
    #[serde(default)]
    pub plan: super::plan::RawPlan,
    #[serde(default)]
    pub dataplane: RawDataplane,
    #[serde(default)]
    pub remote: super::remote::RawRemote,
    #[serde(default)]
    pub deploy: super::deploy::RawDeploy,
}

/// `[dataplane]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDataplane {
    pub mode: Option<Spanned<String>>,
    pub udp_offload: Option<bool>,
    pub busy_poll_us: Option<Spanned<u64>>,
}

/// `[node]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNode {
    pub address: Spanned<NodeAddr>,
    pub bind: Option<Spanned<String>>,
    pub default_rb: Option<u16>,
    pub max_tx_queue: Option<usize>,
    pub max_events: Option<usize>,
}

/// One `[[link]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLink {
    pub peer: Spanned<NodeAddr>,
    pub name: Option<Spanned<String>>,
    pub mtu: Option<Spanned<usize>>,
    pub cost: Option<Spanned<u16>>,
    #[serde(default, rename = "static")]
    pub static_neighbor: bool,
    pub impair: Option<Spanned<super::impair::RawImpair>>,
}

/// One `[[route]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub dest: Spanned<NodeAddr>,
    pub via: Spanned<NodeAddr>,
    pub metric: Option<Spanned<u16>>,
}

/// `[control]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawControl {
    pub socket: Option<Spanned<String>>,
    pub max_connections: Option<Spanned<usize>>,
    pub idle_timeout_s: Option<Spanned<u64>>,
}

/// `[metrics]`: Prometheus metrics of the NodeOS domains, off unless `listen` is set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    pub listen: Option<Spanned<String>>,
}

/// `[capsule]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCapsule {
    pub cache_dir: Option<Spanned<String>>,
    pub cache_max_bytes: Option<Spanned<u64>>,
    pub max_code_bytes: Option<Spanned<u32>>,
    pub file_quota_bytes: Option<Spanned<u64>>,
    pub file_quota_count: Option<Spanned<u64>>,
    pub file_max_bytes: Option<Spanned<u64>>,
    pub workers: Option<Spanned<u64>>,
}
