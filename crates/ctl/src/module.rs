//! Types and client calls of the service-module ops: installing, listing, starting, stopping,
//! upgrading and removing signed modules (`anode-modules`) on a running node.
//!
//! Contract: these are additive to protocol version 1. A package travels as the bytes of its
//! `.amod` file ([`crate::Payload`], hex); the node, not the client, verifies its signature
//! against the publisher keys it trusts, so a client cannot talk a node into running code.
//! Configuration values are JSON integers or booleans, checked against the module's schema
//! by the node.
//!
//! ```text
//! > {"id":2,"op":"module_install","package":"<the .amod bytes, hex>","config":{"limit":5}}
//! < {"type":"reply","id":2,"result":{"kind":"module","module":{"name":"ratelimit","state":"active",...}}}
//! > {"id":3,"op":"module_list"}
//! < {"type":"reply","id":3,"result":{"kind":"modules","modules":[...]}}
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Client, ClientError, Payload, Request, Response};

/// One configuration value of a module (its schema has int and bool fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ModuleConfigValue {
    /// A boolean field.
    Bool(bool),
    /// An integer field.
    Int(i64),
}

/// Configuration values by key.
pub type ModuleConfig = BTreeMap<String, ModuleConfigValue>;

/// What a node reports about one installed module.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModuleEntry {
    /// Name.
    pub name: String,
    /// Version (semver).
    pub version: String,
    /// One-line summary.
    pub summary: String,
    /// Kind: processor, qdisc, service, ...
    pub kind: String,
    /// Its category in the service hierarchy: system, standard, function, user.
    #[serde(default)]
    pub category: String,
    /// Lifecycle state: installed (unresolved), resolved, active, stopped.
    pub state: String,
    /// Hook point (processors).
    pub hook: Option<String>,
    /// Position in load order.
    pub load_order: u64,
    /// What is missing while unresolved.
    pub missing: Vec<String>,
    /// The fault or error that stopped it.
    pub last_error: Option<String>,
    /// Packets it processed.
    pub packets: u64,
    /// SHA-256 of its code, hex.
    pub code_sha256: String,
    /// The publisher key that signed it, hex.
    pub publisher: Option<String>,
    /// Services it provides ("name version").
    pub provides: Vec<String>,
    /// Services it requires ("name range").
    pub requires: Vec<String>,
    /// Where it came from: `config` (the node's `[[module]]` list) or `runtime` (installed
    /// or upgraded over the control socket); kept across restarts either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Files it keeps and their bytes; its quotas (bytes, files) if its manifest asks for
    /// files.
    #[serde(default)]
    pub files: (u64, u64),
    /// See `files`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_quota: Option<(u64, u64)>,
}

/// A service interface as a module provides it (`module_services`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceEntry {
    /// The interface's name.
    pub interface: String,
    /// The version provided.
    pub version: String,
    /// The module providing it.
    pub provider: String,
    /// The provider's category.
    pub category: String,
    /// The provider's state.
    pub state: String,
    /// The modules it serves.
    pub users: Vec<String>,
}

/// A module deployed at a node along a path (`module_deployments`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployedEntry {
    /// The module's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// SHA-256 of its package.
    pub package_sha256: String,
    /// The deploy key that put it here (its name in `[[deploy.key]]`).
    pub by: String,
    /// The lifetime each refresh gives, in seconds.
    pub ttl_s: u32,
    /// Time left before it goes unless refreshed, in ms.
    pub expires_in_ms: u64,
}

fn unexpected(request: &'static str, r: &Response) -> ClientError {
    ClientError::Unexpected {
        request,
        got: serde_json::to_string(r).unwrap_or_else(|_| format!("{r:?}")),
    }
}

impl Client {
    fn module_reply(&mut self, op: &'static str, req: Request) -> Result<ModuleEntry, ClientError> {
        match self.request(req)? {
            Response::Module { module } => Ok(*module),
            r => Err(unexpected(op, &r)),
        }
    }

    /// Installs a package (the bytes of a `.amod` file) with `config`; with `start`, starts
    /// it once resolved. Returns the module as installed.
    pub fn module_install(
        &mut self,
        package: Vec<u8>,
        config: ModuleConfig,
        start: bool,
    ) -> Result<ModuleEntry, ClientError> {
        let req = Request::ModuleInstall {
            package: Payload::from(package),
            config,
            start,
        };
        self.module_reply("module_install", req)
    }

    /// Replaces an installed module by a new version of it, handing over its state.
    pub fn module_upgrade(
        &mut self,
        package: Vec<u8>,
        config: ModuleConfig,
    ) -> Result<ModuleEntry, ClientError> {
        let req = Request::ModuleUpgrade {
            package: Payload::from(package),
            config,
        };
        self.module_reply("module_upgrade", req)
    }

    /// Keeps a package at the node's deployment service (see [`Request::ModuleStage`]);
    /// returns its SHA-256.
    pub fn module_stage(&mut self, package: Vec<u8>) -> Result<String, ClientError> {
        let req = Request::ModuleStage {
            package: Payload::from(package),
        };
        match self.request(req)? {
            Response::ModuleStaged { sha256, .. } => Ok(sha256),
            r => Err(unexpected("module_stage", &r)),
        }
    }

