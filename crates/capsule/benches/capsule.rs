//! Capsule EE costs, no I/O.
//!
//! - `transit/*`: one packet through a transit node (`handle_packet` + `poll_transmit`) at 64
//!   and 1400 bytes of payload (links with a 9000-byte MTU), in the same run: a datagram on the node core's fast path, and a
//!   capsule with `FLAG_EVAL_EVERY_HOP` whose code (`guest/protocols/forward`) runs at this
//!   node: capsule header parse, code lookup, wasm `accept` with a fresh fuel budget, forward.
//!   The difference is the EE's added cost per capsule.
//!   `capsule_forward_winch`: the same with the code compiled by Winch (baseline tier), the
//!   per-capsule price of running new code before its tier-up.
//! - `files/*`: a capsule at its destination answering its source: `ping_reply` (the
//!   baseline) against `store_put_64` / `store_get_64`, which write / read a 64-byte value
//!   in the code object's files (ABI v2) first.
//! - `code_load/*`: a ~100 KB module: compile from bytes (validate, compile, ABI check,
//!   pre-link) with Cranelift (`cranelift_compile_100k`) and with Winch
//!   (`winch_compile_100k`); load from the disk cache (read + verify hashes + deserialize +
//!   pre-link); and `first_capsule_one_hop_100k`: two nodes in memory, the time from the
//!   capsule reaching a node without its code to that node having run it: park, code request,
//!   85 chunks from the neighbor, SHA-256, Winch compile (the first tier of
//!   `Tiering::Tiered`; the bench uses `Tiering::Baseline` so no background Cranelift job
//!   per iteration competes for the CPU), instantiate, `accept`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use anode_capsule::{
    CapsuleConfig, CapsuleEe, CodeTier, Runtime, RuntimeConfig, Tiering, capsule_packet, code_hash,
    protocols,
};
use anode_core::wire::addr::v4;
use anode_core::wire::anep::TYPE_CAPSULE;
use anode_core::wire::datagram::Datagram;
use anode_core::wire::transit::{Transit, TransitRepr};
use anode_core::{LinkConfig, LinkId, Node, NodeConfig};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// The kit's transit node (jumbo links, so a 1400-byte payload plus the 136 bytes of
/// capsule headers fits; 1000 routes) running `ee`.
fn transit_node(ee: CapsuleEe) -> (Node, Instant) {
    let (mut n, now) = anode_testkit::fixtures::transit_node(Some(9000), 1000);
    n.register_ee(Box::new(ee));
    (n, now)
}

fn bench_transit(cr: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let winch = Runtime::new(RuntimeConfig {
        tiering: Tiering::Baseline,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut g = cr.benchmark_group("transit");
    for size in [64usize, 1400] {
        let mut ee = CapsuleEe::with_runtime(rt.clone(), CapsuleConfig::default()).unwrap();
        let code = ee.install(protocols::FORWARD).unwrap();
        let (mut node, now) = transit_node(ee);
        let mut wee = CapsuleEe::with_runtime(winch.clone(), CapsuleConfig::default()).unwrap();
        assert_eq!(wee.install(protocols::FORWARD).unwrap(), code);
        let (mut wnode, _) = transit_node(wee);
        let (src, dst) = (v4(198, 18, 0, 1, 3322), v4(198, 19, 1, 200, 3322));
        let dgram = Datagram {
            transit: TransitRepr {
                rb: u16::MAX,
                src,
                dst,
                ..Default::default()
            },
            port: 9,
            payload: vec![0xa5; size],
        }
        .to_packet()
        .unwrap();
        let capsule = capsule_packet(code, src, dst, u16::MAX, 1, &vec![0xa5; size]).unwrap();
        g.throughput(Throughput::Elements(1));
        for (name, pkt, baseline) in [
            ("fastpath_datagram", &dgram, false),
            ("capsule_forward", &capsule, false),
            ("capsule_forward_winch", &capsule, true),
        ] {
            let node = if baseline { &mut wnode } else { &mut node };
            // The setup works (also when a filter skips this case): one packet goes through.
            let before = node.counters().tx_packets;
            node.handle_packet(now, LinkId(0), pkt.clone());
            assert!(node.poll_transmit().is_some(), "{name}: forwarded");
            assert!(node.counters().tx_packets > before);
            g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
                let mut buf = pkt.clone();
                b.iter(|| {
                    node.handle_packet(now, LinkId(0), std::mem::take(&mut buf));
                    let t = node.poll_transmit().unwrap();
                    buf = t.buf;
                    Transit::new_checked(&mut buf[8..])
                        .unwrap()
                        .set_rb(u16::MAX);
                });
            });
            assert_eq!(node.counters().total_drops(), 0, "{name}: nothing dropped");
        }
    }
    g.finish();
}

