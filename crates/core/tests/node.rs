//! Node-core tests: a few nodes on the test kit's network (zero-delay links), driven in
//! virtual time.

use std::time::{Duration, Instant};

use anode_wire::addr::v4;
use anode_wire::anep::{AnepOption, AnepRepr, FLAG_DISCARD_UNKNOWN, TYPE_CAPSULE, TYPE_DATAGRAM};
use anode_wire::control::{Control, Hello, Lsa, Lsas, Routes};
use anode_wire::datagram::Datagram;
use anode_wire::transit::{FLAG_EVAL_EVERY_HOP, TransitRepr};
use anode_wire::{NodeAddr, routed_packet};

use anode_core::*;
use anode_testkit::{Net, NetOptions, addr};

/// `n` nodes wired by `edges` on the test kit's network (zero-delay links).
fn net(n: usize, edges: &[(usize, usize)]) -> Net {
    Net::new(n, edges, NetOptions::default(), |_, _| {})
}

fn ring(n: usize) -> Net {
    let edges: Vec<(usize, usize)> = (0..n).map(|i| (i, (i + 1) % n)).collect();
    net(n, &edges)
}

#[test]
fn ring_converges_and_every_node_reaches_every_other() {
    let mut net = ring(5);
    net.run_for(Duration::from_secs(3));
    for i in 0..5 {
        for j in 0..5 {
            let r = net.nodes[i].routes();
            let m = r.iter().find(|r| r.dest == addr(j)).map(|r| r.metric);
            let want = {
                let d = (i as i32 - j as i32).unsigned_abs() as u16;
                d.min(5 - d)
            };
            assert_eq!(m, Some(want), "node {i} to {j}");
        }
    }
    for i in 0..5 {
        for j in 0..5 {
            if i != j {
                net.nodes[i]
                    .send_datagram(net.now, addr(j), 7, 1, None, b"hi")
                    .unwrap();
            }
        }
    }
    net.pump();
    for j in 0..5 {
        let d = net.deliveries(j);
        assert_eq!(d.len(), 4, "node {j} deliveries");
        assert!(d.iter().all(|d| d.payload() == b"hi" && d.port == 7));
    }
}

#[test]
fn failed_link_reroutes_within_dead_interval() {
    let mut net = ring(5);
    net.run_for(Duration::from_secs(3));
    // Node 0 reaches node 1 directly; cut that wire.
    assert_eq!(net.nodes[0].lookup(&addr(1)).unwrap().addr, addr(1));
    net.set_wire_up(0, false);
    // RIP semantics: node 0 notices at the dead interval and poisons the route at once; the
    // detour is learned at the latest with the next periodic update of the nodes behind it.
    let r = RoutingConfig::default();
    net.run_for(r.dead_interval + r.update_interval + Duration::from_secs(1));
    let hop = net.nodes[0].lookup(&addr(1)).unwrap();
    assert_eq!(hop.addr, addr(4));
    assert_eq!(
        net.nodes[0]
            .routes()
            .iter()
            .find(|r| r.dest == addr(1))
            .unwrap()
            .metric,
        4
    );
    net.nodes[0]
        .send_datagram(net.now, addr(1), 7, 1, None, b"x")
        .unwrap();
    net.pump();
    assert_eq!(net.deliveries(1).len(), 1);
    // Restore: the direct route comes back.
    net.set_wire_up(0, true);
    net.run_for(Duration::from_secs(3));
    assert_eq!(net.nodes[0].lookup(&addr(1)).unwrap().addr, addr(1));
}

#[test]
fn fast_path_spends_rb_and_drops_at_zero() {
    let mut net = net(4, &[(0, 1), (1, 2), (2, 3)]);
    net.run_for(Duration::from_secs(3));
    // rb 3 gets 0 -> 3 (three hops).
    net.nodes[0]
        .send_datagram(net.now, addr(3), 1, 0, Some(3), b"a")
        .unwrap();
    net.pump();
    let d = net.deliveries(3);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].rb, 0);
    assert_eq!(net.nodes[1].counters().fast_path, 1);
    // rb 2 dies at node 2.
    net.nodes[0]
        .send_datagram(net.now, addr(3), 1, 0, Some(2), b"a")
        .unwrap();
    net.pump();
    assert!(net.deliveries(3).is_empty());
    assert_eq!(net.nodes[2].counters().drops(DropReason::RbExhausted), 1);
}

