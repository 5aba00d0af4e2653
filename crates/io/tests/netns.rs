//! Two drivers in two network namespaces joined by a veth pair (198.18.50.0/24 and
//! 2001:2:50::/64, names prefixed `anio`): neighbors come up over real hellos and a datagram
//! crosses, over IPv4 and over IPv6; then a burst of datagrams under, over and again under
//! the veth's 1500-byte MTU crosses in order: the runs under it segmented (`UDP_SEGMENT`),
//! the ones over it (which the kernel refuses to segment) sent one by one as IP fragments. Each driver's socket is created by a thread that entered
//! its namespace with `setns(2)`. The namespaces are removed by a Drop guard, also on failure.
//! Needs root: without it the test fails if `CI` is set, and is skipped loudly otherwise.

mod common;

use std::fs::File;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Duration;

use anode_core::{LinkConfig, Node, NodeConfig};
use anode_io::{DriverConfig, NodeHandle};
use anode_wire::NodeAddr;
use common::{fast_routing, next_delivery, wait_route};

/// A node at `me` linked to `peer` over a link whose MTU takes 8,000-byte datagrams (the
/// veth's is 1500: bigger ones leave as IP fragments).
fn big_mtu_node(me: SocketAddr, peer: SocketAddr) -> Node {
    let mut cfg = NodeConfig::new(NodeAddr::from(me));
    cfg.routing = fast_routing();
    let now = std::time::Instant::now();
    let mut n = Node::new(cfg, now).expect("node config");
    let mut l = LinkConfig::new(NodeAddr::from(peer));
    l.mtu = 8000;
    n.add_link(l, now);
    n
}

/// Removes the namespaces (and with them the veth pair) when dropped.
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn setup() -> (Namespaces, String, String) {
    let id = std::process::id() % 100_000;
    let (a, b) = (format!("anio{id}a"), format!("anio{id}b"));
    for n in [&a, &b] {
        let _ = Command::new("ip").args(["netns", "del", n]).status();
    }
    let guard = Namespaces(vec![a.clone(), b.clone()]);
    ip(&["netns", "add", &a]);
    ip(&["netns", "add", &b]);
    let (va, vb) = (format!("anio{id}x"), format!("anio{id}y"));
    ip(&[
        "link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b,
    ]);
    for (ns, dev, v4, v6) in [
        (&a, &va, "198.18.50.1/24", "2001:2:50::1/64"),
        (&b, &vb, "198.18.50.2/24", "2001:2:50::2/64"),
    ] {
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        ip(&["-n", ns, "addr", "add", v4, "dev", dev]);
        ip(&["-n", ns, "addr", "add", v6, "dev", dev, "nodad"]);
        ip(&["-n", ns, "link", "set", dev, "up"]);
    }
    (guard, a, b)
}

/// Spawns a driver whose socket is created inside namespace `ns`.
fn spawn_in(ns: &str, me: SocketAddr, peer: SocketAddr) -> NodeHandle {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let f = File::open(&path).expect("open netns");
        // SAFETY: setns on a valid namespace descriptor only changes this thread's network
        // namespace; the thread exists just to create the socket there.
        let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
        anode_io::spawn(big_mtu_node(me, peer), DriverConfig::new(me)).expect("spawn")
    })
    .join()
    .expect("spawner thread")
}

fn cross(nsa: &str, nsb: &str, a: SocketAddr, b: SocketAddr) {
    let ha = spawn_in(nsa, a, b);
    let hb = spawn_in(nsb, b, a);
    let ev = hb.take_events().expect("events");
    assert!(
        wait_route(&ha, b, Duration::from_secs(10)),
        "{a}: no route to {b}"
    );
    let dst = NodeAddr::from(b);
    let r = ha.call(move |n, now| n.send_datagram(now, dst, 77, 1, None, b"over the veth"));
    assert_eq!(r, Ok(Ok(())));
    let d = next_delivery(&ev, Duration::from_secs(5)).expect("delivered across namespaces");
    assert_eq!(d.payload(), b"over the veth");
    assert_eq!(d.src, NodeAddr::from(a));
    assert_eq!(hb.stats().unknown_peer_drops, 0);
    // 60 datagrams of 1000 B, 30 of 2000 B (over the MTU), 60 of 1000 B, as one burst.
    let sizes: Vec<usize> = [(60, 1000), (30, 2000), (60, 1000)]
        .iter()
        .flat_map(|&(n, size)| std::iter::repeat_n(size, n))
        .collect();
    let burst = sizes.clone();
    let sent = ha
        .call(move |n, now| {
            burst
                .iter()
                .enumerate()
                .filter(|(i, size)| {
                    let mut p = vec![0u8; **size];
                    p[..4].copy_from_slice(&(*i as u32).to_be_bytes());
                    n.send_datagram(now, dst, 78, 1, None, &p).is_ok()
                })
                .count()
        })
        .expect("driver alive");
    assert_eq!(sent, sizes.len());
    let mut got = Vec::new();
    while got.len() < sizes.len() {
        let Some(d) = next_delivery(&ev, Duration::from_secs(5)) else {
            break;
        };
        let p = d.payload();
        got.push((u32::from_be_bytes([p[0], p[1], p[2], p[3]]), p.len()));
    }
    let want: Vec<(u32, usize)> = sizes
        .iter()
        .enumerate()
        .map(|(i, s)| (i as u32, *s))
        .collect();
    assert_eq!(got, want, "every datagram once, in order");
    let sa = ha.stats();
    assert!(
        sa.tx_segmented_sends > 0,
        "the runs under the MTU were segmented: {sa:?}"
    );
    assert_eq!(sa.send_errors, 0, "{sa:?}");
    let nb = hb.shutdown();
    assert_eq!(nb.counters().delivered, 1 + sizes.len() as u64);
    assert!(
        ha.shutdown().counters().control_rx > 0,
        "A heard B's hellos"
    );
}

#[test]
#[ignore = "needs root and netns"]
fn datagram_crosses_a_veth_pair_over_ipv4_and_ipv6() {
    anode_testkit::netns::require(
        "datagram_crosses_a_veth_pair_over_ipv4_and_ipv6",
        &["ip"],
        false,
    );
    let (_guard, nsa, nsb) = setup();
    cross(
        &nsa,
        &nsb,
        "198.18.50.1:3322".parse().unwrap(),
        "198.18.50.2:3322".parse().unwrap(),
    );
    cross(
        &nsa,
        &nsb,
        "[2001:2:50::1]:3322".parse().unwrap(),
        "[2001:2:50::2]:3322".parse().unwrap(),
    );
}
