//! Capsule files (ABI v2) in a node as `anode node` assembles it, under the NodeOS: the bytes
//! a protocol keeps in files are charged to its domain, a domain that goes over its memory
//! is terminated and its files go with it, and files travel in a node's handover.

use std::time::Duration;

use anode_capsule::{CodeHash, capsule_packet};
use anode_core::handover::NodeHandover;
use anode_core::{LinkConfig, Node, NodeConfig};
use anode_node::config::nodeos::CAPSULE_DEFAULT;
use anode_node::ees::{EeOptions, capsule_ee, register_with};
use anode_testkit::{Net, NetOptions, addr};

/// A v2 code object that writes its payload (after a 1-byte file number) to file `f<n>`.
fn writer() -> Vec<u8> {
    wat::parse_str(
        r#"(module
            (import "anode" "cap_read" (func $cap_read (param i32 i32 i32) (result i32)))
            (import "anode" "file_write" (func $fw (param i32 i32 i32 i32) (result i32)))
            (memory (export "memory") 1)
            (data (i32.const 0) "f")
            (func (export "anode_abi_v2"))
            (func (export "accept") (param $len i32) (param $why i32) (result i32)
              (drop (call $cap_read (i32.const 0) (i32.const 1) (local.get $len)))
              (i32.store8 (i32.const 1) (i32.add (i32.const 97) (i32.load8_u (i32.const 1))))
              (drop (call $fw (i32.const 0) (i32.const 2) (i32.const 2)
                (i32.sub (local.get $len) (i32.const 1))))
              (i32.const 0)))"#,
    )
    .unwrap()
}

fn node_with(memory_bytes: u64) -> (Net, CodeHash) {
    let mut o = EeOptions::default();
    let mut p = o.nodeos.policy(CAPSULE_DEFAULT);
    p.memory_bytes = memory_bytes;
    o.nodeos.policies.insert(CAPSULE_DEFAULT, p);
    let mut net = Net::new(1, &[], NetOptions::default(), |_, node| {
        register_with(node, &o).expect("EEs");
    });
    let code = capsule_ee(&mut net.nodes[0])
        .unwrap()
        .install(&writer())
        .unwrap();
    (net, code)
}

fn write(net: &mut Net, code: CodeHash, n: u8, bytes: usize) {
    let mut p = vec![n];
    p.resize(1 + bytes, 7);
    let pkt = capsule_packet(code, addr(0), addr(0), 4, 1, &p).unwrap();
    let _ = net.inject(0, pkt);
    net.run_for(Duration::from_millis(5));
}

/// The protocol's domain's memory and whether it is alive.
fn domain(net: &Net, code: &CodeHash) -> Option<u64> {
    let name = anode_capsule::principal_of_code(code);
    net.nodes[0]
        .domain_reports()
        .iter()
        .flat_map(|r| r.domains.iter())
        .find(|d| d.principal == name)
        .map(|d| d.memory_bytes)
}

#[test]
fn file_bytes_are_charged_to_the_protocols_domain_and_go_with_it() {
    let (mut net, code) = node_with(1 << 20);
    write(&mut net, code, 0, 10);
    let before = domain(&net, &code).expect("the protocol's domain");
    write(&mut net, code, 1, 1200);
    let after = domain(&net, &code).unwrap();
    assert_eq!(
        after - before,
        1200,
        "the new file's bytes, charged to the domain"
    );
    let ee = capsule_ee(&mut net.nodes[0]).unwrap();
    assert_eq!(ee.files().bytes_of(&code), 1210);

    // Files travel in the handover.
    let now = net.now;
    let h = net.nodes[0].hand_over(now);
    let h: NodeHandover = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
    let mut fresh = Node::new(NodeConfig::new(addr(0)), now).unwrap();
    fresh.add_link(LinkConfig::new(addr(1)), now);
    register_with(&mut fresh, &EeOptions::default()).unwrap();
    let rep = fresh.take_over(now, &h).unwrap();
    assert!(rep.refused.is_empty(), "{rep:?}");
    let f = capsule_ee(&mut fresh).unwrap();
    assert_eq!(f.files_mut().read(&code, b"fb").unwrap().len(), 1200);
}

#[test]
fn a_domain_over_its_memory_through_its_files_is_terminated_and_its_files_go() {
    // Room for the code and a few files, not for 60 files of 1,200 bytes.
    let (mut net, code) = node_with(48 << 10);
    write(&mut net, code, 0, 10);
    let base = domain(&net, &code).expect("the protocol's domain");
    assert!(base < 48 << 10, "{base}");
    for n in 1..60 {
        write(&mut net, code, n, 1200);
        if domain(&net, &code).is_none() {
            break;
        }
    }
    assert_eq!(domain(&net, &code), None, "terminated");
    let ee = capsule_ee(&mut net.nodes[0]).unwrap();
    assert_eq!(ee.files().bytes_of(&code), 0, "its files went with it");
    let r = &net.nodes[0].domain_reports();
    let t = r
        .iter()
        .flat_map(|r| r.recent_terminations.iter())
        .map(|t| &t.2)
        .collect::<Vec<_>>();
    assert!(t.iter().any(|why| why.contains("memory")), "{t:?}");
}

#[test]
fn files_outlive_the_operator_stopping_the_ee_and_are_charged_again() {
    let (mut net, code) = node_with(1 << 20);
    write(&mut net, code, 0, 10);
    write(&mut net, code, 1, 1200);
    let charged = domain(&net, &code).expect("the protocol's domain");
    let ty = anode_core::wire::anep::TYPE_CAPSULE;
    assert!(net.nodes[0].set_ee_running(ty, false));
    net.run_for(Duration::from_millis(5));
    assert_eq!(domain(&net, &code), None, "the domain ended with the EE");
    let ee = capsule_ee(&mut net.nodes[0]).unwrap();
    assert_eq!(ee.files().bytes_of(&code), 1210, "the files stayed");
    assert!(net.nodes[0].set_ee_running(ty, true));
    // The stopped EE forgot the code (this node has no disk cache): install it again.
    capsule_ee(&mut net.nodes[0])
        .unwrap()
        .install(&writer())
        .unwrap();
    // The protocol's next capsule makes a new domain, charged with the files it kept (and
    // the one more byte-for-byte rewrite of f0 changes nothing).
    write(&mut net, code, 0, 10);
    let again = domain(&net, &code).expect("a new domain");
    assert_eq!(again, charged, "kept files charged to the new domain");
}
