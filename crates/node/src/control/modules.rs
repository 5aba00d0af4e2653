//! The service-module ops (`module_install`, `module_upgrade`, `module_list`, `module_info`,
//! `module_start`, `module_stop`, `module_remove`, `module_call`, `module_qdisc`) against the
//! node's
//! [`anode_modules::ModuleHost`].
//!
//! Contracts:
//! - The node verifies every package against the publisher keys of its config (`[modules]
//!   trusted_keys`); an unsigned, tampered or untrusted package is refused with
//!   [`ErrorCode::ModuleRefused`] and a message naming which.
//! - Verifying and compiling a package (the slow part) runs on the control connection's
//!   thread; only the install, the start or the state hand-off of an upgrade runs on the
//!   node's thread, between two packets.
//! - Routing-function modules become the PLAN EE's routing functions when started and stop
//!   being so when stopped or removed (`anode_modules::sync_routes` after every op).
//! - A node started without trusted keys hosts no modules: every op answers
//!   [`ErrorCode::NoModule`] saying how to enable them.

use anode_ctl::{ErrorCode, ModuleConfig, ModuleEntry, Payload, Response, ServiceEntry};

use crate::config::modules::config_table;
use anode_ctl::remote::{Refusal, RemoteClass};
use anode_modules::{
    Category, ModRuntime, ModuleError, ModuleHost, ModuleInfo, Package, Prepared, State,
};

use crate::modules::journal::{Entry, Journal, Origin, Store};
use std::sync::Arc;

use super::handlers::Failure;
use super::state::Shared;
use super::{Driver, call};

fn no_host() -> Failure {
    (
        ErrorCode::NoModule,
        "this node hosts no service modules: list the publisher keys it should trust in its \
         config ([modules] trusted_keys = [\"HEX\"], from `anode keygen`) and restart it"
            .into(),
    )
}

fn refused(e: ModuleError) -> Failure {
    let code = match e {
        ModuleError::NotInstalled(_) => ErrorCode::NoModule,
        _ => ErrorCode::ModuleRefused,
    };
    (code, e.to_string())
}

/// A module's report as the protocol carries it.
pub(crate) fn entry(i: ModuleInfo) -> ModuleEntry {
    ModuleEntry {
        name: i.name,
        version: i.version,
        summary: i.summary,
        kind: i.kind,
        category: i.category.name().into(),
        state: state_name(i.state).into(),
        hook: i.hook,
        load_order: i.load_order,
        missing: i.missing,
        last_error: i.last_error,
        packets: i.packets,
        code_sha256: i.code_sha256,
        publisher: i.publisher,
        provides: i.provides,
        requires: i.requires,
        origin: None,
        files: i.files,
        file_quota: i.file_quota,
    }
}

/// Records a change in the module journal, if the node keeps one; a failure to write it is
/// logged (the change itself is done).
pub(super) fn journal(shared: &Shared, f: impl FnOnce(&Store, &mut Journal) -> Result<(), String>) {
    let Some(store) = shared.journal.get() else {
        return;
    };
    let r = store.load().map_err(|e| e.to_string()).and_then(|mut j| {
        j.version = 1;
        f(store, &mut j)?;
        store.save(&j).map_err(|e| e.to_string())
    });
    if let Err(e) = r {
        tracing::warn!("module journal not updated: {e}; the change will not survive a restart");
    }
}

/// Records an installed or upgraded package as a run-time module.
fn journal_package(shared: &Shared, package: &Payload, config: &ModuleConfig, info: &ModuleInfo) {
    journal(shared, |store, j| {
        let (file, sha256) = store
            .put_package(&info.name, &info.version, package.as_bytes())
            .map_err(|e| e.to_string())?;
        j.put(Entry {
            name: info.name.clone(),
            version: info.version.clone(),
            package: file,
            sha256,
            config: config.clone(),
            started: info.state == State::Active,
            origin: Origin::Runtime,
        });
        Ok(())
    });
}

/// A lifecycle state as the protocol names it.
fn state_name(s: State) -> &'static str {
    match s {
        State::Installed => "installed",
        State::Resolved => "resolved",
        State::Active => "active",
        State::Stopped => "stopped",
    }
}

