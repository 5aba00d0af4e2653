//! PLAN over real UDP: three nodes on 127.0.0.1, each in an `anode_io` driver with short
//! routing timers; ping/noeval and ping/eval from the first to the third, bounded in time.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anode_core::wire::NodeAddr;
use anode_core::wire::anep::TYPE_PLAN;
use anode_core::{Event, LinkConfig, Node, NodeConfig, RoutingConfig};
use anode_io::{DriverConfig, NodeHandle};
use anode_plan::Interpreter;
use anode_plan::ee::{PacketSpec, PlanEe, build_packet};

fn free_addr() -> SocketAddr {
    let s = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("probe socket");
    s.local_addr().expect("probe addr")
}

fn node(addr: SocketAddr, peers: &[SocketAddr]) -> Node {
    let mut cfg = NodeConfig::new(NodeAddr::from(addr));
    cfg.routing = RoutingConfig {
        hello_interval: Duration::from_millis(100),
        dead_interval: Duration::from_millis(400),
        update_interval: Duration::from_millis(300),
        route_timeout: Duration::from_millis(2000),
        gc_interval: Duration::from_millis(1000),
        triggered_delay: Duration::from_millis(20),
        ..RoutingConfig::default()
    };
    let now = Instant::now();
    let mut n = Node::new(cfg, now).expect("node config");
    for p in peers {
        n.add_link(LinkConfig::new(NodeAddr::from(*p)), now);
    }
    n.register_ee(Box::new(PlanEe::with_defaults()));
    n
}

fn wait_route(h: &NodeHandle, dst: SocketAddr, within: Duration) -> bool {
    let end = Instant::now() + within;
    let dst = NodeAddr::from(dst);
    while Instant::now() < end {
        if h.call(move |n, _| n.lookup(&dst).is_some())
            .unwrap_or(false)
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The next `print` output of the PLAN EE within `within`.
fn next_print(rx: &Receiver<Event>, within: Duration) -> Option<String> {
    let end = Instant::now() + within;
    loop {
        let left = end.checked_duration_since(Instant::now())?;
        match rx.recv_timeout(left) {
            Ok(Event::Log { ee, message }) if ee == "plan" => return Some(message),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

fn to_ee(h: &NodeHandle) -> u64 {
    h.call(|n, _| n.counters().to_ee).expect("driver alive")
}

#[test]
fn ping_noeval_and_eval_over_udp() {
    let [a, b, c] = [free_addr(), free_addr(), free_addr()];
    let ha = anode_io::spawn(node(a, &[b]), DriverConfig::new(a)).expect("spawn a");
    let hb = anode_io::spawn(node(b, &[a, c]), DriverConfig::new(b)).expect("spawn b");
    let hc = anode_io::spawn(node(c, &[b]), DriverConfig::new(c)).expect("spawn c");
    let events = ha.take_events().expect("events");
    assert!(
        wait_route(&ha, c, Duration::from_secs(10)),
        "A never learned a route to C"
    );
    assert!(
        wait_route(&hc, a, Duration::from_secs(10)),
        "C never learned a route to A"
    );
    let interp = Interpreter::with_core();
    let (sa, sc) = (NodeAddr::from(a), NodeAddr::from(c));
    let entry = format!("ping({sa}, {sc})");
    let spec = PacketSpec::new(sa, sa, 16);
    let dir = env!("CARGO_MANIFEST_DIR");

    let b_before = to_ee(&hb);
    let text = std::fs::read_to_string(format!("{dir}/programs/ping/noeval.plan")).unwrap();
    let pkt = build_packet(&interp, &text, &entry, &spec).unwrap();
    let r = ha
        .call(move |n, now| n.inject(now, pkt))
        .expect("driver alive");
    assert_eq!(r, Ok(()));
    assert_eq!(
        next_print(&events, Duration::from_secs(5)).as_deref(),
        Some("Success")
    );
    assert_eq!(
        to_ee(&hb),
        b_before,
        "B forwarded ping/noeval on the fast path"
    );

    let text = std::fs::read_to_string(format!("{dir}/programs/ping/eval.plan")).unwrap();
    let pkt = build_packet(&interp, &text, &entry, &spec).unwrap();
    let r = ha
        .call(move |n, now| n.inject(now, pkt))
        .expect("driver alive");
    assert_eq!(r, Ok(()));
    assert_eq!(
        next_print(&events, Duration::from_secs(5)).as_deref(),
        Some("Success")
    );
    assert_eq!(to_ee(&hb), b_before + 2, "B evaluated ping/eval both ways");

    let (mut na, mut nb, mut nc) = (ha.shutdown(), hb.shutdown(), hc.shutdown());
    let stats = |n: &mut Node| {
        n.ee_mut(TYPE_PLAN)
            .and_then(|e| e.as_any_mut().downcast_mut::<PlanEe>())
            .map(|e| e.stats().clone())
            .expect("plan ee")
    };
    assert_eq!(stats(&mut na).evaluations, 4);
    assert_eq!(stats(&mut nb).evaluations, 2);
    assert_eq!(stats(&mut nc).evaluations, 2);
    assert_eq!(stats(&mut nc).total_drops(), 0);
}
