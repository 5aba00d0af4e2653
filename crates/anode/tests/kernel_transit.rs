//! The kernel fast path for passive transit, differentially: one corpus of ANEP packets
//! (valid, to a farther node, resource bound 0, evaluate-every-hop, truncated, with ANEP
//! options, for the router itself, without route, a short control message, unknown Type ID,
//! from a port that is no peer, larger than the next link's MTU, in IP fragments) goes from host s through an `anode node` in r to host d, once with
//! `[dataplane] mode = "socket"` and once with `"tc"`, over IPv4 and over IPv6. What d
//! receives must be the same bytes in the same order both times, and the kernel's counters
//! must say which packets it forwarded (the two valid ones) and why it passed on each other.
//!
//! Then, with the kernel path on, a link taken down and up again: nothing crosses while it is
//! down, and the kernel forwards again within a second of it coming up; and a route changed
//! at run time (`add_route` over the control socket) to another next hop: within a second
//! the kernel forwards to the new one.
//!
//! s and d are Python scripts (`kernel_transit/peer.py`); r's links to them are static. The
//! namespaces come from `anode_testkit::netns::line` (kernel forwarding off in r: only the
//! node carries traffic). Needs root: ignored by default; run as root with
//! `--include-ignored`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anode_testkit::netns;
use anode_testkit::process::{Anode, NodeProc, Proc, TestDir};

const PORT: u16 = 3322;

struct Family {
    s: &'static str,
    r: &'static str,
    d: &'static str,
    far: &'static str,
}

const V4: Family = Family {
    s: "198.18.1.1",
    r: "198.18.2.1",
    d: "198.18.2.2",
    far: "198.18.9.9",
};

const V6: Family = Family {
    s: "2001:2:0:1::1",
    r: "2001:2:0:2::1",
    d: "2001:2:0:2::2",
    far: "2001:2:0:9::9",
};

fn sock(ip: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{PORT}")
    } else {
        format!("{ip}:{PORT}")
    }
}

fn peer_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernel_transit/peer.py")
}

fn config(f: &Family, mode: &str, socket: &Path) -> String {
    format!(
        "[node]\naddress = \"{r}\"\n\n[control]\nsocket = \"{sock}\"\n\n[dataplane]\nmode = \"{mode}\"\n\n\
         [[link]]\nname = \"to-s\"\npeer = \"{s}\"\nstatic = true\n\n\
         [[link]]\nname = \"to-d\"\npeer = \"{d}\"\nstatic = true\nmtu = 256\n\n\
         [[route]]\ndest = \"{far}\"\nvia = \"{d}\"\n",
        r = sock(f.r),
        s = sock(f.s),
        d = sock(f.d),
        far = sock(f.far),
        sock = socket.display(),
    )
}

/// The driver's counters of the node (`anode stats --json`).
fn driver_stats(n: &NodeProc) -> serde_json::Value {
    let v = n.json(&["stats"]);
    v.get("driver").cloned().unwrap_or(v)
}

fn counter(st: &serde_json::Value, name: &str) -> u64 {
    st.get(name)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| panic!("no counter {name} in {st}"))
}

/// Starts r's node as `what-FAMILY` with data plane `mode`; returns it and its name.
fn start_r(
    anode: &Anode,
    dir: &TestDir,
    r: &str,
    f: &Family,
    what: &str,
    mode: &str,
) -> (NodeProc, String) {
    let name = format!("r-{what}-{}", if f.s.contains(':') { 6 } else { 4 });
    let socket = dir.path(&format!("{name}.sock"));
    let cfg = config(f, mode, &socket);
    (
        anode.start_node_in(Some(r), dir, &name, &sock(f.r), &cfg),
        name,
    )
}

/// Runs the corpus through r once; returns what d received (hex lines) and r's driver
/// counters.
fn run(
    anode: &Anode,
    dir: &TestDir,
    hosts: (&str, &str, &str),
    f: &Family,
    mode: &str,
) -> (Vec<String>, serde_json::Value) {
    let (node, name) = start_r(anode, dir, hosts.1, f, mode, mode);
    let got = send_through(dir, hosts, f, &name, "send");
    // The driver reads the program's counters every 250 ms.
    std::thread::sleep(Duration::from_millis(400));
    (got, driver_stats(&node))
}

