//! Three `anode node` processes in a line a–b–c: a datagram from a reaches c through b's fast
//! path.

mod node_util;

use std::net::IpAddr;
use std::time::Duration;

use node_util::*;

#[test]
fn datagram_crosses_the_middle_node_on_the_fast_path() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let dir = TestDir::new("line");
    let (aa, ba, ca) = (
        addr(ip, free_port(ip)),
        addr(ip, free_port(ip)),
        addr(ip, free_port(ip)),
    );
    let a = anode().start_node(
        &dir,
        "a",
        &aa,
        &node_config(&aa, &[("to-b", &ba)], &dir.0.join("a.sock")),
    );
    let b = anode().start_node(
        &dir,
        "b",
        &ba,
        &node_config(&ba, &[("to-a", &aa), ("to-c", &ca)], &dir.0.join("b.sock")),
    );
    let c = anode().start_node(
        &dir,
        "c",
        &ca,
        &node_config(&ca, &[("to-b", &ba)], &dir.0.join("c.sock")),
    );

    let ok = wait_until(Duration::from_secs(15), || {
        a.has_route(&ca) && c.has_route(&aa)
    });
    assert!(
        ok,
        "a and c did not learn routes to each other\na:\n{}\nb:\n{}\nc:\n{}",
        a.log_text(),
        b.log_text(),
        c.log_text()
    );
    let routes = a.json(&["routes"]);
    let to_c = routes
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["dest"] == ca.as_str())
        .unwrap();
    assert_eq!(to_c["next_hop"], ba.as_str());
    assert_eq!(to_c["metric"], 2);
    assert_eq!(to_c["origin"], "learned");

    let before = b.json(&["stats"])["counters"]["fast_path"]
        .as_u64()
        .unwrap();
    let l = c.listen(9, 2);
    a.json(&["send", &ca, "--port", "9", "one"]);
    a.json(&["send", &ca, "--port", "9", "--rb", "5", "--hex", "00ff"]);
    let got = listened(l);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["payload"], hex("one"));
    assert_eq!(got[0]["src"], aa.as_str());
    assert_eq!(got[1]["payload"], "00ff");
    // Two hops: the resource bound went down by two (once at a, once at b).
    assert_eq!(got[1]["rb"], 3);

    let after = b.json(&["stats"])["counters"]["fast_path"]
        .as_u64()
        .unwrap();
    assert!(after >= before + 2, "b's fast path: {before} -> {after}");
    assert_eq!(b.json(&["stats"])["counters"]["to_ee"], 0);
}
