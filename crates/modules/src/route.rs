//! Routing functions and PLAN services as modules. A `routing-function` module, once
//! active, is registered with the node's PLAN EE under its name (PLANet's `routFun`), so
//! PLAN packets naming it are routed by it at intermediate nodes and PLAN code may call it
//! as a service `host -> host * dev`; `defaultRoute` stays the built-in distance vector. A
//! `plan-service` module is registered as the PLAN service `NAME : int -> int`.
//!
//! Guest ABI: `route(flow: i64) -> i32` returns the link to send on, `ROUTE_NONE` (-1: no
//! route, the packet is dropped and counted) or `ROUTE_DEFAULT` (-2: the node's default
//! route); the destination's 18 address bytes are the "packet" it may `pkt_read`.
//! `plan_call(arg: i64) -> i64` answers a PLAN call. These instances live in the PLAN EE:
//! an upgrade gives the EE a fresh instance of the new version (no state hand-off).
//!
//! Contracts:
//! - [`sync_routes`] makes the PLAN EE's routing functions follow the host: every active
//!   routing-function module registered (a new instance after an upgrade), every one stopped
//!   or removed unregistered. The control ops and the startup list call it after each change.
//! - A routing function that traps, runs out of fuel or names a link that is not up answers
//!   "no route" from then on; the next [`sync_routes`] stops the module with the fault
//!   recorded and unregisters it. The node goes on.

use std::sync::{Arc, Mutex};

use anode_core::{LinkId, NextHop, Node};
use anode_nodeos::guard::DomainGuard;
use anode_nodeos::plan::MeteredPlan;
use anode_plan::ee::route::{RouteFn, RouteQuery};
use anode_plan::ee::{NodeService, PlanEe, ServiceEnv};
use anode_plan::services::ServiceError;
use anode_plan::value::Value;

use crate::runtime::Instance;
use crate::{Kind, ModuleError, host};

/// Where a routing function's instance leaves its fault for the host.
pub(crate) type FaultSlot = Arc<Mutex<Option<ModuleError>>>;

/// `route(flow)` answers.
const ROUTE_NONE: i32 = -1;
const ROUTE_DEFAULT: i32 = -2;

/// A routing-function module's instance, as the PLAN EE's [`RouteFn`].
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
}

impl RouteFn for WasmRoute {
    fn next_hop(&mut self, q: &RouteQuery<'_, '_>) -> Option<NextHop> {
        if self.dead {
            return None;
        }
        match self.inst.route(&q.dst.to_bytes(), q.flow) {
            Ok(ROUTE_DEFAULT) => q.ctx.lookup(&q.dst),
            Ok(ROUTE_NONE) => None,
            Ok(link) => {
                let l = u32::try_from(link).ok();
                let hop =
                    l.and_then(|l| q.ctx.neighbors().into_iter().find(|h| h.link == LinkId(l)));
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

/// The PLAN type of a module's PLAN service.
const PLAN_SERVICE_TYPE: &str = "int -> int";

/// A PLAN-service module's instance, as a PLAN EE extension service.
struct WasmPlanService {
    name: String,
    inst: Box<Instance>,
    fault: FaultSlot,
    dead: bool,
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
        let Some(Value::Int(arg)) = args.first() else {
            return Err(ServiceError::new(
                "ServiceError",
                format!("{name} takes one int"),
            ));
        };
        match self.inst.plan_call(*arg) {
            Ok(v) => Ok(Value::Int(v)),
            Err(e) => {
                let msg = e.to_string();
                self.dead = true;
                if let Ok(mut f) = self.fault.lock() {
                    *f = Some(e);
                }
                Err(ServiceError::new("ServiceError", msg))
            }
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

/// Makes the PLAN EE's routing functions follow the module host (see the module docs).
/// Without a module host there is nothing to do; an active routing function on a node
/// without a PLAN EE is an error naming it.
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
    }
    for (n, kind) in fresh {
        let h = host(node)?;
        let inst = h.route_instance(&n)?;
        let hash = h.info(&n)?.code_sha256;
        let slot: FaultSlot = Arc::default();
        let Some(p) = plan_ee(node) else {
            return Err(ModuleError::State {
                name: n,
                reason: "this node runs no PLAN execution environment".into(),
            });
        };
        let r = if kind == Kind::PlanService {
            let svc = WasmPlanService {
                name: n.clone(),
                inst,
                fault: Arc::clone(&slot),
                dead: false,
            };
            p.set_service(&n, PLAN_SERVICE_TYPE, Box::new(svc))
                .map(|_| ())
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
        host(node)?.routes_attached.insert(n, (hash, slot));
    }
    Ok(())
}
