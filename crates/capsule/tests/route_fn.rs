//! Named routing functions (`forward_by`): a native routing function registered with the EE
//! routes the `routefn` protocol's capsules by flow; an unregistered name is `NOT_FOUND` and
//! counted; bad guest pointers and lengths are `BOUNDS`, never a trap.

use std::time::Instant;

use anode_capsule::{CapsuleEe, CapsuleError, CapsuleRouteFn, capsule_packet, protocols};
use anode_core::wire::NodeAddr;
use anode_core::wire::addr::v4;
use anode_core::wire::anep::TYPE_CAPSULE;
use anode_core::{Event, LinkConfig, LinkId, NextHop, Node, NodeConfig, NodeFacts};

const PORT: u16 = 7;

fn addr(i: u8) -> NodeAddr {
    v4(198, 18, 0, i, 3322)
}

/// Flow `flow` goes out on `link`; flow 99 has no route; flow 98 gets a hop that is not a
/// neighbor; every other flow takes the default route.
struct Pin {
    flow: u64,
    link: LinkId,
}

impl CapsuleRouteFn for Pin {
    fn next_hop(&mut self, node: &dyn NodeFacts, dst: NodeAddr, flow: u64) -> Option<NextHop> {
        match flow {
            99 => None,
            98 => Some(NextHop {
                link: LinkId(5),
                addr: addr(5),
            }),
            f if f == self.flow => node.neighbor_on(self.link),
            _ => node.lookup(&dst),
        }
    }
}

/// Node 10 with neighbors 1 (link 0) and 2 (link 1), node 9 reached via 1, a capsule EE
/// with `pin` registered.
fn node(now: Instant) -> Node {
    let mut n = Node::new(NodeConfig::new(addr(10)), now).unwrap();
    for p in [1, 2] {
        n.add_link(
            LinkConfig {
                static_neighbor: true,
                ..LinkConfig::new(addr(p))
            },
            now,
        );
    }
    n.add_static_route(addr(9), addr(1), 1, now);
    let mut ee = CapsuleEe::new(Default::default()).unwrap();
    ee.register_port(PORT);
    ee.set_route(
        "pin",
        Box::new(Pin {
            flow: 7,
            link: LinkId(1),
        }),
    )
    .unwrap();
    n.register_ee(Box::new(ee));
    while n.poll_transmit().is_some() {}
    n
}

fn ee(n: &mut Node) -> &mut CapsuleEe {
    n.ee_mut(TYPE_CAPSULE)
        .unwrap()
        .as_any_mut()
        .downcast_mut::<CapsuleEe>()
        .unwrap()
}

/// `routefn` payload naming `name`.
fn payload(name: &str) -> Vec<u8> {
    let mut p = PORT.to_be_bytes().to_vec();
    p.push(name.len() as u8);
    p.extend_from_slice(name.as_bytes());
    p.extend_from_slice(b"data");
    p
}

/// The links the capsules leave on, after arriving from neighbor 2 (link 1).
fn out(n: &mut Node, now: Instant, code: [u8; 32], name: &str, flows: &[u64]) -> Vec<u32> {
    for &f in flows {
        let pkt = capsule_packet(code, addr(2), addr(9), 16, f, &payload(name)).unwrap();
        n.handle_packet(now, LinkId(1), pkt);
    }
    let mut v = Vec::new();
    while let Some(t) = n.poll_transmit() {
        v.push(t.link.0);
    }
    v
}

fn drops(n: &Node, reason: &str) -> u64 {
    let r = anode_core::DropReason::from_name(reason)
        .unwrap_or_else(|| panic!("{reason} is not a drop reason"));
    n.counters().ee_drops("capsule", r)
}

