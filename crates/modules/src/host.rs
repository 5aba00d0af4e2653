//! [`ModuleHost`]: the modules of one node, their lifecycle, the service registry, and the
//! packet processors at the node's hook points.
//!
//! Lifecycle (Openet ORE / OSGi):
//! `installed` (verified and compiled; some required service missing) → `resolved` (every
//! required service is provided by an installed module) → `active` (instantiated; processors
//! see packets) ↔ `stopped` → uninstalled (removed). Starting a module starts the modules that
//! provide its services first; a module others depend on cannot be stopped while they are
//! active; removing a provider sends its dependents back to `installed` with a message naming
//! what they miss.
//!
//! Upgrade in place: the new version is verified, compiled and instantiated, the old instance
//! exports its state and the new one imports it, and the new instance replaces the old in the
//! same hook position. The host is the node's [`PacketHooks`]; every operation on it runs on
//! the node's thread between two packets (through `&mut Node`), so no packet is in a module
//! during the swap: none is lost or reordered. If any step fails the old version keeps running.
//!
//! Faults: a module that traps or runs out of fuel is stopped with the reason recorded, the
//! packet goes on as if the module were absent, and the node goes on.
//!
//! Contract: no module code or input makes the host panic.

use std::collections::BTreeMap;
use std::sync::Arc;

use anode_core::{
    DemuxKey, Dispatch, EeCall, HookInfo, HookPoint, HookVerdict, LinkId, NextHop, PacketHooks,
    Transmit,
};
use anode_wire::NodeAddr;
use serde::Serialize;

use crate::runtime::{Code, Instance, ModRuntime, verdict};

mod handover;
use crate::{Category, ConfigValues, Kind, ModuleError, Package, Trust};

/// Where a module is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Verified and compiled, but a required service is missing.
    Installed,
    /// Every required service is provided.
    Resolved,
    /// Running.
    Active,
    /// Stopped (by request or by a fault).
    Stopped,
}

/// What `list` and `info` report about a module.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModuleInfo {
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
    /// One-line summary.
    pub summary: String,
    /// Kind.
    pub kind: String,
    /// Its place in the service hierarchy.
    pub category: Category,
    /// Lifecycle state.
    pub state: State,
    /// Hook point (processors).
    pub hook: Option<String>,
    /// Position in load order.
    pub load_order: u64,
    /// What is missing, if unresolved.
    pub missing: Vec<String>,
    /// The fault or error that stopped it.
    pub last_error: Option<String>,
    /// Packets it processed.
    pub packets: u64,
    /// SHA-256 of its code.
    pub code_sha256: String,
    /// Publisher key.
    pub publisher: Option<String>,
    /// Services it provides.
    pub provides: Vec<String>,
    /// Services it requires.
    pub requires: Vec<String>,
    /// Files it keeps, and their bytes (`files.rs`).
    pub files: (u64, u64),
    /// Its file quotas (bytes, files), if it has files.
    pub file_quota: Option<(u64, u64)>,
}

/// One service interface as a provider offers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceInfo {
    /// The interface's name (`provides` in the manifest).
    pub interface: String,
    /// The version provided.
    pub version: String,
    /// The module providing it.
    pub provider: String,
    /// The provider's category.
    pub category: Category,
    /// The provider's state.
    pub state: State,
    /// Modules this provider serves.
    pub users: Vec<String>,
}

/// A package verified against the trusted keys, compiled and configured, ready to install
/// or upgrade to. Preparing is the slow part (compiling the code) and needs no node, so a
/// running node prepares off its data-path thread and only the (fast) install or swap runs
/// between two packets.
pub struct Prepared {
    pkg: Package,
    code: Code,
    config: ConfigValues,
    filters: Vec<Vec<DemuxKey>>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("id", &self.pkg.id())
            .finish_non_exhaustive()
    }
}

impl Prepared {
    /// Verifies `pkg` against `trust` (unsigned, tampered, untrusted are refused), compiles
    /// it with `rt` and checks `config` against its schema.
    pub fn new(
        rt: &ModRuntime,
        trust: &Trust,
        pkg: Package,
        config: &toml::Table,
    ) -> Result<Prepared, ModuleError> {
        trust.verify(&pkg)?;
        let code = rt.compile(&pkg.manifest, &pkg.code)?;
        let config = pkg.manifest.configure(config)?;
        let filters = pkg.manifest.demux_filters()?;
        Ok(Prepared {
            pkg,
            code,
            config,
            filters,
        })
    }

