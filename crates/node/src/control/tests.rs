//! The control server in-process, on a node behind a mutex (no UDP), with the real client.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anode_core::{Event, LinkConfig, Node, NodeConfig};
use anode_ctl::{Client, ClientError, ErrorCode, SendOptions, StreamItem};

use super::*;

/// Runs jobs on a node under a mutex and forwards its events, like the UDP driver does.
struct LocalDriver {
    node: Mutex<Node>,
    events: Mutex<Sender<Event>>,
}

impl Driver for LocalDriver {
    fn run(&self, job: Job) -> Result<(), NodeGone> {
        let mut n = self.node.lock().map_err(|_| NodeGone)?;
        job(&mut n, Instant::now());
        let tx = self.events.lock().map_err(|_| NodeGone)?;
        while let Some(e) = n.poll_event() {
            let _ = tx.send(e);
        }
        while n.poll_transmit().is_some() {}
        Ok(())
    }

    fn driver_stats(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([("test".to_string(), 1)])
    }

    fn bound_addr(&self) -> String {
        "127.0.0.1:4001".into()
    }
}

struct Fixture {
    server: Option<ControlServer>,
    dir: PathBuf,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        Self::with_link(tag, false)
    }

    /// A fixture whose link to 127.0.0.1:4002 is static (`static_neighbor`) or not.
    fn with_link(tag: &str, static_neighbor: bool) -> Fixture {
        Self::with_limits(tag, static_neighbor, Limits::default())
    }

    /// A fixture with the control server's `limits`.
    fn with_limits(tag: &str, static_neighbor: bool, limits: Limits) -> Fixture {
        let dir = std::env::temp_dir().join(format!("anode-ctl-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let now = Instant::now();
        let mut node = Node::new(NodeConfig::new("127.0.0.1:4001".parse().unwrap()), now).unwrap();
        let mut l = LinkConfig::new("127.0.0.1:4002".parse().unwrap());
        l.name = "to-b".into();
        l.static_neighbor = static_neighbor;
        node.add_link(l, now);
        let (tx, rx) = mpsc::channel();
        let d = Arc::new(LocalDriver {
            node: Mutex::new(node),
            events: Mutex::new(tx),
        });
        let path = dir.join("sub/n.sock");
        let listener = bind_socket(&path).unwrap();
        let server = ControlServer::serve_with(listener, &path, d, rx, limits).unwrap();
        Fixture {
            server: Some(server),
            dir,
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join("sub/n.sock")
    }

    fn client(&self) -> Client {
        Client::connect(self.path(), "test").unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn raw_exchange(path: &std::path::Path, lines: &[&str]) -> Vec<serde_json::Value> {
    let s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let mut out = Vec::new();
    for l in lines {
        w.write_all(l.as_bytes()).unwrap();
        w.write_all(b"\n").unwrap();
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        out.push(serde_json::from_str(&line).unwrap());
    }
    out
}

#[test]
fn socket_is_private_and_status_works() {
    let f = Fixture::new("status");
    let meta = std::fs::metadata(f.path()).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let dmeta = std::fs::metadata(f.dir.join("sub")).unwrap();
    assert_eq!(dmeta.permissions().mode() & 0o777, 0o700);
    let mut c = f.client();
    assert_eq!(c.node_info().node, "127.0.0.1:4001".parse().unwrap());
    let s = c.status().unwrap();
    assert_eq!(s.links.len(), 1);
    assert_eq!(s.links[0].name, "to-b");
    assert_eq!(s.routes, 1);
    let st = c.stats().unwrap();
    assert_eq!(st.driver.get("test"), Some(&1));
    assert_eq!(st.control.connections, 1);
    let routes = c.routes().unwrap();
    assert_eq!(routes.len(), 1);
    assert!(c.neighbors().unwrap().is_empty());
}

#[test]
fn bad_input_gets_errors_not_crashes() {
    let f = Fixture::new("bad");
    let r = raw_exchange(
        &f.path(),
        &[
            "{\"id\":1,\"op\":\"status\"}",
            "this is not json",
            "{\"id\":2,\"op\":\"hello\",\"protocol\":99}",
            "{\"id\":3,\"op\":\"hello\",\"protocol\":1}",
            "{\"id\":4,\"op\":\"teleport\"}",
            "{\"id\":5,\"op\":\"bind\"}",
            "{\"id\":6,\"op\":\"status\"}",
        ],
    );
    let code = |v: &serde_json::Value| v["error"]["code"].as_str().unwrap_or("").to_string();
    assert_eq!(code(&r[0]), "hello_first");
    assert_eq!(r[0]["id"], 1);
    assert_eq!(code(&r[1]), "bad_request");
    assert!(r[1]["id"].is_null());
    assert_eq!(code(&r[2]), "version");
    assert_eq!(r[3]["result"]["kind"], "hello");
    assert_eq!(code(&r[4]), "bad_request");
    assert_eq!(r[4]["id"], 4);
    assert_eq!(code(&r[5]), "bad_request");
    assert_eq!(r[6]["result"]["kind"], "status");
}

#[test]
fn ports_are_exclusive_and_freed_on_close() {
    let f = Fixture::new("ports");
    let mut a = f.client();
    let mut b = f.client();
    a.bind(7).unwrap();
    a.bind(7).unwrap();
    match b.bind(7) {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::PortInUse),
        r => panic!("{r:?}"),
    }
    match b.unbind(7) {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::NotBound),
        r => panic!("{r:?}"),
    }
    drop(a);
    let t0 = Instant::now();
    loop {
        match b.bind(7) {
            Ok(()) => break,
            Err(_) if t0.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("port not freed: {e}"),
        }
    }
    b.unbind(7).unwrap();
}

#[test]
fn local_delivery_to_bound_port_and_unbound_drop() {
    let f = Fixture::new("deliver");
    let mut rx = f.client();
    rx.bind(9).unwrap();
    let mut tx = f.client();
    let me = tx.node_info().node;
    tx.send(me, 9, &b"\x00hi\xff"[..], SendOptions::default())
        .unwrap();
    tx.send(me, 10, "nobody", SendOptions::default()).unwrap();
    let item = rx
        .next_item(Some(Instant::now() + Duration::from_secs(5)))
        .unwrap();
    match item {
        StreamItem::Delivery(d) => {
            assert_eq!(d.port, 9);
            assert_eq!(d.src, me);
            assert_eq!(d.payload.0, b"\x00hi\xff");
        }
        other => panic!("{other:?}"),
    }
    let t0 = Instant::now();
    while tx.stats().unwrap().control.unbound_port_drops < 1 {
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(20));
    }
    // No route: a clear refusal.
    match tx.send(
        "127.0.0.1:4999".parse().unwrap(),
        9,
        "x",
        SendOptions::default(),
    ) {
        Err(ClientError::Refused { code, message }) => {
            assert_eq!(code, ErrorCode::Dropped);
            assert!(message.contains("no_route"), "{message}");
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn links_routes_and_shutdown() {
    let f = Fixture::new("links");
    let mut c = f.client();
    c.subscribe().unwrap();
    match c.set_link("to-z", false) {
        Err(ClientError::Refused { code, message }) => {
            assert_eq!(code, ErrorCode::NoSuchLink);
            assert!(message.contains("to-b"), "{message}");
        }
        r => panic!("{r:?}"),
    }
    c.set_link("to-b", false).unwrap();
    assert!(!c.links().unwrap()[0].enabled);
    c.set_link("0", true).unwrap();
    assert!(c.links().unwrap()[0].enabled);
    match c.add_route(
        "127.0.0.1:4009".parse().unwrap(),
        "127.0.0.1:4005".parse().unwrap(),
        1,
    ) {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::NotNeighbor),
        r => panic!("{r:?}"),
    }
    c.add_route(
        "127.0.0.1:4009".parse().unwrap(),
        "127.0.0.1:4002".parse().unwrap(),
        2,
    )
    .unwrap();
    assert!(!f.server.as_ref().unwrap().shutdown_requested());
    c.shutdown().unwrap();
    assert!(f.server.as_ref().unwrap().shutdown_requested());
}

#[test]
fn live_socket_refused_stale_socket_replaced() {
    let f = Fixture::new("live");
    let (_tx, rx) = mpsc::channel();
    let node = Node::new(
        NodeConfig::new("127.0.0.1:4003".parse().unwrap()),
        Instant::now(),
    )
    .unwrap();
    let (etx, _erx) = mpsc::channel();
    let d = Arc::new(LocalDriver {
        node: Mutex::new(node),
        events: Mutex::new(etx),
    });
    match ControlServer::start(&f.path(), d.clone(), rx) {
        Err(SocketError::InUse { .. }) => {}
        r => panic!("{r:?}"),
    }
    // A stale socket file (nothing listening) is replaced.
    let stale = f.dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let (_tx2, rx2) = mpsc::channel();
    let s = ControlServer::start(&stale, d.clone(), rx2).unwrap();
    Client::connect(&stale, "t").unwrap();
    s.stop();
    assert!(!stale.exists());
    // A regular file is never removed.
    let file = f.dir.join("file.sock");
    std::fs::write(&file, "x").unwrap();
    let (_tx3, rx3) = mpsc::channel();
    match ControlServer::start(&file, d, rx3) {
        Err(SocketError::NotSocket { .. }) => {}
        r => panic!("{r:?}"),
    }
    assert!(file.exists());
}

#[test]
fn subscribers_get_neighbor_and_route_events() {
    let f = Fixture::with_link("events", true);
    let mut c = f.client();
    c.subscribe().unwrap();
    let peer: anode_wire::NodeAddr = "127.0.0.1:4002".parse().unwrap();
    assert_eq!(c.neighbors().unwrap()[0].addr, peer);
    c.set_link("to-b", false).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut down, mut unreachable) = (false, false);
    while !(down && unreachable) {
        match c.next_item(Some(deadline)).unwrap() {
            StreamItem::Event(anode_ctl::NodeEvent::NeighborDown {
                addr, link_name, ..
            }) => {
                assert_eq!(addr, peer);
                assert_eq!(link_name, "to-b");
                down = true;
            }
            StreamItem::Event(anode_ctl::NodeEvent::RouteChanged { route })
                if route.dest == peer && !route.reachable =>
            {
                unreachable = true;
            }
            _ => {}
        }
    }
}

/// An EE that keeps NodeOS domains (reports a fixed set).
struct DomainsEe;

impl anode_core::ExecutionEnvironment for DomainsEe {
    fn type_id(&self) -> u16 {
        0x0b01
    }
    fn name(&self) -> &str {
        "capsule+nodeos"
    }
    fn handle_packet(&mut self, _: &mut anode_core::NodeContext<'_>, _: anode_core::EePacket) {}
    fn domain_report(&self) -> Option<anode_core::DomainReport> {
        Some(anode_core::DomainReport {
            ee: "capsule+nodeos".into(),
            memory_used: 146,
            memory_limit: 4096,
            terminations: 1,
            recent_terminations: vec![(3, "proto-1".into(), "cpu over limit".into())],
            domains: vec![anode_core::DomainStat {
                id: 1,
                parent: Some(0),
                principal: "capsule-ee".into(),
                packets: 5,
                ..Default::default()
            }],
        })
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[test]
fn domains_op_reports_the_nodeos_domains() {
    // No EE keeps domains: an empty answer.
    let f = Fixture::new("domains-none");
    assert!(f.client().domains().unwrap().is_empty());
    drop(f);
    // A node whose EE keeps domains.
    let dir = std::env::temp_dir().join(format!("anode-ctl-domains-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut node = Node::new(
        NodeConfig::new("127.0.0.1:4001".parse().unwrap()),
        Instant::now(),
    )
    .unwrap();
    node.register_ee(Box::new(DomainsEe));
    let (tx, rx) = mpsc::channel();
    let d = Arc::new(LocalDriver {
        node: Mutex::new(node),
        events: Mutex::new(tx),
    });
    let sock = dir.join("n.sock");
    let server = ControlServer::start(&sock, d, rx).unwrap();
    let ees = Client::connect(&sock, "test").unwrap().domains().unwrap();
    assert_eq!(ees.len(), 1);
    assert_eq!(ees[0].ee, "capsule+nodeos");
    assert_eq!(ees[0].domains[0].principal, "capsule-ee");
    assert_eq!(ees[0].domains[0].packets, 5);
    assert_eq!(ees[0].recent_terminations[0].reason, "cpu over limit");
    let raw = raw_exchange(
        &sock,
        &[
            r#"{"id":1,"op":"hello","protocol":1}"#,
            r#"{"id":2,"op":"domains"}"#,
        ],
    );
    assert_eq!(raw[1]["result"]["kind"], "domains");
    assert_eq!(raw[1]["result"]["ees"][0]["memory_used"], 146);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn connections_are_bounded_and_idle_ones_closed() {
    let limits = Limits {
        max_connections: 3,
        idle: Duration::from_millis(300),
        workers: 2,
    };
    let f = Fixture::with_limits("bounds", false, limits);
    let mut listening = f.client();
    listening.bind(4242).unwrap();
    let _a = f.client();
    let _b = f.client();
    // A fourth is told why and closed.
    let s = UnixStream::connect(f.path()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    assert!(line.contains("too many control connections"), "{line}");
    // After the idle time the two that wait for nothing are gone; the one owning a port
    // stays, and new connections are accepted again.
    let t0 = Instant::now();
    loop {
        let st = listening.stats().unwrap().control;
        if st.idle_closed == 2 {
            assert_eq!(st.refused_connections, 1, "{st:?}");
            assert_eq!(st.connections, 1, "{st:?}");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{st:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut c = f.client();
    assert!(c.status().is_ok());
}

#[test]
fn stops_even_when_its_socket_file_was_deleted() {
    let mut f = Fixture::new("unlinked");
    let _c = f.client();
    std::fs::remove_file(f.path()).unwrap();
    let server = f.server.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        server.stop();
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_ok(),
        "stop() hung after the socket file was deleted"
    );
}

#[test]
fn a_request_naming_a_key_twice_is_refused() {
    let f = Fixture::new("dupkeys");
    let replies = raw_exchange(
        &f.path(),
        &[
            r#"{"id":1,"op":"hello","protocol":1}"#,
            r#"{"id":2,"op":"status","op":"shutdown"}"#,
        ],
    );
    assert_eq!(replies[1]["type"], "error", "{replies:?}");
    assert!(
        replies[1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate key \"op\""),
        "{replies:?}"
    );
}
