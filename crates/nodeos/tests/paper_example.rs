//! The NodeOS paper's example (§III): an input channel for ANEP over UDP, demultiplexed to one
//! protocol of one EE, written against anode's API.
//!
//! The capsule EE runs in a domain of its own; one protocol (one code group, named by the
//! SHA-256 of its module) gets a child domain, and that domain opens an inChan on
//! `if0/ip/udp/anep` whose address spec selects the capsule EE's ANEP Type ID and whose demux
//! key selects the protocol's code name. Real capsules arrive at a node and the EE's packets
//! are demultiplexed through the NodeOS: the protocol's capsules reach its handler, charged to
//! its domain; another protocol's capsules and another EE's packets do not match.

use std::time::Instant;

use anode_core::wire::anep::{TYPE_CAPSULE, TYPE_PLAN};
use anode_core::wire::capsule::{Capsule, CapsuleRepr};
use anode_core::wire::transit::{FLAG_EVAL_EVERY_HOP, TransitRepr};
use anode_core::wire::{addr::v4, routed_packet};
use anode_core::{EePacket, ExecutionEnvironment, LinkConfig, Node, NodeConfig, NodeContext};
use anode_nodeos::{
    AddrSpec, ChanId, Credentials, DomainId, HandlerId, InChanSpec, InMatch, NodeOs, NodeOsConfig,
    Policy, capsule_protocol_key,
};

/// The capsule EE as the paper draws it: it owns no demux logic; the NodeOS's inChan does.
struct DemuxedEe {
    os: NodeOs,
    got: Vec<Option<InMatch>>,
}

impl ExecutionEnvironment for DemuxedEe {
    fn type_id(&self) -> u16 {
        TYPE_CAPSULE
    }
    fn name(&self) -> &str {
        "capsule"
    }
    fn handle_packet(&mut self, _ctx: &mut NodeContext<'_>, pkt: EePacket) {
        let m = self.os.demux(&pkt.buf);
        if let Some(m) = m
            && self.os.in_buffer(m.chan)
        {
            self.os.count_packet(m.domain, pkt.buf.len() as u64);
            self.os.in_unbuffer(m.chan);
        }
        self.got.push(m);
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[test]
fn an_inchan_for_anep_over_udp_demultiplexed_to_one_protocol_of_one_ee() {
    let ping: [u8; 32] = [0x11; 32];
    let other: [u8; 32] = [0x22; 32];
    let ping_principal = format!("capsule/{}", hex_of(&ping));

    // Credentials and policies: the EE, and the protocol under it.
    let mut cfg = NodeOsConfig::default();
    cfg.policies.insert(
        "capsule-ee",
        Policy {
            max_children: 16,
            max_channels: 16,
            memory_bytes: 16 << 20,
            channels: vec!["*".into()],
            ..Policy::default()
        },
    );
    cfg.policies.insert(
        &ping_principal,
        Policy {
            channels: vec!["if0/ip/udp/anep".into()],
            ..Policy::default()
        },
    );
    let mut os = NodeOs::new(cfg);
    let ee = os
        .create_domain(DomainId::ROOT, &Credentials::new("capsule-ee"), None)
        .unwrap();
    let proto = os
        .create_domain(ee, &Credentials::new(&ping_principal), None)
        .unwrap();

    // inChan(if0/ip/udp/anep, Type ID = capsule EE, key = the protocol's code name).
    let chan: ChanId = os
        .open_in_chan(
            proto,
            InChanSpec {
                protocol: "if0/ip/udp/anep".into(),
                addr: AddrSpec {
                    type_id: Some(TYPE_CAPSULE),
                    ..Default::default()
                },
                keys: vec![capsule_protocol_key(&ping)],
                buffer_limit: 64,
                handler: HandlerId(7),
                priority: 0,
            },
        )
        .unwrap();

    // A node with that EE; capsules arrive from a neighbor and are evaluated here.
    let now = Instant::now();
    let me = v4(10, 0, 0, 2, 3322);
    let peer = v4(10, 0, 0, 1, 3322);
    let far = v4(10, 0, 0, 3, 3322);
    let mut node = Node::new(NodeConfig::new(me), now).unwrap();
    let mut lc = LinkConfig::new(peer);
    lc.static_neighbor = true;
    let link = node.add_link(lc, now);
    node.register_ee(Box::new(DemuxedEe { os, got: vec![] }));

    let transit = TransitRepr {
        flags: FLAG_EVAL_EVERY_HOP,
        rb: 8,
        flow: 1,
        src: peer,
        dst: me,
        prev_hop: peer,
    };
    let cap = |code: [u8; 32]| {
        Capsule {
            transit,
            header: CapsuleRepr {
                flags: 0,
                code,
                code_source: None,
            },
            payload: b"echo".to_vec(),
        }
        .to_packet()
        .unwrap()
    };
    node.handle_packet(now, link, cap(ping));
    node.handle_packet(now, link, cap(other));
    let mut t2 = transit;
    t2.dst = far;
    node.handle_packet(
        now,
        link,
        Capsule {
            transit: t2,
            header: CapsuleRepr {
                flags: 0,
                code: ping,
                code_source: None,
            },
            payload: vec![],
        }
        .to_packet()
        .unwrap(),
    );
    // Another EE's packet with the same bytes after the transit header does not match.
    let plan = routed_packet(
        TYPE_PLAN,
        &transit,
        &CapsuleRepr {
            flags: 0,
            code: ping,
            code_source: None,
        }
        .to_vec(),
        b"",
    )
    .unwrap();
    let ee_view = anode_core::wire::anep::AnepPacket::new_checked(&plan[..]).unwrap();
    assert_eq!(ee_view.type_id(), TYPE_PLAN);

    let e = node
        .ee_mut(TYPE_CAPSULE)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<DemuxedEe>()
        .unwrap();
    let want = InMatch {
        chan,
        domain: proto,
        handler: HandlerId(7),
    };
    // ping (for us), other protocol, ping in transit (every-hop): the protocol's capsules
    // reach its handler wherever they are headed; the other protocol's do not.
    assert_eq!(e.got, vec![Some(want), None, Some(want)]);
    assert_eq!(e.os.demux(&plan), None);
    let c = e.os.counters(proto).unwrap();
    assert_eq!(c.packets, 2);
    assert_eq!(e.os.counters(ee).unwrap().packets, 0);
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
