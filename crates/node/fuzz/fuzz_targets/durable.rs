//! The EE state a node keeps on disk across restarts (`anode_node::durable`, `[plan]
//! state_file`), which it must check before it trusts it: `decode` never panics, a decoded
//! file encodes and decodes to the same states, and a node given each state (as `anode
//! node` does at start) neither panics nor loses its outcome ledger.
#![no_main]
use std::path::Path;
use std::time::Instant;

use anode_core::wire::addr::v4;
use anode_core::{LinkConfig, NodeConfig};
use anode_node::builder::NodeBuilder;
use anode_node::durable;
use anode_node::ees::EeOptions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let path = Path::new("fuzz/plan.json");
    let Ok(states) = durable::decode(path, &text) else {
        return;
    };
    let again = durable::decode(path, &durable::encode(&states)).expect("an encoded file decodes");
    assert_eq!(again, states);
    let now = Instant::now();
    let Ok(mut node) = NodeBuilder::new(NodeConfig::new(v4(198, 18, 0, 2, 3322)))
        .link(LinkConfig::new(v4(198, 18, 0, 1, 3322)))
        .ees(EeOptions::default())
        .build(now)
    else {
        return;
    };
    for (t, s) in &states {
        let _ = node.restore_durable(*t, s);
    }
    node.handle_timeout(now + std::time::Duration::from_secs(1));
    while node.poll_transmit().is_some() {}
    let c = node.counters();
    assert_eq!(c.rx_packets + c.local_packets, c.outcomes.total());
});