    /// The package's `name@version`.
    pub fn id(&self) -> String {
        self.pkg.id()
    }

    /// The module's name.
    pub fn name(&self) -> &str {
        &self.pkg.manifest.name
    }

    /// The module's place in the service hierarchy.
    pub fn category(&self) -> Category {
        self.pkg.manifest.category()
    }
}

struct Entry {
    pkg: Package,
    code: Code,
    config: ConfigValues,
    state: State,
    inst: Option<Box<Instance>>,
    missing: Vec<String>,
    last_error: Option<String>,
    order: u64,
    filters: Vec<Vec<DemuxKey>>,
    packets: u64,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("id", &self.pkg.id())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// The modules of one node.
#[derive(Debug)]
pub struct ModuleHost {
    rt: Arc<ModRuntime>,
    trust: Trust,
    modules: BTreeMap<String, Entry>,
    next_order: u64,
    /// Active processors per hook point, in load order (index = `HookPoint` order).
    active: [Vec<Arc<str>>; 4],
    /// Link peers, for emitted and redirected packets.
    links: Vec<NodeAddr>,
    /// Faults and module log lines, most recent last (bounded).
    pub log: Vec<String>,
    /// Routing functions registered with the PLAN EE: name -> (code SHA-256, fault slot).
    pub(crate) routes_attached: BTreeMap<String, (String, crate::route::FaultSlot)>,
    /// The modules' files (`files.rs`).
    files: crate::files::ModFiles,
}

fn point_index(p: HookPoint) -> usize {
    match p {
        HookPoint::Ingress => 0,
        HookPoint::PreRouting => 1,
        HookPoint::PostRouting => 2,
        HookPoint::LocalDelivery => 3,
    }
}

fn matches(filters: &[Vec<DemuxKey>], pkt: &[u8]) -> bool {
    filters.is_empty() || filters.iter().any(|f| f.iter().all(|k| k.matches(pkt)))
}

const MAX_LOG: usize = 256;

impl ModuleHost {
    /// A host with no modules, trusting `trust`.
    pub fn new(rt: Arc<ModRuntime>, trust: Trust) -> Self {
        ModuleHost {
            rt,
            trust,
            modules: BTreeMap::new(),
            next_order: 0,
            active: Default::default(),
            links: Vec::new(),
            log: Vec::new(),
            routes_attached: BTreeMap::new(),
            files: crate::files::memory_store(),
        }
    }

    /// Keeps the modules' files in `dir` from now on, reading what is there (call before
    /// installing modules: files held in memory so far are dropped).
    pub fn set_file_dir(&mut self, dir: std::path::PathBuf) {
        self.files = crate::files::disk_store(dir);
        let limits: Vec<(String, anode_capsule::files::FileLimits)> = self
            .modules
            .iter()
            .map(|(n, e)| (n.clone(), crate::files::limits_of(&e.pkg.manifest)))
            .collect();
        let mut f = crate::files::lock(&self.files);
        for (n, l) in limits {
            f.set_limits(&n, l);
        }
    }

    /// The modules' files (for tools and tests).
    pub fn files(&self) -> &crate::files::ModFiles {
        &self.files
    }

    /// The runtime.
    pub fn runtime(&self) -> &Arc<ModRuntime> {
        &self.rt
    }

    /// Tells the host the node's link peers (index = link id).
    pub fn set_links(&mut self, peers: Vec<NodeAddr>) {
        self.links = peers;
    }

    fn note(&mut self, s: String) {
        if self.log.len() >= MAX_LOG {
            self.log.remove(0);
        }
        self.log.push(s);
    }

    /// Verifies, compiles and installs a package; returns its state (`Installed` if a
    /// required service is missing, with [`ModuleInfo::missing`] saying which).
    pub fn install(&mut self, pkg: Package, config: &toml::Table) -> Result<State, ModuleError> {
        let p = Prepared::new(&self.rt, &self.trust, pkg, config)?;
        self.install_prepared(p)
    }

    /// The publisher keys this host trusts.
    pub fn trust(&self) -> &Trust {
        &self.trust
    }

