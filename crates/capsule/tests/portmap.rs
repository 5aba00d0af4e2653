//! The portmapper code object (guest/protocols/portmap): applications holding a port register
//! a service number for it; capsules addressed to the service are delivered to that port; the
//! map is the portmapper's soft state, also read by other code objects through its
//! `portmap_lookup` export.

mod common;

use std::time::Duration;

use anode_capsule::{CodeHash, capsule_packet, protocols};
use common::*;

const APP: u16 = 40;
const OTHER_APP: u16 = 41;
const SERVICE: u16 = 7000;
const SECOND: Duration = Duration::from_secs(1);

fn msg(op: u8, service: u16, port: u16, data: &[u8]) -> Vec<u8> {
    let mut p = vec![op, 0];
    p.extend_from_slice(&service.to_be_bytes());
    p.extend_from_slice(&port.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    p.extend_from_slice(data);
    p
}

/// Node `at` injects a portmap capsule with `payload` toward node `to`.
fn inject(net: &mut Net, pm: CodeHash, at: usize, to: usize, payload: &[u8]) {
    let pkt = capsule_packet(pm, addr(at), addr(to), 16, 1, payload).unwrap();
    let now = net.now;
    let _ = net.nodes[at].inject(now, pkt);
}

/// The ack status an application at node 2 got on `port`, if any.
fn ack(net: &mut Net, port: u16) -> Option<u8> {
    let (d, _) = net.wait_delivery(2, SECOND)?;
    assert_eq!(d.port, port);
    Some(d.payload()[1])
}

#[test]
fn capsules_addressed_to_a_service_reach_the_application_holding_it() {
    let rt = runtime();
    let mut net = Net::line(3, &rt);
    let pm = net.ee(2).install(protocols::PORTMAP).unwrap();
    net.ee(2).register_port(APP);
    net.ee(2).register_port(OTHER_APP);

    // The application holding APP registers SERVICE where it runs (node 2).
    inject(&mut net, pm, 2, 2, &msg(1, SERVICE, APP, b""));
    assert_eq!(ack(&mut net, APP), Some(1));

    // Node 0 sends to SERVICE at node 2 (node 1 loads the portmapper from node 0 on demand).
    assert_eq!(net.ee(0).install(protocols::PORTMAP).unwrap(), pm);
    inject(&mut net, pm, 0, 2, &msg(3, SERVICE, 0, b"hello service"));
    let (d, _) = net.wait_delivery(2, SECOND).expect("delivered");
    assert_eq!(d.port, APP);
    assert_eq!(&d.payload()[4..6], &APP.to_be_bytes(), "port filled in");
    assert_eq!(&d.payload()[12..], b"hello service");

    // Another application cannot take the service while it is held.
    inject(&mut net, pm, 2, 2, &msg(1, SERVICE, OTHER_APP, b""));
    assert_eq!(ack(&mut net, OTHER_APP), Some(2));
    // A port nobody holds here cannot be registered: dropped, no ack, no mapping.
    inject(&mut net, pm, 2, 2, &msg(1, SERVICE + 1, 55, b""));
    assert_eq!(ack(&mut net, 55), None);
    assert_eq!(net.drops(2, "guest_drop"), 1);
    inject(&mut net, pm, 0, 2, &msg(3, SERVICE + 1, 0, b"nobody"));
    assert!(net.wait_delivery(2, SECOND).is_none());
    assert_eq!(net.drops(2, "guest_drop"), 2);
    // Registrations act only where they are injected: node 0 has no OTHER_APP, so this
    // one ends there ...
    inject(&mut net, pm, 0, 2, &msg(1, SERVICE + 2, OTHER_APP, b""));
    assert!(net.wait_delivery(2, SECOND).is_none());
    assert_eq!(net.drops(0, "guest_drop"), 1);
    // ... and one arriving from a neighbor is refused.
    let pkt = capsule_packet(
        pm,
        addr(0),
        addr(2),
        16,
        1,
        &msg(1, SERVICE + 2, OTHER_APP, b""),
    )
    .unwrap();
    let now = net.now;
    net.nodes[2].handle_packet(now, anode_core::LinkId(0), pkt);
    assert!(net.wait_delivery(2, SECOND).is_none());
    assert_eq!(net.drops(2, "guest_drop"), 3);

    // Unregistered by its holder, the service is gone and free for another application.
    inject(&mut net, pm, 2, 2, &msg(2, SERVICE, APP, b""));
    assert_eq!(ack(&mut net, APP), Some(1));
    inject(&mut net, pm, 0, 2, &msg(3, SERVICE, 0, b"gone"));
    assert!(net.wait_delivery(2, SECOND).is_none());
    inject(&mut net, pm, 2, 2, &msg(1, SERVICE, OTHER_APP, b""));
    assert_eq!(ack(&mut net, OTHER_APP), Some(1));
    inject(&mut net, pm, 0, 2, &msg(3, SERVICE, 0, b"new holder"));
    let (d, _) = net.wait_delivery(2, SECOND).expect("delivered");
    assert_eq!(
        (d.port, &d.payload()[12..]),
        (OTHER_APP, &b"new holder"[..])
    );
}

#[test]
fn other_code_objects_resolve_services_through_the_portmapper() {
    let rt = runtime();
    let mut net = Net::line(3, &rt);
    let pm = net.ee(2).install(protocols::PORTMAP).unwrap();
    net.ee(2).register_port(APP);
    inject(&mut net, pm, 2, 2, &msg(1, SERVICE, APP, b""));
    assert_eq!(ack(&mut net, APP), Some(1));
    // A protocol whose payload starts with a service number: forwarded at every hop,
    // delivered at the destination to whatever port the portmapper maps it to.
    let user = wat::parse_str(format!(
        r#"(module
            (import "code:{pm}" "portmap_lookup" (func $lookup (param i32) (result i32)))
            (import "anode" "cap_read" (func $cap_read (param i32 i32 i32) (result i32)))
            (import "anode" "deliver" (func $deliver (param i32) (result i32)))
            (memory (export "memory") 1)
            (func (export "anode_abi_v1"))
            (func (export "accept") (param $len i32) (param $why i32) (result i32)
                (local $port i32)
                (if (i32.ne (local.get $why) (i32.const 0)) (then (return (i32.const 1))))
                (if (i32.ne (call $cap_read (i32.const 0) (i32.const 0) (i32.const 2))
                            (i32.const 2))
                    (then (return (i32.const 2))))
                (local.set $port (call $lookup
                    (i32.or (i32.shl (i32.load8_u (i32.const 0)) (i32.const 8))
                            (i32.load8_u (i32.const 1)))))
                (if (i32.lt_s (local.get $port) (i32.const 0)) (then (return (i32.const 2))))
                (if (i32.ne (call $deliver (local.get $port)) (i32.const 0))
                    (then (return (i32.const 2))))
                (i32.const 0)))"#,
        pm = hex::encode(pm)
    ))
    .unwrap();
    net.ee(0).install(protocols::PORTMAP).unwrap();
    let u = net.ee(0).install(&user).unwrap();
    let mut payload = SERVICE.to_be_bytes().to_vec();
    payload.extend_from_slice(b"via lookup");
    let pkt = capsule_packet(u, addr(0), addr(2), 16, 1, &payload).unwrap();
    let now = net.now;
    net.nodes[0].inject(now, pkt).unwrap();
    let (d, _) = net.wait_delivery(2, SECOND).expect("delivered");
    assert_eq!((d.port, &d.payload()[2..]), (APP, &b"via lookup"[..]));
}
