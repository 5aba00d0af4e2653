//! A whole node fed arbitrary packets on its links: never panics, and every packet is
//! accounted for (forwarded, delivered, handed on, or counted as a drop).
#![no_main]
use std::time::{Duration, Instant};

use anode_core::wire::addr::v4;
use anode_core::{LinkConfig, LinkId, Node, NodeConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let mut n = Node::new(NodeConfig::new(v4(198, 18, 0, 2, 3322)), now).expect("valid config");
    n.add_link(LinkConfig { static_neighbor: true, ..LinkConfig::new(v4(198, 18, 0, 1, 3322)) }, now);
    n.add_link(LinkConfig::new(v4(198, 18, 0, 3, 3322)), now);
    // Split the input into packets: [len_hi, len_lo, link, bytes...]*
    let mut rest = data;
    let mut fed = 0u64;
    while rest.len() >= 3 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 3);
        let link = LinkId(u32::from(rest[2] % 3));
        n.handle_packet(now, link, rest[3..3 + len].to_vec());
        fed += 1;
        rest = &rest[3 + len..];
    }
    n.handle_timeout(now + Duration::from_secs(10));
    while n.poll_transmit().is_some() {}
    while n.poll_event().is_some() {}
    let c = n.counters();
    assert_eq!(c.rx_packets, fed);
    let outcomes = c.delivered + c.fast_path + c.unknown_type_forwarded + c.control_rx + c.to_ee + c.total_drops();
    assert!(outcomes >= fed);
});