    /// Installs a package verified and compiled beforehand (see [`Prepared`]).
    pub fn install_prepared(&mut self, p: Prepared) -> Result<State, ModuleError> {
        let Prepared {
            pkg,
            code,
            config,
            filters,
        } = p;
        let name = pkg.manifest.name.clone();
        if self.modules.contains_key(&name) {
            return Err(ModuleError::AlreadyInstalled(name));
        }
        self.check_type_id(&pkg.manifest)?;
        crate::files::lock(&self.files).set_limits(&name, crate::files::limits_of(&pkg.manifest));
        let order = self.next_order;
        self.next_order += 1;
        self.modules.insert(
            name.clone(),
            Entry {
                pkg,
                code,
                config,
                state: State::Installed,
                inst: None,
                missing: Vec::new(),
                last_error: None,
                order,
                filters,
                packets: 0,
            },
        );
        self.resolve_all();
        Ok(self
            .modules
            .get(&name)
            .map_or(State::Installed, |e| e.state))
    }

    /// The module that serves `svc` to module `user` (not `user` itself) in a version `req`
    /// accepts: among resolved providers whose category `user`'s may use, the highest
    /// version (ties: the first by name).
    fn provider(&self, svc: &str, req: &semver::VersionReq, user: &str) -> Option<String> {
        let cat = self.modules.get(user).map(|e| e.pkg.manifest.category());
        self.candidates(svc, req)
            .filter(|(n, c, _)| *n != user && cat.is_none_or(|u| u.may_use(*c)))
            .max_by(|a, b| a.2.cmp(b.2).then_with(|| b.0.cmp(a.0)))
            .map(|(n, _, _)| n.to_string())
    }

