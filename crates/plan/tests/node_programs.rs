//! The shipped programs on real anode nodes (virtual time): ping/noeval and ping/eval over 1
//! to 4 hops, traceroute, hello, route scouting.

mod node_common;

use anode_core::wire::NodeAddr;
use anode_plan::Value;
use anode_plan::ee::{FLOW_ROUTE, PacketSpec};
use node_common::*;

fn spec(src: NodeAddr, dst: NodeAddr, rb: u16) -> PacketSpec {
    PacketSpec::new(src, dst, rb)
}

#[test]
fn ping_noeval_1_to_4_hops_passes_intermediates_on_the_fast_path() {
    let text = program("ping/noeval.plan");
    for hops in 1..=4usize {
        let mut net = Net::line(hops + 1);
        let before: Vec<u64> = net.nodes.iter().map(|n| n.counters().to_ee).collect();
        let (s, d) = (addr(0), addr(hops));
        net.inject(0, &text, &format!("ping({s}, {d})"), &spec(s, s, 16));
        assert_eq!(net.output(0), "Success", "{hops} hops");
        assert!(
            net.report.iter().all(|r| r.errors.is_empty()),
            "{hops} hops"
        );
        // Evaluated at the source, the destination, and the source again.
        assert_eq!(net.ee(0).stats().evaluations, 2, "{hops} hops");
        assert_eq!(net.ee(hops).stats().evaluations, 1, "{hops} hops");
        for (i, to_ee) in before.iter().enumerate().take(hops).skip(1) {
            assert_eq!(
                net.nodes[i].counters().to_ee,
                *to_ee,
                "node {i} entered the EE"
            );
            assert!(net.nodes[i].counters().fast_path >= 2, "node {i}");
            assert_eq!(net.ee(i).stats().packets, 0);
        }
    }
}

#[test]
fn ping_eval_1_to_4_hops_evaluates_at_every_hop() {
    let text = program("ping/eval.plan");
    for hops in 1..=4usize {
        let mut net = Net::line(hops + 1);
        let (s, d) = (addr(0), addr(hops));
        net.inject(0, &text, &format!("ping({s}, {d})"), &spec(s, s, 16));
        assert_eq!(net.output(0), "Success", "{hops} hops");
        assert!(net.report.iter().all(|r| r.errors.is_empty()));
        // ping at every node on the way out, back at every node on the way back.
        assert_eq!(net.ee(0).stats().evaluations, 2);
        assert_eq!(net.ee(hops).stats().evaluations, 1);
        for i in 1..hops {
            assert_eq!(net.ee(i).stats().evaluations, 2, "node {i}");
        }
    }
}

#[test]
fn ping_with_too_small_rb_does_not_come_back() {
    let mut net = Net::line(4);
    let (s, d) = (addr(0), addr(3));
    net.inject(
        0,
        &program("ping/noeval.plan"),
        &format!("ping({s}, {d})"),
        &spec(s, s, 4),
    );
    // 3 hops out leave 1 unit: not enough to come back over 3 hops.
    assert_eq!(net.output(0), "");
}

#[test]
fn traceroute_reports_every_hop() {
    let mut net = Net::line(4);
    let (s, d) = (addr(0), addr(3));
    net.inject(
        0,
        &program("traceroute.plan"),
        &format!("trace({s}, {d}, 0)"),
        &spec(s, s, 30),
    );
    let mut lines: Vec<String> = net.report[0]
        .prints
        .iter()
        .map(|(_, l)| l.clone())
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            format!("1 {}\n", addr(1)),
            format!("2 {}\n", addr(2)),
            format!("3 {}\n", addr(3)),
        ]
    );
}

#[test]
fn hello_prints_this_host() {
    let mut net = Net::line(2);
    let s = addr(0);
    net.inject(0, &program("hello.plan"), "hello()", &spec(s, s, 1));
    let out = net.output(0);
    assert!(out.ends_with(" says : Hello world!\n"), "{out}");
    assert!(out.contains("198.18.0.1"), "{out}");
    // Remote hello: evaluated at node 1, printed there.
    net.inject(0, &program("hello.plan"), "hello()", &spec(s, addr(1), 1));
    assert!(net.output(1).contains("198.18.0.2"));
}

