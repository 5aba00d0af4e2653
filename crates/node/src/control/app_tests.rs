//! The application-library ops in-process: a node with both EEs behind a mutex, the real
//! client, and real capsules and PLAN packets.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anode_capsule::{capsule_packet, protocols};
use anode_core::{Event, Node, NodeConfig};
use anode_ctl::{Client, ClientError, ErrorCode, NodeEvent, StreamItem};
use anode_plan::ee::{PacketSpec, PlanEe, build_packet};
use anode_wire::anep::{TYPE_CAPSULE, TYPE_PLAN};

use super::*;

/// Runs jobs on the node, then its timers, and forwards its events (like the UDP driver).
struct LocalDriver {
    node: Mutex<Node>,
    events: Mutex<Sender<Event>>,
}

impl Driver for LocalDriver {
    fn run(&self, job: Job) -> Result<(), NodeGone> {
        let mut n = self.node.lock().map_err(|_| NodeGone)?;
        let now = Instant::now();
        job(&mut n, now);
        let tx = self.events.lock().map_err(|_| NodeGone)?;
        while let Some(e) = n.poll_event() {
            let _ = tx.send(e);
        }
        while n.poll_transmit().is_some() {}
        Ok(())
    }

    fn driver_stats(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }

    fn bound_addr(&self) -> String {
        "127.0.0.1:4001".into()
    }
}

struct Fx {
    server: Option<ControlServer>,
    dir: PathBuf,
    driver: Arc<LocalDriver>,
}

impl Fx {
    fn new(tag: &str) -> Fx {
        let dir = std::env::temp_dir().join(format!("anode-app-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let now = Instant::now();
        let mut node = Node::new(NodeConfig::new("127.0.0.1:4001".parse().unwrap()), now).unwrap();
        let mut l = anode_core::LinkConfig::new(PEER.parse().unwrap());
        l.static_neighbor = true;
        node.add_link(l, now);
        crate::ees::register(&mut node, Some(dir.join("code")), None).unwrap();
        let (tx, rx) = mpsc::channel();
        let d = Arc::new(LocalDriver {
            node: Mutex::new(node),
            events: Mutex::new(tx),
        });
        let server = ControlServer::start(&dir.join("n.sock"), d.clone(), rx).unwrap();
        Fx {
            server: Some(server),
            dir,
            driver: d,
        }
    }

    fn client(&self) -> Client {
        Client::connect(self.dir.join("n.sock"), "app-test").unwrap()
    }
}

impl Drop for Fx {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The node's one neighbor.
const PEER: &str = "127.0.0.1:4002";

fn next(c: &mut Client) -> StreamItem {
    c.next_item(Some(Instant::now() + Duration::from_secs(5)))
        .expect("a stream item within 5 s")
}

#[test]
fn code_cache_ops() {
    let fx = Fx::new("code");
    let mut c = fx.client();
    assert!(c.code_list().unwrap().is_empty());
    let e = c.code_put(protocols::PING.to_vec()).unwrap();
    assert_eq!(e.hash.len(), 64);
    assert_eq!(e.wasm_len, protocols::PING.len() as u64);
    assert!(e.in_memory && e.on_disk);
    assert_eq!(c.code_list().unwrap(), vec![c.code_show(&e.hash).unwrap()]);
    match c.code_put(b"not wasm".to_vec()) {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::BadCode),
        r => panic!("{r:?}"),
    }
    match c.code_show("xyz") {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::BadRequest),
        r => panic!("{r:?}"),
    }
    assert!(c.code_evict(&e.hash).unwrap());
    assert!(!c.code_evict(&e.hash).unwrap());
    match c.code_show(&e.hash) {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::NoCode),
        r => panic!("{r:?}"),
    }
}

#[test]
fn capsule_delivers_to_the_bound_application_port_only() {
    let fx = Fx::new("cap");
    let mut c = fx.client();
    let me = c.node_info().node;
    let e = c.code_put(protocols::PING.to_vec()).unwrap();
    let code = anode_ctl::app::parse_code_name(&e.hash).unwrap();
    let peer = PEER.parse().unwrap();
    // A ping reply from the neighbor arrives on the link: the code delivers it to `port`.
    let reply = |port: u16| {
        let mut p = vec![0u8; 20];
        p[0] = 1;
        p[2..4].copy_from_slice(&port.to_be_bytes());
        capsule_packet(code, peer, me, 8, 1, &p).unwrap()
    };
    let arrive = |pkt: Vec<u8>| {
        call(&*fx.driver, move |n, now| {
            n.handle_packet(now, anode_core::LinkId(0), pkt)
        })
        .unwrap();
    };
    // Unbound port: the code may not deliver there; nothing comes.
    arrive(reply(7));
    assert!(matches!(
        c.next_item(Some(Instant::now() + Duration::from_millis(200))),
        Err(ClientError::Timeout)
    ));
    c.bind_app(TYPE_CAPSULE, 7).unwrap();
    let mut other = fx.client();
    match other.bind_app(TYPE_CAPSULE, 7) {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::PortInUse),
        r => panic!("{r:?}"),
    }
    arrive(reply(7));
    match next(&mut c) {
        StreamItem::Delivery(d) => {
            assert_eq!((d.type_id, d.port), (TYPE_CAPSULE, 7));
            assert_eq!(d.payload.as_bytes()[0], 1, "a ping reply");
        }
        i => panic!("{i:?}"),
    }
    // A request capsule injected here leaves toward the neighbor.
    let mut p = vec![0u8; 20];
    p[2..4].copy_from_slice(&7u16.to_be_bytes());
    c.inject(capsule_packet(code, me, peer, 8, 1, &p).unwrap(), false)
        .unwrap();
    // Garbage is refused with the node's reason.
    match c.inject(vec![1, 2, 3], false) {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::Dropped),
        r => panic!("{r:?}"),
    }
    match c.request(anode_ctl::Request::Inject {
        packet: reply(7).into(),
        logs: false,
        count: 0,
        partial: false,
    }) {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::BadRequest),
        r => panic!("{r:?}"),
    }
}

#[test]
fn plan_prints_stream_to_the_injecting_client() {
    let fx = Fx::new("plan");
    let mut c = fx.client();
    let me = c.node_info().node;
    let ee = PlanEe::with_defaults();
    let prog = "fun f(n : int) = (print(n * 2); deliver(getImplicitPort(), n))";
    let mut spec = PacketSpec::new(me, me, 4);
    spec.session = 9;
    let pkt = build_packet(ee.interp(), prog, "f(21)", &spec).unwrap();
    c.bind_app(TYPE_PLAN, 9).unwrap();
    c.inject(pkt, true).unwrap();
    let mut got = (None, None);
    while got.0.is_none() || got.1.is_none() {
        match next(&mut c) {
            StreamItem::Event(NodeEvent::Log { ee, message }) if ee == "plan" => {
                got.0 = Some(message)
            }
            StreamItem::Delivery(d) if d.type_id == TYPE_PLAN => {
                let v = anode_plan::marshal::decode_value(d.payload.as_bytes()).unwrap();
                got.1 = Some(v.to_string());
            }
            _ => {}
        }
    }
    assert_eq!(got.0.as_deref(), Some("42"));
    assert_eq!(got.1.as_deref(), Some("21"));
}
