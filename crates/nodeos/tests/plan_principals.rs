//! Authenticated PLAN principals at one node (addr 9) running the PLAN EE under the NodeOS
//! as `anode node` does: packets signed by a key the policy names run in the signer's domain;
//! a replay, a tampered packet and a forgery in a named key's name are dropped by reason
//! without running; unsigned packets, and packets signed by keys the policy does not name,
//! run in their source's (unauthenticated) domain; and a flood of forgeries in one key's name
//! does not keep another signer's packets from running, nor does a flood of unsigned packets
//! from 500 forged source addresses (their group, `plan/unauthenticated`, weighs as one
//! principal). Every packet has exactly one outcome.

use std::time::{Duration, Instant};

use anode_core::{DropReason, Event, LinkConfig, LinkId, Node, NodeConfig};
use anode_nodeos::auth::sign_packet;
use anode_nodeos::guard::{DomainGuard, GuardConfig};
use anode_nodeos::plan::MeteredPlan;
use anode_nodeos::{CpuMeter, NodeOs, NodeOsConfig, Policy, PolicyStore};
use anode_plan::ee::{PacketSpec, PlanEe, build_packet};
use anode_wire::NodeAddr;
use ed25519_dalek::SigningKey;

fn addr(i: u8) -> NodeAddr {
    anode_wire::addr::v4(198, 18, 0, i, 3322)
}

fn key(b: u8) -> SigningKey {
    SigningKey::from_bytes(&[b; 32])
}

fn signer(b: u8) -> String {
    MeteredPlan::principal_of_signer(&key(b).verifying_key().to_bytes())
}

/// Node 9 with neighbor 1 on link 0; policies name signers 1 and 2.
fn node(now: Instant) -> Node {
    node_with_cpu(now, GuardConfig::default().cpu_ns_per_sec)
}

/// [`node`] whose PLAN EE has `cpu_ns_per_sec` of CPU.
fn node_with_cpu(now: Instant, cpu_ns_per_sec: u64) -> Node {
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
    for k in [1, 2] {
        policies.insert(
            &signer(k),
            Policy {
                memory_bytes: 4 << 20,
                ..Policy::default()
            },
        );
    }
    let keys = MeteredPlan::keys_named(policies.iter().map(|(n, _)| n.as_str()));
    assert_eq!(keys.len(), 2);
    let g = DomainGuard::new(
        MeteredPlan::with_keys(PlanEe::with_defaults(), keys),
        NodeOs::new(NodeOsConfig {
            policies,
            ..NodeOsConfig::default()
        }),
        GuardConfig {
            ee_principal: "plan".into(),
            protocol_policy: Policy {
                memory_bytes: 4 << 20,
                ..Policy::default()
            },
            // As `anode node` meters PLAN: 50 ns a step.
            meter: CpuMeter::new(50_000),
            cpu_ns_per_sec,
            ..GuardConfig::default()
        },
    )
    .unwrap();
    n.register_ee(Box::new(g));
    while n.poll_transmit().is_some() {}
    n
}

/// A PLAN packet from node 1, evaluated at node 9, printing `word`.
fn packet(word: &str) -> Vec<u8> {
    let ee = PlanEe::with_defaults();
    build_packet(
        ee.interp(),
        &format!("fun say() = print(\"{word}\")"),
        "say()",
        &PacketSpec::new(addr(1), addr(9), 8),
    )
    .unwrap()
}

fn prints(n: &mut Node) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(e) = n.poll_event() {
        if let Event::Log { ee, message } = e
            && ee == "plan"
        {
            out.push(message);
        }
    }
    out
}

fn packets(n: &Node, principal: &str) -> u64 {
    n.domain_reports()
        .iter()
        .flat_map(|r| r.domains.iter())
        .find(|d| d.principal == principal)
        .map_or(0, |d| d.packets)
}

fn drops(n: &Node, r: DropReason) -> u64 {
    n.counters().ee_drops("plan", r)
}

