//! Prefix advertisements (anode_ip::learn): parse arbitrary bytes; whatever parses re-emits
//! to bytes that parse to the same advertisement; the learner takes it (from an origin that
//! is the next hop on a connected segment) and syncs a real router's learned routes without
//! panicking, and withdraws them all once the origin is unreachable.
#![no_main]

use std::time::Instant;

use anode_ip::learn::{PrefixAd, PrefixLearner, Reach};
use anode_ip::{InterfaceConfig, IpRouter, MacAddr, RouteOrigin, RouterConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(ad) = PrefixAd::parse(data) else {
        return;
    };
    let b = ad.to_bytes().unwrap();
    assert_eq!(PrefixAd::parse(&b).unwrap(), ad);
    let mut router = IpRouter::new(RouterConfig::default());
    router
        .add_interface(InterfaceConfig {
            name: "b".into(),
            mac: MacAddr([2, 0, 0, 0, 0, 1]),
            mtu: 1500,
            ipv4: vec!["198.18.2.1/24".parse().unwrap()],
            ipv6: vec!["2001:2:0:2::1/64".parse().unwrap()],
        })
        .unwrap();
    let origin = "198.18.2.2:3322".parse().unwrap();
    let now = Instant::now();
    let mut l = PrefixLearner::new();
    l.receive(now, origin, data).unwrap();
    let reach = [Reach {
        origin,
        metric: 1,
        next_hop: origin,
    }];
    l.sync(&reach, &mut router);
    l.sync(&[], &mut router);
    assert!(
        router
            .routes()
            .routes()
            .iter()
            .all(|r| r.origin != RouteOrigin::Learned)
    );
});