    /// The modules deployed at the node along a path, and the deployment counters.
    pub fn module_deployments(
        &mut self,
    ) -> Result<(Vec<DeployedEntry>, BTreeMap<String, u64>), ClientError> {
        match self.request(Request::ModuleDeployments)? {
            Response::Deployments { deployed, counters } => Ok((deployed, counters)),
            r => Err(unexpected("module_deployments", &r)),
        }
    }

    /// The node's execution environments as services (kind `ee`).
    pub fn module_ees(&mut self) -> Result<Vec<ModuleEntry>, ClientError> {
        match self.request(Request::ModuleEes)? {
            Response::Modules { modules } => Ok(modules),
            r => Err(unexpected("module_ees", &r)),
        }
    }

    /// Every installed module, in load order.
    pub fn module_list(&mut self) -> Result<Vec<ModuleEntry>, ClientError> {
        match self.request(Request::ModuleList)? {
            Response::Modules { modules } => Ok(modules),
            r => Err(unexpected("module_list", &r)),
        }
    }

    /// The service interfaces provided (`interface`: the provider a module of `category`
    /// would be given for `version`).
    pub fn module_services(
        &mut self,
        interface: Option<String>,
        version: Option<String>,
        category: Option<String>,
    ) -> Result<Vec<ServiceEntry>, ClientError> {
        let req = Request::ModuleServices {
            interface,
            version,
            category,
        };
        match self.request(req)? {
            Response::Services { services } => Ok(services),
            r => Err(unexpected("module_services", &r)),
        }
    }

    /// One module.
    pub fn module_info(&mut self, name: &str) -> Result<ModuleEntry, ClientError> {
        let req = Request::ModuleInfo {
            name: name.to_string(),
        };
        self.module_reply("module_info", req)
    }

    /// Starts a module (and the modules providing its services).
    pub fn module_start(&mut self, name: &str) -> Result<ModuleEntry, ClientError> {
        let req = Request::ModuleStart {
            name: name.to_string(),
        };
        self.module_reply("module_start", req)
    }

    /// Stops a module.
    pub fn module_stop(&mut self, name: &str) -> Result<ModuleEntry, ClientError> {
        let req = Request::ModuleStop {
            name: name.to_string(),
        };
        self.module_reply("module_stop", req)
    }

    /// Calls operation `op` of module `name`'s service export with `arg`; what it returned.
    pub fn module_call(&mut self, name: &str, op: i32, arg: i64) -> Result<i64, ClientError> {
        let req = Request::ModuleCall {
            name: name.to_string(),
            operation: op,
            arg,
        };
        match self.request(req)? {
            Response::ModuleCalled { result, .. } => Ok(result),
            r => Err(unexpected("module_call", &r)),
        }
    }

    /// Puts qdisc module `name` on `link` at `rate_bps` (`None`: removes the link's
    /// discipline); the discipline it replaced.
    pub fn module_qdisc(
        &mut self,
        name: Option<&str>,
        link: &str,
        rate_bps: u64,
    ) -> Result<Option<String>, ClientError> {
        let req = Request::ModuleQdisc {
            name: name.map(str::to_string),
            link: link.to_string(),
            rate_bps,
        };
        match self.request(req)? {
            Response::QdiscSet { replaced, .. } => Ok(replaced),
            r => Err(unexpected("module_qdisc", &r)),
        }
    }

    /// Removes a module; returns it as it was.
    pub fn module_remove(&mut self, name: &str) -> Result<ModuleEntry, ClientError> {
        let req = Request::ModuleRemove {
            name: name.to_string(),
        };
        self.module_reply("module_remove", req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_request;

    #[test]
    fn module_ops_on_the_wire() {
        let f = parse_request(
            r#"{"id":2,"op":"module_install","package":"00ff","config":{"limit":5,"on":true}}"#,
        )
        .unwrap();
        let mut cfg = ModuleConfig::new();
        cfg.insert("limit".into(), ModuleConfigValue::Int(5));
        cfg.insert("on".into(), ModuleConfigValue::Bool(true));
        assert_eq!(
            f.request,
            Request::ModuleInstall {
                package: vec![0, 255].into(),
                config: cfg,
                start: true
            }
        );
        for (line, req) in [
            (r#"{"id":1,"op":"module_list"}"#, Request::ModuleList),
            (
                r#"{"id":1,"op":"module_stop","name":"null"}"#,
                Request::ModuleStop {
                    name: "null".into(),
                },
            ),
            (
                r#"{"id":1,"op":"module_call","name":"flowcount","operation":1,"arg":9}"#,
                Request::ModuleCall {
                    name: "flowcount".into(),
                    operation: 1,
                    arg: 9,
                },
            ),
        ] {
            assert_eq!(parse_request(line).unwrap().request, req);
        }
        // A string is not a configuration value.
        let e = parse_request(r#"{"id":7,"op":"module_upgrade","package":"","config":{"a":"x"}}"#)
            .unwrap_err();
        assert_eq!(e.0, Some(7));
        let m = ModuleEntry {
            name: "null".into(),
            state: "active".into(),
            ..ModuleEntry::default()
        };
        let r = Response::Module {
            module: Box::new(m),
        };
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains(r#""kind":"module""#), "{line}");
        assert_eq!(serde_json::from_str::<Response>(&line).unwrap(), r);
    }
}