/// A capsule at its destination that answers its source, in the same run: `ping_reply`
/// (`guest/protocols/ping`: soft-state-free reply, the baseline), `store_put_64` and
/// `store_get_64` (`guest/protocols/store`: a 64-byte value written to / read from the code
/// object's files, then the reply), with the files persisted (a cache directory: each put
/// wakes the writer thread, which writes off this thread).
fn bench_files(cr: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig::default()).unwrap();
    let dir = std::env::temp_dir().join(format!("anode-files-bench-{}", std::process::id()));
    let cfg = CapsuleConfig {
        cache_dir: Some(dir.clone()),
        ..CapsuleConfig::default()
    };
    let mut ee = CapsuleEe::with_runtime(rt, cfg).unwrap();
    let ping = ee.install(protocols::PING).unwrap();
    let store = ee.install(protocols::STORE).unwrap();
    let (mut node, now) = transit_node(ee);
    let (src, me) = (anode_testkit::fixtures::far(0), node.address());
    let request = |op: u8, value: &[u8]| {
        let mut p = vec![op, 0, 0, 9, 1, 0];
        p.extend_from_slice(&(value.len() as u16).to_be_bytes());
        p.push(b'k');
        p.extend_from_slice(value);
        p
    };
    let mut g = cr.benchmark_group("files");
    g.throughput(Throughput::Elements(1));
    for (name, code, payload) in [
        ("ping_reply", ping, vec![0u8; 20]),
        ("store_put_64", store, request(2, &[0x5a; 64])),
        ("store_get_64", store, request(1, &[])),
    ] {
        let pkt = capsule_packet(code, src, me, 64, 1, &payload).unwrap();
        node.handle_packet(now, LinkId(1), pkt.clone());
        let reply = node.poll_transmit().expect("a reply");
        assert!(reply.buf.len() > 40, "{name}");
        g.bench_function(name, |b| {
            b.iter(|| {
                node.handle_packet(now, LinkId(1), pkt.clone());
                black_box(node.poll_transmit().unwrap());
            });
        });
        assert_eq!(node.counters().total_drops(), 0, "{name}: nothing dropped");
    }
    g.finish();
    assert_eq!(
        capsule_ee(&mut node).files().refused(),
        [0; 5],
        "no file operation refused"
    );
    drop(node);
    let _ = std::fs::remove_dir_all(dir);
}

/// A valid ABI-v1 module of about `target` bytes: many small arithmetic functions, not
/// exported (as in a real module, whose few exports call into the rest; every export would
/// add a Cranelift-compiled trampoline even for Winch code).
fn big_module(target: usize) -> Vec<u8> {
    let mut wat = String::from(
        "(module (memory (export \"memory\") 1) (func (export \"anode_abi_v1\"))\n\
         (func (export \"accept\") (param i32 i32) (result i32) (i32.const 0))\n",
    );
    let mut n = 0;
    loop {
        wat.push_str(&format!(
            "(func $f{n} (param i32 i32) (result i32) (local i32)
               (local.set 2 (i32.const {n}))
               (block (loop
                 (br_if 1 (i32.eqz (local.get 0)))
                 (local.set 2 (i32.add (i32.mul (local.get 2) (i32.const 31)) (local.get 1)))
                 (local.set 1 (i32.xor (local.get 1) (i32.shl (local.get 2) (i32.const 3))))
                 (i32.store (i32.and (local.get 2) (i32.const 0xfffc)) (local.get 1))
                 (local.set 0 (i32.sub (local.get 0) (i32.const 1)))
                 (br 0)))
               (i32.add (local.get 2) (i32.load (i32.const {m}))))\n",
            m = (n * 4) % 65532
        ));
        n += 1;
        if n % 100 == 0 {
            let probe = wat::parse_str(format!("{wat})")).unwrap();
            if probe.len() >= target {
                return probe;
            }
        }
    }
}