/// `module_services`: every provided interface, or the provider one lookup would give.
pub(super) fn services(
    shared: &Shared,
    interface: Option<String>,
    version: Option<String>,
    category: Option<String>,
) -> Result<Response, Failure> {
    let bad = |m: String| (ErrorCode::BadRequest, m);
    let category = match category.as_deref() {
        None => Category::User,
        Some(c) => Category::ALL
            .into_iter()
            .find(|k| k.name() == c)
            .ok_or_else(|| {
                bad(format!(
                    "category '{c}': use system, standard, function or user"
                ))
            })?,
    };
    let req = match version.as_deref() {
        None => semver::VersionReq::STAR,
        Some(v) => semver::VersionReq::parse(v).map_err(|e| {
            bad(format!(
                "version '{v}' is not a semver range ({e}), e.g. ^1.2"
            ))
        })?,
    };
    let found = with_host(&*shared.driver, move |h| {
        Ok(match &interface {
            None => h.services(),
            Some(i) => h.lookup(i, &req, category).into_iter().collect(),
        })
    })?;
    Ok(Response::Services {
        services: found
            .into_iter()
            .map(|s| ServiceEntry {
                interface: s.interface,
                version: s.version,
                provider: s.provider,
                category: s.category.name().into(),
                state: state_name(s.state).into(),
                users: s.users,
            })
            .collect(),
    })
}

/// Who asks for a module operation: the local socket's owner (anything), or the holder of a
/// remote key, who may touch system and standard modules only with the `system` class.
#[derive(Clone, Copy)]
pub(super) struct Caller<'a> {
    pub shared: &'a Shared,
    pub remote: Option<&'a (std::net::SocketAddr, super::remote::Grant)>,
}

impl Caller<'_> {
    /// Refuses (counted and logged as a remote refusal) a remote `op` on a module of
    /// `category` the key may not touch.
    pub(super) fn may_touch(
        &self,
        op: &str,
        what: &str,
        category: Category,
    ) -> Result<(), Failure> {
        let Some((peer, grant)) = self.remote else {
            return Ok(());
        };
        if category > Category::Standard || grant.may.contains(&RemoteClass::System) {
            return Ok(());
        }
        let e = Refusal::NotPermitted {
            key: grant.key.clone(),
            op: format!("{op} {what} (a {} module)", category.name()),
            class: RemoteClass::System.name(),
        };
        if let Some(g) = &self.shared.remote {
            g.refused(*peer, &e);
        }
        Err((ErrorCode::Unauthorized, e.to_string()))
    }

    /// [`Caller::may_touch`] for the installed module `name`.
    fn may_touch_installed(&self, op: &str, name: &str) -> Result<(), Failure> {
        if self.remote.is_none() {
            return Ok(());
        }
        let n = name.to_string();
        let category = with_host(&*self.shared.driver, move |h| h.info(&n))?.category;
        self.may_touch(op, name, category)
    }
}

/// Runs `f` on the node's module host.
fn with_host<R: Send + 'static>(
    d: &dyn Driver,
    f: impl FnOnce(&mut ModuleHost) -> Result<R, ModuleError> + Send + 'static,
) -> Result<R, Failure> {
    call(d, move |n, _| {
        if anode_modules::host_mut(n).is_none() {
            return Err(no_host());
        }
        // `host` also tells the module host the node's current link peers; the PLAN EE's
        // routing functions follow every change (and report faults) through `sync_routes`.
        let r = anode_modules::host(n).and_then(f).map_err(refused);
        anode_modules::sync_routes(n).map_err(refused)?;
        r
    })?
}

/// Decodes, verifies and compiles a package off the node's thread.
fn prepare(shared: &Shared, package: &Payload, config: &ModuleConfig) -> Result<Prepared, Failure> {
    let pkg = Package::decode(package.as_bytes()).map_err(refused)?;
    let (rt, trust): (Arc<ModRuntime>, _) = with_host(&*shared.driver, |h| {
        Ok((h.runtime().clone(), h.trust().clone()))
    })?;
    Prepared::new(&rt, &trust, pkg, &config_table(config)).map_err(refused)
}

/// `module_install`.
pub(super) fn install(
    who: Caller<'_>,
    package: &Payload,
    config: &ModuleConfig,
    start: bool,
) -> Result<Response, Failure> {
    let shared = who.shared;
    let p = prepare(shared, package, config)?;
    who.may_touch("module_install", p.name(), p.category())?;
    let id = p.id();
    let name = p.name().to_string();
    let info = with_host(&*shared.driver, move |h| {
        let state = h.install_prepared(p)?;
        if start && state == State::Resolved {
            h.start(&name).map_err(|e| ModuleError::State {
                name: name.clone(),
                reason: format!("installed, but it did not start: {e}"),
            })?;
        }
        h.info(&name)
    })?;
    tracing::info!(module = %id, state = ?info.state, "module installed over the control socket");
    journal_package(shared, package, config, &info);
    Ok(module(info))
}

/// `module_upgrade`.
pub(super) fn upgrade(
    who: Caller<'_>,
    package: &Payload,
    config: &ModuleConfig,
) -> Result<Response, Failure> {
    let shared = who.shared;
    let p = prepare(shared, package, config)?;
    who.may_touch("module_upgrade", p.name(), p.category())?;
    who.may_touch_installed("module_upgrade", p.name())?;
    let id = p.id();
    let name = p.name().to_string();
    let info = with_host(&*shared.driver, move |h| {
        h.upgrade_prepared(p)?;
        h.info(&name)
    })?;
    tracing::info!(module = %id, "module upgraded over the control socket");
    journal_package(shared, package, config, &info);
    Ok(module(info))
}

