//! cutChan at fast-path speed: per-packet cost of `handle_packet` + `poll_transmit` for a
//! capsule transiting a node, three ways, in the same run:
//! - `fast_path`: no every-hop flag, the core's fast path (no EE);
//! - `ee`: every-hop flag, handed to an EE that forwards it;
//! - `cut_through`: every-hop flag, but its flow is on a cut-through channel (one of 1,000
//!   open), so the core forwards it without the EE.

use std::hint::black_box;
use std::time::Instant;

use anode_core::wire::addr::v4;
use anode_core::wire::anep::TYPE_CAPSULE;
use anode_core::wire::routed_packet;
use anode_core::wire::transit::{FLAG_EVAL_EVERY_HOP, Transit, TransitRepr};
use anode_core::{CutSpec, EePacket, ExecutionEnvironment, LinkId, Node, NodeContext};
use anode_nodeos::{CutTable, flow_key};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

struct Fwd;

impl ExecutionEnvironment for Fwd {
    fn type_id(&self) -> u16 {
        TYPE_CAPSULE
    }
    fn name(&self) -> &str {
        "fwd"
    }
    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        let _ = ctx.forward(pkt.buf, pkt.anep_len);
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

fn node() -> (Node, Instant) {
    let (mut n, now) = anode_testkit::fixtures::transit_node(None, 0);
    n.register_ee(Box::new(Fwd));
    let mut t = CutTable::new(2000, u64::MAX);
    let spec = CutSpec {
        via: None,
        rate_bytes_per_sec: None,
        burst_bytes: 0,
        expires: None,
        owner: "test".into(),
    };
    for f in 0..1000u64 {
        anode_core::CutThrough::open(
            &mut t,
            now,
            TYPE_CAPSULE,
            vec![flow_key(f * 31)],
            spec.clone(),
        )
        .unwrap();
    }
    n.set_cut_through(Box::new(t));
    (n, now)
}

fn bench(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("cut_through");
    g.throughput(Throughput::Elements(1));
    let pkt = |flags, flow| {
        let t = TransitRepr {
            flags,
            rb: u16::MAX,
            flow,
            src: v4(198, 18, 0, 1, 3322),
            dst: v4(198, 18, 0, 3, 3322),
            prev_hop: v4(198, 18, 0, 1, 3322),
        };
        routed_packet(TYPE_CAPSULE, &t, &[0u8; 56], &[0xa5; 64]).unwrap()
    };
    for (name, p) in [
        ("fast_path", pkt(0, 1)),
        ("ee", pkt(FLAG_EVAL_EVERY_HOP, 1)),
        ("cut_through", pkt(FLAG_EVAL_EVERY_HOP, 31 * 500)),
    ] {
        let (mut n, now) = node();
        g.bench_function(name, |b| {
            let mut buf = p.clone();
            b.iter(|| {
                n.handle_packet(now, LinkId(0), std::mem::take(&mut buf));
                let t = n.poll_transmit().unwrap();
                buf = black_box(t.buf);
                Transit::new_checked(&mut buf[8..])
                    .unwrap()
                    .set_rb(u16::MAX);
            })
        });
        let c = n.counters();
        assert_eq!(c.cut_through > 0, name == "cut_through");
        assert_eq!(c.to_ee > 0, name == "ee");
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
