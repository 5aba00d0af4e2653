//! Passive routing of PLAN packets through the node core vs the fast path, and one full
//! evaluation at a hop through the node, in the same run.
//!
//! * `plain_datagram`: a datagram transiting the node (the fast-path baseline);
//! * `plan_default_route`: a PLAN packet of the same size with `defaultRoute` (fast path,
//!   the EE is not entered);
//! * `plan_flow_route`: the same with routFun `flowRoute` (the EE reads the PLAN header
//!   only and looks the flow up);
//! * `plan_eval_ping_hop`: a ping/eval packet evaluated at the node (unmarshal, evaluate,
//!   remarshal and send the child), including the copy of the arriving buffer.
//!
//! Run: `cargo bench -p anode-plan --bench node`.

use std::time::Instant;

use anode_core::wire::addr::v4;
use anode_core::wire::anep::TYPE_PLAN;
use anode_core::wire::datagram::Datagram;
use anode_core::wire::transit::{Transit, TransitRepr};
use anode_core::{LinkId, NextHop, Node};
use anode_plan::ee::{FLOW_ROUTE, PacketSpec, PlanEe, build_packet};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const PING: &str = include_str!("../programs/ping/eval.plan");

/// The kit's transit node (1000 routes) running the PLAN EE, with flow 42 routed to the
/// next hop.
fn transit_node() -> (Node, Instant) {
    let (mut n, now) = anode_testkit::fixtures::transit_node(None, 1000);
    let mut ee = PlanEe::with_defaults();
    ee.state_mut().flows.install(
        42,
        NextHop {
            link: LinkId(1),
            addr: anode_testkit::addr(2),
        },
        now,
    );
    n.register_ee(Box::new(ee));
    (n, now)
}

fn plan_ee(n: &mut Node) -> &mut PlanEe {
    n.ee_mut(TYPE_PLAN)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<PlanEe>()
        .unwrap()
}

fn bench_node(cr: &mut Criterion) {
    let src = v4(198, 18, 0, 1, 3322);
    let far = v4(198, 19, 1, 200, 3322);
    let me = v4(198, 18, 0, 2, 3322);
    let (mut node, now) = transit_node();
    let entry = format!("ping({src}, {far})");
    let interp = plan_ee(&mut node).interp();
    let mut spec = PacketSpec::new(src, far, u16::MAX);
    let plan_default = build_packet(interp, PING, &entry, &spec).unwrap();
    spec.route_fun = FLOW_ROUTE.to_string();
    spec.flow = 42;
    let plan_flow = build_packet(interp, PING, &entry, &spec).unwrap();
    let mut eval_spec = PacketSpec::new(src, me, u16::MAX);
    eval_spec.flow = 7;
    let plan_eval = build_packet(interp, PING, &entry, &eval_spec).unwrap();
    let header = 8 + anode_core::wire::transit::LEN + anode_core::wire::datagram::LEN;
    let datagram = Datagram {
        transit: TransitRepr {
            rb: u16::MAX,
            src,
            dst: far,
            ..Default::default()
        },
        port: 9,
        payload: vec![0xa5; plan_default.len() - header],
    }
    .to_packet()
    .unwrap();
    assert_eq!(datagram.len(), plan_default.len());

    let mut g = cr.benchmark_group("plan_node");
    g.throughput(Throughput::Elements(1));
    for (name, pkt) in [
        ("plain_datagram", &datagram),
        ("plan_default_route", &plan_default),
        ("plan_flow_route", &plan_flow),
    ] {
        let mut buf = pkt.clone();
        g.bench_function(format!("{name}_{}B", pkt.len()), |b| {
            b.iter(|| {
                node.handle_packet(now, LinkId(0), std::mem::take(&mut buf));
                let t = node.poll_transmit().unwrap();
                buf = t.buf;
                Transit::new_checked(&mut buf[8..])
                    .unwrap()
                    .set_rb(u16::MAX);
            });
        });
    }
    let to_ee = node.counters().to_ee;
    let evals = plan_ee(&mut node).stats().evaluations;
    g.bench_function(format!("plan_eval_ping_hop_{}B", plan_eval.len()), |b| {
        b.iter(|| {
            node.handle_packet(now, LinkId(0), plan_eval.clone());
            let t = node.poll_transmit().unwrap();
            std::hint::black_box(t);
        });
    });
    g.finish();
    assert!(node.counters().to_ee > to_ee);
    let st = plan_ee(&mut node).stats();
    assert!(st.evaluations > evals && st.total_drops() == 0, "{st:?}");
}

criterion_group!(benches, bench_node);
criterion_main!(benches);
