//! What `anode upgrade` reads from the process it takes over from, which it must not trust:
//! the frames of the conversation (`anode_node::upgrade::frame::recv`) and the node state
//! (`anode_core::handover::NodeHandover`, taken over by a node as `anode node` assembles it).
//! Never panics; a node that took a state over keeps its outcome ledger exact.
//!
//! Input: first byte even: the rest is written to one end of a Unix socket pair and frames
//! are read from the other until an error. Odd: the rest is a handover (JSON) for a fresh
//! node at 198.18.0.2:3322 with two links.
#![no_main]
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use anode_core::handover::NodeHandover;
use anode_core::wire::addr::v4;
use anode_core::{LinkConfig, NodeConfig};
use anode_node::builder::NodeBuilder;
use anode_node::ees::EeOptions;
use libfuzzer_sys::fuzz_target;

fn frames(bytes: &[u8]) {
    let Ok((a, b)) = UnixStream::pair() else {
        return;
    };
    let _ = b.set_read_timeout(Some(std::time::Duration::from_millis(100)));
    let bytes = bytes.to_vec();
    let w = std::thread::spawn(move || {
        let mut a = a;
        let _ = a.write_all(&bytes);
    });
    while anode_node::upgrade::frame::recv(&b).is_ok() {}
    drop(b);
    let _ = w.join();
}

fn state(bytes: &[u8]) {
    let Ok(h) = serde_json::from_slice::<NodeHandover>(bytes) else {
        return;
    };
    let now = Instant::now();
    let Ok(mut node) = NodeBuilder::new(NodeConfig::new(v4(198, 18, 0, 2, 3322)))
        .link(LinkConfig::new(v4(198, 18, 0, 1, 3322)))
        .link(LinkConfig::new(v4(198, 18, 0, 3, 3322)))
        .ees(EeOptions::default())
        .build(now)
    else {
        return;
    };
    let _ = node.take_over(now, &h);
    let c = node.counters();
    assert_eq!(c.rx_packets + c.local_packets, c.outcomes.total());
    node.handle_timeout(now + std::time::Duration::from_secs(1));
    while node.poll_transmit().is_some() {}
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((k, rest)) if k % 2 == 0 => frames(rest),
        Some((_, rest)) => state(rest),
        None => {}
    }
});
