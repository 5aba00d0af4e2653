//! The AF_XDP forwarder (`anode_ether::xsk`) on real traffic: three namespaces in a line,
//! s --veth-- r --veth-- d, with the forwarder running on a thread in r, whose kernel has no
//! addresses on r0/r1 and forwarding off, so pings from s reach d (and come back) only
//! through the forwarder: the XDP program redirects every frame to the AF_XDP sockets, the
//! router answers ARP/NDP and echo to its own addresses, and forwards the rest from UMEM.
//! Once with the UMEM shared by both sockets (forwarding in place) and once with one UMEM
//! per socket (forwarding copies). The counters must show the frames went through AF_XDP.
//!
//! Needs root: the tests are ignored by default; run them as root with `--include-ignored`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use anode_ether::Stopped;
use anode_ether::xsk::{BindMode, UmemPref, XskConfig, XskForwarder, router_for};

use anode_testkit::netns::{self, line, sh};

/// The forwarder's thread; stopped and joined on drop (also when the test fails), before
/// the namespaces go.
struct Running {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Stopped>>,
}

impl Running {
    fn finish(mut self) -> Stopped {
        self.stop.store(true, Ordering::Relaxed);
        let h = self.handle.take().unwrap();
        h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Opens the forwarder on r0/r1 in namespace `ns` (on its own thread, which stays there to
/// run it) and returns once it is set up.
fn start(ns: &str, umem: UmemPref) -> Running {
    let ns = ns.to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        netns::enter(&ns);
        let ifaces = vec![
            (
                "r0".to_string(),
                vec![
                    "198.18.1.2/24".parse().unwrap(),
                    "2001:2:0:1::2/64".parse().unwrap(),
                ],
            ),
            (
                "r1".to_string(),
                vec![
                    "198.18.2.1/24".parse().unwrap(),
                    "2001:2:0:2::1/64".parse().unwrap(),
                ],
            ),
        ];
        let cfg = XskConfig {
            ifaces: vec!["r0".into(), "r1".into()],
            umem,
            chunks: 1024,
            socket: anode_ether::xsk::SocketConfig {
                ring_size: 256,
                ..Default::default()
            },
            ..XskConfig::default()
        };
        let opened = router_for(&ifaces).and_then(|r| XskForwarder::open(r, &cfg));
        match opened {
            Ok(f) => {
                tx.send(Ok((f.stop_flag(), f.info().clone()))).unwrap();
                f.run()
            }
            Err(e) => {
                let msg = e.to_string();
                tx.send(Err(msg.clone())).unwrap();
                panic!("{msg}");
            }
        }
    });
    let (stop, info) = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the forwarder thread answers")
        .unwrap_or_else(|e| panic!("opening the forwarder: {e}"));
    eprintln!("{info}");
    Running {
        stop,
        handle: Some(handle),
    }
}

fn pings_through(tag: &str, umem: UmemPref) {
    let (s, r, d, _namespaces) = line(tag, 1500);
    // The forwarder owns r0/r1: the kernel there gets no IPv6 addresses on them either.
    sh(&format!(
        "ip netns exec {r} sysctl -qw net.ipv6.conf.r0.disable_ipv6=1 net.ipv6.conf.r1.disable_ipv6=1"
    ));
    let fwd = start(&r, umem);
    // Through the router both ways, both families, and to the router itself.
    sh(&format!(
        "ip netns exec {s} ping -c 3 -i 0.2 -W 2 -q 198.18.2.2"
    ));
    sh(&format!(
        "ip netns exec {s} ping -6 -c 3 -i 0.2 -W 2 -q 2001:2:0:2::2"
    ));
    sh(&format!(
        "ip netns exec {d} ping -c 2 -i 0.2 -W 2 -q 198.18.1.1"
    ));
    sh(&format!("ip netns exec {s} ping -c 1 -W 2 -q 198.18.1.2"));
    let stopped = fwd.finish();
    let st = stopped.xsk().expect("the AF_XDP sockets' report");
    for l in st.lines() {
        eprintln!("{l}");
    }
    let c = stopped.router.counters();
    eprintln!("{:?}", c.entries());

    // veth has no zero-copy AF_XDP: the kernel granted copy mode.
    assert!(
        st.info.bind.iter().all(|b| *b == BindMode::Copy),
        "{}",
        st.info
    );
    assert_eq!(
        st.info.shared_umem,
        umem != UmemPref::Separate,
        "{}",
        st.info
    );
    // Echo requests and replies through the router: 3 + 3 from s, 2 + 2 from d; the first
    // packet each way waited for ARP / NDP (queued, then released as a generated frame).
    assert!(c.forwarded + c.queued_released >= 16, "{:?}", c.entries());
    assert!(c.forwarded_v6 >= 5, "{:?}", c.entries());
    assert!(c.echo_replies >= 1, "{:?}", c.entries());
    assert!(c.arp_replies + c.arp_requests >= 2, "{:?}", c.entries());
    let (r0, r1) = (&st.ports[0].1, &st.ports[1].1);
    // Every frame the router saw came off an AF_XDP rx ring ...
    assert_eq!(r0.rx_frames + r1.rx_frames, c.rx_frames);
    // ... and every forwarded one left from an AF_XDP tx ring, in place or copied.
    let (in_place, copied) = (r0.tx_in_place + r1.tx_in_place, r0.tx_copied + r1.tx_copied);
    assert_eq!(in_place + copied, c.forwarded, "{:?}", st.lines());
    if st.info.shared_umem {
        assert_eq!(copied, 0);
    } else {
        assert_eq!(in_place, 0);
    }
    for (name, p) in &st.ports {
        assert!(p.rx_frames >= 8 && p.tx_frames >= 8, "{name}: {p:?}");
        assert_eq!(
            (p.kernel.rx_dropped, p.kernel.rx_ring_full),
            (0, 0),
            "{name}: the kernel dropped nothing: {p:?}"
        );
        assert_eq!(p.tx_completed, p.tx_frames, "{name}: every frame sent");
        assert_eq!(
            (p.bad_rx, p.bad_completion, p.drop_tx_full, p.drop_no_chunk),
            (0, 0, 0, 0),
            "{name}: {p:?}"
        );
        assert!(p.kicks >= 1, "{name}: {p:?}");
    }
}

#[test]
#[ignore = "needs root and netns"]
fn xsk_forwards_pings_with_a_shared_umem() {
    netns::require(
        "xsk_forwards_pings_with_a_shared_umem",
        &["ip", "ping"],
        true,
    );
    pings_through("xku", UmemPref::Shared);
}

#[test]
#[ignore = "needs root and netns"]
fn xsk_forwards_pings_with_a_umem_per_socket() {
    netns::require(
        "xsk_forwards_pings_with_a_umem_per_socket",
        &["ip", "ping"],
        true,
    );
    pings_through("xkp", UmemPref::Separate);
}
