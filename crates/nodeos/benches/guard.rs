//! The NodeOS on the capsule path: per-capsule cost of `handle_packet` + `poll_transmit` at a
//! router whose capsule EE runs a forwarding protocol (WebAssembly `accept` returning
//! "forward"), two ways in the same run:
//! - `bare`: the capsule EE alone (no run reports);
//! - `guarded`: the same EE as `DomainGuard<MeteredCapsule>` (domain lookup, packet memory
//!   charge, DRR queue, run reports, output bucket), with CPU and bandwidth to spare so
//!   nothing is throttled.
//!
//! Time advances 10 µs per capsule so the guard's CPU budget refills as on a live node.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anode_capsule::{CapsuleConfig, CapsuleEe, capsule_packet, code_hash};
use anode_core::wire::addr::v4;
use anode_core::wire::control::{Control, Hello};
use anode_core::wire::transit::Transit;
use anode_core::{ExecutionEnvironment, LinkConfig, LinkId, Node, NodeConfig};
use anode_nodeos::capsule::MeteredCapsule;
use anode_nodeos::guard::{DomainGuard, GuardConfig};
use anode_nodeos::{NodeOs, NodeOsConfig, Policy};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn forward_code() -> Vec<u8> {
    wat::parse_str(
        r#"(module (memory (export "memory") 1) (func (export "anode_abi_v1"))
             (func (export "accept") (param i32 i32) (result i32) (i32.const 1)))"#,
    )
    .unwrap()
}

fn node(ee: Box<dyn ExecutionEnvironment>) -> (Node, Instant) {
    let now = Instant::now();
    let me = v4(198, 18, 0, 2, 3322);
    let (a, c) = (v4(198, 18, 0, 1, 3322), v4(198, 18, 0, 3, 3322));
    let mut n = Node::new(NodeConfig::new(me), now).unwrap();
    n.add_link(LinkConfig::new(a), now);
    n.add_link(LinkConfig::new(c), now);
    for (i, peer) in [a, c].into_iter().enumerate() {
        let h = Control::Hello(Hello {
            sender: peer,
            hello_ms: 1000,
            dead_ms: 1_000_000_000,
            seq: 1,
            seen: vec![me],
        });
        n.handle_packet(now, LinkId(i as u32), h.to_packet().unwrap());
    }
    while n.poll_transmit().is_some() {}
    while n.poll_event().is_some() {}
    n.register_ee(ee);
    (n, now)
}

fn guarded(code: &[u8]) -> DomainGuard<MeteredCapsule> {
    let mut cfg = NodeOsConfig::default();
    cfg.policies.insert("capsule", Policy::unlimited());
    let mut ee = MeteredCapsule::new(CapsuleConfig::default(), None).unwrap();
    ee.inner_mut().install(code).unwrap();
    let gc = GuardConfig {
        ee_principal: "capsule".into(),
        protocol_policy: Policy {
            channel_bandwidth: u64::MAX,
            ..Policy::default()
        },
        cpu_ns_per_sec: 1_000_000_000,
        ..GuardConfig::default()
    };
    DomainGuard::new(ee, NodeOs::new(cfg), gc).unwrap()
}

fn bench(cr: &mut Criterion) {
    let code = forward_code();
    let h = code_hash(&code);
    let pkt = capsule_packet(
        h,
        v4(198, 18, 0, 1, 3322),
        v4(198, 18, 0, 3, 3322),
        u16::MAX,
        1,
        &[0xa5; 64],
    )
    .unwrap();
    let mut g = cr.benchmark_group("capsule_guard");
    g.throughput(Throughput::Elements(1));
    for name in ["bare", "guarded"] {
        let ee: Box<dyn ExecutionEnvironment> = if name == "bare" {
            let mut ee = CapsuleEe::new(CapsuleConfig::default()).unwrap();
            ee.install(&code).unwrap();
            Box::new(ee)
        } else {
            Box::new(guarded(&code))
        };
        let (mut n, start) = node(ee);
        let mut now = start;
        let mut ran = false;
        g.bench_function(name, |b| {
            ran = true;
            let mut buf = pkt.clone();
            b.iter(|| {
                now += Duration::from_micros(10);
                n.handle_packet(now, LinkId(0), std::mem::take(&mut buf));
                let t = n.poll_transmit().expect("forwarded");
                buf = black_box(t.buf);
                Transit::new_checked(&mut buf[8..])
                    .unwrap()
                    .set_rb(u16::MAX);
            })
        });
        if !ran {
            // Filtered out on the command line.
            continue;
        }
        assert!(n.counters().to_ee > 0);
        assert!(
            n.counters().ee_drop_map().is_empty(),
            "{:?}",
            n.counters().ee_drop_map()
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
