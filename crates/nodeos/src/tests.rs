//! NodeOS facade tests: domain lifecycle, cascade, handler budget, resources coming back,
//! memory pressure, channels.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anode_wire::addr::v4;

use crate::*;

fn os() -> NodeOs {
    let mut cfg = NodeOsConfig {
        node_memory_bytes: 1 << 20,
        memory_grace: Duration::from_millis(50),
        ..Default::default()
    };
    let parent = Policy {
        cpu_share: 4,
        memory_bytes: 512 << 10,
        soft_state_bytes: 256 << 10,
        code_bytes: 256 << 10,
        channel_bandwidth: 1_000_000,
        max_children: 8,
        max_channels: 8,
        channels: vec!["*".into()],
    };
    cfg.policies.insert("ee", parent);
    cfg.policies.insert(
        "proto",
        Policy {
            memory_bytes: 48 << 10,
            soft_state_bytes: 32 << 10,
            code_bytes: 32 << 10,
            max_children: 2,
            channels: vec!["udp/anep".into(), "anep".into()],
            ..Policy::default()
        },
    );
    NodeOs::new(cfg)
}

struct Recorder {
    seen: Arc<Mutex<Vec<(DomainId, String)>>>,
    greedy: bool,
}

impl TerminationHandler for Recorder {
    fn imminent(
        &mut self,
        child: DomainId,
        reason: &TerminationReason,
        budget: &mut HandlerBudget,
    ) {
        self.seen.lock().unwrap().push((child, reason.to_string()));
        if self.greedy {
            // Tries to run far past the budget: the budget refuses and the handler stops.
            while budget.charge(1_000).is_ok() {}
        } else {
            budget.charge(10).unwrap();
        }
    }
}

#[test]
fn credentials_alone_set_resources() {
    let mut os = os();
    assert_eq!(
        os.create_domain(DomainId::ROOT, &Credentials::new("nobody"), None),
        Err(NodeOsError::UnknownPrincipal("nobody".into()))
    );
    let ee = os
        .create_domain(DomainId::ROOT, &Credentials::new("ee"), None)
        .unwrap();
    assert_eq!(os.policy(ee).unwrap().cpu_share, 4);
    // A child may not exceed its parent: "ee" under "proto" asks for more memory.
    let p = os
        .create_domain(ee, &Credentials::new("proto"), None)
        .unwrap();
    assert!(matches!(
        os.create_domain(p, &Credentials::new("ee"), None),
        Err(NodeOsError::ExceedsParent(_))
    ));
    os.create_domain(p, &Credentials::new("proto"), None)
        .unwrap();
    os.create_domain(p, &Credentials::new("proto"), None)
        .unwrap();
    assert!(matches!(
        os.create_domain(p, &Credentials::new("proto"), None),
        Err(NodeOsError::TooManyChildren { max: 2, .. })
    ));
    assert_eq!(
        os.terminate(DomainId::ROOT, Terminator::Node, TerminationReason::Exit),
        Err(NodeOsError::RootIsPermanent)
    );
}

