//! Protocol round trips and the client against a scripted server.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use super::*;

fn addr(s: &str) -> anode_wire::NodeAddr {
    s.parse().unwrap()
}

fn all_requests() -> Vec<Request> {
    vec![
        Request::Hello {
            protocol: PROTOCOL_VERSION,
            client: "t".into(),
        },
        Request::Status,
        Request::Routes,
        Request::Neighbors,
        Request::Links,
        Request::Stats,
        Request::Domains,
        Request::Send {
            dst: addr("[::1]:4002"),
            port: 7,
            payload: Payload(vec![0, 1, 255]),
            rb: Some(3),
            flow: 9,
            ee_type: Some(0x0A10),
            every_hop: true,
        },
        Request::Send {
            dst: addr("127.0.0.1:4002"),
            port: 7,
            payload: Payload::default(),
            rb: None,
            flow: 0,
            ee_type: None,
            every_hop: false,
        },
        Request::Bind { port: 7 },
        Request::Unbind { port: 7 },
        Request::Subscribe,
        Request::AddRoute {
            dest: addr("127.0.0.1:4003"),
            via: addr("127.0.0.1:4002"),
            metric: 2,
        },
        Request::SetLink {
            link: "to-b".into(),
            up: false,
        },
        Request::Shutdown,
    ]
}

#[test]
fn every_request_round_trips_as_one_line() {
    for (i, r) in all_requests().into_iter().enumerate() {
        let f = RequestFrame {
            id: i as u64,
            request: r,
        };
        let line = f.to_line();
        assert!(line.ends_with('\n'));
        assert_eq!(line.matches('\n').count(), 1);
        assert_eq!(parse_request(&line).unwrap(), f, "{line}");
    }
}