/// `module_list`.
pub(super) fn list(shared: &Shared) -> Result<Response, Failure> {
    let l = with_host(&*shared.driver, |h| Ok(h.list()))?;
    let kept = shared.journal.get().and_then(|s| s.load().ok());
    let deployed = super::deploy::deployed_names(shared);
    let origin = |name: &str| {
        if deployed.iter().any(|d| d == name) {
            return Some("deployed".to_string());
        }
        kept.as_ref()
            .and_then(|j| j.entries.iter().find(|e| e.name == name))
            .map(|e| e.origin.as_str().to_string())
    };
    Ok(Response::Modules {
        modules: l
            .into_iter()
            .map(|i| {
                let o = origin(&i.name);
                ModuleEntry {
                    origin: o,
                    ..entry(i)
                }
            })
            .collect(),
    })
}

/// `module_info`, `module_start`, `module_stop`, `module_remove`.
pub(super) fn by_name(who: Caller<'_>, op: Op, name: String) -> Result<Response, Failure> {
    if let Some(r) = super::ees::by_name(&who, op, &name)? {
        return Ok(r);
    }
    let shared = who.shared;
    if op != Op::Info {
        who.may_touch_installed(op.wire(), &name)?;
    }
    let info = with_host(&*shared.driver, move |h| {
        match op {
            Op::Info => {}
            Op::Start => h.start(&name)?,
            Op::Stop => h.stop(&name)?,
            Op::Remove => {
                let before = h.info(&name)?;
                h.remove(&name)?;
                return Ok(before);
            }
        }
        h.info(&name)
    })?;
    if op != Op::Info {
        tracing::info!(module = %info.name, ?op, "module op over the control socket");
        let (name, active) = (info.name.clone(), info.state == State::Active);
        journal(shared, |_, j| {
            match op {
                Op::Remove => j.remove(&name),
                _ => {
                    if let Some(e) = j.get_mut(&name) {
                        e.started = active;
                    }
                }
            }
            Ok(())
        });
    }
    Ok(module(info))
}

/// `module_qdisc`.
pub(super) fn qdisc(
    who: Caller<'_>,
    name: Option<String>,
    link: String,
    rate_bps: u64,
) -> Result<Response, Failure> {
    let shared = who.shared;
    // A link's queue discipline is how the node forwards: system, whichever module.
    who.may_touch("module_qdisc", &format!("on link {link}"), Category::System)?;
    if name.is_some() && rate_bps == 0 {
        return Err((
            ErrorCode::BadRequest,
            "give the link's transmit rate (rate_bps > 0, e.g. --rate-mbps 40)".into(),
        ));
    }
    let r = call(&*shared.driver, move |n, now| {
        let Some(id) = super::convert::link_named(n, &link) else {
            return Err((
                ErrorCode::NoSuchLink,
                format!("no link '{link}'; see `anode links`"),
            ));
        };
        let replaced = match &name {
            Some(q) => {
                if anode_modules::host_mut(n).is_none() {
                    return Err(no_host());
                }
                anode_modules::attach_qdisc(n, q, id, rate_bps, now).map_err(refused)?
            }
            None => n.set_link_qdisc(id, None, now),
        };
        Ok(Response::QdiscSet {
            link: id.0,
            qdisc: name,
            replaced,
        })
    })?;
    if let Ok(Response::QdiscSet { link, qdisc, .. }) = &r {
        tracing::info!(
            link,
            ?qdisc,
            rate_bps,
            "link queue discipline set over the control socket"
        );
    }
    r
}

/// `module_call`.
pub(super) fn call_op(
    who: Caller<'_>,
    name: String,
    op: i32,
    arg: i64,
) -> Result<Response, Failure> {
    let shared = who.shared;
    who.may_touch_installed("module_call", &name)?;
    let n = name.clone();
    let result = with_host(&*shared.driver, move |h| h.call_service(&n, op, arg))?;
    Ok(Response::ModuleCalled { name, op, result })
}

/// The ops on one installed module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Info,
    Start,
    Stop,
    Remove,
}

impl Op {
    /// The protocol's name of the op.
    pub(super) fn wire(self) -> &'static str {
        match self {
            Op::Info => "module_info",
            Op::Start => "module_start",
            Op::Stop => "module_stop",
            Op::Remove => "module_remove",
        }
    }
}

fn module(i: ModuleInfo) -> Response {
    Response::Module {
        module: Box::new(entry(i)),
    }
}
