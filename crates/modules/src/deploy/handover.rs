//! The deployment service's part of a node's handover to the process taking its place
//! (`anode upgrade`, `anode_core::handover`): the modules deployed here (with their packages
//! and the lifetime they had left) and the nonces of the requests it took (a request cannot
//! be replayed across the upgrade). Deployed modules are not in the module journal, so the
//! successor installs them from the packages handed over, checked as any package: the
//! SHA-256 the deploy request signed, then the publisher's signature against the node's
//! trusted keys. A module the successor already runs under that name (the operator's) wins.

use std::sync::Arc;
use std::time::Duration;

use anode_core::NodeContext;
use anode_core::handover::hex_bytes;
use sha2::{Digest, Sha256};

use super::{DeployEe, Deployed};
use crate::{Package, Prepared};

/// A deployed module, as handed over.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct DeployedRecord {
    name: String,
    version: String,
    #[serde(with = "hex_bytes")]
    package_sha256: Vec<u8>,
    by: String,
    ttl_s: u32,
    expires_in_ms: u64,
    #[serde(with = "hex_bytes")]
    package: Vec<u8>,
}

/// What the service hands over.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct State {
    deployed: Vec<DeployedRecord>,
    /// (nonce, the request's expiry in Unix ms).
    nonces: Vec<(String, u64)>,
}

impl DeployEe {
    /// See the module docs.
    pub(super) fn export(&self, now: std::time::Instant) -> serde_json::Value {
        let deployed = self
            .deployed
            .values()
            .filter_map(|d| {
                let package = self.cache.get(&d.package_sha256)?;
                Some(DeployedRecord {
                    name: d.name.clone(),
                    version: d.version.clone(),
                    package_sha256: d.package_sha256.to_vec(),
                    by: d.by.clone(),
                    ttl_s: d.ttl_s,
                    expires_in_ms: u64::try_from(
                        d.expires.saturating_duration_since(now).as_millis(),
                    )
                    .unwrap_or(u64::MAX),
                    package: package.as_ref().clone(),
                })
            })
            .collect();
        let mut nonces: Vec<(String, u64)> = self
            .nonces
            .iter()
            .map(|(n, exp)| (hex::encode(n), *exp))
            .collect();
        nonces.sort_unstable();
        serde_json::to_value(State { deployed, nonces }).unwrap_or_default()
    }

    /// See the module docs; what could not be restored is named in the error.
    pub(super) fn import(
        &mut self,
        ctx: &mut NodeContext<'_>,
        v: &serde_json::Value,
    ) -> Result<(), String> {
        let st: State = serde_json::from_value(v.clone())
            .map_err(|e| format!("the deployment service's state does not parse: {e}"))?;
        let now = ctx.now();
        let unix = self.clock.unix_ms(now);
        for (n, exp) in st.nonces {
            let mut nonce = [0u8; 16];
            if hex::decode_to_slice(&n, &mut nonce).is_ok()
                && exp > unix
                && self.nonces.len() < super::MAX_NONCES
            {
                self.nonces.insert(nonce, exp);
            }
        }
        let mut refused = Vec::new();
        for d in st.deployed {
            if let Err(e) = self.reinstall(ctx, d.clone()) {
                refused.push(format!("deployed module {}: {e}", d.name));
            }
        }
        if refused.is_empty() {
            Ok(())
        } else {
            Err(refused.join("; "))
        }
    }

    fn reinstall(&mut self, ctx: &mut NodeContext<'_>, d: DeployedRecord) -> Result<(), String> {
        let hash: [u8; 32] = Sha256::digest(&d.package).into();
        if d.package_sha256 != hash {
            return Err("its package does not have the SHA-256 it was deployed with".into());
        }
        if d.expires_in_ms == 0 || d.ttl_s == 0 || d.ttl_s > self.policy.max_ttl_s {
            return Err("its lifetime is over or outside this node's policy".into());
        }
        let pkg = Package::decode(&d.package).map_err(|e| e.to_string())?;
        if pkg.manifest.name != d.name || pkg.manifest.version.to_string() != d.version {
            return Err("its package is another module".into());
        }
        let host = Self::host(ctx).ok_or("this node hosts no modules")?;
        if host.state(&d.name).is_some() {
            return Err("a module of that name is installed here already".into());
        }
        let prepared = Prepared::new(host.runtime(), host.trust(), pkg, &toml::Table::new())
            .map_err(|e| e.to_string())?;
        host.install_prepared(prepared).map_err(|e| e.to_string())?;
        host.start(&d.name).map_err(|e| e.to_string())?;
        self.cache.put(hash, Arc::new(d.package));
        self.deployed.insert(
            d.name.clone(),
            Deployed {
                name: d.name,
                version: d.version,
                package_sha256: hash,
                by: d.by,
                expires: ctx.now() + Duration::from_millis(d.expires_in_ms.min(86_400_000)),
                ttl_s: d.ttl_s,
            },
        );
        Ok(())
    }
}