fn bench_code_load(cr: &mut Criterion) {
    let rt: Arc<Runtime> = Runtime::new(RuntimeConfig::default()).unwrap();
    let wasm = big_module(100 * 1024);
    let h = code_hash(&wasm);
    eprintln!("code_load: module of {} bytes", wasm.len());
    let dir = std::env::temp_dir().join(format!("anode-capsule-bench-{}", std::process::id()));
    let cfg = CapsuleConfig {
        cache_dir: Some(dir.clone()),
        ..CapsuleConfig::default()
    };
    {
        let mut ee = CapsuleEe::with_runtime(rt.clone(), cfg.clone()).unwrap();
        ee.install(&wasm).unwrap();
    }
    let winch = Runtime::new(RuntimeConfig {
        tiering: Tiering::Baseline,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut g = cr.benchmark_group("code_load");
    g.sample_size(10);
    g.bench_function("cranelift_compile_100k", |b| {
        b.iter(|| black_box(rt.compile_tier(&wasm, CodeTier::Optimized).unwrap()));
    });
    g.sample_size(20);
    g.bench_function("winch_compile_100k", |b| {
        b.iter(|| black_box(winch.compile_tier(&wasm, CodeTier::Baseline).unwrap()));
    });
    g.bench_function("first_capsule_one_hop_100k", |b| {
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                total += first_capsule_one_hop(&winch, &wasm);
            }
            total
        });
    });
    g.bench_function("disk_cache_100k", |b| {
        b.iter(|| {
            let mut ee = CapsuleEe::with_runtime(rt.clone(), cfg.clone()).unwrap();
            assert!(ee.has_code(&h));
            assert_eq!(ee.stats().disk_loads, 1);
            black_box(ee)
        });
    });
    g.finish();
    let _ = std::fs::remove_dir_all(dir);
}

/// The capsule EE of `n`.
fn capsule_ee(n: &mut Node) -> &mut CapsuleEe {
    n.ee_mut(TYPE_CAPSULE)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<CapsuleEe>()
        .unwrap()
}

/// Node `a` holds `wasm`; node `b` (fresh) gets a capsule of it from `a`. Returns the time from
/// `b` receiving the capsule to `b` having run it (setup untimed; packets are handed over
/// in memory, so this is the nodes' own work: no link delay).
fn first_capsule_one_hop(rt: &Arc<Runtime>, wasm: &[u8]) -> std::time::Duration {
    let now = Instant::now();
    let (aa, ba) = (v4(198, 18, 0, 1, 3322), v4(198, 18, 0, 2, 3322));
    let mut a = Node::new(NodeConfig::new(aa), now).unwrap();
    let mut b = Node::new(NodeConfig::new(ba), now).unwrap();
    a.add_link(LinkConfig::new(ba), now);
    b.add_link(LinkConfig::new(aa), now);
    let mut ea = CapsuleEe::with_runtime(rt.clone(), CapsuleConfig::default()).unwrap();
    let code = ea.install(wasm).unwrap();
    a.register_ee(Box::new(ea));
    let eb = CapsuleEe::with_runtime(rt.clone(), CapsuleConfig::default()).unwrap();
    b.register_ee(Box::new(eb));
    let pkt = capsule_packet(code, aa, ba, 16, 1, b"first").unwrap();
    let t0 = Instant::now();
    b.handle_packet(now, LinkId(0), pkt);
    for _ in 0..10_000 {
        if capsule_ee(&mut b).stats().runs > 0 {
            break;
        }
        while let Some(t) = b.poll_transmit() {
            a.handle_packet(now, LinkId(0), t.buf);
        }
        while let Some(t) = a.poll_transmit() {
            b.handle_packet(now, LinkId(0), t.buf);
        }
    }
    let el = t0.elapsed();
    let st = capsule_ee(&mut b).stats().clone();
    assert_eq!(
        (st.runs, st.compiled, st.loads_completed),
        (1, 1, 1),
        "{st:?}"
    );
    el
}

criterion_group!(benches, bench_transit, bench_files, bench_code_load);
criterion_main!(benches);
