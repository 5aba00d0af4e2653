//! Two `anode node` processes on loopback become neighbors, exchange routes, and carry a
//! datagram from `anode send` on one to `anode listen` on the other, over real UDP; over IPv4
//! and over IPv6.

mod node_util;

use std::net::IpAddr;
use std::time::Duration;

use node_util::*;

fn two_nodes(ip: IpAddr, tag: &str) {
    let dir = TestDir::new(tag);
    let (pa, pb) = (free_port(ip), free_port(ip));
    let (a_addr, b_addr) = (addr(ip, pa), addr(ip, pb));
    let a = anode().start_node(
        &dir,
        "a",
        &a_addr,
        &node_config(&a_addr, &[("to-b", &b_addr)], &dir.0.join("a.sock")),
    );
    let b = anode().start_node(
        &dir,
        "b",
        &b_addr,
        &node_config(&b_addr, &[("to-a", &a_addr)], &dir.0.join("b.sock")),
    );

    let ok = wait_until(Duration::from_secs(15), || {
        a.has_route(&b_addr) && b.has_route(&a_addr)
    });
    assert!(
        ok,
        "no routes exchanged\na:\n{}\nb:\n{}",
        a.log_text(),
        b.log_text()
    );

    let routes = a.json(&["routes"]);
    let to_b = routes
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["dest"] == b_addr.as_str())
        .unwrap();
    assert_eq!(to_b["next_hop"], b_addr.as_str());
    assert_eq!(to_b["metric"], 1);
    let nb = a.json(&["neighbors"]);
    assert_eq!(nb[0]["addr"], b_addr.as_str());
    assert_eq!(nb[0]["link_name"], "to-b");
    let st = b.json(&["status"]);
    assert_eq!(st["address"], b_addr.as_str());
    assert_eq!(st["links"][0]["neighbor_up"], true);

    let l = b.listen(7, 1);
    let sent = a.json(&["send", &b_addr, "--port", "7", "hello from a"]);
    assert_eq!(sent["sent"], 12);
    let got = listened(l);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["src"], a_addr.as_str());
    assert_eq!(got[0]["port"], 7);
    assert_eq!(got[0]["payload"], hex("hello from a"));

    let stats = b.json(&["stats"]);
    assert!(stats["counters"]["delivered"].as_u64().unwrap() >= 1);
    assert!(stats["driver"]["rx_datagrams"].as_u64().unwrap() >= 1);

    // The logs tell about the neighbor and the route.
    let log = a.log_text();
    assert!(log.contains("neighbor up"), "{log}");
    assert!(log.contains("route"), "{log}");
}

#[test]
fn two_nodes_over_ipv4() {
    two_nodes("127.0.0.1".parse().unwrap(), "two4");
}

#[test]
fn two_nodes_over_ipv6() {
    if !have_ipv6() {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    }
    two_nodes("::1".parse().unwrap(), "two6");
}
