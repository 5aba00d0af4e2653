//! Feed a sequence of frames (and timer ticks) to an IpRouter with two interfaces, filters
//! installed and neighbors learned. Never panics; every frame is accounted for in exactly one
//! outcome; forwarded ranges lie inside the frame.
//!
//! Input: chunks of `[iface: u8][tick: u8][len: u8][frame: len bytes]`.
#![no_main]

use std::time::{Duration, Instant};

use anode_ip::*;
use libfuzzer_sys::fuzz_target;

fn router() -> IpRouter {
    let mut r = IpRouter::new(RouterConfig::default());
    for (name, mac, a4, a6) in [
        (
            "r0",
            [2, 0, 0, 0, 0, 0x10],
            "198.18.1.2/24",
            "2001:2:0:1::2/64",
        ),
        (
            "r1",
            [2, 0, 0, 0, 0, 0x11],
            "198.18.2.1/24",
            "2001:2:0:2::1/64",
        ),
    ] {
        r.add_interface(InterfaceConfig {
            name: name.into(),
            mac: MacAddr(mac),
            mtu: 1500,
            ipv4: vec![a4.parse().unwrap()],
            ipv6: vec![a6.parse().unwrap()],
        })
        .unwrap();
    }
    r.add_route(
        "198.19.0.0/16".parse().unwrap(),
        "198.18.2.2".parse().unwrap(),
        1,
        RouteOrigin::Static,
    )
    .unwrap();
    r.add_filter(Filter::LocalUdp {
        port: ANEP_UDP_PORT,
    });
    r.add_filter(Filter::EtherType(ETHERTYPE_ANEP));
    r.add_filter(Filter::Demux {
        ethertype: None,
        keys: vec![DemuxKey::exact(9, &[132])],
    });
    r
}

fuzz_target!(|data: &[u8]| {
    let mut r = router();
    let t0 = Instant::now();
    let mut t = t0;
    let mut rest = data;
    let mut n = 0u64;
    while let [iface, tick, len, tail @ ..] = rest {
        let len = (*len as usize).min(tail.len());
        let (frame, more) = tail.split_at(len);
        rest = more;
        // Lengthen short frames with a copy of themselves so big packets are reachable.
        let mut f = frame.to_vec();
        if *tick & 0x80 != 0 {
            let c = f.clone();
            for _ in 0..(*tick & 0x0f) {
                f.extend_from_slice(&c);
            }
        }
        n += 1;
        if let Verdict::Forward { start, len, .. } =
            r.handle_frame(t, IfaceId(u32::from(*iface % 3)), &mut f)
        {
            assert!(start + len <= f.len());
        }
        t += Duration::from_millis(u64::from(*tick & 0x7f) * 50);
        if r.poll_timeout().is_some_and(|d| d <= t) {
            r.handle_timeout(t);
        }
        while let Some(x) = r.poll_transmit() {
            r.recycle(x.frame);
        }
    }
    let c = r.counters();
    assert_eq!(c.rx_frames, n);
    assert_eq!(c.rx_frames, c.outcomes());
});
