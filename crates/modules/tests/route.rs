//! Routing functions as modules: a PLAN packet naming the `flowpin` module's routing function
//! is routed by it at an intermediate node (its flow pinned to a link, other flows on the
//! default route); upgraded, it routes by its new configuration; stopped or removed, packets
//! naming it are dropped as an unknown routing function again.

mod common;

use std::time::Instant;

use anode_core::{LinkId, Node};
use anode_modules::{host, sync_routes};
use anode_nodeos::guard::{DomainGuard, GuardConfig};
use anode_nodeos::plan::MeteredPlan;
use anode_nodeos::{NodeOs, NodeOsConfig, Policy, PolicyStore};
use anode_plan::ee::{PacketSpec, PlanEe, build_packet};
use common::*;

/// A PLAN packet from neighbor 1 to node 9, routed by `route_fun`, in flow `flow`.
fn plan_packet(route_fun: &str, flow: u64) -> Vec<u8> {
    let ee = PlanEe::with_defaults();
    let mut spec = PacketSpec::new(addr(1), addr(9), 8);
    spec.route_fun = route_fun.into();
    spec.flow = flow;
    build_packet(
        ee.interp(),
        "fun arrive() = print(\"arrived\")",
        "arrive()",
        &spec,
    )
    .unwrap()
}

/// The links `pkts` leave `n` on, after arriving from link 0.
fn route(n: &mut Node, now: Instant, pkts: Vec<Vec<u8>>) -> Vec<u32> {
    for p in pkts {
        n.handle_packet(now, LinkId(0), p);
    }
    let mut out = Vec::new();
    while let Some(t) = n.poll_transmit() {
        out.push(t.link.0);
    }
    out
}

fn unknown(n: &Node) -> u64 {
    n.counters()
        .ee_drops("plan", anode_core::DropReason::UnknownRouteFun)
}

fn config(flow: i64, link: i64) -> toml::Table {
    let mut t = toml::Table::new();
    t.insert("flow".into(), flow.into());
    t.insert("link".into(), link.into());
    t
}

/// The PLAN EE bare, or under the NodeOS as `anode node` runs it.
fn plan_ee(guarded: bool) -> Box<dyn anode_core::ExecutionEnvironment> {
    if !guarded {
        return Box::new(PlanEe::with_defaults());
    }
    let mut policies = PolicyStore::new();
    policies.insert("plan", Policy::unlimited());
    let g = DomainGuard::new(
        MeteredPlan::new(PlanEe::with_defaults()),
        NodeOs::new(NodeOsConfig {
            policies,
            ..NodeOsConfig::default()
        }),
        GuardConfig {
            ee_principal: "plan".into(),
            ..GuardConfig::default()
        },
    )
    .unwrap();
    Box::new(g)
}

#[test]
fn a_plan_packet_naming_a_module_routing_function_is_routed_by_it() {
    routed_by_module(false);
}

#[test]
fn the_same_under_the_nodeos() {
    routed_by_module(true);
}

fn routed_by_module(guarded: bool) {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    n.register_ee(plan_ee(guarded));
    // The default route to node 9 is via neighbor 1 (link 0).
    n.add_static_route(addr(9), addr(1), 1, now);
    while n.poll_transmit().is_some() {}

    // Not installed yet: refused as an unknown routing function.
    assert!(route(&mut n, now, vec![plan_packet("flowpin", 7)]).is_empty());
    assert_eq!(unknown(&n), 1);

    let h = host(&mut n).unwrap();
    h.install(signed("flowpin", None), &config(7, 1)).unwrap();
    h.start("flowpin").unwrap();
    sync_routes(&mut n).unwrap();
    // Flow 7 is pinned to link 1; flow 8 takes the default route (link 0); a defaultRoute
    // packet is not the module's business.
    let pkts = vec![
        plan_packet("flowpin", 7),
        plan_packet("flowpin", 8),
        plan_packet("flowpin", 7),
        plan_packet("defaultRoute", 7),
    ];
    assert_eq!(route(&mut n, now, pkts), [1, 0, 1, 0]);

    // Upgraded with flow 7 pinned to link 0 and flow 8 to link 1: the new version routes.
    let h = host(&mut n).unwrap();
    h.upgrade(signed("flowpin", Some("1.1.0")), &config(8, 1))
        .unwrap();
    sync_routes(&mut n).unwrap();
    let pkts = vec![plan_packet("flowpin", 7), plan_packet("flowpin", 8)];
    assert_eq!(route(&mut n, now, pkts), [0, 1]);

    // Stopped: unknown again. Started: routes again. Removed: unknown again.
    host(&mut n).unwrap().stop("flowpin").unwrap();
    sync_routes(&mut n).unwrap();
    assert!(route(&mut n, now, vec![plan_packet("flowpin", 8)]).is_empty());
    assert_eq!(unknown(&n), 2);
    host(&mut n).unwrap().start("flowpin").unwrap();
    sync_routes(&mut n).unwrap();
    assert_eq!(route(&mut n, now, vec![plan_packet("flowpin", 8)]), [1]);
    host(&mut n).unwrap().remove("flowpin").unwrap();
    sync_routes(&mut n).unwrap();
    assert!(route(&mut n, now, vec![plan_packet("flowpin", 8)]).is_empty());
    assert_eq!(unknown(&n), 3);
}

#[test]
fn a_routing_function_naming_a_link_without_neighbor_is_stopped() {
    let now = Instant::now();
    let mut n = relay(&[1, 2], now);
    n.register_ee(Box::new(PlanEe::with_defaults()));
    n.add_static_route(addr(9), addr(1), 1, now);
    while n.poll_transmit().is_some() {}
    let h = host(&mut n).unwrap();
    h.install(signed("flowpin", None), &config(7, 5)).unwrap();
    h.start("flowpin").unwrap();
    sync_routes(&mut n).unwrap();
    // Link 5 does not exist: no route, the packet is dropped and counted.
    assert!(route(&mut n, now, vec![plan_packet("flowpin", 7)]).is_empty());
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
    // The node goes on: the default route still works.
    assert_eq!(
        route(&mut n, now, vec![plan_packet("defaultRoute", 7)]),
        [0]
    );
}
