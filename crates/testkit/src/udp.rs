//! Real nodes over loopback UDP for tests: free addresses, fast routing timers, nodes with
//! links, drivers, and bounded waits for routes and deliveries.

use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anode_core::{Delivery, Event, LinkConfig, Node, NodeConfig, RoutingConfig};
use anode_io::{DriverConfig, NodeHandle};
use anode_wire::NodeAddr;

/// A UDP address that was free a moment ago on `ip`.
pub fn free_addr(ip: IpAddr) -> SocketAddr {
    let s = std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).expect("bind probe socket");
    s.local_addr().expect("probe local addr")
}

/// Routing timers short enough for tests (hello 100 ms, dead 400 ms, updates 300 ms).
pub fn fast_routing() -> RoutingConfig {
    RoutingConfig {
        hello_interval: Duration::from_millis(100),
        dead_interval: Duration::from_millis(400),
        update_interval: Duration::from_millis(300),
        route_timeout: Duration::from_millis(2000),
        gc_interval: Duration::from_millis(1000),
        triggered_delay: Duration::from_millis(20),
        ..RoutingConfig::default()
    }
}

/// A node at `addr` with [`fast_routing`] and links to `peers` (static neighbors if asked).
pub fn udp_node(addr: SocketAddr, peers: &[SocketAddr], static_neighbors: bool) -> Node {
    let mut cfg = NodeConfig::new(NodeAddr::from(addr));
    cfg.routing = fast_routing();
    let now = Instant::now();
    let mut n = Node::new(cfg, now).expect("node config");
    for p in peers {
        let mut l = LinkConfig::new(NodeAddr::from(*p));
        l.static_neighbor = static_neighbors;
        n.add_link(l, now);
    }
    n
}

/// Spawns a driver for `n` bound at `bind`.
pub fn run(n: Node, bind: SocketAddr) -> NodeHandle {
    anode_io::spawn(n, DriverConfig::new(bind)).expect("spawn driver")
}

/// Waits (at most `within`) until the node behind `h` has a route to `dst`.
pub fn wait_route(h: &NodeHandle, dst: SocketAddr, within: Duration) -> bool {
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

/// The next delivery on `rx` within `within` (other events skipped).
pub fn next_delivery(rx: &Receiver<Event>, within: Duration) -> Option<Delivery> {
    let end = Instant::now() + within;
    loop {
        let left = end.checked_duration_since(Instant::now())?;
        match rx.recv_timeout(left) {
            Ok(Event::Delivered(d)) => return Some(d),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}
