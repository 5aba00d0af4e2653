//! The node's execution environments as services (Openet runs its ANTS EE as one): `module_ees`
//! lists them as entries of kind `ee`, category `standard`, and `module_info`, `module_start`
//! and `module_stop` act on an EE when given its name ("capsule", "plan", "deploy") and no
//! installed module has that name.
//!
//! EE modules (kind `ee`: an EE in a signed package, owning an ANEP Type ID of its own) are
//! listed here too, after the built-in ones; they are modules in every other respect
//! (install, upgrade with state hand-off, stop, start, remove).
//!
//! Contract: a stopped EE keeps its state (code cache, soft state, NodeOS domains, timers);
//! the node drops the packets and control messages it would get, counted as `ee_stopped`,
//! and closes the cut-through channels of its Type ID, until it is started again. On a node
//! hosting modules the stop is kept in the module journal and survives a restart. Built-in EEs cannot be removed. A remote party needs the
//! `system` class to start or stop one (they are standard services). EEs answer these ops
//! whether or not the node hosts service modules.

use anode_core::{EeInfo, Node};
use anode_ctl::{ErrorCode, ModuleEntry, Response};
use anode_modules::Category;

use super::call;
use super::handlers::Failure;
use super::modules::{Caller, Op};
use super::state::Shared;

/// An EE's service name: its name without the `+nodeos` of an EE run under the NodeOS.
fn service_name(ee: &str) -> &str {
    ee.split('+').next().unwrap_or(ee)
}

/// An EE as the protocol carries a module.
fn entry(e: &EeInfo) -> ModuleEntry {
    let name = service_name(&e.name);
    ModuleEntry {
        name: name.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        summary: format!(
            "the {name} execution environment (ANEP Type ID 0x{:04X}){}, built in",
            e.type_id,
            if e.name.ends_with("+nodeos") {
                " under the NodeOS"
            } else {
                ""
            }
        ),
        kind: "ee".into(),
        category: Category::Standard.name().into(),
        state: if e.running { "active" } else { "stopped" }.into(),
        hook: None,
        load_order: 0,
        missing: Vec::new(),
        last_error: None,
        packets: e.packets,
        code_sha256: String::new(),
        publisher: None,
        provides: vec![format!("ee/0x{:04X}", e.type_id)],
        requires: Vec::new(),
        origin: Some("built-in".into()),
        ..ModuleEntry::default()
    }
}

/// `module_ees`.
pub(super) fn list(shared: &Shared) -> Result<Response, Failure> {
    let ees = call(&*shared.driver, |n, _| n.ees())?;
    let mut modules: Vec<ModuleEntry> = ees.iter().map(entry).collect();
    // EE modules (kind `ee`, from signed packages), when the node hosts modules.
    if let Ok(Response::Modules { modules: m }) = super::modules::list(shared) {
        modules.extend(m.into_iter().filter(|e| e.kind == "ee"));
    }
    Ok(Response::Modules { modules })
}

/// The EE `name` names at `n`, unless an installed module has that name.
fn ee_named(n: &mut Node, name: &str) -> Option<EeInfo> {
    if anode_modules::host_mut(n).is_some_and(|h| h.state(name).is_some()) {
        return None;
    }
    n.ees().into_iter().find(|e| service_name(&e.name) == name)
}

/// `module_info`, `module_start`, `module_stop`, `module_remove` on an EE: `None` if `name` is
/// not an EE's (or a module has it).
pub(super) fn by_name(who: &Caller<'_>, op: Op, name: &str) -> Result<Option<Response>, Failure> {
    let n = name.to_string();
    let Some(_) = call(&*who.shared.driver, move |node, _| ee_named(node, &n))? else {
        return Ok(None);
    };
    if op == Op::Remove {
        return Err((
            ErrorCode::ModuleRefused,
            format!(
                "{name} is a built-in execution environment: it cannot be removed; stop it (`anode module stop {name}`) to drop its packets"
            ),
        ));
    }
    if op != Op::Info {
        who.may_touch(op.wire(), name, Category::Standard)?;
    }
    let n = name.to_string();
    let e = call(&*who.shared.driver, move |node, _| {
        let e = ee_named(node, &n)?;
        match op {
            Op::Start => node.set_ee_running(e.type_id, true),
            Op::Stop => node.set_ee_running(e.type_id, false),
            _ => true,
        };
        ee_named(node, &n)
    })?;
    let Some(e) = e else {
        return Ok(None);
    };
    if op != Op::Info {
        tracing::info!(ee = %service_name(&e.name), ?op, "execution environment op over the control socket");
        // Kept across a restart (a node hosting modules keeps a journal).
        let name = service_name(&e.name).to_string();
        super::modules::journal(who.shared, |_, j| {
            j.stopped_ees.retain(|n| *n != name);
            if !e.running {
                j.stopped_ees.push(name);
            }
            Ok(())
        });
    }
    Ok(Some(Response::Module {
        module: Box::new(entry(&e)),
    }))
}