#[test]
fn signers_replays_forgeries_and_unauthenticated_sources() {
    let now = Instant::now();
    let mut n = node(now);
    let source = MeteredPlan::principal_of_source(addr(1));

    // Signed by a named key: the signer's domain.
    let signed = sign_packet(&packet("one"), &key(1), 10).unwrap();
    n.handle_packet(now, LinkId(0), signed.clone());
    assert_eq!(prints(&mut n), ["one"]);
    assert_eq!(packets(&n, &signer(1)), 1);

    // The same packet again: a replay, dropped before it runs.
    n.handle_packet(now, LinkId(0), signed.clone());
    assert_eq!(prints(&mut n), Vec::<String>::new());
    assert_eq!(drops(&n, DropReason::Replayed), 1);

    // Changed on the way (a byte of its program): the signature no longer verifies.
    let mut tampered = sign_packet(&packet("two"), &key(1), 11).unwrap();
    let at = tampered.len() - 3;
    tampered[at] ^= 0x20;
    n.handle_packet(now, LinkId(0), tampered);
    // Signed by key 3 but claiming key 1: a forgery.
    let mut forged = sign_packet(&packet("three"), &key(3), 12).unwrap();
    let k1 = key(1).verifying_key().to_bytes();
    let opt = forged
        .windows(32)
        .position(|w| w == key(3).verifying_key().as_bytes())
        .unwrap();
    forged[opt..opt + 32].copy_from_slice(&k1);
    n.handle_packet(now, LinkId(0), forged);
    assert_eq!(prints(&mut n), Vec::<String>::new());
    assert_eq!(drops(&n, DropReason::BadSignature), 2);
    // Neither moved the replay window: the genuine 11 and 12 still run.
    for (seq, w) in [(11, "eleven"), (12, "twelve")] {
        n.handle_packet(
            now,
            LinkId(0),
            sign_packet(&packet(w), &key(1), seq).unwrap(),
        );
    }
    assert_eq!(prints(&mut n), ["eleven", "twelve"]);

    // Unsigned, or signed by a key the policy does not name: the source's domain.
    n.handle_packet(now, LinkId(0), packet("plain"));
    n.handle_packet(
        now,
        LinkId(0),
        sign_packet(&packet("stranger"), &key(3), 1).unwrap(),
    );
    assert_eq!(prints(&mut n), ["plain", "stranger"]);
    assert_eq!(packets(&n, &source), 2);
    assert_eq!(packets(&n, &signer(1)), 6, "every packet claiming key 1");
    assert!(
        !n.domain_reports()
            .iter()
            .flat_map(|r| r.domains.iter())
            .any(|d| d.principal == signer(3)),
        "no domain for a key the policy does not name"
    );
    let c = n.counters();
    assert_eq!(c.rx_packets, 8);
    assert_eq!(c.outcomes.total(), c.rx_packets, "{:?}", c.outcomes);
}

#[test]
fn forgeries_in_one_keys_name_do_not_starve_another_signer() {
    let t0 = Instant::now();
    let mut n = node(t0);
    // Over one second: 4,000 forgeries claiming key 1 (each costs a verification), and
    // 100 genuine packets of signer 2, interleaved.
    let forged = {
        let mut p = sign_packet(&packet("x"), &key(3), 1).unwrap();
        let at = p
            .windows(32)
            .position(|w| w == key(3).verifying_key().as_bytes())
            .unwrap();
        p[at..at + 32].copy_from_slice(key(1).verifying_key().as_bytes());
        p
    };
    let mut now = t0;
    let mut genuine = 0;
    for i in 0..4_000u64 {
        now += Duration::from_micros(250);
        n.handle_packet(now, LinkId(0), forged.clone());
        if i % 40 == 0 {
            genuine += 1;
            let p = sign_packet(&packet("ok"), &key(2), i + 1).unwrap();
            n.handle_packet(now, LinkId(0), p);
        }
        if let Some(t) = n.poll_timeout() {
            n.handle_timeout(t.max(now));
        }
    }
    for _ in 0..100 {
        now += Duration::from_millis(10);
        n.handle_timeout(now);
    }
    let ok = prints(&mut n).iter().filter(|m| *m == "ok").count();
    assert_eq!(ok, genuine, "every genuine packet of signer 2 ran");
    let forged_out = drops(&n, DropReason::BadSignature);
    assert!(forged_out > 0);
    let c = n.counters();
    assert_eq!(c.outcomes.total(), c.rx_packets, "{:?}", c.outcomes);
    // What the forgeries cost was charged to key 1's domain, not to signer 2's.
    let cpu = |p: &str| {
        n.domain_reports()
            .iter()
            .flat_map(|r| r.domains.iter())
            .find(|d| d.principal == p)
            .map_or(0, |d| d.cpu_ns)
    };
    assert!(
        cpu(&signer(1)) > 10 * cpu(&signer(2)),
        "{} vs {}",
        cpu(&signer(1)),
        cpu(&signer(2))
    );
}