    /// Resolved modules providing `svc` in a version `req` accepts: (module, its category,
    /// the version it provides).
    fn candidates<'a>(
        &'a self,
        svc: &'a str,
        req: &'a semver::VersionReq,
    ) -> impl Iterator<Item = (&'a str, Category, &'a semver::Version)> + 'a {
        self.modules
            .iter()
            .filter(|(_, e)| e.state != State::Installed)
            .flat_map(move |(n, e)| {
                e.pkg
                    .manifest
                    .provides
                    .iter()
                    .filter(move |p| p.name == svc && req.matches(&p.version))
                    .map(move |p| (n.as_str(), e.pkg.manifest.category(), &p.version))
            })
    }

    /// Every service interface provided, with its providers (highest version first) and the
    /// modules that use each.
    pub fn services(&self) -> Vec<ServiceInfo> {
        let mut out: Vec<ServiceInfo> = Vec::new();
        for (n, e) in &self.modules {
            for p in &e.pkg.manifest.provides {
                let users = self
                    .modules
                    .keys()
                    .filter(|u| {
                        self.providers_of(u)
                            .iter()
                            .any(|(s, pn)| s == &p.name && pn == n)
                    })
                    .cloned()
                    .collect();
                out.push(ServiceInfo {
                    interface: p.name.clone(),
                    version: p.version.to_string(),
                    provider: n.clone(),
                    category: e.pkg.manifest.category(),
                    state: e.state,
                    users,
                });
            }
        }
        out.sort_by(|a, b| {
            a.interface.cmp(&b.interface).then_with(|| {
                let v = |s: &ServiceInfo| semver::Version::parse(&s.version).ok();
                v(b).cmp(&v(a))
            })
        });
        out
    }

    /// The provider a module of `category` would be given for service `svc` in a version
    /// `req` accepts, if any (`anode module services --interface`).
    pub fn lookup(
        &self,
        svc: &str,
        req: &semver::VersionReq,
        category: Category,
    ) -> Option<ServiceInfo> {
        let (n, c, v) = self
            .candidates(svc, req)
            .filter(|(_, c, _)| category.may_use(*c))
            .max_by(|a, b| a.2.cmp(b.2).then_with(|| b.0.cmp(a.0)))?;
        let users = self
            .services()
            .into_iter()
            .find(|s| s.interface == svc && s.provider == n)
            .map(|s| s.users)
            .unwrap_or_default();
        Some(ServiceInfo {
            interface: svc.to_string(),
            version: v.to_string(),
            provider: n.to_string(),
            category: c,
            state: self.modules.get(n).map_or(State::Installed, |e| e.state),
            users,
        })
    }

    /// Recomputes which modules are resolved (to a fixed point: providers may be unresolved).
    fn resolve_all(&mut self) {
        loop {
            let mut changed = false;
            let names: Vec<String> = self.modules.keys().cloned().collect();
            for n in names {
                let Some(e) = self.modules.get(&n) else {
                    continue;
                };
                let reqs = e.pkg.manifest.requires.clone();
                let state = e.state;
                let mut missing = Vec::new();
                for r in &reqs {
                    // A module cannot satisfy its own requirement unless it is resolved.
                    let found = self.provider(&r.name, &r.version, &n).is_some();
                    if !found {
                        let have: Vec<String> = self
                            .modules
                            .values()
                            .flat_map(|e| e.pkg.manifest.provides.iter())
                            .filter(|p| p.name == r.name)
                            .map(|p| p.version.to_string())
                            .collect();
                        let above: Vec<String> = self
                            .candidates(&r.name, &r.version)
                            .filter(|(p, c, _)| *p != n && !e.pkg.manifest.category().may_use(*c))
                            .map(|(p, c, v)| format!("{p} {v} is {}", c.name()))
                            .collect();
                        missing.push(if !above.is_empty() {
                            format!(
                                "service {} {} (a {} module may use only its own or lower categories; {})",
                                r.name,
                                r.version,
                                e.pkg.manifest.category().name(),
                                above.join(", ")
                            )
                        } else if have.is_empty() {
                            format!(
                                "service {} {} (no installed module provides it)",
                                r.name, r.version
                            )
                        } else {
                            format!(
                                "service {} {} (installed: {}, not usable)",
                                r.name,
                                r.version,
                                have.join(", ")
                            )
                        });
                    }
                }
                let new_state = match (state, missing.is_empty()) {
                    (State::Installed, true) => State::Resolved,
                    (State::Resolved | State::Stopped, false) => State::Installed,
                    (State::Active, false) => State::Installed,
                    (s, _) => s,
                };
                if new_state != state {
                    changed = true;
                }
                if let Some(e) = self.modules.get_mut(&n) {
                    if new_state == State::Installed && e.inst.is_some() {
                        e.inst = None;
                        e.last_error = Some(format!("stopped: lost {}", missing.join("; ")));
                    }
                    e.state = new_state;
                    e.missing = missing;
                }
            }
            if !changed {
                break;
            }
        }
        self.rebuild_active();
    }

    fn rebuild_active(&mut self) {
        let mut lists: [Vec<(u64, String)>; 4] = Default::default();
        for (n, e) in &self.modules {
            if e.state == State::Active
                && let Some(p) = e.pkg.manifest.hook_point()
                && let Some(l) = lists.get_mut(point_index(p))
            {
                l.push((e.order, n.clone()));
            }
        }
        for (dst, mut l) in self.active.iter_mut().zip(lists) {
            l.sort();
            *dst = l.into_iter().map(|(_, n)| Arc::from(n.as_str())).collect();
        }
    }

    /// The PLAN type of PLAN-service module `name` (manifest `plan_type`; `None`: the
    /// `int -> int` of `plan_call`).
    pub(crate) fn plan_type(&self, name: &str) -> Result<Option<String>, ModuleError> {
        Ok(self.entry(name)?.pkg.manifest.plan_type.clone())
    }

    fn entry(&self, name: &str) -> Result<&Entry, ModuleError> {
        self.modules
            .get(name)
            .ok_or_else(|| ModuleError::NotInstalled(name.to_string()))
    }

    fn entry_mut(&mut self, name: &str) -> Result<&mut Entry, ModuleError> {
        self.modules
            .get_mut(name)
            .ok_or_else(|| ModuleError::NotInstalled(name.to_string()))
    }

    /// The providers of `name`'s required services.
    fn providers_of(&self, name: &str) -> Vec<(String, String)> {
        let Some(e) = self.modules.get(name) else {
            return Vec::new();
        };
        e.pkg
            .manifest
            .requires
            .iter()
            .filter_map(|r| {
                self.provider(&r.name, &r.version, name)
                    .map(|p| (r.name.clone(), p))
            })
            .collect()
    }

    /// Starts a module (and, first, the modules providing its services).
    pub fn start(&mut self, name: &str) -> Result<(), ModuleError> {
        self.start_depth(name, 0)
    }

    fn start_depth(&mut self, name: &str, depth: usize) -> Result<(), ModuleError> {
        let e = self.entry(name)?;
        match e.state {
            State::Active => return Ok(()),
            State::Installed => {
                return Err(ModuleError::State {
                    name: name.to_string(),
                    reason: format!("unresolved: missing {}", e.missing.join("; ")),
                });
            }
            State::Resolved | State::Stopped => {}
        }
        if depth > 8 {
            return Err(ModuleError::State {
                name: name.to_string(),
                reason: "service dependencies nest deeper than 8 (a cycle?)".into(),
            });
        }
        for (_, p) in self.providers_of(name) {
            self.start_depth(&p, depth + 1)?;
        }
        let e = self.entry(name)?;
        if matches!(
            e.pkg.manifest.kind,
            Kind::Qdisc | Kind::RoutingFunction | Kind::PlanService
        ) {
            // A queue discipline is instantiated per link when attached (`attach_qdisc`), a
            // routing function once, by the PLAN EE it routes for (`sync_routes`).
            self.entry_mut(name)?.state = State::Active;
            return Ok(());
        }
        let inst = self
            .rt
            .instantiate(&e.pkg.manifest, &e.code, e.config.clone(), &self.files)?;
        let e = self.entry_mut(name)?;
        e.inst = Some(Box::new(inst));
        e.state = State::Active;
        e.last_error = None;
        self.rebuild_active();
        Ok(())
    }

    /// Active modules that use a service `name` provides.
    fn active_dependents(&self, name: &str) -> Vec<String> {
        self.modules
            .keys()
            .filter(|n| n.as_str() != name)
            .filter(|n| {
                self.modules
                    .get(*n)
                    .is_some_and(|e| e.state == State::Active)
            })
            .filter(|n| self.providers_of(n).iter().any(|(_, p)| p == name))
            .cloned()
            .collect()
    }

    /// Stops a module (its instance and state are discarded).
    pub fn stop(&mut self, name: &str) -> Result<(), ModuleError> {
        let deps = self.active_dependents(name);
        if !deps.is_empty() {
            return Err(ModuleError::State {
                name: name.to_string(),
                reason: format!(
                    "active modules use its services: {} (stop them first)",
                    deps.join(", ")
                ),
            });
        }
        let e = self.entry_mut(name)?;
        if e.state != State::Active {
            return Err(ModuleError::State {
                name: name.to_string(),
                reason: "not active".into(),
            });
        }
        e.inst = None;
        e.state = State::Stopped;
        self.rebuild_active();
        Ok(())
    }

    /// Removes a module and its files; modules that needed its services go back to
    /// `installed`.
    pub fn remove(&mut self, name: &str) -> Result<(), ModuleError> {
        self.entry(name)?;
        self.modules.remove(name);
        {
            let mut f = crate::files::lock(&self.files);
            f.clear(&name.to_string());
            if let Some(p) = f.persist() {
                p.schedule();
            }
        }
        self.resolve_all();
        Ok(())
    }

    /// Replaces `pkg.manifest.name`'s installed version by `pkg`, handing the old instance's
    /// state to the new one if it is active. On any error the old version stays as it was.
    pub fn upgrade(&mut self, pkg: Package, config: &toml::Table) -> Result<(), ModuleError> {
        let p = Prepared::new(&self.rt, &self.trust, pkg, config)?;
        self.upgrade_prepared(p)
    }

    /// [`ModuleHost::upgrade`] with a package verified and compiled beforehand.
    pub fn upgrade_prepared(&mut self, p: Prepared) -> Result<(), ModuleError> {
        let Prepared {
            pkg,
            code,
            config,
            filters,
        } = p;
        let name = pkg.manifest.name.clone();
        let old = self.entry(&name)?;
        if old.pkg.manifest.kind != pkg.manifest.kind {
            return Err(ModuleError::State {
                name,
                reason: format!(
                    "cannot upgrade a {} to a {}",
                    old.pkg.manifest.kind.name(),
                    pkg.manifest.kind.name()
                ),
            });
        }
        self.check_type_id(&pkg.manifest)?;
        for r in &pkg.manifest.requires {
            if self.provider(&r.name, &r.version, &name).is_none() {
                return Err(ModuleError::State {
                    name,
                    reason: format!(
                        "the new version requires service {} {}, which no installed module provides",
                        r.name, r.version
                    ),
                });
            }
        }
        for d in self.active_dependents(&name) {
            let Some(de) = self.modules.get(&d) else {
                continue;
            };
            for r in &de.pkg.manifest.requires {
                let was = self.provider(&r.name, &r.version, &d).as_deref() == Some(name.as_str());
                let still = pkg
                    .manifest
                    .provides
                    .iter()
                    .any(|p| p.name == r.name && r.version.matches(&p.version));
                if was && !still {
                    return Err(ModuleError::State {
                        name,
                        reason: format!(
                            "active module {d} needs service {} {}, which the new version does not provide",
                            r.name, r.version
                        ),
                    });
                }
            }
        }
        let active_inst = old.state == State::Active && old.inst.is_some();
        let new_inst = if active_inst {
            let mut ni = self
                .rt
                .instantiate(&pkg.manifest, &code, config.clone(), &self.files)?;
            let e = self.entry_mut(&name)?;
            let state = match e.inst.as_mut() {
                Some(i) => i.export_state()?,
                None => Vec::new(),
            };
            ni.import_state(&state)?;
            Some(Box::new(ni))
        } else {
            None
        };
        // A routing function gets a new instance in the PLAN EE at the next `sync_routes`.
        self.routes_attached.remove(&name);
        crate::files::lock(&self.files).set_limits(&name, crate::files::limits_of(&pkg.manifest));
        let e = self.entry_mut(&name)?;
        e.pkg = pkg;
        e.code = code;
        e.config = config;
        e.filters = filters;
        if active_inst {
            e.inst = new_inst;
        }
        self.resolve_all();
        Ok(())
    }

    /// Calls service operation `op` of module `name` (for tools and tests).
    pub fn call_service(&mut self, name: &str, op: i32, arg: i64) -> Result<i64, ModuleError> {
        let e = self.entry_mut(name)?;
        let Some(inst) = e.inst.as_mut() else {
            return Err(ModuleError::State {
                name: name.to_string(),
                reason: "not active".into(),
            });
        };
        inst.call_service(op, arg)
    }

    /// A module's state.
    pub fn state(&self, name: &str) -> Option<State> {
        self.modules.get(name).map(|e| e.state)
    }

    /// What is known about one module.
    pub fn info(&self, name: &str) -> Result<ModuleInfo, ModuleError> {
        let e = self.entry(name)?;
        let m = &e.pkg.manifest;
        Ok(ModuleInfo {
            name: m.name.clone(),
            version: m.version.to_string(),
            summary: m.summary.clone(),
            kind: m.kind.name().to_string(),
            category: m.category(),
            state: e.state,
            hook: m.hook.clone(),
            load_order: e.order,
            missing: e.missing.clone(),
            last_error: e.last_error.clone(),
            packets: e.packets,
            code_sha256: e.pkg.code_hash(),
            publisher: e.pkg.signature.as_ref().map(|(k, _)| hex::encode(k)),
            provides: m
                .type_id
                .map(|t| format!("ee/0x{t:04X}"))
                .into_iter()
                .chain(
                    m.provides
                        .iter()
                        .map(|p| format!("{} {}", p.name, p.version)),
                )
                .collect(),
            requires: m
                .requires
                .iter()
                .map(|r| format!("{} {}", r.name, r.version))
                .collect(),
            files: {
                let f = crate::files::lock(&self.files);
                let n = name.to_string();
                (f.count_of(&n) as u64, f.bytes_of(&n) as u64)
            },
            file_quota: m
                .resources
                .file_limits()
                .map(|l| (l.max_bytes as u64, l.max_files as u64)),
        })
    }

    /// Every module, in load order.
    pub fn list(&self) -> Vec<ModuleInfo> {
        let mut v: Vec<ModuleInfo> = self
            .modules
            .keys()
            .filter_map(|n| self.info(n).ok())
            .collect();
        v.sort_by_key(|i| i.load_order);
        v
    }

    /// A fresh instance of an active queue-discipline module, with its `limit`.
    pub(crate) fn qdisc_instance(
        &mut self,
        name: &str,
    ) -> Result<(Box<Instance>, usize), ModuleError> {
        let e = self.entry(name)?;
        if e.pkg.manifest.kind != Kind::Qdisc {
            return Err(ModuleError::State {
                name: name.to_string(),
                reason: format!("is a {}, not a qdisc", e.pkg.manifest.kind.name()),
            });
        }
        if e.state != State::Active {
            self.start(name)?;
        }
        let e = self.entry(name)?;
        let limit = e.config.get("limit").copied().unwrap_or(64);
        let inst = self
            .rt
            .instantiate(&e.pkg.manifest, &e.code, e.config.clone(), &self.files)?;
        Ok((Box::new(inst), usize::try_from(limit).unwrap_or(64)))
    }

    /// The active routing-function and PLAN-service modules: (name, code SHA-256, kind).
    pub(crate) fn active_routes(&self) -> Vec<(String, String, Kind)> {
        self.modules
            .iter()
            .filter(|(_, e)| {
                e.state == State::Active
                    && matches!(
                        e.pkg.manifest.kind,
                        Kind::RoutingFunction | Kind::PlanService
                    )
            })
            .map(|(n, e)| (n.clone(), e.pkg.code_hash(), e.pkg.manifest.kind))
            .collect()
    }

    /// A fresh instance of an active routing-function or PLAN-service module.
    pub(crate) fn route_instance(&mut self, name: &str) -> Result<Box<Instance>, ModuleError> {
        let e = self.entry(name)?;
        if !matches!(
            e.pkg.manifest.kind,
            Kind::RoutingFunction | Kind::PlanService
        ) || e.state != State::Active
        {
            return Err(ModuleError::State {
                name: name.to_string(),
                reason: "not an active routing function or PLAN service".into(),
            });
        }
        let inst = self
            .rt
            .instantiate(&e.pkg.manifest, &e.code, e.config.clone(), &self.files)?;
        Ok(Box::new(inst))
    }

    /// Records a routing function's fault (its instances live in the PLAN and capsule EEs).
    pub(crate) fn route_fault(&mut self, name: &str, err: ModuleError) {
        self.fault(name, err);
    }

    fn fault(&mut self, name: &str, err: ModuleError) {
        if let Some(e) = self.modules.get_mut(name) {
            e.inst = None;
            e.state = State::Stopped;
            e.last_error = Some(err.to_string());
        }
        self.note(format!("stopped {name}: {err}"));
        self.rebuild_active();
    }

    /// A redirect verdict: to the neighbor on link `to`, dropped if the node has no such
    /// link (or the module set none).
    fn redirect(&self, to: Option<u32>, buf: Vec<u8>) -> HookVerdict {
        let hop = to.and_then(|l| {
            self.links.get(l as usize).map(|a| NextHop {
                link: LinkId(l),
                addr: *a,
            })
        });
        match hop {
            Some(h) => HookVerdict::Redirect(h, buf),
            None => HookVerdict::Drop,
        }
    }

    /// Refuses an EE whose Type ID another installed EE module owns.
    fn check_type_id(&self, m: &crate::Manifest) -> Result<(), ModuleError> {
        let Some(t) = m.type_id else {
            return Ok(());
        };
        match self
            .modules
            .iter()
            .find(|(n, e)| **n != m.name && e.pkg.manifest.type_id == Some(t))
        {
            Some((other, _)) => Err(ModuleError::State {
                name: m.name.clone(),
                reason: format!(
                    "ANEP Type ID 0x{t:04X} belongs to the installed EE {other}; remove it first or pick another type_id"
                ),
            }),
            None => Ok(()),
        }
    }

    /// The EE module that owns `type_id`.
    fn ee_module(&self, type_id: u16) -> Option<(&String, &Entry)> {
        self.modules.iter().find(|(_, e)| {
            e.pkg.manifest.type_id == Some(type_id) && e.pkg.manifest.kind == Kind::Ee
        })
    }

    /// Runs one processor (`call` = `Processor(info)`) or EE module on a packet.
    fn run_one(
        &mut self,
        name: &str,
        call: Call<'_>,
        buf: Vec<u8>,
        emit: &mut Vec<Transmit>,
    ) -> Result<crate::runtime::Processed, Vec<u8>> {
        let needs = self
            .modules
            .get(name)
            .is_some_and(|e| !e.pkg.manifest.requires.is_empty());
        let providers = if needs {
            self.providers_of(name)
        } else {
            Vec::new()
        };
        let mut lent = Vec::new();
        for (svc, p) in &providers {
            if let Some(i) = self.modules.get_mut(p).and_then(|e| e.inst.take()) {
                lent.push((svc.clone(), i, p.clone()));
            }
        }
        let Some(e) = self.modules.get_mut(name) else {
            return Err(buf);
        };
        let Some(inst) = e.inst.as_mut() else {
            return Err(buf);
        };
        e.packets += 1;
        let owners: Vec<String> = lent.iter().map(|(_, _, p)| p.clone()).collect();
        inst.lend_services(lent.into_iter().map(|(s, i, _)| (s, i)).collect());
        let in_link = match call {
            Call::Processor(info) => info.in_link,
            Call::Ee(c) => c.in_link,
        }
        .map_or(-1, |l| i32::try_from(l.0).unwrap_or(-1));
        let r = match call {
            Call::Processor(info) => inst.process(point_index(info.point) as i32, in_link, buf),
            Call::Ee(c) => inst.ee_packet(why_index(c.why), in_link, c.payload_at, buf),
        };
        let back = inst.return_services();
        let (emits, logs) = inst.take_outputs();
        for ((_, i), owner) in back.into_iter().zip(owners) {
            if let Some(pe) = self.modules.get_mut(&owner) {
                pe.inst = Some(i);
            }
        }
        for (link, b) in emits {
            if let Some(peer) = self.links.get(link as usize) {
                emit.push(Transmit {
                    link: LinkId(link),
                    dst: *peer,
                    buf: b,
                });
            }
        }
        for l in logs {
            self.note(format!("{name}: {l}"));
        }
        match r {
            Ok(v) => Ok(v),
            Err((err, buf)) => {
                self.fault(name, err);
                Err(buf)
            }
        }
    }
}

