//! Routing functions and PLAN services as modules. A `routing-function` module, once
//! active, is registered with the node's PLAN EE under its name (PLANet's `routFun`), so
//! PLAN packets naming it are routed by it at intermediate nodes and PLAN code may call it
//! as a service `host -> host * dev`; `defaultRoute` stays the built-in distance vector. It
//! is also registered with the node's capsule EE under the same name, so capsules asking for
//! it (`forward_by`, `crates/capsule/ABI.md`) are forwarded by it. A `plan-service` module is
//! registered as the PLAN service `NAME : T`, `T` its manifest's `plan_type` (any PLAN
//! function type; default `int -> int`). The PLAN EE checks what it answers against `T`, so a
//! module cannot hand PLAN code a value of another type.
//!
//! Guest ABI: `route(flow: i64) -> i32` returns the link to send on, `ROUTE_NONE` (-1: no
//! route, the packet is dropped and counted) or `ROUTE_DEFAULT` (-2: the node's default
//! route); the destination's 18 address bytes are the "packet" it may `pkt_read`.
//! `plan_call(arg: i64) -> i64` answers a PLAN call of an `int -> int` service,
//! `plan_invoke(len) -> i64` one of any other type (marshalled values, `runtime.rs`). These
//! instances live in the EEs, one
//! fresh instance per EE (the PLAN and the capsule EE do not share globals or memory): an
//! upgrade gives each EE a fresh instance of the new version (no state hand-off).
//!
//! Contracts:
//! - [`sync_routes`] makes the EEs' routing functions follow the host: every active
//!   routing-function module registered with the PLAN EE and the capsule EE the node has (a
//!   new instance after an upgrade), every one stopped or removed unregistered from both. The
//!   control ops and the startup list call it after each change. The EEs may sit bare or
//!   under the NodeOS guard.
//! - A routing function that traps, runs out of fuel or names a link that is not up answers
//!   "no route" from then on (in the EE where it failed); the next [`sync_routes`] stops the
//!   module with the fault recorded and unregisters it from both EEs. The node goes on.
//! - A routing function on a node with neither a PLAN nor a capsule EE, or a PLAN service on a
//!   node without a PLAN EE, is an error naming it.

use std::sync::{Arc, Mutex};

use anode_capsule::{CapsuleEe, CapsuleRouteFn};
use anode_core::{LinkId, NextHop, Node, NodeFacts};
use anode_nodeos::capsule::MeteredCapsule;
use anode_nodeos::guard::DomainGuard;
use anode_nodeos::plan::MeteredPlan;
use anode_plan::ee::route::{RouteFn, RouteQuery};
use anode_plan::ee::{NodeService, PlanEe, ServiceEnv};
use anode_plan::services::ServiceError;
use anode_plan::value::Value;
use anode_wire::NodeAddr;

use crate::runtime::Instance;
use crate::{Kind, ModuleError, host};

/// Where a routing function's instance leaves its fault for the host.
pub(crate) type FaultSlot = Arc<Mutex<Option<ModuleError>>>;

/// `route(flow)` answers.
const ROUTE_NONE: i32 = -1;
const ROUTE_DEFAULT: i32 = -2;

/// A routing-function module's instance, as the PLAN EE's [`RouteFn`] or the capsule EE's
/// [`CapsuleRouteFn`] (each EE holds its own).
struct WasmRoute {
    name: String,
    inst: Box<Instance>,
    fault: FaultSlot,
    dead: bool,
}

impl WasmRoute {
    fn failed(&mut self, e: ModuleError) -> Option<NextHop> {
        self.dead = true;
        if let Ok(mut f) = self.fault.lock() {
            *f = Some(e);
        }
        None
    }

