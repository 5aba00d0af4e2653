//! Real-UDP harness: the test kit's loopback nodes, and the paced senders of the real-UDP
//! isolation tests.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anode_core::Node;
use anode_io::NodeHandle;

/// A free UDP address on 127.0.0.1.
pub fn free_addr() -> SocketAddr {
    anode_testkit::udp::free_addr(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// A node at `addr` with links to `peers` and fast routing timers.
pub fn node(addr: SocketAddr, peers: &[SocketAddr]) -> Node {
    anode_testkit::udp::udp_node(addr, peers, false)
}

/// Waits (at most 10 s) until the node behind `h` has a route to `dst`.
pub fn wait_route(h: &NodeHandle, dst: SocketAddr) -> bool {
    anode_testkit::udp::wait_route(h, dst, Duration::from_secs(10))
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