/// Sends the corpus (`what` = "send") or its first packet ("one") from s and returns what d
/// received, as hex lines.
fn send_through(
    dir: &TestDir,
    hosts: (&str, &str, &str),
    f: &Family,
    name: &str,
    what: &str,
) -> Vec<String> {
    send_through_to(dir, hosts, f, name, what, PORT)
}

/// [`send_through`] with d receiving on `port`.
fn send_through_to(
    dir: &TestDir,
    (s, _, d): (&str, &str, &str),
    f: &Family,
    name: &str,
    what: &str,
    port: u16,
) -> Vec<String> {
    let out = dir.path(&format!("{name}-{what}-{port}.recv"));
    let py = peer_py();
    let mut recv = Command::new("ip");
    recv.args(["netns", "exec", d, "python3"])
        .arg(&py)
        .args(["recv", f.d, "2.5"])
        .arg(&out)
        .arg(port.to_string());
    let recv = Proc::spawn(&mut recv);
    std::thread::sleep(Duration::from_millis(400));
    let sent = Command::new("timeout")
        .args(["10", "ip", "netns", "exec", s, "python3"])
        .arg(&py)
        .args([what, f.s, f.r, f.d, f.far])
        .output()
        .unwrap();
    assert!(
        sent.status.success(),
        "sender: {}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let done = recv.finish(Duration::from_secs(10));
    assert!(done.status.success(), "receiver: {done:?}");
    let got = std::fs::read_to_string(&out).unwrap();
    got.lines().map(str::to_string).collect()
}

/// With the kernel path on: a link taken down stops the kernel forwarding over it at once
/// (the node drops instead), and taken up again the kernel forwards again within a second.
fn link_down_and_up(anode: &Anode, dir: &TestDir, hosts: (&str, &str, &str), f: &Family) {
    let (node, name) = start_r(anode, dir, hosts.1, f, "link", "tc");
    let forwarded = || {
        std::thread::sleep(Duration::from_millis(400));
        counter(&driver_stats(&node), "kernel_forwarded")
    };
    assert_eq!(send_through(dir, hosts, f, &name, "one").len(), 1);
    assert_eq!(forwarded(), 1);
    let sock_arg = node.socket.to_string_lossy().into_owned();
    let out = anode.run(
        &["link", "down", "to-d", "--socket", &sock_arg],
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        send_through(dir, hosts, f, &name, "one").is_empty(),
        "nothing crosses a link that is down"
    );
    assert_eq!(forwarded(), 1, "and the kernel forwarded nothing");
    let out = anode.run(
        &["link", "up", "to-d", "--socket", &sock_arg],
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(send_through(dir, hosts, f, &name, "one").len(), 1);
    assert_eq!(
        forwarded(),
        2,
        "the kernel forwards again a second after the link is up"
    );
}

/// With the kernel path on: the route to the far node changed at run time from next hop d
/// to d's second port (a link of its own) steers what the kernel forwards within a second.
fn route_change_resteers(anode: &Anode, dir: &TestDir, hosts: (&str, &str, &str), f: &Family) {
    let name = "r-resteer";
    let socket = dir.path(&format!("{name}.sock"));
    let d2 = format!("{}:{}", f.d, PORT + 1);
    let mut cfg = config(f, "tc", &socket);
    cfg.push_str(&format!(
        "\n[[link]]\nname = \"to-d2\"\npeer = \"{d2}\"\nstatic = true\n"
    ));
    let node = anode.start_node_in(Some(hosts.1), dir, name, &sock(f.r), &cfg);
    let forwarded = || {
        std::thread::sleep(Duration::from_millis(400));
        counter(&driver_stats(&node), "kernel_forwarded")
    };
    assert_eq!(send_through_to(dir, hosts, f, name, "far", PORT).len(), 1);
    assert_eq!(forwarded(), 1, "the kernel forwards toward d");
    let mut c = anode_ctl::Client::connect(&node.socket, "kernel-transit").unwrap();
    let changed = std::time::Instant::now();
    c.add_route(sock(f.far).parse().unwrap(), d2.parse().unwrap(), 1)
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let got = send_through_to(dir, hosts, f, name, "far-again", PORT + 1);
    assert_eq!(got.len(), 1, "the packet goes the new way");
    assert!(changed.elapsed() < Duration::from_secs(3));
    assert_eq!(
        forwarded(),
        2,
        "in the kernel, within a second of the route change: {}",
        node.log_text()
    );
}

fn check_family(anode: &Anode, dir: &TestDir, hosts: (&str, &str, &str), f: &Family) {
    let (_, r, _) = hosts;
    // Neighbors resolved first, so the driver finds the next hops' MACs from the first packet
    // on (an unresolved neighbor is passed on to the node: correct, but not this test's point).
    let ping = if f.s.contains(':') { "ping -6" } else { "ping" };
    for h in [f.s, f.d] {
        netns::sh(&format!(
            "ip netns exec {r} {ping} -c 1 -W 2 {h} >/dev/null"
        ));
    }
    let (by_socket, st_socket) = run(anode, dir, hosts, f, "socket");
    let (by_kernel, st_kernel) = run(anode, dir, hosts, f, "tc");
    assert_eq!(
        by_socket.len(),
        3,
        "socket mode: d gets the two valid datagrams and the one with options: {by_socket:?}"
    );
    assert_eq!(
        by_kernel, by_socket,
        "the kernel must deliver the same bytes as the node"
    );
    assert_eq!(counter(&st_socket, "kernel_forwarded"), 0, "{st_socket}");
    assert_eq!(counter(&st_kernel, "kernel_forwarded"), 2, "{st_kernel}");
    for (reason, n) in [
        ("rb_exhausted", 1),
        ("active", 1),
        ("malformed", 2),
        ("anep_options", 1),
        ("for_node", 1),
        ("no_route", 1),
        ("type", 1),
        ("peer", 1),
        ("next_hop", 1),
        ("no_neighbor", 0),
        ("error", 0),
    ] {
        assert_eq!(
            counter(&st_kernel, &format!("kernel_pass_{reason}")),
            n,
            "kernel_pass_{reason}: {st_kernel}"
        );
    }
    // What the node itself received: everything but the two forwarded in the kernel (the
    // fragments arrive reassembled, as one).
    assert_eq!(
        counter(&st_socket, "rx_datagrams") - counter(&st_kernel, "rx_datagrams"),
        2,
        "socket {st_socket}\nkernel {st_kernel}"
    );
}

#[test]
#[ignore = "needs root and netns"]
fn kernel_forwards_exactly_what_the_node_would() {
    netns::require(
        "kernel_forwards_exactly_what_the_node_would",
        &["python3", "ping", "ethtool"],
        false,
    );
    let anode = Anode::new(env!("CARGO_BIN_EXE_anode"));
    let dir = TestDir::new("kernel-transit");
    let (s, r, d, _guard) = netns::line("kt", 1500);
    netns::sh(&format!(
        "ip -n {r} addr add 198.18.1.2/24 dev r0 && ip -n {r} addr add 198.18.2.1/24 dev r1 && \
         ip -n {r} -6 addr add 2001:2:0:1::2/64 dev r0 nodad && \
         ip -n {r} -6 addr add 2001:2:0:2::1/64 dev r1 nodad"
    ));
    // Real checksums end to end: without offloads the sender computes the UDP checksum in
    // full and d's stack verifies it in software, so a wrong incremental update in r's
    // program would lose the packet (veth would otherwise pass CHECKSUM_PARTIAL along and
    // mark what it receives as verified).
    netns::sh(&format!(
        "ip netns exec {s} ethtool -K s0 tx off >/dev/null && \
         ip netns exec {r} ethtool -K r0 rx off tx off >/dev/null && \
         ip netns exec {r} ethtool -K r1 rx off tx off >/dev/null && \
         ip netns exec {d} ethtool -K d0 rx off >/dev/null"
    ));
    for f in [&V4, &V6] {
        check_family(&anode, &dir, (&s, &r, &d), f);
    }
    link_down_and_up(&anode, &dir, (&s, &r, &d), &V4);
    route_change_resteers(&anode, &dir, (&s, &r, &d), &V4);
}