impl PacketHooks for ModuleHost {
    fn wants(&self, point: HookPoint) -> bool {
        self.active
            .get(point_index(point))
            .is_some_and(|l| !l.is_empty())
    }

    fn run(&mut self, info: HookInfo, mut buf: Vec<u8>, emit: &mut Vec<Transmit>) -> HookVerdict {
        let idx = point_index(info.point);
        let mut i = 0;
        while let Some(n) = self.active.get(idx).and_then(|l| l.get(i)).cloned() {
            let before = self.active.get(idx).map_or(0, Vec::len);
            let n: &str = &n;
            let Some(e) = self.modules.get(n) else {
                i += 1;
                continue;
            };
            if !matches(&e.filters, &buf) {
                i += 1;
                continue;
            }
            match self.run_one(n, Call::Processor(&info), buf, emit) {
                Err(b) => buf = b,
                Ok((v, b, redirect)) => match v {
                    verdict::CONTINUE => buf = b,
                    verdict::DROP => return HookVerdict::Drop,
                    verdict::CONSUME => return HookVerdict::Consumed,
                    verdict::REDIRECT => return self.redirect(redirect, b),
                    other => {
                        self.fault(
                            n,
                            ModuleError::Fault {
                                name: n.to_string(),
                                reason: format!("process returned unknown verdict {other}"),
                            },
                        );
                        buf = b;
                    }
                },
            }
            // A processor stopped by a fault leaves the list: the next one is now at `i`.
            if self.active.get(idx).map_or(0, Vec::len) >= before {
                i += 1;
            }
        }
        HookVerdict::Continue(buf)
    }