/// Sends a scout round from node 0 to node `d` (session 7) and returns the best (metric,
/// flow) that came back.
fn scout_round(net: &mut Net, d: usize, round: i64) -> (i64, u64) {
    net.clear_reports();
    let (s, d) = (addr(0), addr(d));
    let mut sp = spec(s, s, 40);
    sp.session = 7;
    net.inject(
        0,
        &program("scout.plan"),
        &format!("scout({s}, {d}, {round}, 0, [{s}])"),
        &sp,
    );
    assert!(
        net.report.iter().all(|r| r.errors.is_empty()),
        "{:?}",
        net.report
    );
    // The source application (port 7) gets (flow, metric) for each scout that made it back.
    let found: Vec<(i64, i64)> = net.report[0]
        .deliveries
        .iter()
        .filter(|(_, d)| d.port == 7)
        .filter_map(|(_, d)| match &d.value {
            Value::Tuple(t) => match t.items() {
                [Value::Int(f), Value::Int(m)] => Some((*m, *f)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let (metric, flow) = found.iter().copied().min().expect("a scout came back");
    (metric, u64::try_from(flow).unwrap())
}

/// Node 1 sends `n` small PLAN packets to node 3 at once (its link 1 carries them).
fn congest(net: &mut Net, n: usize) {
    let pkt = anode_plan::ee::build_packet(
        net.ee(1).interp(),
        "fun sink() = ()",
        "sink()",
        &spec(addr(1), addr(3), 4),
    )
    .unwrap();
    for _ in 0..n {
        net.inject_raw(1, pkt.clone());
    }
}

#[test]
fn route_scouting_installs_flow_routes_that_packets_then_follow() {
    // 0 - 1 - 3 (short) and 0 - 2 - 4 - 3 (long), on links of the default 1472-byte MTU: the
    // scouting program travels as one packet.
    let mut net = Net::new(5, &[(0, 1), (1, 3), (0, 2), (2, 4), (4, 3)]);
    let now = net.now;
    let (metric, flow) = scout_round(&mut net, 3, 1);
    assert_eq!(metric, 2, "the short path while nothing loads it");
    assert_eq!(
        net.ee(0).state().flows.lookup(flow, now).map(|h| h.addr),
        Some(addr(1))
    );

    // Node 1's link to 3 carries 300 packets within this instant: 3000 packets/s over the
    // 100 ms window, a device load of 30 units of 100 packets/s (`queueLength`).
    congest(&mut net, 300);
    let before: u64 = (0..5).map(|i| net.ee(i).stats().packets).sum();
    let (metric, flow) = scout_round(&mut net, 3, 2);
    assert_eq!(metric, 3, "the long path round the congested link");
    let now = net.now;
    for (at, next) in [(0, 2), (2, 4), (4, 3)] {
        assert_eq!(
            net.ee(at).state().flows.lookup(flow, now).map(|h| h.addr),
            Some(addr(next)),
            "node {at}"
        );
    }
    assert_eq!(net.ee(1).state().flows.lookup(flow, now), None);
    // Scouting is bounded by its resource bound: no more packets than units of it.
    let scouting = (0..5).map(|i| net.ee(i).stats().packets).sum::<u64>() - before;
    assert!(scouting <= 41, "{scouting} packets");

    // The application now sends along the flow: nodes 2 and 4 route it by flowRoute, node 1
    // never sees it.
    let routed_before = [net.ee(1).stats().routed, net.ee(2).stats().routed];
    let fast_before = net.nodes[1].counters().fast_path;
    let mut sp = spec(addr(0), addr(3), 8);
    sp.route_fun = FLOW_ROUTE.to_string();
    sp.flow = flow;
    net.inject(0, "fun arrive() = print(\"arrived\")", "arrive()", &sp);
    assert_eq!(net.output(3), "arrived");
    assert_eq!(net.ee(2).stats().routed, routed_before[1] + 1);
    assert_eq!(net.ee(1).stats().routed, routed_before[0]);
    assert_eq!(net.nodes[1].counters().fast_path, fast_before);

    // Half a second later the link is idle again and the next round takes the short path.
    net.run_for(std::time::Duration::from_millis(500));
    let (metric, flow) = scout_round(&mut net, 3, 3);
    assert_eq!(metric, 2);
    let now = net.now;
    assert_eq!(
        net.ee(0).state().flows.lookup(flow, now).map(|h| h.addr),
        Some(addr(1))
    );
}