#[test]
fn termination_cascades_runs_handlers_and_returns_everything() {
    let mut os = os();
    let now = Instant::now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let ee = os
        .create_domain(DomainId::ROOT, &Credentials::new("ee"), None)
        .unwrap();
    os.set_termination_handler(
        ee,
        Box::new(Recorder {
            seen: seen.clone(),
            greedy: false,
        }),
    )
    .unwrap();
    let p = os
        .create_domain(ee, &Credentials::new("proto"), None)
        .unwrap();
    os.set_termination_handler(
        p,
        Box::new(Recorder {
            seen: seen.clone(),
            greedy: true,
        }),
    )
    .unwrap();
    let c1 = os
        .create_domain(p, &Credentials::new("proto"), None)
        .unwrap();
    let shared = os.create_shared_pool(ee, 128 << 10).unwrap();
    let c2 = os
        .create_domain(p, &Credentials::new("proto"), Some(shared))
        .unwrap();
    for (d, k, b) in [
        (ee, MemKind::Code, 1000),
        (p, MemKind::SoftState, 2000),
        (c1, MemKind::Packet, 3000),
        (c2, MemKind::SoftState, 4000),
    ] {
        os.charge_mem(d, k, b, now).unwrap();
    }
    os.open_in_chan(
        c1,
        InChanSpec {
            protocol: "udp/anep".into(),
            addr: AddrSpec {
                type_id: Some(0x0a03),
                ..Default::default()
            },
            keys: vec![],
            buffer_limit: 4,
            handler: HandlerId(1),
            priority: 0,
        },
    )
    .unwrap();
    os.open_out_chan(p, v4(10, 0, 0, 1, 1), 1000, 1000).unwrap();
    assert_eq!(os.pools().node_used(), 10_000);
    assert_eq!(os.channel_count(), 2);
    let pools_before = os.pools().len();
    assert_eq!(pools_before, 5); // root, ee, p, c1, shared

    // The node ends "p" for a violation: c1 and c2 go first, then p; each parent's handler is told.
    let ended = os
        .terminate(
            p,
            Terminator::Node,
            TerminationReason::Policy("test".into()),
        )
        .unwrap();
    assert_eq!(ended, vec![c1, c2, p]);
    let s = seen.lock().unwrap().clone();
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].0, c1);
    assert!(s[0].1.contains("ancestor d2"), "{s:?}");
    assert_eq!(s[2], (p, "policy violation: test".into()));
    // p's greedy handler was cut at the budget (twice: c1, c2).
    let mut overruns = 0;
    let mut terms = vec![];
    while let Some(e) = os.poll_event() {
        match e {
            NodeOsEvent::HandlerOverrun { parent, .. } => {
                assert_eq!(parent, p);
                overruns += 1;
            }
            NodeOsEvent::Terminated {
                domain, reason, by, ..
            } => terms.push((domain, by, reason)),
            _ => {}
        }
    }
    assert_eq!(overruns, 2);
    assert_eq!(terms.len(), 3);
    assert_eq!(
        terms[2],
        (
            p,
            Terminator::Node,
            TerminationReason::Policy("test".into())
        )
    );
    // Everything of the subtree is back: memory, channels, pools.
    assert_eq!(os.pools().node_used(), 1000);
    assert_eq!(os.channel_count(), 0);
    assert_eq!(os.pools().len(), 2);
    assert!(!os.is_live(c1) && !os.is_live(c2) && !os.is_live(p));
    assert_eq!(os.children(ee), Vec::<DomainId>::new());
    // The parent's handler work was charged to the parent.
    assert!(os.counters(ee).unwrap().cpu_ns >= 10);
    assert_eq!(os.counters(ee).unwrap().child_terminations, 1);
    // Self-exit of the last one: the node is back to zero.
    assert_eq!(os.exit(ee).unwrap(), vec![ee]);
    assert_eq!(os.pools().node_used(), 0);
    assert_eq!(os.pools().len(), 1);
    assert_eq!(os.domains().len(), 1);
    assert_eq!(os.terminations(), 4);
    assert!(os.exit(ee).is_err());
}

#[test]
fn memory_limits_refuse_or_start_a_grace_period() {
    let mut os = os();
    let t0 = Instant::now();
    let ee = os
        .create_domain(DomainId::ROOT, &Credentials::new("ee"), None)
        .unwrap();
    let p = os
        .create_domain(ee, &Credentials::new("proto"), None)
        .unwrap();
    // Per-kind policy limit refuses.
    let e = os
        .charge_mem(p, MemKind::SoftState, 40 << 10, t0)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("policy allows 32768 bytes of soft_state"),
        "{e}"
    );
    // Packet buffers are refused at the pool limit (48 KiB); the pool is then starved, which
    // starts a grace period: dropping packets is no remedy, releasing soft state is.
    os.charge_mem(p, MemKind::Code, 20 << 10, t0).unwrap();
    os.charge_mem(p, MemKind::SoftState, 20 << 10, t0).unwrap();
    assert!(os.charge_mem(p, MemKind::Packet, 10 << 10, t0).is_err());
    let ev = os.poll_event().unwrap();
    assert!(
        matches!(
            ev,
            NodeOsEvent::MemoryPressure {
                used: 40960,
                limit: 49152,
                ..
            }
        ),
        "{ev:?}"
    );
    assert_eq!(os.poll_timeout(), Some(t0 + Duration::from_millis(50)));
    os.release_mem(p, MemKind::SoftState, 1 << 10);
    assert!(matches!(
        os.poll_event(),
        Some(NodeOsEvent::MemoryRelieved { .. })
    ));
    assert_eq!(os.poll_timeout(), None);
    // Soft state over the pool limit: pressure, and termination if not remedied in time.
    os.charge_mem(p, MemKind::SoftState, 11 << 10, t0).unwrap();
    let ev = os.poll_event().unwrap();
    assert!(
        matches!(
            ev,
            NodeOsEvent::MemoryPressure {
                used: 51200,
                limit: 49152,
                ..
            }
        ),
        "{ev:?}"
    );
    os.handle_timeout(t0 + Duration::from_millis(49));
    assert!(os.is_live(p));
    os.handle_timeout(t0 + Duration::from_millis(50));
    assert!(!os.is_live(p));
    let rec = os.recent_terminations().last().unwrap();
    assert!(
        rec.reason.starts_with("memory over limit"),
        "{}",
        rec.reason
    );
    assert_eq!(rec.by, Terminator::Node);
    assert_eq!(os.pools().node_used(), 0);
    // The node total is a hard bound.
    let e = os.charge_mem(ee, MemKind::Packet, 2 << 20, t0).unwrap_err();
    assert!(e.to_string().contains("node total"), "{e}");
}