#[test]
fn request_wire_form_is_stable() {
    let f =
        parse_request(r#"{"id":3,"op":"send","dst":"127.0.0.1:4002","port":7,"payload":"6869"}"#)
            .unwrap();
    assert_eq!(
        f,
        RequestFrame {
            id: 3,
            request: Request::Send {
                dst: addr("127.0.0.1:4002"),
                port: 7,
                payload: Payload::from("hi"),
                rb: None,
                flow: 0,
                ee_type: None,
                every_hop: false,
            }
        }
    );
    let f = parse_request(r#"{"id":1,"op":"add_route","dest":"10.0.0.1:1","via":"10.0.0.2:1"}"#)
        .unwrap();
    assert!(matches!(f.request, Request::AddRoute { metric: 1, .. }));
    assert_eq!(
        RequestFrame {
            id: 1,
            request: Request::Status
        }
        .to_line(),
        "{\"id\":1,\"op\":\"status\"}\n"
    );
}

#[test]
fn bad_requests_say_what_is_wrong_and_keep_the_id() {
    let (id, msg) = parse_request("{not json").unwrap_err();
    assert_eq!(id, None);
    assert!(msg.contains("not JSON"), "{msg}");
    let (id, msg) = parse_request(r#"{"op":"status"}"#).unwrap_err();
    assert_eq!(id, None);
    assert!(msg.contains("\"id\""), "{msg}");
    let (id, msg) = parse_request(r#"{"id":4,"op":"frobnicate"}"#).unwrap_err();
    assert_eq!(id, Some(4));
    assert!(msg.contains("frobnicate"), "{msg}");
    let (id, msg) =
        parse_request(r#"{"id":5,"op":"send","dst":"nowhere","port":1,"payload":""}"#).unwrap_err();
    assert_eq!(id, Some(5));
    assert!(msg.contains("not a node address"), "{msg}");
    let (id, _) = parse_request(r#"{"id":6,"op":"bind","port":70000}"#).unwrap_err();
    assert_eq!(id, Some(6));
}

fn sample_messages() -> Vec<ServerMessage> {
    let route = RouteInfo {
        dest: addr("127.0.0.1:4002"),
        metric: 1,
        reachable: true,
        next_hop: Some(addr("127.0.0.1:4002")),
        link: Some(0),
        origin: RouteOrigin::Learned,
    };
    let link = LinkEntry {
        id: 0,
        name: "to-b".into(),
        peer: addr("127.0.0.1:4002"),
        mtu: 1472,
        cost: 1,
        static_neighbor: false,
        enabled: true,
        neighbor_up: true,
        tx_packets: 12,
        tx_bytes: 3456,
        tx_pps: 10,
        queued: 0,
    };
    let nb = NeighborEntry {
        link: 0,
        link_name: "to-b".into(),
        addr: addr("127.0.0.1:4002"),
    };
    let mut drops = BTreeMap::new();
    drops.insert("no_route".to_string(), 2);
    let counters = CountersInfo {
        fast_path: 5,
        drops,
        ..CountersInfo::default()
    };
    let reply = |result| ServerMessage::Reply { id: 1, result };
    vec![
        reply(Response::Hello(HelloInfo {
            protocol: 1,
            node: addr("[::1]:4001"),
            software: "anode 0.1.0".into(),
        })),
        reply(Response::Status(StatusInfo {
            address: addr("127.0.0.1:4001"),
            bind: "0.0.0.0:4001".into(),
            software: "anode".into(),
            uptime_ms: 5,
            links: vec![link.clone()],
            neighbors: vec![nb.clone()],
            routes: 2,
            route_changes: 3,
            counters: counters.clone(),
        })),
        reply(Response::Routes {
            routes: vec![route.clone()],
        }),
        reply(Response::Neighbors {
            neighbors: vec![nb.clone()],
        }),
        reply(Response::Links { links: vec![link] }),
        reply(Response::Stats(StatsInfo {
            counters,
            driver: BTreeMap::from([("rx_datagrams".to_string(), 4)]),
            control: ControlStats {
                connections: 1,
                ..ControlStats::default()
            },
            domains: vec![DomainsInfo {
                ee: "capsule+nodeos".into(),
                terminations: 2,
                ..DomainsInfo::default()
            }],
            routing: BTreeMap::from([("digests_sent".to_string(), 7)]),
        })),
        reply(Response::Domains {
            ees: vec![DomainsInfo {
                ee: "capsule+nodeos".into(),
                memory_used: 10,
                memory_limit: 100,
                terminations: 1,
                recent_terminations: vec![TerminationEntry {
                    domain: 3,
                    principal: "p".into(),
                    reason: "cpu over limit".into(),
                }],
                domains: vec![DomainEntry {
                    id: 1,
                    principal: "capsule-ee".into(),
                    drops: BTreeMap::from([("queue_full".to_string(), 2)]),
                    ..DomainEntry::default()
                }],
            }],
        }),
        reply(Response::Sent),
        reply(Response::Bound { port: 7 }),
        reply(Response::Unbound { port: 7 }),
        reply(Response::Subscribed),
        reply(Response::Done),
        ServerMessage::error(Some(2), ErrorCode::PortInUse, "taken"),
        ServerMessage::error(None, ErrorCode::BadRequest, "not JSON"),
        ServerMessage::Delivery(DeliveryInfo {
            port: 7,
            src: addr("127.0.0.1:4002"),
            flow: 1,
            rb: 30,
            type_id: 1,
            payload: Payload::from("ok"),
        }),
        ServerMessage::Event(NodeEvent::NeighborUp {
            link: 0,
            link_name: "to-b".into(),
            addr: addr("127.0.0.1:4002"),
        }),
        ServerMessage::Event(NodeEvent::NeighborDown {
            link: 0,
            link_name: "".into(),
            addr: addr("127.0.0.1:4002"),
        }),
        ServerMessage::Event(NodeEvent::RouteChanged { route }),
        ServerMessage::Event(NodeEvent::RouteRemoved {
            dest: addr("127.0.0.1:4009"),
        }),
        ServerMessage::Event(NodeEvent::Log {
            ee: "plan".into(),
            message: "hi".into(),
        }),
    ]
}

#[test]
fn every_server_message_round_trips() {
    for m in sample_messages() {
        let line = m.to_line();
        assert_eq!(line.matches('\n').count(), 1);
        let back: ServerMessage = serde_json::from_str(&line).unwrap();
        assert_eq!(back, m, "{line}");
    }
}

#[test]
fn server_wire_form_is_stable_and_tolerant() {
    let m = ServerMessage::Event(NodeEvent::NeighborUp {
        link: 0,
        link_name: "to-b".into(),
        addr: addr("127.0.0.1:4002"),
    });
    assert_eq!(
        m.to_line(),
        "{\"type\":\"event\",\"event\":\"neighbor_up\",\"link\":0,\"link_name\":\"to-b\",\"addr\":\"127.0.0.1:4002\"}\n"
    );
    // Unknown error codes and route origins from a newer node still parse.
    let e: ServerMessage = serde_json::from_str(
        r#"{"type":"error","id":1,"error":{"code":"quota_exceeded","message":"x"}}"#,
    )
    .unwrap();
    assert!(matches!(
        e,
        ServerMessage::Error {
            error: ErrorInfo {
                code: ErrorCode::Other,
                ..
            },
            ..
        }
    ));
    // Counters with fields this version does not know still parse.
    let c: CountersInfo = serde_json::from_str(r#"{"fast_path":3,"new_counter":1}"#).unwrap();
    assert_eq!(c.fast_path, 3);
}

/// A scripted node: answers the hello, then runs `script` on the connection.
fn scripted(
    script: impl FnOnce(
        &mut BufReader<std::os::unix::net::UnixStream>,
        &mut std::os::unix::net::UnixStream,
    ) + Send
    + 'static,
) -> (std::path::PathBuf, std::thread::JoinHandle<()>) {
    let dir = std::env::temp_dir().join(format!(
        "anode-ctl-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("n.sock");
    let l = UnixListener::bind(&path).unwrap();
    let h = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let f = parse_request(&line).unwrap();
        assert!(matches!(f.request, Request::Hello { protocol: 1, .. }));
        let hello = ServerMessage::Reply {
            id: f.id,
            result: Response::Hello(HelloInfo {
                protocol: PROTOCOL_VERSION,
                node: "127.0.0.1:4001".parse().unwrap(),
                software: "test".into(),
            }),
        };
        w.write_all(hello.to_line().as_bytes()).unwrap();
        script(&mut r, &mut w);
        let _ = std::fs::remove_dir_all(dir);
    });
    (path, h)
}

#[test]
fn client_queues_stream_messages_that_arrive_before_a_reply() {
    let (path, h) = scripted(|r, w| {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let f = parse_request(&line).unwrap();
        assert_eq!(f.request, Request::Bind { port: 7 });
        let d = ServerMessage::Delivery(DeliveryInfo {
            port: 7,
            src: "127.0.0.1:4002".parse().unwrap(),
            flow: 0,
            rb: 1,
            type_id: 1,
            payload: Payload::from("early"),
        });
        // A delivery, a message kind from the future, then the reply, then a late delivery
        // split across two writes.
        w.write_all(d.to_line().as_bytes()).unwrap();
        w.write_all(b"{\"type\":\"gossip\",\"x\":1}\n").unwrap();
        let rep = ServerMessage::Reply {
            id: f.id,
            result: Response::Bound { port: 7 },
        };
        w.write_all(rep.to_line().as_bytes()).unwrap();
        let late = d.to_line().replace("6561726c79", "6c617465");
        let (a, b) = late.split_at(20);
        w.write_all(a.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        w.write_all(b.as_bytes()).unwrap();
    });
    let mut c = Client::connect(&path, "t").unwrap();
    assert_eq!(c.node_info().software, "test");
    c.bind(7).unwrap();
    let got: Vec<String> = c
        .subscription(Some(Instant::now() + Duration::from_secs(5)))
        .take(2)
        .map(|i| match i.unwrap() {
            StreamItem::Delivery(d) => d.payload.as_text().unwrap().to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, ["early", "late"]);
    h.join().unwrap();
    // The node closed the connection.
    assert!(matches!(c.next_item(None), Err(ClientError::Closed)));
}

#[test]
fn client_reports_refusals_and_timeouts() {
    let (path, h) = scripted(|r, w| {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let f = parse_request(&line).unwrap();
        let e = ServerMessage::error(Some(f.id), ErrorCode::PortInUse, "port 7 is taken");
        w.write_all(e.to_line().as_bytes()).unwrap();
        // Keep the connection open past the client's deadline.
        line.clear();
        let _ = r.read_line(&mut line);
    });
    let mut c = Client::connect(&path, "t").unwrap();
    match c.bind(7) {
        Err(ClientError::Refused { code, message }) => {
            assert_eq!(code, ErrorCode::PortInUse);
            assert_eq!(message, "port 7 is taken");
        }
        r => panic!("{r:?}"),
    }
    let t0 = Instant::now();
    let r = c.next_item(Some(t0 + Duration::from_millis(100)));
    assert!(matches!(r, Err(ClientError::Timeout)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    drop(c);
    h.join().unwrap();
}

#[test]
fn connecting_to_nothing_says_how_to_start_a_node() {
    let e = Client::connect("/nonexistent/anode.sock", "t").unwrap_err();
    let m = e.to_string();
    assert!(m.contains("anode node --config"), "{m}");
    assert!(m.contains("/nonexistent/anode.sock"), "{m}");
}
