//! Real-UDP harness: loopback addresses, nodes with fast routing timers, route waits.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anode_core::wire::NodeAddr;
use anode_core::{LinkConfig, Node, NodeConfig, RoutingConfig};
use anode_io::NodeHandle;

/// A free UDP port on 127.0.0.1.
pub fn free_addr() -> SocketAddr {
    let s = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    s.local_addr().unwrap()
}

/// A node at `addr` with links to `peers` and fast routing timers.
pub fn node(addr: SocketAddr, peers: &[SocketAddr]) -> Node {
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
    let mut n = Node::new(cfg, now).unwrap();
    for p in peers {
        n.add_link(LinkConfig::new(NodeAddr::from(*p)), now);
    }
    n
}

/// Waits (at most 10 s) until the node behind `h` has a route to `dst`.
pub fn wait_route(h: &NodeHandle, dst: SocketAddr) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
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

/// Injects `batch` at the node behind `h`, then sleeps until the end of 10 ms tick `tick` of a
/// clock started at `start` (the paced senders of the real-UDP isolation tests).
pub fn inject_tick(h: &NodeHandle, batch: Vec<Vec<u8>>, start: Instant, tick: u32) {
    h.call(move |n, now| {
        for p in batch {
            let _ = n.inject(now, p);
        }
    })
    .unwrap();
    let next = start + Duration::from_millis(10 * u64::from(tick + 1));
    if let Some(d) = next.checked_duration_since(Instant::now()) {
        std::thread::sleep(d);
    }
}
