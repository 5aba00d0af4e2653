//! Routing functions as modules, asked for by capsules: a capsule of the `routefn` protocol
//! naming the `flowpin` module is forwarded by it (its flow pinned to a link, other flows on
//! the default route); upgraded, it routes by its new configuration; stopped or removed, the
//! capsule's `forward_by` finds no routing function of that name, which the capsule EE counts
//! and the protocol answers by dropping the capsule. The same with the capsule EE under the
//! NodeOS guard, and on a node running the PLAN EE too.

mod common;

use std::time::Instant;

use anode_capsule::{CapsuleConfig, CapsuleEe, CodeHash, capsule_packet, protocols};
use anode_core::{ExecutionEnvironment, LinkId, Node};
use anode_modules::{host, sync_routes};
use anode_nodeos::capsule::MeteredCapsule;
use anode_nodeos::guard::{DomainGuard, GuardConfig};
use anode_nodeos::{NodeOs, NodeOsConfig, Policy, PolicyStore};
use anode_plan::ee::PlanEe;
use anode_wire::anep::TYPE_CAPSULE;
use common::*;

fn config(flow: i64, link: i64) -> toml::Table {
    let mut t = toml::Table::new();
    t.insert("flow".into(), flow.into());
    t.insert("link".into(), link.into());
    t
}

/// The capsule EE bare, or under the NodeOS as `anode node` runs it.
fn capsule_ee(guarded: bool) -> Box<dyn ExecutionEnvironment> {
    if !guarded {
        return Box::new(CapsuleEe::new(CapsuleConfig::default()).unwrap());
    }
    let mut policies = PolicyStore::new();
    policies.insert("capsule", Policy::unlimited());
    let g = DomainGuard::new(
        MeteredCapsule::new(CapsuleConfig::default(), None).unwrap(),
        NodeOs::new(NodeOsConfig {
            policies,
            ..NodeOsConfig::default()
        }),
        GuardConfig {
            ee_principal: "capsule".into(),
            ..GuardConfig::default()
        },
    )
    .unwrap();
    Box::new(g)
}

fn ee(n: &mut Node) -> &mut CapsuleEe {
    let any = n.ee_mut(TYPE_CAPSULE).unwrap().as_any_mut();
    if any.is::<CapsuleEe>() {
        return any.downcast_mut::<CapsuleEe>().unwrap();
    }
    any.downcast_mut::<DomainGuard<MeteredCapsule>>()
        .unwrap()
        .inner_mut()
        .inner_mut()
}

/// The links `routefn` capsules from neighbor 2 to node 9 naming `name`, one per flow, leave
/// `n` on.
fn route(n: &mut Node, now: Instant, code: CodeHash, name: &str, flows: &[u64]) -> Vec<u32> {
    for &f in flows {
        let mut payload = 7u16.to_be_bytes().to_vec();
        payload.push(name.len() as u8);
        payload.extend_from_slice(name.as_bytes());
        let pkt = capsule_packet(code, addr(2), addr(9), 16, f, &payload).unwrap();
        n.handle_packet(now, LinkId(1), pkt);
    }
    let mut out = Vec::new();
    while let Some(t) = n.poll_transmit() {
        out.push(t.link.0);
    }
    out
}

fn unknown(n: &mut Node) -> u64 {
    ee(n).stats().unknown_route_fn
}

fn guest_drops(n: &Node) -> u64 {
    n.counters()
        .ee_drops("capsule", anode_core::DropReason::GuestDrop)
}

#[test]
fn a_capsule_asking_for_a_module_routing_function_is_forwarded_by_it() {
    routed_by_module(false, false);
}

#[test]
fn the_same_under_the_nodeos() {
    routed_by_module(true, false);
}

#[test]
fn the_same_next_to_the_plan_ee() {
    routed_by_module(false, true);
}

