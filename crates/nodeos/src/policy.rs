//! Credentials and policies: what a principal's domain gets.
//!
//! Contract: a domain's resources come only from the policy configured for its principal
//! ([`PolicyStore`]); nothing the requesting EE or packet says can raise them. A child
//! domain's policy must not exceed its parent's in any dimension (checked at creation).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Who asks for a domain (an EE, a protocol's code group, an operator).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Principal(pub String);

/// What a domain is created with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The principal; its configured policy alone sets the domain's resources.
    pub principal: Principal,
}

impl Credentials {
    /// Credentials for the principal named `name`.
    pub fn new(name: &str) -> Self {
        Credentials {
            principal: Principal(name.to_string()),
        }
    }
}

/// Resources and rights of one domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// CPU weight for the data-path scheduler (deficit round robin quanta scale with it),
    /// relative to the domain's siblings: a parent's share bounds what its whole subtree gets
    /// (DRR in tiers), so a child's share is not compared with its parent's.
    pub cpu_share: u32,
    /// Memory bytes of all kinds (packet buffers, soft state, code).
    pub memory_bytes: u64,
    /// Soft-state bytes (within `memory_bytes`).
    pub soft_state_bytes: u64,
    /// Code bytes (within `memory_bytes`).
    pub code_bytes: u64,
    /// Bandwidth of each output or cut-through channel, bytes per second.
    pub channel_bandwidth: u64,
    /// Child domains it may create.
    pub max_children: u32,
    /// Channels it may hold open at once.
    pub max_channels: u32,
    /// Protocol specs it may open input channels on (exact spec strings, or "*" for any).
    pub channels: Vec<String>,
}

impl Default for Policy {
    /// A small policy: weight 1, 1 MiB, 64 KiB soft state, 256 KiB code, 1 MB/s, no children.
    fn default() -> Self {
        Policy {
            cpu_share: 1,
            memory_bytes: 1 << 20,
            soft_state_bytes: 64 << 10,
            code_bytes: 256 << 10,
            channel_bandwidth: 1_000_000,
            max_children: 0,
            max_channels: 4,
            channels: vec!["anep".to_string()],
        }
    }
}

impl Policy {
    /// The policy of the root domain: everything the node has.
    pub fn unlimited() -> Self {
        Policy {
            cpu_share: u32::MAX,
            memory_bytes: u64::MAX,
            soft_state_bytes: u64::MAX,
            code_bytes: u64::MAX,
            channel_bandwidth: u64::MAX,
            max_children: u32::MAX,
            max_channels: u32::MAX,
            channels: vec!["*".to_string()],
        }
    }

    /// Whether it may open an input channel on `spec` (its canonical text).
    pub fn allows_channel(&self, spec: &str) -> bool {
        self.channels.iter().any(|c| c == "*" || c == spec)
    }

    /// `Err(dimension)` if `self` exceeds `parent` in any quantity it is given from the
    /// parent's (every dimension but `cpu_share`, a weight among siblings).
    pub fn within(&self, parent: &Policy) -> Result<(), String> {
        let checks: [(&str, u64, u64); 6] = [
            ("memory_bytes", self.memory_bytes, parent.memory_bytes),
            (
                "soft_state_bytes",
                self.soft_state_bytes,
                parent.soft_state_bytes,
            ),
            ("code_bytes", self.code_bytes, parent.code_bytes),
            (
                "channel_bandwidth",
                self.channel_bandwidth,
                parent.channel_bandwidth,
            ),
            (
                "max_children",
                self.max_children.into(),
                parent.max_children.into(),
            ),
            (
                "max_channels",
                self.max_channels.into(),
                parent.max_channels.into(),
            ),
        ];
        for (name, mine, theirs) in checks {
            if mine > theirs {
                return Err(format!("{name} {mine} > parent's {theirs}"));
            }
        }
        if let Some(c) = self
            .channels
            .iter()
            .find(|c| !parent.allows_channel(c.as_str()))
        {
            return Err(format!("channel {c:?} not allowed to the parent"));
        }
        Ok(())
    }
}

/// The configured policies, by principal (e.g. the `[domains.<principal>]` tables of a node
/// configuration).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PolicyStore {
    map: BTreeMap<String, Policy>,
}

impl PolicyStore {
    /// An empty store: no principal gets anything.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the policy of `principal`.
    pub fn insert(&mut self, principal: &str, p: Policy) {
        self.map.insert(principal.to_string(), p);
    }

    /// The policy of `principal`.
    pub fn get(&self, principal: &Principal) -> Option<&Policy> {
        self.map.get(&principal.0)
    }

    /// Every principal and its policy, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Policy)> {
        self.map.iter()
    }

    /// Parses a TOML table of policies, e.g. `[proto-a]\ncpu_share = 2`.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_policies_parse_and_unknown_fields_are_refused() {
        let s = PolicyStore::from_toml(
            "[a]\ncpu_share = 3\nmemory_bytes = 4096\nchannels = [\"udp/anep\"]\n",
        )
        .unwrap();
        let p = s.get(&Principal("a".into())).unwrap();
        assert_eq!(p.cpu_share, 3);
        assert_eq!(p.memory_bytes, 4096);
        assert!(p.allows_channel("udp/anep"));
        assert!(!p.allows_channel("anep"));
        assert!(PolicyStore::from_toml("[a]\ncpu = 3\n").is_err());
        assert!(s.get(&Principal("b".into())).is_none());
    }

    #[test]
    fn child_within_parent() {
        let parent = Policy::default();
        let mut child = Policy::default();
        assert!(child.within(&parent).is_ok());
        child.memory_bytes += 1;
        assert!(child.within(&parent).unwrap_err().contains("memory_bytes"));
        let c2 = Policy {
            channels: vec!["if0/ip/udp/anep".into()],
            ..Policy::default()
        };
        assert!(c2.within(&parent).unwrap_err().contains("channel"));
        // A share is a weight among siblings, not something the parent hands out.
        let heavy = Policy {
            cpu_share: parent.cpu_share + 7,
            ..Policy::default()
        };
        assert!(heavy.within(&parent).is_ok());
    }
}