#[test]
fn channels_follow_policy_and_demux() {
    let mut os = os();
    let now = Instant::now();
    let ee = os
        .create_domain(DomainId::ROOT, &Credentials::new("ee"), None)
        .unwrap();
    let p = os
        .create_domain(ee, &Credentials::new("proto"), None)
        .unwrap();
    let spec = |proto: &str| InChanSpec {
        protocol: proto.into(),
        addr: AddrSpec {
            type_id: Some(0x0a03),
            flow: Some(7),
            ..Default::default()
        },
        keys: vec![],
        buffer_limit: 1,
        handler: HandlerId(3),
        priority: 0,
    };
    let e = os.open_in_chan(p, spec("if0/ip/udp/anep")).unwrap_err();
    assert!(e.to_string().contains("not in its policy"), "{e}");
    assert!(matches!(
        os.open_in_chan(p, spec("ip/tcp")),
        Err(NodeOsError::Spec(_))
    ));
    let c = os.open_in_chan(p, spec("udp/anep")).unwrap();
    let mut pkt = vec![0u8; 40];
    pkt[2..4].copy_from_slice(&0x0a03u16.to_be_bytes());
    pkt[16..24].copy_from_slice(&7u64.to_be_bytes());
    let m = os.demux(&pkt).unwrap();
    assert_eq!((m.chan, m.domain, m.handler), (c, p, HandlerId(3)));
    assert!(os.in_buffer(c));
    assert!(!os.in_buffer(c));
    os.in_unbuffer(c);
    assert!(os.in_buffer(c));
    assert_eq!(
        os.counters(p)
            .unwrap()
            .drops
            .get(&anode_core::DropReason::InChanFull),
        Some(&1)
    );
    pkt[23] = 8;
    assert_eq!(os.demux(&pkt), None);
    // Out channel: capped at the policy's bandwidth (1 MB/s), bucket enforced.
    let o = os
        .open_out_chan(p, v4(10, 0, 0, 1, 1), u64::MAX, 1500)
        .unwrap();
    assert!(os.out_send(o, now, 1500).unwrap());
    assert!(!os.out_send(o, now, 1500).unwrap());
    assert!(
        os.out_send(o, now + Duration::from_micros(1500), 1500)
            .unwrap()
    );
    // Channel count limit (4 for "proto").
    os.open_out_chan(p, v4(10, 0, 0, 1, 1), 1, 1).unwrap();
    os.open_out_chan(p, v4(10, 0, 0, 1, 1), 1, 1).unwrap();
    assert!(os.open_out_chan(p, v4(10, 0, 0, 1, 1), 1, 1).is_err());
    os.close_chan(c).unwrap();
    assert_eq!(os.demux(&pkt), None);
    assert!(os.close_chan(c).is_err());
}

