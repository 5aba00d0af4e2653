//! What authenticated PLAN principals cost, each beside its baseline in the same run:
//!
//! - `principal/*`: finding a packet's principal. `source_only` is the code before signed
//!   principals (read the transit header's source); `unsigned_keys_named` what every unsigned
//!   packet now pays when the policy names keys (the ANEP options walked for an
//!   authentication option); `signed_claim` a signed packet's cheap first step.
//! - `verify/*`: the signature check of a signed packet (`Authenticator::verify`: signed bytes
//!   laid out, ed25519 `verify_strict`, replay window) beside `ed25519_only`, the bare curve
//!   check of the same bytes.
//! - `node/*`: the whole path as `anode node` runs it, a node taking a small PLAN packet
//!   (`print`) from a neighbor, evaluated there under the NodeOS guard: `unsigned` (the
//!   baseline) and `signed` by a key the policy names (a fresh sequence number each).
//!
//! `cargo bench -p anode-nodeos --features plan --bench auth`

use std::hint::black_box;
use std::time::Instant;

use anode_core::{Dispatch, EePacket, LinkConfig, LinkId, Node, NodeConfig};
use anode_nodeos::auth::{Authenticator, sign_packet};
use anode_nodeos::guard::{DomainGuard, GuardConfig, MeteredEe};
use anode_nodeos::plan::MeteredPlan;
use anode_nodeos::{CpuMeter, NodeOs, NodeOsConfig, Policy, PolicyStore};
use anode_plan::ee::{PacketSpec, PlanEe, build_packet};
use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_PLAN;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ed25519_dalek::{Signature, SigningKey};

fn addr(i: u8) -> NodeAddr {
    anode_wire::addr::v4(198, 18, 0, i, 3322)
}

fn packet() -> Vec<u8> {
    let ee = PlanEe::with_defaults();
    build_packet(
        ee.interp(),
        "fun say() = print(\"hi\")",
        "say()",
        &PacketSpec::new(addr(1), addr(9), 8),
    )
    .unwrap()
}

fn ee_packet(buf: Vec<u8>) -> EePacket {
    let anep = anode_wire::anep::AnepPacket::new_checked(&buf[..])
        .unwrap()
        .header_len();
    EePacket::new(
        TYPE_PLAN,
        buf,
        (anep, anode_wire::transit::LEN),
        Some(LinkId(0)),
        Dispatch::Destination,
    )
}

fn principal(c: &mut Criterion) {
    let key = SigningKey::from_bytes(&[1; 32]);
    let pk = key.verifying_key().to_bytes();
    let bare = MeteredPlan::new(PlanEe::with_defaults());
    let keyed = MeteredPlan::with_keys(PlanEe::with_defaults(), [pk]);
    let unsigned = ee_packet(packet());
    let signed = ee_packet(sign_packet(&packet(), &key, 1).unwrap());
    let mut g = c.benchmark_group("principal");
    g.bench_function("source_only", |b| {
        b.iter(|| black_box(bare.principal_of(black_box(&unsigned))))
    });
    g.bench_function("unsigned_keys_named", |b| {
        b.iter(|| black_box(keyed.principal_of(black_box(&unsigned))))
    });
    g.bench_function("signed_claim", |b| {
        b.iter(|| black_box(keyed.principal_of(black_box(&signed))))
    });
    g.finish();
}

fn verify(c: &mut Criterion) {
    let key = SigningKey::from_bytes(&[1; 32]);
    let pk = key.verifying_key().to_bytes();
    let p = packet();
    let mut seq = 0u64;
    let mut g = c.benchmark_group("verify");
    g.bench_function("authenticator", |b| {
        b.iter_batched(
            || {
                seq += 1;
                (
                    Authenticator::new([pk]),
                    sign_packet(&p, &key, seq).unwrap(),
                )
            },
            |(mut a, s)| a.verify(&pk, &s).unwrap(),
            BatchSize::SmallInput,
        )
    });
    let mut msg = Vec::new();
    anode_wire::auth::signed_bytes(&p, 1, &mut msg).unwrap();
    let sig: Signature = ed25519_dalek::Signer::sign(&key, &msg);
    let vk = key.verifying_key();
    g.bench_function("ed25519_only", |b| {
        b.iter(|| vk.verify_strict(black_box(&msg), &sig).unwrap())
    });
    g.finish();
}

fn node(pk: [u8; 32], now: Instant) -> Node {
    let mut n = Node::new(NodeConfig::new(addr(9)), now).unwrap();
    n.add_link(
        LinkConfig {
            static_neighbor: true,
            ..LinkConfig::new(addr(1))
        },
        now,
    );
    let mut policies = PolicyStore::new();
    policies.insert("plan", Policy::unlimited());
    let signer = MeteredPlan::principal_of_signer(&pk);
    policies.insert(&signer, Policy::unlimited());
    policies.insert(
        &MeteredPlan::principal_of_source(addr(1)),
        Policy::unlimited(),
    );
    let g = DomainGuard::new(
        MeteredPlan::with_keys(PlanEe::with_defaults(), [pk]),
        NodeOs::new(NodeOsConfig {
            policies,
            ..NodeOsConfig::default()
        }),
        GuardConfig {
            ee_principal: "plan".into(),
            // No CPU limit in the way of a benchmark: the cost is what is measured.
            cpu_ns_per_sec: u64::MAX / 4,
            max_burst_ns: u64::MAX / 4,
            meter: CpuMeter::new(50_000),
            ..GuardConfig::default()
        },
    )
    .unwrap();
    n.register_ee(Box::new(g));
    while n.poll_transmit().is_some() {}
    n
}

fn whole_node(c: &mut Criterion) {
    let key = SigningKey::from_bytes(&[1; 32]);
    let pk = key.verifying_key().to_bytes();
    let now = Instant::now();
    let p = packet();
    let mut g = c.benchmark_group("node");
    let mut n = node(pk, now);
    g.bench_function("unsigned", |b| {
        b.iter(|| {
            n.handle_packet(now, LinkId(0), p.clone());
            while n.poll_event().is_some() {}
        })
    });
    let mut n = node(pk, now);
    let mut seq = 0u64;
    g.bench_function("signed", |b| {
        b.iter_batched(
            || {
                seq += 1;
                sign_packet(&p, &key, seq).unwrap()
            },
            |s| {
                n.handle_packet(now, LinkId(0), s);
                while n.poll_event().is_some() {}
            },
            BatchSize::SmallInput,
        )
    });
    let signed_packets = n
        .counters()
        .ee_drops("plan", anode_core::DropReason::BadSignature)
        + n.counters()
            .ee_drops("plan", anode_core::DropReason::Replayed);
    assert_eq!(signed_packets, 0, "every signed packet verified");
    g.finish();
}

criterion_group!(benches, principal, verify, whole_node);
criterion_main!(benches);