    /// The guest's answer for `dst` and `flow`, as a next hop that is an up neighbor.
    fn hop(&mut self, node: &dyn NodeFacts, dst: &NodeAddr, flow: u64) -> Option<NextHop> {
        if self.dead {
            return None;
        }
        match self.inst.route(&dst.to_bytes(), flow) {
            Ok(ROUTE_DEFAULT) => node.lookup(dst),
            Ok(ROUTE_NONE) => None,
            Ok(link) => {
                let l = u32::try_from(link).ok();
                let hop = l.and_then(|l| node.neighbor_on(LinkId(l)));
                if hop.is_none() {
                    let name = self.name.clone();
                    return self.failed(ModuleError::Fault {
                        name,
                        reason: format!(
                            "route returned {link}, which is not a link with an up neighbor"
                        ),
                    });
                }
                hop
            }
            Err(e) => self.failed(e),
        }
    }
}

impl RouteFn for WasmRoute {
    fn next_hop(&mut self, q: &RouteQuery<'_, '_>) -> Option<NextHop> {
        self.hop(q.ctx, &q.dst, q.flow)
    }
}

impl CapsuleRouteFn for WasmRoute {
    fn next_hop(&mut self, node: &dyn NodeFacts, dst: NodeAddr, flow: u64) -> Option<NextHop> {
        self.hop(node, &dst, flow)
    }
}

/// The PLAN type of a module's PLAN service without a manifest `plan_type`.
const PLAN_SERVICE_TYPE: &str = "int -> int";

/// A PLAN-service module's instance, as a PLAN EE extension service.
struct WasmPlanService {
    name: String,
    inst: Box<Instance>,
    fault: FaultSlot,
    dead: bool,
    /// Declared with a `plan_type`: called through `plan_invoke` with marshalled values.
    typed: bool,
}

impl WasmPlanService {
    /// Records a fault: the module answers no more and the next sync stops it.
    fn faulted(&mut self, e: ModuleError) -> ServiceError {
        let msg = e.to_string();
        self.dead = true;
        if let Ok(mut f) = self.fault.lock() {
            *f = Some(e);
        }
        ServiceError::new("ServiceError", msg)
    }

    fn invoke(&mut self, args: &[Value]) -> Result<Value, ServiceError> {
        let bytes = anode_plan::marshal::encode_args(args);
        match self.inst.plan_invoke(bytes) {
            Ok(Ok(out)) => match anode_plan::marshal::decode_value(&out) {
                Ok(v) => Ok(v),
                Err(e) => Err(self.faulted(ModuleError::Fault {
                    name: self.name.clone(),
                    reason: format!("plan_invoke answered a malformed value: {e}"),
                })),
            },
            Ok(Err(why)) => Err(ServiceError::new(
                "ServiceError",
                format!("{}: {why}", self.name),
            )),
            Err(e) => Err(self.faulted(e)),
        }
    }
}

impl NodeService for WasmPlanService {
    fn call(
        &mut self,
        _env: &mut ServiceEnv<'_, '_>,
        args: &[Value],
    ) -> Result<Value, ServiceError> {
        let name = &self.name;
        if self.dead {
            return Err(ServiceError::new(
                "UnknownService",
                format!("{name} faulted and is stopped"),
            ));
        }
        if self.typed {
            return self.invoke(args);
        }
        let Some(Value::Int(arg)) = args.first() else {
            return Err(ServiceError::new(
                "ServiceError",
                format!("{name} takes one int"),
            ));
        };
        match self.inst.plan_call(*arg) {
            Ok(v) => Ok(Value::Int(v)),
            Err(e) => Err(self.faulted(e)),
        }
    }
}

/// The node's PLAN EE, bare or under the NodeOS (`DomainGuard<MeteredPlan>`, as `anode
/// node` and the emulator run it).
fn plan_ee(node: &mut Node) -> Option<&mut PlanEe> {
    let any = node.ee_mut(anode_wire::anep::TYPE_PLAN)?.as_any_mut();
    if any.is::<PlanEe>() {
        return any.downcast_mut::<PlanEe>();
    }
    any.downcast_mut::<DomainGuard<MeteredPlan>>()
        .map(|g| g.inner_mut().inner_mut())
}

/// The node's capsule EE, bare or under the NodeOS (`DomainGuard<MeteredCapsule>`).
fn capsule_ee(node: &mut Node) -> Option<&mut CapsuleEe> {
    let any = node.ee_mut(anode_wire::anep::TYPE_CAPSULE)?.as_any_mut();
    if any.is::<CapsuleEe>() {
        return any.downcast_mut::<CapsuleEe>();
    }
    any.downcast_mut::<DomainGuard<MeteredCapsule>>()
        .map(|g| g.inner_mut().inner_mut())
}

