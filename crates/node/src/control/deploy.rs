//! The deployment ops: `module_stage` (keep a package at this node so the first hop of a
//! deployment can fetch it) and `module_deployments` (what is deployed here, and the
//! service's counters), against the node's [`anode_modules::deploy::DeployEe`].
//!
//! The deploy request itself is a packet the client builds and signs (`anode module
//! deploy`) and injects with `inject`; its per-hop results come back as deliveries of Type
//! ID `TYPE_DEPLOY` to the port the client bound with `bind_app`.

use std::collections::BTreeMap;

use anode_core::Node;
use anode_ctl::{DeployedEntry, ErrorCode, Payload, Response};
use anode_modules::deploy::DeployEe;
use anode_wire::anep::TYPE_DEPLOY;

use super::call;
use super::handlers::Failure;
use super::state::Shared;

fn no_service() -> Failure {
    (
        ErrorCode::NoModule,
        "this node runs no deployment service: it comes with service modules (list the \
         publisher keys to trust in [modules] trusted_keys and restart the node)"
            .into(),
    )
}

fn service(n: &mut Node) -> Option<&mut DeployEe> {
    n.ee_mut(TYPE_DEPLOY)?
        .as_any_mut()
        .downcast_mut::<DeployEe>()
}

/// The names of the modules deployed here along a path (for `module_list`'s origin).
pub(super) fn deployed_names(shared: &Shared) -> Vec<String> {
    call(&*shared.driver, |n, _| {
        service(n)
            .map(|d| d.deployed().map(|x| x.name.clone()).collect())
            .unwrap_or_default()
    })
    .unwrap_or_default()
}

/// `module_stage`.
pub(super) fn stage(shared: &Shared, package: Payload) -> Result<Response, Failure> {
    let bytes = package.as_bytes().to_vec();
    let len = bytes.len() as u64;
    let r = call(&*shared.driver, move |n, _| {
        service(n).map(|d| d.stage(bytes))
    })?;
    match r {
        None => Err(no_service()),
        Some(Err(e)) => Err((ErrorCode::ModuleRefused, e)),
        Some(Ok(hash)) => Ok(Response::ModuleStaged {
            sha256: hex::encode(hash),
            bytes: len,
        }),
    }
}

/// `module_deployments`.
pub(super) fn deployments(shared: &Shared) -> Result<Response, Failure> {
    let r = call(&*shared.driver, move |n, now| {
        let d = service(n)?;
        let deployed: Vec<DeployedEntry> = d
            .deployed()
            .map(|x| DeployedEntry {
                name: x.name.clone(),
                version: x.version.clone(),
                package_sha256: hex::encode(x.package_sha256),
                by: x.by.clone(),
                ttl_s: x.ttl_s,
                expires_in_ms: x.expires.saturating_duration_since(now).as_millis() as u64,
            })
            .collect();
        let s = d.stats();
        let mut c = BTreeMap::new();
        c.insert("requests".to_string(), s.requests);
        for (k, v) in &s.outcomes {
            c.insert(format!("outcome/{k}"), *v);
        }
        for (k, v) in &s.refused {
            c.insert(format!("refused/{k}"), *v);
        }
        for (k, v) in [
            ("expired", s.expired),
            ("fetched_bytes", s.fetched_bytes),
            ("served_bytes", s.served_bytes),
            ("repo_bytes", s.repo_bytes),
            ("repo_failures", s.repo_failures),
            ("serve_refused", s.serve_refused),
            ("malformed", s.malformed),
            ("unanswered", s.unanswered),
        ] {
            c.insert(k.to_string(), v);
        }
        Some((deployed, c))
    })?;
    let (deployed, counters) = r.ok_or_else(no_service)?;
    Ok(Response::Deployments { deployed, counters })
}