#[test]
fn no_route_and_unknown_types_are_counted() {
    let mut net = net(3, &[(0, 1), (1, 2)]);
    net.run_for(Duration::from_secs(3));
    let r = net.nodes[0].send_datagram(net.now, v4(198, 18, 9, 9, 1), 1, 0, None, b"a");
    assert_eq!(r, Err(DropReason::NoRoute));
    // Unknown type, discard flag: dropped at the first node that sees it.
    let mut h = AnepRepr::new(0x7777);
    h.options.push(AnepOption::Destination(addr(2)));
    let pkt = h.emit_packet(b"opaque").unwrap();
    net.nodes[1].handle_packet(net.now, LinkId(0), pkt);
    assert_eq!(
        net.nodes[1]
            .counters()
            .drops(DropReason::UnknownTypeDiscarded),
        1
    );
    // Unknown type, forward: follows its destination option.
    h.flags &= !FLAG_DISCARD_UNKNOWN;
    net.nodes[1].handle_packet(net.now, LinkId(0), h.emit_packet(b"opaque").unwrap());
    assert_eq!(net.nodes[1].counters().unknown_type_forwarded, 1);
    // Unknown type, forward, no destination option.
    net.nodes[1].handle_packet(
        net.now,
        LinkId(0),
        AnepRepr {
            flags: 0,
            type_id: 0x7777,
            options: vec![],
        }
        .emit_packet(b"x")
        .unwrap(),
    );
    assert_eq!(
        net.nodes[1]
            .counters()
            .drops(DropReason::UnknownTypeNoDestination),
        1
    );
}

#[test]
fn checksum_survives_the_fast_path_and_catches_corruption() {
    let mut net = net(3, &[(0, 1), (1, 2)]);
    net.run_for(Duration::from_secs(3));
    let mut body = TransitRepr {
        rb: 5,
        src: addr(0),
        dst: addr(2),
        prev_hop: addr(0),
        ..Default::default()
    }
    .to_vec();
    body.extend_from_slice(&[0, 9, 0, 0]);
    body.extend_from_slice(b"payload");
    let mut h = AnepRepr::new(TYPE_DATAGRAM);
    h.options.push(AnepOption::Checksum(0));
    let pkt = h.emit_packet(&body).unwrap();
    net.nodes[0].inject(net.now, pkt.clone()).unwrap();
    net.pump();
    assert_eq!(net.deliveries(2).len(), 1);
    let mut bad = pkt;
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    net.nodes[0].inject(net.now, bad).unwrap();
    net.pump();
    assert!(net.deliveries(2).is_empty());
    assert_eq!(net.nodes[2].counters().drops(DropReason::BadChecksum), 1);
}

/// An EE that counts what it sees and forwards everything it gets.
struct Recorder {
    seen: Vec<Dispatch>,
}

