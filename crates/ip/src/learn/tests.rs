//! The learner against a real `IpRouter`: routes appear from an advertisement joined with
//! distance-vector reachability, forward frames, and are withdrawn when the origin becomes
//! unreachable or its advertisement expires.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use super::*;
use crate::router::{IfaceId, InterfaceConfig, RouterConfig, Verdict};
use crate::wire::{ArpPacket, ArpRepr, EtherType, EthernetRepr, Ipv4Repr, MacAddr};

const R0: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x10]);
const R1: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x11]);
const H1: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);

fn node(s: &str) -> NodeAddr {
    s.parse().unwrap()
}

/// h1 -- [198.18.1.2 r0] r1 [r1 198.18.2.1] -- r2 (198.18.2.2) -- 198.18.3.0/24
fn r1() -> IpRouter {
    let mut r = IpRouter::new(RouterConfig::default());
    for (name, mac, v4, v6) in [
        ("r0", R0, "198.18.1.2/24", "2001:2:0:1::2/64"),
        ("r1", R1, "198.18.2.1/24", "2001:2:0:2::1/64"),
    ] {
        r.add_interface(InterfaceConfig {
            name: name.into(),
            mac,
            mtu: 1500,
            ipv4: vec![v4.parse().unwrap()],
            ipv6: vec![v6.parse().unwrap()],
        })
        .unwrap();
    }
    r
}

fn r2_ad(seq: u32) -> Vec<u8> {
    PrefixAd {
        seq,
        hold_ms: 3000,
        addrs: vec![
            "198.18.2.2/24".parse().unwrap(),
            "2001:2:0:2::2/64".parse().unwrap(),
            "198.18.3.1/24".parse().unwrap(),
        ],
        prefixes: vec![
            ("198.18.2.0/24".parse().unwrap(), 0),
            ("198.18.3.0/24".parse().unwrap(), 0),
            ("2001:2:0:3::/64".parse().unwrap(), 0),
        ],
    }
    .to_bytes()
    .unwrap()
}

/// A UDP packet from h1 to `dst`, as a frame arriving on r0.
fn udp_to(dst: &str) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8];
    EthernetRepr {
        src: H1,
        dst: R0,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut f)
    .unwrap();
    Ipv4Repr {
        src: "198.18.1.1".parse().unwrap(),
        dst: dst.parse().unwrap(),
        protocol: 17,
        ttl: 64,
        tos: 0,
        ident: 1,
        dont_frag: true,
        payload_len: 8,
    }
    .emit(&mut f[14..])
    .unwrap();
    f[34..36].copy_from_slice(&1000u16.to_be_bytes());
    f[36..38].copy_from_slice(&2000u16.to_be_bytes());
    f[38..40].copy_from_slice(&8u16.to_be_bytes());
    f
}

