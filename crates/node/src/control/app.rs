//! The application-library ops: inject an ANEP packet, bind a Type ID's application port,
//! and the capsule code cache (`list`, `show`, `put`, `evict`).
//!
//! Contracts: an injected packet is handled exactly like one a local application originated
//! (`Node::inject`): its Type ID picks the EE, and a refusal is answered with the node's drop
//! reason. Binding under `TYPE_CAPSULE` also registers the port with the capsule EE (the
//! capability code objects deliver to); the server unregisters it when the connection
//! closes. Code names are checked before the node is touched.

use anode_ctl::app::{code_name, parse_code_name};
use anode_ctl::{CodeEntry, ErrorCode, Payload, Response, StateEntry};
use anode_wire::anep::TYPE_CAPSULE;

use super::handlers::ConnState;
use super::state::Shared;
use super::{call, handlers::Failure};
use crate::ees::capsule_ee;

/// Most copies one `inject` request may ask for.
const MAX_INJECT: u32 = 10_000;

fn entry(c: &anode_capsule::CodeInfo) -> CodeEntry {
    CodeEntry {
        hash: code_name(&c.hash),
        name: c.name.clone().unwrap_or_default(),
        wasm_len: c.wasm_len as u64,
        mem_bytes: c.cost as u64,
        in_memory: c.in_memory,
        live: c.live,
        on_disk: c.on_disk,
    }
}

fn no_capsule_ee() -> Failure {
    (
        ErrorCode::NoCode,
        "this node runs no capsule execution environment".into(),
    )
}

/// `inject`.
pub(super) fn inject(
    shared: &Shared,
    st: &ConnState,
    packet: Payload,
    logs: bool,
    (count, partial): (u32, bool),
) -> Result<Response, Failure> {
    if !(1..=MAX_INJECT).contains(&count) {
        return Err((
            ErrorCode::BadRequest,
            format!("count must be 1 to {MAX_INJECT}"),
        ));
    }
    if logs {
        shared.want_logs(st.id);
    }
    let buf = packet.as_bytes().to_vec();
    let r = call(&*shared.driver, move |n, now| {
        for k in 0..count {
            if let Err(why) = n.inject(now, buf.clone()) {
                return Err((k, why, n.inject_drop_detail().map(str::to_string)));
            }
        }
        Ok(())
    })?;
    match r {
        Ok(()) => Ok(Response::Injected),
        Err((injected, why, detail)) if partial => Ok(Response::InjectedPart {
            injected,
            reason: drop_message(why, detail.as_deref()),
            drop: detail.unwrap_or_else(|| why.to_string()),
        }),
        Err((_, why, detail)) => Err((ErrorCode::Dropped, drop_message(why, detail.as_deref()))),
    }
}

/// What an application is told when the node dropped its injected packet: the node's reason,
/// or the EE's ("ee/reason") with what to do about it.
fn drop_message(why: anode_core::DropReason, ee: Option<&str>) -> String {
    let Some(detail) = ee else {
        return format!(
            "the node dropped the injected packet: {why}; check the packet's destination (`anode routes`) and resource bound"
        );
    };
    let (ee, reason) = detail.rsplit_once('/').unwrap_or(("an EE", detail));
    let fix = match reason {
        "bandwidth" => {
            "its protocol's domain is over its NodeOS channel_bandwidth: send more slowly, or raise channel_bandwidth in the node's [nodeos] policy (see `anode domains`)"
        }
        "queue_full" => {
            "its protocol's domain has a full queue (the EE is behind on its CPU share): send more slowly (see `anode domains`)"
        }
        "memory" => {
            "its protocol's domain is out of memory under its NodeOS policy (see `anode domains`)"
        }
        "domain_refused" => {
            "its protocol was terminated by the NodeOS and is refused until the node restarts (see `anode domains`)"
        }
        _ => "see `anode status` for the EE's drop counters",
    };
    format!("the {ee} EE dropped the injected packet ({reason}): {fix}")
}

/// `bind_app`.
pub(super) fn bind_app(
    shared: &Shared,
    st: &ConnState,
    type_id: u16,
    port: u16,
) -> Result<Response, Failure> {
    if !shared.bind_port(st.id, port) {
        return Err((
            ErrorCode::PortInUse,
            format!("port {port} is bound by another application; pick another port"),
        ));
    }
    if type_id == TYPE_CAPSULE {
        let ok = call(&*shared.driver, move |n, _| {
            capsule_ee(n).map(|ee| ee.register_port(port)).is_some()
        })?;
        if !ok {
            shared.unbind_port(st.id, port);
            return Err(no_capsule_ee());
        }
        shared.note_capsule_port(port);
    }
    Ok(Response::Bound { port })
}