impl ExecutionEnvironment for Recorder {
    fn type_id(&self) -> u16 {
        TYPE_CAPSULE
    }
    fn name(&self) -> &str {
        "recorder"
    }
    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        self.seen.push(pkt.why);
        if pkt.why != Dispatch::Destination {
            let _ = ctx.forward(pkt.buf, pkt.anep_len);
        } else {
            ctx.count_drop("recorder", anode_core::DropReason::GuestDrop);
        }
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

fn recorder(n: &mut Node) -> &mut Recorder {
    n.ee_mut(TYPE_CAPSULE)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<Recorder>()
        .unwrap()
}

#[test]
fn ee_dispatch_every_hop_vs_fast_path() {
    let mut net = net(3, &[(0, 1), (1, 2)]);
    for n in &mut net.nodes {
        n.register_ee(Box::new(Recorder { seen: vec![] }));
    }
    net.run_for(Duration::from_secs(3));
    let mk = |flags| {
        let t = TransitRepr {
            flags,
            rb: 9,
            src: addr(0),
            dst: addr(2),
            prev_hop: addr(0),
            flow: 0,
        };
        routed_packet(TYPE_CAPSULE, &t, &[], b"p").unwrap()
    };
    net.nodes[0].inject(net.now, mk(0)).unwrap();
    net.pump();
    assert_eq!(recorder(&mut net.nodes[1]).seen, vec![]);
    assert_eq!(
        recorder(&mut net.nodes[2]).seen,
        vec![Dispatch::Destination]
    );
    net.nodes[0]
        .inject(net.now, mk(FLAG_EVAL_EVERY_HOP))
        .unwrap();
    net.pump();
    assert_eq!(recorder(&mut net.nodes[1]).seen, vec![Dispatch::EveryHop]);
    assert_eq!(
        recorder(&mut net.nodes[0]).seen,
        vec![Dispatch::Local, Dispatch::Local]
    );
}

#[test]
fn inject_says_which_ee_dropped_and_never_a_stale_reason() {
    let mut net = net(2, &[(0, 1)]);
    net.nodes[0].register_ee(Box::new(Recorder { seen: vec![] }));
    net.run_for(Duration::from_secs(3));
    let r = net.nodes[0].send_datagram(net.now, v4(198, 18, 9, 9, 1), 1, 0, None, b"a");
    assert_eq!(r, Err(DropReason::NoRoute));
    assert_eq!(net.nodes[0].inject_drop_detail(), None);
    // A capsule for node 0 itself: its EE drops it (as a guest would) and counts it.
    let t = TransitRepr {
        flags: 0,
        rb: 9,
        src: addr(0),
        dst: addr(0),
        prev_hop: addr(0),
        flow: 0,
    };
    let pkt = routed_packet(TYPE_CAPSULE, &t, &[], b"p").unwrap();
    assert_eq!(
        net.nodes[0].inject(net.now, pkt),
        Err(DropReason::EeDropped),
        "the EE's drop, not the earlier no-route"
    );
    assert_eq!(
        net.nodes[0].inject_drop_detail(),
        Some("recorder/guest_drop")
    );
    // A packet that goes through clears it.
    net.nodes[0]
        .send_datagram(net.now, addr(1), 7, 0, None, b"b")
        .unwrap();
    assert_eq!(net.nodes[0].inject_drop_detail(), None);
}

#[test]
fn garbled_corpus_never_panics_and_every_packet_is_accounted() {
    let mut net = net(2, &[(0, 1)]);
    net.run_for(Duration::from_secs(3));
    let good = Datagram {
        transit: TransitRepr {
            rb: 4,
            src: addr(0),
            dst: addr(1),
            prev_hop: addr(0),
            ..Default::default()
        },
        port: 1,
        payload: b"abcdef".to_vec(),
    }
    .to_packet()
    .unwrap();
    let hello = Control::Hello(Hello {
        sender: addr(0),
        hello_ms: 1000,
        dead_ms: 3500,
        seq: 9,
        seen: vec![addr(1)],
    })
    .to_packet()
    .unwrap();
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let n = &mut net.nodes[1];
    let before = n.counters().clone();
    let mut fed = 0u64;
    for base in [&good, &hello] {
        for len in 0..base.len() {
            n.handle_packet(net.now, LinkId(0), base[..len].to_vec());
            fed += 1;
        }
        for _ in 0..5000 {
            let mut b = base.clone();
            for _ in 0..(rnd() % 4 + 1) {
                let i = (rnd() as usize) % b.len();
                b[i] = rnd() as u8;
            }
            n.handle_packet(net.now, LinkId(0), b);
            fed += 1;
        }
    }
    for _ in 0..2000 {
        let len = (rnd() % 200) as usize;
        n.handle_packet(net.now, LinkId(0), (0..len).map(|_| rnd() as u8).collect());
        fed += 1;
    }
    let c = n.counters();
    assert_eq!(c.rx_packets - before.rx_packets, fed);
    let outcomes = (c.delivered - before.delivered)
        + (c.fast_path - before.fast_path)
        + (c.unknown_type_forwarded - before.unknown_type_forwarded)
        + (c.control_rx - before.control_rx)
        + (c.to_ee - before.to_ee)
        + (c.total_drops() - before.total_drops());
    // Control messages are counted once on receipt; a control message that also produced a
    // NotNeighbor drop counts twice, so outcomes >= fed; nothing is unaccounted for.
    assert!(outcomes >= fed, "outcomes {outcomes} < fed {fed}");
    assert!(c.drops(DropReason::MalformedAnep) > 0);
    assert!(c.drops(DropReason::MalformedTransit) + c.drops(DropReason::MalformedControl) > 0);
}

#[test]
fn packets_on_unknown_or_disabled_links_are_dropped() {
    let mut net = net(2, &[(0, 1)]);
    net.run_for(Duration::from_secs(3));
    net.nodes[1].handle_packet(net.now, LinkId(5), vec![1, 2, 3]);
    assert_eq!(net.nodes[1].counters().drops(DropReason::UnknownLink), 1);
    let now = net.now;
    net.nodes[1].set_link_up(LinkId(0), false, now);
    assert!(net.nodes[1].neighbors().is_empty());
    net.nodes[1].handle_packet(now, LinkId(0), vec![1, 2, 3]);
    assert_eq!(net.nodes[1].counters().drops(DropReason::LinkDown), 1);
}

#[test]
fn bad_config_says_how_to_fix_it() {
    let mut c = NodeConfig::new(NodeAddr::UNSPECIFIED);
    let e = Node::new(c.clone(), Instant::now()).unwrap_err();
    assert!(e.0.contains("198.18.0.1:3322"), "{e}");
    c.address = addr(0);
    c.routing.dead_interval = Duration::from_millis(10);
    let e = Node::new(c, Instant::now()).unwrap_err();
    assert!(e.0.contains("dead_interval_ms"), "{e}");
}

#[test]
fn static_neighbor_forwards_without_hellos() {
    let now = Instant::now();
    let mut n = Node::new(NodeConfig::new(addr(1)), now).unwrap();
    let mut to_sink = LinkConfig::new(addr(2));
    to_sink.static_neighbor = true;
    n.add_link(
        LinkConfig {
            static_neighbor: true,
            ..LinkConfig::new(addr(0))
        },
        now,
    );
    n.add_link(to_sink, now);
    assert_eq!(n.neighbors().len(), 2);
    // Long after any dead interval the pinned neighbors are still up.
    let later = now + Duration::from_secs(3600);
    n.handle_timeout(later);
    assert_eq!(n.lookup(&addr(2)).unwrap().link, LinkId(1));
    while n.poll_transmit().is_some() {}
    let pkt = Datagram {
        transit: TransitRepr {
            rb: 2,
            src: addr(0),
            dst: addr(2),
            prev_hop: addr(0),
            ..Default::default()
        },
        port: 1,
        payload: vec![7; 64],
    }
    .to_packet()
    .unwrap();
    n.handle_packet(later, LinkId(0), pkt);
    let t = n.poll_transmit().unwrap();
    assert_eq!((t.link, t.dst), (LinkId(1), addr(2)));
}

/// A linear-scan cut-through table, enough to test the hook.
#[derive(Debug, Default)]
struct ScanCut {
    chans: Vec<(CutId, u16, Vec<DemuxKey>, CutSpec)>,
    policed: bool,
}

impl CutThrough for ScanCut {
    fn open(
        &mut self,
        _now: Instant,
        t: u16,
        keys: Vec<DemuxKey>,
        spec: CutSpec,
    ) -> Result<CutId, CutError> {
        if keys.is_empty() {
            return Err(CutError::BadKeys("empty".into()));
        }
        let id = CutId(self.chans.len() as u64);
        self.chans.push((id, t, keys, spec));
        Ok(id)
    }
    fn close(&mut self, id: CutId) -> bool {
        let n = self.chans.len();
        self.chans.retain(|c| c.0 != id);
        n != self.chans.len()
    }
    fn classify(&mut self, _now: Instant, t: u16, pkt: &[u8]) -> Option<CutVerdict> {
        let c = self
            .chans
            .iter()
            .find(|c| c.1 == t && c.2.iter().all(|k| k.matches(pkt)))?;
        Some(if self.policed {
            CutVerdict::Police
        } else {
            CutVerdict::Forward(c.3.via)
        })
    }
    fn channels(&mut self, _now: Instant) -> Vec<anode_core::CutInfo> {
        Vec::new()
    }
    fn close_owner(&mut self, owner: &str) -> usize {
        let n = self.chans.len();
        self.chans.retain(|c| c.3.owner != owner);
        n - self.chans.len()
    }
    fn close_type(&mut self, t: u16) -> usize {
        let n = self.chans.len();
        self.chans.retain(|c| c.1 != t);
        n - self.chans.len()
    }
}

#[test]
fn cut_through_moves_a_flow_off_the_ee_and_keeps_the_rest() {
    let mut net = net(3, &[(0, 1), (1, 2)]);
    for n in &mut net.nodes {
        n.register_ee(Box::new(Recorder { seen: vec![] }));
    }
    net.run_for(Duration::from_secs(3));
    let mk = |flow| {
        let t = TransitRepr {
            flags: FLAG_EVAL_EVERY_HOP,
            rb: 9,
            src: addr(0),
            dst: addr(2),
            prev_hop: addr(0),
            flow,
        };
        routed_packet(TYPE_CAPSULE, &t, &[], b"p").unwrap()
    };
    let spec = CutSpec {
        via: None,
        rate_bytes_per_sec: None,
        burst_bytes: 0,
        expires: None,
        owner: "test".into(),
    };
    // Without a table the EE cannot open one.
    let err = net.nodes[1]
        .with_ee(net.now, TYPE_CAPSULE, |_, ctx| {
            ctx.open_cut_through(
                TYPE_CAPSULE,
                vec![DemuxKey::exact(16, &7u64.to_be_bytes())],
                spec.clone(),
            )
        })
        .unwrap();
    assert_eq!(err, Err(CutError::NotInstalled));
    net.nodes[1].set_cut_through(Box::new(ScanCut::default()));
    let id = net.nodes[1]
        .with_ee(net.now, TYPE_CAPSULE, |_, ctx| {
            ctx.open_cut_through(
                TYPE_CAPSULE,
                vec![DemuxKey::exact(16, &7u64.to_be_bytes())],
                spec.clone(),
            )
        })
        .unwrap()
        .unwrap();
    net.nodes[0].inject(net.now, mk(7)).unwrap();
    net.nodes[0].inject(net.now, mk(8)).unwrap();
    net.pump();
    // Flow 8 (control) still reaches node 1's EE; flow 7 took the cut-through channel.
    assert_eq!(recorder(&mut net.nodes[1]).seen, vec![Dispatch::EveryHop]);
    assert_eq!(net.nodes[1].counters().cut_through, 1);
    assert_eq!(
        recorder(&mut net.nodes[2]).seen,
        vec![Dispatch::Destination, Dispatch::Destination]
    );
    // Policing drops and counts.
    net.nodes[1]
        .cut_through_mut()
        .map(|t| {
            assert!(t.close(id));
            t.open(
                net.now,
                TYPE_CAPSULE,
                vec![DemuxKey::exact(16, &7u64.to_be_bytes())],
                spec.clone(),
            )
        })
        .unwrap()
        .unwrap();
    let before = net.nodes[1].counters().drops(DropReason::CutThroughPoliced);
    // Replace with a policing table to check the drop path.
    let mut t = ScanCut {
        policed: true,
        ..Default::default()
    };
    t.open(
        net.now,
        TYPE_CAPSULE,
        vec![DemuxKey::exact(16, &7u64.to_be_bytes())],
        spec,
    )
    .unwrap();
    net.nodes[1].set_cut_through(Box::new(t));
    net.nodes[0].inject(net.now, mk(7)).unwrap();
    net.pump();
    assert_eq!(
        net.nodes[1].counters().drops(DropReason::CutThroughPoliced),
        before + 1
    );
    // Stopping the EE closes its channels: its flows are its packets too (dropped as
    // `ee_stopped` while it is stopped, not forwarded by a channel it no longer serves).
    assert!(net.nodes[1].set_ee_running(TYPE_CAPSULE, false));
    assert!(
        std::iter::from_fn(|| net.nodes[1].poll_event())
            .collect::<Vec<_>>()
            .iter()
            .any(|e| matches!(e, Event::Log { message, .. } if message.contains("closed its 1 cut-through"))),
        "the stop says what it closed"
    );
    let stopped = net.nodes[1].counters().drops(DropReason::EeStopped);
    net.nodes[0].inject(net.now, mk(7)).unwrap();
    net.pump();
    assert_eq!(
        net.nodes[1].counters().drops(DropReason::CutThroughPoliced),
        before + 1,
        "no channel left to police it"
    );
    assert_eq!(
        net.nodes[1].counters().drops(DropReason::EeStopped),
        stopped + 1
    );
}

#[test]
fn demux_key_matches_with_mask_and_refuses_short_packets() {
    let k = DemuxKey {
        offset: 2,
        value: vec![0xab, 0xc0],
        mask: vec![0xff, 0xf0],
    };
    assert!(k.matches(&[0, 0, 0xab, 0xcf]));
    assert!(!k.matches(&[0, 0, 0xab, 0xbf]));
    assert!(!k.matches(&[0, 0, 0xab]));
    let far = DemuxKey::exact(usize::MAX, &[1]);
    assert!(!far.matches(&[1, 2, 3]));
}

#[test]
fn domain_reports_come_only_from_ees_that_keep_domains() {
    struct Reporting;
    impl ExecutionEnvironment for Reporting {
        fn type_id(&self) -> u16 {
            0x0b00
        }
        fn name(&self) -> &str {
            "reporting"
        }
        fn handle_packet(&mut self, _ctx: &mut NodeContext<'_>, _pkt: EePacket) {}
        fn domain_report(&self) -> Option<DomainReport> {
            Some(DomainReport {
                ee: "reporting".into(),
                domains: vec![DomainStat {
                    id: 1,
                    principal: "p".into(),
                    ..Default::default()
                }],
                ..Default::default()
            })
        }
        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    }
    let mut n = Node::new(NodeConfig::new(addr(0)), Instant::now()).unwrap();
    n.register_ee(Box::new(Recorder { seen: vec![] }));
    assert!(n.domain_reports().is_empty());
    n.register_ee(Box::new(Reporting));
    let r = n.domain_reports();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].domains[0].principal, "p");
}