mod random_ops {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Create(usize, bool),
        Charge(usize, u8, u32),
        Release(usize, u8, u32),
        Terminate(usize),
        Exit(usize),
        Timeout(u16),
        OpenIn(usize, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..8, any::<bool>()).prop_map(|(p, s)| Op::Create(p, s)),
            (0usize..8, 0u8..3, 0u32..40_000).prop_map(|(d, k, b)| Op::Charge(d, k, b)),
            (0usize..8, 0u8..3, 0u32..40_000).prop_map(|(d, k, b)| Op::Release(d, k, b)),
            (0usize..8).prop_map(Op::Terminate),
            (0usize..8).prop_map(Op::Exit),
            (0u16..200).prop_map(Op::Timeout),
            (0usize..8, any::<u8>()).prop_map(|(d, f)| Op::OpenIn(d, f)),
        ]
    }

    fn kind(k: u8) -> MemKind {
        match k {
            0 => MemKind::Packet,
            1 => MemKind::SoftState,
            _ => MemKind::Code,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// Random operation sequences: the node bound holds, the node total equals the sum over
        /// live domains, and once every domain is gone everything is back (memory, channels,
        /// pools).
        #[test]
        fn accounting_holds_under_random_operations(ops in proptest::collection::vec(op(), 1..80)) {
            let mut os = os();
            let t0 = Instant::now();
            let mut ids = vec![DomainId::ROOT];
            let mut shared = None;
            for o in ops {
                let pick = |i: usize| ids[i % ids.len()];
                match o {
                    Op::Create(p, s) => {
                        let parent = pick(p);
                        let who = if parent == DomainId::ROOT { "ee" } else { "proto" };
                        let pool = if s { shared } else { None };
                        if let Ok(d) = os.create_domain(parent, &Credentials::new(who), pool) {
                            ids.push(d);
                            if shared.is_none() && parent == DomainId::ROOT {
                                shared = os.create_shared_pool(d, 100_000).ok();
                            }
                        }
                    }
                    Op::Charge(d, k, b) => {
                        let _ = os.charge_mem(pick(d), kind(k), u64::from(b), t0);
                    }
                    Op::Release(d, k, b) => os.release_mem(pick(d), kind(k), u64::from(b)),
                    Op::Terminate(d) => {
                        let _ = os.terminate(pick(d), Terminator::Node, TerminationReason::Policy("random".into()));
                    }
                    Op::Exit(d) => {
                        let _ = os.exit(pick(d));
                    }
                    Op::Timeout(ms) => os.handle_timeout(t0 + Duration::from_millis(u64::from(ms))),
                    Op::OpenIn(d, f) => {
                        let _ = os.open_in_chan(pick(d), InChanSpec {
                            protocol: "anep".into(),
                            addr: AddrSpec { flow: Some(u64::from(f)), ..Default::default() },
                            keys: vec![],
                            buffer_limit: 1,
                            handler: HandlerId(0),
                            priority: 0,
                        });
                    }
                }
                ids.retain(|d| os.is_live(*d));
                prop_assert!(os.pools().node_used() <= os.pools().node_limit());
                let sum: u64 = os.domains().iter().map(|d| d.memory_by_kind.iter().sum::<u64>()).sum();
                prop_assert_eq!(sum, os.pools().node_used());
                while os.poll_event().is_some() {}
            }
            for c in os.children(DomainId::ROOT) {
                let _ = os.terminate(c, Terminator::Node, TerminationReason::Exit);
            }
            let root_held: u64 = os.domains().iter().map(|d| d.memory_by_kind.iter().sum::<u64>()).sum();
            prop_assert_eq!(os.domains().len(), 1);
            prop_assert_eq!(os.pools().node_used(), root_held);
            let root_chans = os.domains()[0].channels;
            prop_assert_eq!(os.channel_count(), root_chans);
        }
    }
}

/// Two EEs on one NodeOS (as `anode node` runs them): EE `ee` (512 KB) and EE `ee2`
/// (512 KB) under a node of 1 MB, each with `proto` (48 KB) children.
fn two_ees() -> (NodeOs, [DomainId; 2], [DomainId; 2]) {
    let mut os = os();
    let big = os
        .policies_mut()
        .get(&Principal("ee".into()))
        .cloned()
        .unwrap();
    os.policies_mut().insert("ee2", big);
    let a = os
        .create_domain(DomainId::ROOT, &Credentials::new("ee"), None)
        .unwrap();
    let b = os
        .create_domain(DomainId::ROOT, &Credentials::new("ee2"), None)
        .unwrap();
    let pa = os
        .create_domain(a, &Credentials::new("proto"), None)
        .unwrap();
    let pb = os
        .create_domain(b, &Credentials::new("proto"), None)
        .unwrap();
    (os, [a, b], [pa, pb])
}