/// `code_list`. The node thread gives the memory cache's entries; the disk cache is read
/// here, on the control connection's thread.
pub(super) fn code_list(shared: &Shared) -> Result<Response, Failure> {
    let listing = call(&*shared.driver, |n, _| {
        capsule_ee(n).map(|ee| ee.code_listing())
    })?
    .ok_or_else(no_capsule_ee)?;
    let code = listing.complete().iter().map(entry).collect();
    Ok(Response::CodeList { code })
}

fn name(hash: &str) -> Result<[u8; 32], Failure> {
    parse_code_name(hash).map_err(|e| (ErrorCode::BadRequest, e.to_string()))
}

/// `code_show`.
pub(super) fn code_show(shared: &Shared, hash: &str) -> Result<Response, Failure> {
    let h = name(hash)?;
    let r = call(&*shared.driver, |n, _| {
        capsule_ee(n).map(|ee| ee.code_listing())
    })?
    .map(|listing| listing.find(&h));
    match r {
        None => Err(no_capsule_ee()),
        Some(None) => Err((
            ErrorCode::NoCode,
            format!("no code object {hash} in the cache; see `anode code list`"),
        )),
        Some(Some(c)) => Ok(Response::Code(entry(&c))),
    }
}

/// `code_state`: the live soft-state entries of one code object.
pub(super) fn code_state(shared: &Shared, hash: &str) -> Result<Response, Failure> {
    let h = name(hash)?;
    let r = call(&*shared.driver, move |n, now| {
        capsule_ee(n).map(|ee| ee.soft_state().entries(&h, now))
    })?;
    let entries = r.ok_or_else(no_capsule_ee)?;
    Ok(Response::CodeState {
        hash: hash.trim().to_string(),
        entries: entries
            .into_iter()
            .map(|e| StateEntry {
                key: Payload(e.key),
                value: Payload(e.value),
                expires_in_ms: u64::try_from(e.ttl_left.as_millis()).unwrap_or(u64::MAX),
            })
            .collect(),
    })
}

/// `code_put`. The module is compiled and written to the disk cache here, on the control
/// connection's thread; the node thread only takes the finished code object, so installing a
/// large module does not stall forwarding.
pub(super) fn code_put(shared: &Shared, wasm: Payload) -> Result<Response, Failure> {
    let bytes = wasm.as_bytes().to_vec();
    let installer = call(&*shared.driver, |n, _| {
        capsule_ee(n).map(|ee| ee.installer())
    })?
    .ok_or_else(no_capsule_ee)?;
    let built = installer.build(&bytes).map_err(|e| {
        (
            ErrorCode::BadCode,
            format!("the module was refused: {e}; check it against crates/capsule/ABI.md"),
        )
    })?;
    let r = call(&*shared.driver, move |n, _| {
        let ee = capsule_ee(n)?;
        let h = ee.install_built(built);
        Some(ee.code_info(&h).map(|c| entry(&c)))
    })?;
    match r {
        None => Err(no_capsule_ee()),
        Some(Some(c)) => Ok(Response::Code(c)),
        Some(None) => Err((
            ErrorCode::NoCode,
            "the module was installed but evicted at once (larger than the memory cache?)".into(),
        )),
    }
}

/// `code_evict`.
pub(super) fn code_evict(shared: &Shared, hash: String) -> Result<Response, Failure> {
    let h = name(&hash)?;
    let r = call(&*shared.driver, move |n, _| {
        capsule_ee(n).map(|ee| ee.evict(&h))
    })?;
    r.map(|removed| Response::Evicted { hash, removed })
        .ok_or_else(no_capsule_ee)
}

#[cfg(test)]
mod tests {
    use super::drop_message;
    use anode_core::DropReason;

    #[test]
    fn drop_messages_name_the_ee_and_the_fix() {
        let m = drop_message(DropReason::EeDropped, Some("capsule+nodeos/bandwidth"));
        assert!(m.starts_with("the capsule+nodeos EE dropped the injected packet (bandwidth)"));
        assert!(m.contains("channel_bandwidth"), "{m}");
        let m = drop_message(DropReason::EeDropped, Some("capsule+nodeos/domain_refused"));
        assert!(m.contains("terminated by the NodeOS"), "{m}");
        let m = drop_message(DropReason::EeDropped, Some("plan/odd"));
        assert!(m.contains("(odd)") && m.contains("anode status"), "{m}");
        let m = drop_message(DropReason::NoRoute, None);
        assert!(m.contains("no_route") && m.contains("anode routes"), "{m}");
    }
}