#[test]
fn learns_forwards_and_withdraws() {
    let t0 = Instant::now();
    let mut router = r1();
    let mut l = PrefixLearner::new();
    let r2 = node("198.18.2.2:3322");
    assert_eq!(l.receive(t0, r2, &r2_ad(1)), Ok(true));
    assert_eq!(l.receive(t0, r2, &r2_ad(2)), Ok(false), "same contents");
    // Not reachable in the DV table yet: nothing installed.
    assert!(l.sync(&[], &mut router).is_none());
    assert_eq!(router.routes().lookup("198.18.3.5".parse().unwrap()), None);

    let reach = [Reach {
        origin: r2,
        metric: 1,
        next_hop: r2,
    }];
    let got = l.sync(&reach, &mut router).unwrap().to_vec();
    // The shared segment is connected here: only the far prefixes, through r2's address on
    // the shared segment (not its far one), for both families.
    assert_eq!(got.len(), 2, "{got:?}");
    let hop = router
        .routes()
        .lookup("198.18.3.5".parse().unwrap())
        .unwrap();
    assert_eq!(hop.iface, IfaceId(1));
    assert_eq!(hop.gateway, Some("198.18.2.2".parse().unwrap()));
    let hop6 = router
        .routes()
        .lookup("2001:2:0:3::9".parse().unwrap())
        .unwrap();
    assert_eq!(hop6.gateway, Some("2001:2:0:2::2".parse().unwrap()));
    assert!(got.iter().all(|r| r.metric == 1 && r.origin == r2));
    assert!(
        l.sync(&reach, &mut router).is_none(),
        "unchanged: no rewrite"
    );

    // A packet to the far prefix now goes to r2: the router resolves 198.18.2.2 on r1.
    let mut f = udp_to("198.18.3.5");
    assert_eq!(
        router.handle_frame(t0, IfaceId(0), &mut f),
        Verdict::Consumed
    );
    let tx = router.poll_transmit().expect("an ARP request");
    assert_eq!(tx.iface, IfaceId(1));
    let arp = ArpRepr::parse(&ArpPacket::new_checked(&tx.frame[14..]).unwrap()).unwrap();
    assert_eq!(arp.tpa, "198.18.2.2".parse::<Ipv4Addr>().unwrap());
    assert_eq!(router.queued_for_neighbors(), 1);

    // r2 unreachable in the DV table: withdrawn; packets get ICMP unreachable instead.
    assert_eq!(l.sync(&[], &mut router).map(|r| r.len()), Some(0));
    assert_eq!(router.routes().lookup("198.18.3.5".parse().unwrap()), None);
    // Back, then the advertisement expires without a refresh: withdrawn again.
    assert!(l.sync(&reach, &mut router).is_some());
    assert_eq!(l.poll_timeout(), Some(t0 + Duration::from_millis(3000)));
    assert!(!l.expire(t0 + Duration::from_millis(2999)));
    assert!(l.expire(t0 + Duration::from_millis(3000)));
    assert_eq!(l.sync(&reach, &mut router).map(|r| r.len()), Some(0));
    assert_eq!(l.counters().ads_expired, 1);
}

#[test]
fn multi_hop_uses_the_next_hops_address_and_adds_metrics() {
    let t0 = Instant::now();
    let mut router = r1();
    let mut l = PrefixLearner::new();
    let (r2, r3) = (node("198.18.2.2:3322"), node("198.18.4.3:3322"));
    l.receive(t0, r2, &r2_ad(1)).unwrap();
    let r3_ad = PrefixAd {
        seq: 1,
        hold_ms: 3000,
        addrs: vec!["198.18.4.3/24".parse().unwrap()],
        prefixes: vec![
            ("198.18.9.0/24".parse().unwrap(), 2),
            // Also advertised by r2 (metric 0 + DV 1): the cheaper one wins.
            ("198.18.3.0/24".parse().unwrap(), 5),
        ],
    };
    l.receive(t0, r3, &r3_ad.to_bytes().unwrap()).unwrap();
    let reach = [
        Reach {
            origin: r2,
            metric: 1,
            next_hop: r2,
        },
        Reach {
            origin: r3,
            metric: 2,
            next_hop: r2,
        },
    ];
    let got = l.sync(&reach, &mut router).unwrap().to_vec();
    let far = got
        .iter()
        .find(|r| r.prefix == "198.18.9.0/24".parse().unwrap())
        .unwrap();
    assert_eq!(
        far.gateway,
        "198.18.2.2".parse::<std::net::IpAddr>().unwrap()
    );
    assert_eq!(far.metric, 4);
    let near = got
        .iter()
        .find(|r| r.prefix == "198.18.3.0/24".parse().unwrap())
        .unwrap();
    assert_eq!((near.metric, near.origin), (1, r2));
}

#[test]
fn malformed_and_unroutable_advertisements_are_counted() {
    let t0 = Instant::now();
    let mut router = r1();
    let mut l = PrefixLearner::new();
    assert!(l.receive(t0, node("198.18.2.2:3322"), &[1, 0, 0]).is_err());
    assert_eq!(l.counters().ads_malformed, 1);
    // An origin whose next hop is on no connected segment gives no route.
    let far = node("203.0.113.1:3322");
    let ad = PrefixAd {
        seq: 1,
        hold_ms: 1000,
        addrs: vec![],
        prefixes: vec![("198.18.9.0/24".parse().unwrap(), 0)],
    };
    l.receive(t0, far, &ad.to_bytes().unwrap()).unwrap();
    let reach = [Reach {
        origin: far,
        metric: 1,
        next_hop: far,
    }];
    assert!(l.sync(&reach, &mut router).is_none());
    assert_eq!(l.counters().no_gateway, 1);
}