#[test]
fn routefn_capsules_are_routed_by_the_named_function() {
    let now = Instant::now();
    let mut n = node(now);
    let code = ee(&mut n).install(protocols::ROUTEFN).unwrap();
    assert_eq!(ee(&mut n).route_names(), ["pin"]);
    // Flow 7 pinned to link 1, flow 8 by the default route (link 0); an empty name is the
    // default route.
    assert_eq!(out(&mut n, now, code, "pin", &[7, 8, 7]), [1, 0, 1]);
    assert_eq!(out(&mut n, now, code, "", &[7]), [0]);
    // No route, and a hop that is not a neighbor: dropped by the protocol.
    assert!(out(&mut n, now, code, "pin", &[99, 98]).is_empty());
    assert_eq!(drops(&n, "guest_drop"), 2);
    assert_eq!(ee(&mut n).stats().unknown_route_fn, 0);
    // Unknown names: dropped and counted.
    assert!(out(&mut n, now, code, "nosuch", &[7]).is_empty());
    assert!(ee(&mut n).remove_route("pin"));
    assert!(!ee(&mut n).remove_route("pin"));
    assert!(out(&mut n, now, code, "pin", &[7]).is_empty());
    assert_eq!(ee(&mut n).stats().unknown_route_fn, 2);
    assert_eq!(drops(&n, "guest_drop"), 4);
    assert!(ee(&mut n).route_names().is_empty());
}

#[test]
fn route_names_are_checked() {
    let mut e = CapsuleEe::new(Default::default()).unwrap();
    let pin = || {
        Box::new(Pin {
            flow: 7,
            link: LinkId(0),
        })
    };
    assert!(matches!(
        e.set_route("", pin()),
        Err(CapsuleError::RouteName { .. })
    ));
    let long = "x".repeat(anode_capsule::abi::MAX_ROUTE_NAME + 1);
    assert!(matches!(
        e.set_route(&long, pin()),
        Err(CapsuleError::RouteName { .. })
    ));
    e.set_route("a", pin()).unwrap();
    e.set_route("a", pin()).unwrap();
    assert_eq!(e.route_names(), ["a"]);
}

/// A module calling `forward_by(np, nl, flow)` once, then writing the result to the first
/// four payload bytes and delivering the capsule (if it still holds it). The name "pin" is at
/// offset 16 of its memory (one page).
fn probe(np: i32, nl: i32, flow: i64) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (import "anode" "forward_by" (func $fb (param i32 i32 i64) (result i32)))
            (import "anode" "cap_write" (func $w (param i32 i32 i32) (result i32)))
            (import "anode" "deliver" (func $d (param i32) (result i32)))
            (memory (export "memory") 1)
            (data (i32.const 16) "pin")
            (func (export "anode_abi_v1"))
            (func (export "accept") (param i32 i32) (result i32)
                (i32.store (i32.const 0) (call $fb (i32.const {np}) (i32.const {nl}) (i64.const {flow})))
                (drop (call $w (i32.const 0) (i32.const 0) (i32.const 4)))
                (drop (call $d (i32.const {PORT})))
                (i32.const 0)))"#
    ))
    .unwrap()
}

#[test]
fn forward_by_checks_pointers_and_reports_its_outcome() {
    let now = Instant::now();
    let mut n = node(now);
    let cases: &[(i32, i32, i64, i32)] = &[
        (65535, 10, 7, -2),
        (-1, 3, 7, -2),
        (16, -1, 7, -2),
        (16, i32::MAX, 7, -2),
        (i32::MAX, i32::MAX, 7, -2),
        (20, 3, 7, -1),
        (16, 2, 7, -1),
        (16, 0, 7, -1),
        (0, 60000, 7, -1),
        (16, 3, 99, -5),
        (16, 3, 98, -5),
    ];
    for &(np, nl, flow, want) in cases {
        let code = ee(&mut n).install(&probe(np, nl, flow)).unwrap();
        assert!(out(&mut n, now, code, "", &[1]).is_empty(), "{np} {nl}");
        let got: Vec<i32> = std::iter::from_fn(|| n.poll_event())
            .filter_map(|e| match e {
                Event::Delivered(d) => {
                    Some(i32::from_le_bytes(d.payload()[..4].try_into().unwrap()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(got, [want], "forward_by({np}, {nl}, {flow})");
    }
    assert_eq!(ee(&mut n).stats().unknown_route_fn, 4);
    assert_eq!(ee(&mut n).stats().traps, 0);
    // Found, with a route: the capsule is gone on the pinned link, nothing delivered.
    let code = ee(&mut n).install(&probe(16, 3, 7)).unwrap();
    assert_eq!(out(&mut n, now, code, "", &[1]), [1]);
    assert!(!std::iter::from_fn(|| n.poll_event()).any(|e| matches!(e, Event::Delivered(_))));
}
