//! The node services of route scouting (PLANet §V-B; program `programs/scout.plan`):
//!
//! | service | type | behaviour |
//! |---|---|---|
//! | `queueLength` | `dev -> int` | the device's load: packets waiting in its queue discipline, plus its recent transmit rate in units of [`NodeState::load_unit_pps`] (default 100 packets/s; `anode_core::load`), plus any load its owner reports ([`NodeState::device_load`]); 0 for a device that is not a link |
//! | `getMark` | `(int, host) -> int` | best metric seen for (round, destination), `~1` if none or expired |
//! | `setMark` | `(int, host, int) -> unit` | records it for [`NodeState::mark_ttl`] |
//! | `newFlowId` | `void -> int` | a flow id unique to this node (address hash, counter) |
//! | `installFlow` | `(int, host, dev) -> unit` | flow id -> (neighbor, device) in the flow table read by `flowRoute` |
//!
//! Raises `ServiceError` when the bounded soft state or flow table is full, or for a flow
//! id that is negative or a device that is not the link to that neighbor.

use anode_core::wire::NodeAddr;
use anode_core::{LinkId, NextHop};

use super::PlanEe;
use super::services::{NodeState, ServiceEnv};
use crate::Value;
use crate::services::{RegistryError, ServiceError};

pub(crate) const MARKS: &str = "scout.mark";

fn bad(name: &str) -> ServiceError {
    ServiceError::new("ServiceError", format!("{name}: bad arguments"))
}

fn queue_length(env: &mut ServiceEnv<'_, '_>, a: &[Value]) -> Result<Value, ServiceError> {
    let Some(Value::Dev(d)) = a.first() else {
        return Err(bad("queueLength"));
    };
    Ok(Value::Int(device_load(env, *d)))
}

/// The load of device `d` (see the module docs).
pub fn device_load(env: &ServiceEnv<'_, '_>, d: crate::value::Dev) -> i64 {
    let measured = env.ctx.link_load(LinkId(d)).map_or(0, |l| {
        let rate = l.tx_pps / env.state.load_unit_pps.max(1);
        i64::try_from(rate)
            .unwrap_or(i64::MAX)
            .saturating_add(i64::try_from(l.queued).unwrap_or(i64::MAX))
    });
    let reported = env.state.device_load.get(&d).copied().unwrap_or(0);
    measured.saturating_add(reported)
}

fn mark_key(a: &[Value], name: &str) -> Result<Value, ServiceError> {
    match (a.first(), a.get(1)) {
        (Some(r @ Value::Int(_)), Some(h @ Value::Host(_))) => {
            Value::tuple(vec![r.clone(), h.clone()]).map_err(|_| bad(name))
        }
        _ => Err(bad(name)),
    }
}

fn get_mark(env: &mut ServiceEnv<'_, '_>, a: &[Value]) -> Result<Value, ServiceError> {
    let key = mark_key(a, "getMark")?;
    let now = env.ctx.now();
    Ok(env
        .state
        .soft
        .get(MARKS, &key, now)
        .cloned()
        .unwrap_or(Value::Int(-1)))
}

fn set_mark(env: &mut ServiceEnv<'_, '_>, a: &[Value]) -> Result<Value, ServiceError> {
    let key = mark_key(a, "setMark")?;
    let Some(v @ Value::Int(_)) = a.get(2) else {
        return Err(bad("setMark"));
    };
    let now = env.ctx.now();
    let ttl = env.state.mark_ttl;
    if env.state.soft.set(MARKS, &key, v.clone(), ttl, now) {
        Ok(Value::Unit)
    } else {
        Err(ServiceError::new(
            "ServiceError",
            "setMark: soft state is full",
        ))
    }
}

pub(crate) fn addr_hash(a: NodeAddr) -> u64 {
    a.to_bytes().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The next flow id of this node: 24 bits of its address hash, then a 31-bit counter
/// (always positive as a PLAN int).
pub fn next_flow_id(state: &mut NodeState, me: NodeAddr) -> i64 {
    state.next_flow = state.next_flow.wrapping_add(1);
    let id = ((addr_hash(me) & 0xff_ffff) << 31) | (state.next_flow & 0x7fff_ffff);
    i64::try_from(id).unwrap_or(i64::MAX)
}

fn new_flow_id(env: &mut ServiceEnv<'_, '_>, _a: &[Value]) -> Result<Value, ServiceError> {
    let me = env.ctx.address();
    Ok(Value::Int(next_flow_id(env.state, me)))
}

fn install_flow(env: &mut ServiceEnv<'_, '_>, a: &[Value]) -> Result<Value, ServiceError> {
    let (Some(Value::Int(flow)), Some(Value::Host(h)), Some(Value::Dev(d))) =
        (a.first(), a.get(1), a.get(2))
    else {
        return Err(bad("installFlow"));
    };
    let flow = u64::try_from(*flow)
        .map_err(|_| ServiceError::new("ServiceError", "installFlow: negative flow id"))?;
    let hop = NextHop {
        link: LinkId(*d),
        addr: NodeAddr::from(*h),
    };
    if !env.ctx.neighbors().contains(&hop) {
        return Err(ServiceError::new(
            "NotANeighbor",
            format!("installFlow: {h} is not the up neighbor on device {d}"),
        ));
    }
    let now = env.ctx.now();
    if env.state.flows.install(flow, hop, now) {
        Ok(Value::Unit)
    } else {
        Err(ServiceError::new(
            "ServiceError",
            "installFlow: flow table is full",
        ))
    }
}

/// Installs the scouting services on `ee`.
pub fn install(ee: &mut PlanEe) -> Result<(), RegistryError> {
    ee.register_service("queueLength", "dev -> int", Box::new(queue_length))?;
    ee.register_service("getMark", "(int, host) -> int", Box::new(get_mark))?;
    ee.register_service("setMark", "(int, host, int) -> unit", Box::new(set_mark))?;
    ee.register_service("newFlowId", "void -> int", Box::new(new_flow_id))?;
    ee.register_service(
        "installFlow",
        "(int, host, dev) -> unit",
        Box::new(install_flow),
    )?;
    Ok(())
}
