//! The guest protocols end to end in an emulated network: traceroute, flood, multicast and
//! the counting protocol (ping is in loading.rs).

mod common;

use std::time::Duration;

use anode_capsule::{CapsuleConfig, capsule_packet, protocols};
use anode_core::wire::NodeAddr;
use common::*;

const PORT: u16 = 7;

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn traceroute_records_the_path_there_and_reports_it_back() {
    let rt = runtime();
    let mut net = Net::line(4, &rt);
    let h = net.ee(0).install(protocols::TRACEROUTE).unwrap();
    net.ee(0).register_port(PORT);
    let mut p = vec![0u8; 12];
    p[2..4].copy_from_slice(&PORT.to_be_bytes());
    let pkt = capsule_packet(h, addr(0), addr(3), 16, 1, &p).unwrap();
    let now = net.now;
    net.nodes[0].inject(now, pkt).unwrap();
    let (d, took) = net
        .wait_delivery(0, Duration::from_secs(10))
        .expect("reply");
    let r = d.payload();
    assert_eq!(r[0], 1);
    assert_eq!(r[1], 4, "four nodes recorded");
    let hops: Vec<NodeAddr> = (0..4)
        .map(|i| NodeAddr::read(r, 12 + i * 18).unwrap())
        .collect();
    assert_eq!(hops, (0..4).map(addr).collect::<Vec<_>>());
    assert_eq!(
        Duration::from_nanos(be64(r, 4)),
        took,
        "rtt measured at the source"
    );
}

#[test]
fn flood_counts_per_flow_at_the_receiver_and_reports_status() {
    let rt = runtime();
    let mut net = Net::line(3, &rt);
    let h = net.ee(0).install(protocols::FLOOD).unwrap();
    net.ee(0).register_port(PORT);
    let header = |kind: u8| {
        let mut p = vec![0u8; 24];
        p[0] = kind;
        p[2..4].copy_from_slice(&PORT.to_be_bytes());
        p[4..8].copy_from_slice(&100u32.to_be_bytes()); // status every 100 ms
        p.extend_from_slice(&[0xee; 200]);
        p
    };
    let flow = 77;
    let pkt = capsule_packet(h, addr(0), addr(2), 16, flow, &header(0)).unwrap();
    let now = net.now;
    net.nodes[0].inject(now, pkt).unwrap();
    // One data capsule every 10 ms for 1 s.
    for _ in 0..100 {
        net.run_for(Duration::from_millis(10));
        let pkt = capsule_packet(h, addr(0), addr(2), 16, flow, &header(1)).unwrap();
        let now = net.now;
        net.nodes[0].inject(now, pkt).unwrap();
    }
    net.run_for(Duration::from_millis(100));
    let status = net.deliveries(0);
    assert!(
        status.len() >= 9 && status.len() <= 12,
        "periodic status: {}",
        status.len()
    );
    let last = status.last().unwrap();
    let p = last.payload();
    assert_eq!(p[0], 2);
    let (elapsed, count) = (be64(p, 8), be64(p, 16));
    assert!((85..=101).contains(&count), "count {count}");
    assert!(elapsed >= 800_000_000, "elapsed {elapsed} ns");
    // The receiver counted every capsule: start + 100 data.
    let mut key = addr(0).to_bytes().to_vec();
    key.extend_from_slice(&flow.to_le_bytes());
    let now = net.now;
    let entry = net.ee(2).soft_state().get(&h, &key, now).unwrap().to_vec();
    assert_eq!(u64::from_le_bytes(entry[8..16].try_into().unwrap()), 101);
    // The flow's entry lives in the flood code's soft state at the receiver only.
    assert_eq!(net.ee(2).soft_state().len(&h), 1);
    assert_eq!(net.ee(1).soft_state().len(&h), 0);
}

#[test]
fn multicast_delivers_to_every_member_over_the_join_tree() {
    let rt = runtime();
    // A tree rooted at 0: 0-1, 1-2, 1-3, 0-4; members at 2, 3 and 4 (not 1).
    let mut net = Net::new(5, &[(0, 1), (1, 2), (1, 3), (0, 4)], &rt, |_| {
        CapsuleConfig::default()
    });
    let h = net.ee(0).install(protocols::MULTICAST).unwrap();
    let group = 42u32;
    for m in [2usize, 3, 4] {
        net.ee(m).install(protocols::MULTICAST).unwrap();
        net.ee(m).register_port(PORT);
        let mut p = vec![0u8; 8];
        p[2..4].copy_from_slice(&PORT.to_be_bytes());
        p[4..8].copy_from_slice(&group.to_be_bytes());
        let pkt = capsule_packet(h, addr(m), addr(0), 16, 0, &p).unwrap();
        let now = net.now;
        net.nodes[m].inject(now, pkt).unwrap();
    }
    net.run_for(Duration::from_millis(50));
    // The root's application puts the same code again (as `anode multicast send` does):
    // that must not wipe the tree the joins built in its soft state.
    assert_eq!(net.ee(0).install(protocols::MULTICAST).unwrap(), h);
    let mut p = vec![1u8, 0, 0, 0];
    p.extend_from_slice(&group.to_be_bytes());
    p.extend_from_slice(b"hello group");
    let pkt = capsule_packet(h, addr(0), addr(0), 16, 0, &p).unwrap();
    let now = net.now;
    net.nodes[0].inject(now, pkt).unwrap();
    net.run_for(Duration::from_millis(50));
    for m in [2usize, 3, 4] {
        let d = net.deliveries(m);
        assert_eq!(d.len(), 1, "member {m}");
        assert_eq!(&d[0].payload()[8..], b"hello group");
    }
    assert!(net.deliveries(1).is_empty(), "node 1 is no member");
}

#[test]
fn the_counter_protocol_keeps_state_across_capsules() {
    let rt = runtime();
    let mut net = Net::line(3, &rt);
    let h = net.ee(0).install(protocols::COUNTER).unwrap();
    net.ee(2).register_port(PORT);
    let mut p = vec![0u8; 16];
    p[12..14].copy_from_slice(&PORT.to_be_bytes());
    let mut seen = Vec::new();
    for _ in 0..5 {
        let pkt = capsule_packet(h, addr(0), addr(2), 16, 9, &p).unwrap();
        let now = net.now;
        net.nodes[0].inject(now, pkt).unwrap();
        let (d, _) = net.wait_delivery(2, Duration::from_secs(5)).unwrap();
        let b = d.payload();
        assert_eq!(
            u32::from_be_bytes(b[8..12].try_into().unwrap()),
            3,
            "3 nodes ran it"
        );
        seen.push(be64(b, 0));
    }
    assert_eq!(seen, vec![1, 2, 3, 4, 5]);
    // Another flow counts separately.
    let pkt = capsule_packet(h, addr(0), addr(2), 16, 10, &p).unwrap();
    let now = net.now;
    net.nodes[0].inject(now, pkt).unwrap();
    let (d, _) = net.wait_delivery(2, Duration::from_secs(5)).unwrap();
    assert_eq!(be64(d.payload(), 0), 1);
}
