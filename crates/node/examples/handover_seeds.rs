//! Writes seed inputs for the `handover` fuzz target (`crates/node/fuzz`): a real node's
//! handover, taken while it holds capsules waiting for their code, and the same state as a
//! frame of the upgrade conversation.
//!
//! `cargo run -p anode-node --example handover_seeds -- crates/node/fuzz/corpus/handover`

use std::time::Duration;

use anode_capsule::protocols;
use anode_node::ees::{EeOptions, capsule_ee, register_with};
use anode_testkit::{Net, NetOptions, addr};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: handover_seeds DIR")?;
    std::fs::create_dir_all(&dir)?;
    let opts = NetOptions {
        delay: Duration::from_millis(1),
        settle: Duration::from_secs(3),
        ..NetOptions::default()
    };
    let mut net = Net::line(3, opts, |_, node| {
        register_with(node, &EeOptions::default()).expect("EEs");
    });
    let ee = capsule_ee(&mut net.nodes[0]).ok_or("no capsule EE")?;
    let code = ee.install(protocols::FORWARD)?;
    for i in 0..3u8 {
        let pkt = anode_capsule::capsule_packet(code, addr(0), addr(2), 16, 1, &[0, 9, i])?;
        let _ = net.inject(0, pkt);
    }
    let until = net.now + Duration::from_millis(50);
    net.run_until(until, |n| n.nodes[1].counters().outcomes.held == 3);
    let now = net.now;
    let json = serde_json::to_vec(&net.nodes[1].hand_over(now))?;
    let mut seed = vec![1u8];
    seed.extend_from_slice(&json);
    std::fs::write(format!("{dir}/seed-state"), &seed)?;
    let len = u32::try_from(json.len())?;
    let mut frame = vec![0u8, 5];
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&json);
    std::fs::write(format!("{dir}/seed-frame"), &frame)?;
    println!(
        "wrote {dir}/state and {dir}/frame ({} bytes of state)",
        json.len()
    );
    Ok(())
}