#[test]
fn a_routing_message_of_the_other_protocol_is_counted_not_used() {
    let mut net = net(2, &[(0, 1)]);
    net.run_for(Duration::from_secs(3));
    let lsas = Control::Lsas(Lsas {
        sender: addr(0),
        lsas: vec![Lsa {
            origin: v4(198, 19, 9, 9, 3322),
            fragment: 0,
            seq: 1,
            lifetime_ms: 60_000,
            links: vec![(addr(0), 1)].into(),
        }],
    })
    .to_packet()
    .unwrap();
    let n = &mut net.nodes[1];
    n.handle_packet(net.now, LinkId(0), lsas);
    assert_eq!(n.counters().drops(DropReason::RoutingMismatch), 1);
    assert!(n.lookup(&v4(198, 19, 9, 9, 3322)).is_none());

    // And the reverse: a link-state node given a distance-vector update.
    let mut cfg = NodeConfig::new(addr(5));
    cfg.routing.protocol = anode_routing::Protocol::Ls;
    let now = Instant::now();
    let mut ls = Node::new(cfg, now).unwrap();
    let link = ls.add_link(LinkConfig::new(addr(6)), now);
    let routes = Control::Routes(Routes::plain(addr(6), vec![(v4(198, 19, 9, 9, 3322), 1)]))
        .to_packet()
        .unwrap();
    ls.handle_packet(now, link, routes);
    assert_eq!(ls.counters().drops(DropReason::RoutingMismatch), 1);
}