    fn ee_owner(&self, type_id: u16) -> Option<bool> {
        self.ee_module(type_id)
            .map(|(_, e)| e.state == State::Active && e.inst.is_some())
    }

    fn run_ee(&mut self, call: EeCall, buf: Vec<u8>, emit: &mut Vec<Transmit>) -> HookVerdict {
        let Some(name) = self.ee_module(call.type_id).map(|(n, _)| n.clone()) else {
            return HookVerdict::Drop;
        };
        let (v, b, redirect) = match self.run_one(&name, Call::Ee(call), buf, emit) {
            Ok(r) => r,
            // A fault stopped the module: its packet goes no further.
            Err(_) => return HookVerdict::Drop,
        };
        match v {
            verdict::CONTINUE => HookVerdict::Continue(b),
            verdict::DROP => HookVerdict::Drop,
            verdict::CONSUME => HookVerdict::Consumed,
            verdict::REDIRECT => self.redirect(redirect, b),
            other => {
                self.fault(
                    &name,
                    ModuleError::Fault {
                        name: name.clone(),
                        reason: format!("ee_packet returned unknown verdict {other}"),
                    },
                );
                HookVerdict::Drop
            }
        }
    }

    fn hand_over(&mut self, now: std::time::Instant) -> serde_json::Value {
        let _ = now;
        self.export_states()
    }

    fn take_over(
        &mut self,
        now: std::time::Instant,
        state: &serde_json::Value,
    ) -> Result<(), String> {
        let _ = now;
        self.import_states(state)
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// What [`ModuleHost::run_one`] runs: a processor at a hook point or an EE module.
#[derive(Clone, Copy)]
enum Call<'a> {
    Processor(&'a HookInfo),
    Ee(EeCall),
}

/// The `why` an EE module's `ee_packet` gets (`runtime.rs`, "Guest ABI").
fn why_index(d: Dispatch) -> i32 {
    match d {
        Dispatch::Destination => 0,
        Dispatch::EveryHop => 1,
        Dispatch::Route => 2,
        Dispatch::Local => 3,
    }
}