#[test]
fn one_nodeos_for_two_ees_keeps_each_ees_subtree_within_its_policy() {
    let now = Instant::now();
    let (mut os, [a, b], [pa, pb]) = two_ees();
    assert_eq!(os.top_of(pa), a);
    assert_eq!(os.top_of(a), a);
    assert_eq!(os.top_of(DomainId::ROOT), DomainId::ROOT);
    let mut kids = vec![pa];
    for _ in 0..6 {
        kids.push(
            os.create_domain(a, &Credentials::new("proto"), None)
                .unwrap(),
        );
    }
    // Seven children of 40 KB (each may hold 48 KB) and the EE's own 230 KB: 510 of 512 KB.
    for k in &kids {
        os.charge_mem(*k, MemKind::File, 40 << 10, now).unwrap();
    }
    os.charge_mem(a, MemKind::Code, 230 << 10, now).unwrap();
    assert_eq!(os.report_under("ee", a).memory_used, (7 * 40 + 230) << 10);
    // 4 KB more is refused, though the child's own policy has room: the EE's bound covers
    // its subtree.
    let e = os
        .charge_mem(pa, MemKind::File, 4 << 10, now)
        .unwrap_err()
        .to_string();
    assert!(e.contains("ee and its domains hold"), "{e}");
    // The other EE is not touched by it.
    os.charge_mem(pb, MemKind::File, 40 << 10, now).unwrap();
    assert_eq!(os.report_under("ee2", b).memory_used, 40 << 10);
    // Releasing and terminating give the EE's room back.
    os.release_mem(a, MemKind::Code, 230 << 10);
    os.terminate(kids[6], Terminator::Node, TerminationReason::ByParent)
        .unwrap();
    assert_eq!(os.report_under("ee", a).memory_used, (6 * 40) << 10);
    os.charge_mem(pa, MemKind::File, 4 << 10, now).unwrap();
}

#[test]
fn one_nodeos_for_two_ees_bounds_them_together_by_the_node() {
    let now = Instant::now();
    let (mut os, [a, b], _) = two_ees();
    // Each EE may hold 512 KB and the node 1 MB: 500 KB each fits, 30 KB more does not.
    os.charge_mem(a, MemKind::File, 500 << 10, now).unwrap();
    os.charge_mem(b, MemKind::File, 500 << 10, now).unwrap();
    let e = os
        .charge_mem(b, MemKind::File, 30 << 10, now)
        .unwrap_err()
        .to_string();
    assert!(e.contains("node total"), "{e}");
}

#[test]
fn each_ee_takes_only_the_events_and_reports_of_its_own_domains() {
    let (mut os, [a, b], [pa, pb]) = two_ees();
    os.terminate(pb, Terminator::Node, TerminationReason::ByParent)
        .unwrap();
    assert!(os.has_events_under(b));
    assert!(!os.has_events_under(a));
    assert_eq!(os.poll_event_under(a), None, "not a's");
    match os.poll_event_under(b) {
        Some(NodeOsEvent::Terminated { domain, .. }) => assert_eq!(domain, pb),
        other => panic!("{other:?}"),
    }
    assert_eq!(os.poll_event_under(b), None);
    // One tree: ids unique in the node, each EE's report its own subtree, the EE's domain
    // a child of the root.
    let ra = os.report_under("ee", a);
    let rb = os.report_under("ee2", b);
    let ids = |r: &anode_core::DomainReport| r.domains.iter().map(|d| d.id).collect::<Vec<_>>();
    assert_eq!(ids(&ra), vec![a.0, pa.0]);
    assert_eq!(ids(&rb), vec![b.0]);
    assert_eq!(
        ra.domains.first().and_then(|d| d.parent),
        Some(DomainId::ROOT.0)
    );
    assert_eq!((ra.terminations, rb.terminations), (0, 1));
    assert_eq!(rb.recent_terminations.len(), 1);
    assert!(ra.recent_terminations.is_empty());
    assert_eq!(ra.memory_limit, 512 << 10);
}