fn routed_by_module(guarded: bool, with_plan: bool) {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    n.register_ee(capsule_ee(guarded));
    if with_plan {
        n.register_ee(Box::new(PlanEe::with_defaults()));
    }
    // The default route to node 9 is via neighbor 1 (link 0).
    n.add_static_route(addr(9), addr(1), 1, now);
    while n.poll_transmit().is_some() {}
    let code = ee(&mut n).install(protocols::ROUTEFN).unwrap();

    // Not installed yet: no routing function of that name, counted and dropped.
    assert!(route(&mut n, now, code, "flowpin", &[7]).is_empty());
    assert_eq!((unknown(&mut n), guest_drops(&n)), (1, 1));

    let h = host(&mut n).unwrap();
    h.install(signed("flowpin", None), &config(7, 1)).unwrap();
    h.start("flowpin").unwrap();
    sync_routes(&mut n).unwrap();
    assert_eq!(ee(&mut n).route_names(), ["flowpin"]);
    // Flow 7 is pinned to link 1, flow 8 takes the default route (link 0), and so does a
    // capsule naming no routing function.
    assert_eq!(route(&mut n, now, code, "flowpin", &[7, 8, 7]), [1, 0, 1]);
    assert_eq!(route(&mut n, now, code, "", &[7]), [0]);

    // Upgraded with flow 8 pinned to link 1: the new version routes.
    let h = host(&mut n).unwrap();
    h.upgrade(signed("flowpin", Some("1.1.0")), &config(8, 1))
        .unwrap();
    sync_routes(&mut n).unwrap();
    assert_eq!(route(&mut n, now, code, "flowpin", &[7, 8]), [0, 1]);

    // Stopped: unknown again. Started: routes again. Removed: unknown again.
    host(&mut n).unwrap().stop("flowpin").unwrap();
    sync_routes(&mut n).unwrap();
    assert!(ee(&mut n).route_names().is_empty());
    assert!(route(&mut n, now, code, "flowpin", &[8]).is_empty());
    assert_eq!((unknown(&mut n), guest_drops(&n)), (2, 2));
    host(&mut n).unwrap().start("flowpin").unwrap();
    sync_routes(&mut n).unwrap();
    assert_eq!(route(&mut n, now, code, "flowpin", &[8]), [1]);
    host(&mut n).unwrap().remove("flowpin").unwrap();
    sync_routes(&mut n).unwrap();
    assert!(route(&mut n, now, code, "flowpin", &[8]).is_empty());
    assert_eq!((unknown(&mut n), guest_drops(&n)), (3, 3));
    assert_eq!(ee(&mut n).stats().traps, 0);
}

#[test]
fn a_routing_function_faulting_for_a_capsule_is_stopped() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    n.register_ee(capsule_ee(false));
    n.add_static_route(addr(9), addr(1), 1, now);
    while n.poll_transmit().is_some() {}
    let code = ee(&mut n).install(protocols::ROUTEFN).unwrap();
    let h = host(&mut n).unwrap();
    h.install(signed("flowpin", None), &config(7, 5)).unwrap();
    h.start("flowpin").unwrap();
    sync_routes(&mut n).unwrap();
    // Link 5 does not exist: no route, the protocol drops the capsule.
    assert!(route(&mut n, now, code, "flowpin", &[7]).is_empty());
    assert_eq!(guest_drops(&n), 1);
    sync_routes(&mut n).unwrap();
    let info = host(&mut n).unwrap().info("flowpin").unwrap();
    assert_eq!(info.state, anode_modules::State::Stopped);
    assert!(
        info.last_error
            .as_deref()
            .unwrap_or("")
            .contains("route returned 5"),
        "{info:?}"
    );
    assert!(ee(&mut n).route_names().is_empty());
    // The node goes on: the default route still works.
    assert_eq!(route(&mut n, now, code, "", &[7]), [0]);
}

#[test]
fn a_routing_function_needs_a_plan_or_capsule_ee() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    let h = host(&mut n).unwrap();
    h.install(signed("flowpin", None), &config(7, 1)).unwrap();
    h.start("flowpin").unwrap();
    let e = sync_routes(&mut n).unwrap_err().to_string();
    assert!(e.contains("flowpin") && e.contains("capsule"), "{e}");
}