/// Makes the EEs' routing functions follow the module host (see the module docs).
/// Without a module host there is nothing to do; an active routing function on a node
/// with neither a PLAN nor a capsule EE (a PLAN service: without a PLAN EE) is an error
/// naming it.
pub fn sync_routes(node: &mut Node) -> Result<(), ModuleError> {
    if crate::host_mut(node).is_none() {
        return Ok(());
    }
    // Faults first: a faulted routing function is stopped (and so unregistered below).
    let h = host(node)?;
    let faulted: Vec<(String, ModuleError)> = h
        .routes_attached
        .iter()
        .filter_map(|(n, (_, slot))| {
            let e = match slot.lock() {
                Ok(mut f) => f.take()?,
                Err(_) => ModuleError::Fault {
                    name: n.clone(),
                    reason: "its fault record was poisoned".into(),
                },
            };
            Some((n.clone(), e))
        })
        .collect();
    for (n, e) in faulted {
        h.route_fault(&n, e);
    }
    let active = h.active_routes();
    let stale: Vec<String> = h
        .routes_attached
        .keys()
        .filter(|n| !active.iter().any(|(a, _, _)| a == *n))
        .cloned()
        .collect();
    let fresh: Vec<(String, Kind)> = active
        .iter()
        .filter(|(n, hash, _)| h.routes_attached.get(n).is_none_or(|(had, _)| had != hash))
        .map(|(n, _, k)| (n.clone(), *k))
        .collect();
    for n in stale {
        host(node)?.routes_attached.remove(&n);
        if let Some(p) = plan_ee(node) {
            p.remove_route(&n);
            p.remove_service(&n);
        }
        if let Some(c) = capsule_ee(node) {
            c.remove_route(&n);
        }
    }
    for (n, kind) in fresh {
        let hash = host(node)?.info(&n)?.code_sha256;
        let slot: FaultSlot = Arc::default();
        let to_capsule = kind == Kind::RoutingFunction && capsule_ee(node).is_some();
        let to_plan = plan_ee(node).is_some();
        if !to_plan && !to_capsule {
            let reason = if kind == Kind::PlanService {
                "this node runs no PLAN execution environment"
            } else {
                "this node runs neither a PLAN nor a capsule execution environment"
            };
            return Err(ModuleError::State {
                name: n,
                reason: reason.into(),
            });
        }
        if to_plan {
            let inst = host(node)?.route_instance(&n)?;
            let ty = host(node)?.plan_type(&n)?;
            let Some(p) = plan_ee(node) else {
                continue;
            };
            let r = if kind == Kind::PlanService {
                let svc = WasmPlanService {
                    name: n.clone(),
                    inst,
                    fault: Arc::clone(&slot),
                    dead: false,
                    typed: ty.is_some(),
                };
                let ty = ty.as_deref().unwrap_or(PLAN_SERVICE_TYPE);
                p.set_service(&n, ty, Box::new(svc)).map(|_| ())
            } else {
                let f = WasmRoute {
                    name: n.clone(),
                    inst,
                    fault: Arc::clone(&slot),
                    dead: false,
                };
                p.set_route(&n, Box::new(f))
            };
            r.map_err(|e| ModuleError::State {
                name: n.clone(),
                reason: format!("cannot register it with the PLAN EE: {e}"),
            })?;
        }
        if to_capsule {
            let inst = host(node)?.route_instance(&n)?;
            let f = WasmRoute {
                name: n.clone(),
                inst,
                fault: Arc::clone(&slot),
                dead: false,
            };
            if let Some(c) = capsule_ee(node) {
                c.set_route(&n, Box::new(f))
                    .map_err(|e| ModuleError::State {
                        name: n.clone(),
                        reason: format!("cannot register it with the capsule EE: {e}"),
                    })?;
            }
        }
        host(node)?.routes_attached.insert(n, (hash, slot));
    }
    Ok(())
}
