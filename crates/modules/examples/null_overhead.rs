//! NetServ's module-layer overhead, node-level: packets per second through one sans-IO node
//! (`handle_packet` + `poll_transmit`, 100-byte datagrams) with (a) no module host (the fast
//! path), (b) a module host with no module, (c) the `null` processor matching every packet at
//! pre-routing. `cargo run --release -p anode-modules --example null_overhead`.
//! (The netns line testbed of scripts/bench-netns.sh is not used here.)

use std::time::{Duration, Instant};

use anode_core::{LinkConfig, LinkId, Node, NodeConfig};
use anode_modules::{ModRuntime, Package, Trust, builtin};
use anode_wire::datagram::Datagram;
use anode_wire::transit::TransitRepr;

fn addr(i: u8) -> anode_wire::NodeAddr {
    anode_wire::addr::v4(198, 18, 0, i, 3322)
}

fn node(now: Instant) -> Node {
    let mut n = Node::new(NodeConfig::new(addr(10)), now).unwrap_or_else(|e| panic!("{e}"));
    for p in [1, 2] {
        n.add_link(
            LinkConfig {
                static_neighbor: true,
                ..LinkConfig::new(addr(p))
            },
            now,
        );
    }
    while n.poll_transmit().is_some() {}
    n
}

fn rate(n: &mut Node, now: Instant, pkt: &[u8]) -> f64 {
    let dur = Duration::from_secs(2);
    let t0 = Instant::now();
    let mut count = 0u64;
    while t0.elapsed() < dur {
        for _ in 0..1000 {
            n.handle_packet(now, LinkId(0), pkt.to_vec());
            while n.poll_transmit().is_some() {
                count += 1;
            }
        }
    }
    count as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    let now = Instant::now();
    let pkt = Datagram {
        transit: TransitRepr {
            rb: 16,
            src: addr(1),
            dst: addr(2),
            prev_hop: addr(1),
            ..Default::default()
        },
        port: 9,
        payload: vec![0; 100],
    }
    .to_packet()
    .unwrap_or_default();
    let key = ed25519_dalek::SigningKey::from_bytes(&[1; 32]);
    let rt = ModRuntime::new(8).unwrap_or_else(|e| panic!("{e}"));

    let mut a = node(now);
    let fast = rate(&mut a, now, &pkt);

    let mut b = node(now);
    anode_modules::attach(&mut b, rt.clone(), Trust::new(vec![key.verifying_key()]));
    let empty_host = rate(&mut b, now, &pkt);

    let mut c = node(now);
    anode_modules::attach(&mut c, rt, Trust::new(vec![key.verifying_key()]));
    let Some(mut p) = builtin::package("null") else {
        return eprintln!("no null module");
    };
    p.sign(&key);
    let p: Package = p;
    if let Ok(h) = anode_modules::host(&mut c) {
        let _ = h.install(p, &toml::Table::new());
        let _ = h.start("null");
    }
    let null = rate(&mut c, now, &pkt);
    println!("fast path (no module host):      {:>10.0} pkt/s", fast);
    println!(
        "module host, no module:          {:>10.0} pkt/s ({:+.1}%)",
        empty_host,
        (empty_host / fast - 1.0) * 100.0
    );
    println!(
        "null processor on every packet:  {:>10.0} pkt/s ({:+.1}%)",
        null,
        (null / fast - 1.0) * 100.0
    );
}