#[test]
fn replay_windows_survive_a_hand_over() {
    let now = Instant::now();
    let mut old = node(now);
    let signed = sign_packet(&packet("once"), &key(1), 10).unwrap();
    old.handle_packet(now, LinkId(0), signed.clone());
    assert_eq!(prints(&mut old), ["once"]);
    // The process that takes the node's place (`anode upgrade`) refuses the same packet.
    let h = old.hand_over(now);
    let mut new = node(now);
    let rep = new.take_over(now, &h).unwrap();
    assert!(rep.refused.is_empty(), "{rep:?}");
    new.handle_packet(now, LinkId(0), signed);
    assert_eq!(prints(&mut new), Vec::<String>::new());
    assert_eq!(drops(&new, DropReason::Replayed), 1);
    new.handle_packet(
        now,
        LinkId(0),
        sign_packet(&packet("next"), &key(1), 11).unwrap(),
    );
    assert_eq!(prints(&mut new), ["next"]);
}

/// A PLAN packet from `src`, evaluated at node 9, making 2^`depth` calls (its CPU; PLAN has
/// no recursion, so each function calls the one before it twice).
fn spin_packet(src: NodeAddr, depth: u32, word: &str) -> Vec<u8> {
    let ee = PlanEe::with_defaults();
    let mut program = String::from("fun f0() = ()\n");
    for i in 1..=depth {
        program.push_str(&format!("fun f{i}() = (f{j}(); f{j}())\n", j = i - 1));
    }
    program.push_str(&format!("fun go() = (f{depth}(); print(\"{word}\"))\n"));
    build_packet(
        ee.interp(),
        &program,
        "go()",
        &PacketSpec::new(src, addr(9), 8),
    )
    .unwrap()
}

#[test]
fn forging_many_source_addresses_buys_no_more_than_one_share() {
    let t0 = Instant::now();
    // 50 ms of CPU a second: about 60 of these packets (each 2^10 calls, ~0.8 ms charged).
    let mut n = node_with_cpu(t0, 50_000_000);
    // Over one second: unsigned packets from 500 forged source addresses, 1,000 a second;
    // the signer sends 20 a second.
    let mut now = t0;
    let (mut forged_sent, mut signed_sent) = (0u64, 0usize);
    for i in 0..1_000u32 {
        now += Duration::from_millis(1);
        let src = anode_wire::addr::v4(198, 18, 1 + (i % 500 / 250) as u8, (i % 250) as u8, 3322);
        n.handle_packet(now, LinkId(0), spin_packet(src, 10, "forged"));
        forged_sent += 1;
        if i % 50 == 0 {
            let p = spin_packet(addr(1), 10, "signed");
            let p = sign_packet(&p, &key(2), u64::from(i) + 1).unwrap();
            n.handle_packet(now, LinkId(0), p);
            signed_sent += 1;
        }
        if let Some(t) = n.poll_timeout()
            && t <= now
        {
            n.handle_timeout(now);
        }
    }
    for _ in 0..10 {
        now += Duration::from_millis(10);
        n.handle_timeout(now);
    }
    let out = prints(&mut n);
    let signed = out.iter().filter(|m| *m == "signed").count();
    let forged = out.iter().filter(|m| *m == "forged").count() as u64;
    let r = n.domain_reports();
    let doms = &r[0].domains;
    let cpu = |p: &str| {
        doms.iter()
            .find(|d| d.principal == p)
            .map_or(0, |d| d.cpu_ns)
    };
    // Without the group each forged address was a principal of its own, and the signer got
    // one share in 501: 1 of its 20 packets ran.
    assert_eq!(
        signed,
        signed_sent,
        "the signer's packets all ran ({} ns of CPU)",
        cpu(&signer(2))
    );
    assert!(
        forged < forged_sent / 4,
        "{forged} of {forged_sent} forged ran"
    );
    // The sources are members of the group, which is a child of the EE's domain.
    let ee = doms.iter().find(|d| d.principal == "plan").unwrap();
    let group = doms
        .iter()
        .find(|d| d.principal == anode_nodeos::plan::UNAUTHENTICATED)
        .unwrap();
    assert_eq!(group.parent, Some(ee.id));
    let members = doms.iter().filter(|d| d.parent == Some(group.id)).count();
    assert!(members > 100, "{members} source domains in the group");
    assert!(
        doms.iter()
            .filter(|d| d.parent == Some(group.id))
            .all(|d| d.authenticated == Some(false))
    );
    let c = n.counters();
    assert_eq!(c.outcomes.total(), c.rx_packets, "{:?}", c.outcomes);
}
