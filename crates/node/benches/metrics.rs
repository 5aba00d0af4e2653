//! What a Prometheus scrape costs the node: `Snapshot::of` runs on the data-path thread (the
//! part that takes time from forwarding), `render` on the HTTP thread. The node is the one
//! `anode node` builds from a config (capsule and PLAN EEs under the NodeOS, two links) with
//! 1,000 learned routes. Baseline in the same run: one fast-path hop of a 64-byte datagram
//! through the same node, so the scrape can be read as "packets' worth" of data-path time;
//! at 1 scrape/s the data path loses `snapshot time / 1 s` of its time.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use anode_core::LinkId;
use anode_core::wire::datagram::Datagram;
use anode_core::wire::transit::TransitRepr;
use anode_node::NodeBuilder;
use anode_node::metrics::Snapshot;
use anode_testkit::fixtures::{addr, far, hear};
use criterion::{Criterion, criterion_group, criterion_main};

fn node() -> (anode_core::Node, Instant) {
    let (me, a, c) = (addr(1), addr(0), addr(2));
    let text = format!(
        "[node]\naddress = \"{me}\"\n[[link]]\nname = \"a\"\npeer = \"{a}\"\n[[link]]\nname = \"c\"\npeer = \"{c}\"\n"
    );
    let file = anode_node::config::parse(Path::new("bench.toml"), &text).unwrap();
    let now = Instant::now();
    let mut n = NodeBuilder::from_file(&file).build(now).unwrap();
    hear(&mut n, now, &[a, c], 1000);
    (n, now)
}

fn bench_scrape(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("metrics_scrape");
    let (mut n, now) = node();
    let pkt = Datagram {
        transit: TransitRepr {
            rb: u16::MAX,
            src: addr(0),
            dst: far(500),
            ..Default::default()
        },
        port: 9,
        payload: vec![0xa5; 64],
    }
    .to_packet()
    .unwrap();
    g.bench_function("baseline_fast_path_hop_64B", |b| {
        let mut buf = pkt.clone();
        b.iter(|| {
            n.handle_packet(now, LinkId(0), std::mem::take(&mut buf));
            let t = n.poll_transmit().unwrap();
            buf = t.buf;
            buf.clear();
            buf.extend_from_slice(&pkt);
        });
    });
    g.bench_function("snapshot_on_node_thread", |b| {
        b.iter(|| black_box(Snapshot::of(&mut n)));
    });
    let snap = Snapshot::of(&mut n);
    g.bench_function("render_on_http_thread", |b| {
        b.iter(|| black_box(snap.clone().render()));
    });
    g.finish();
}

criterion_group!(benches, bench_scrape);
criterion_main!(benches);
