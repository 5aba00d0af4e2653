//! `[metrics] listen`: an `anode node` process serves Prometheus text on loopback, answers
//! `anode domains --json`, and a non-loopback `listen` is refused with a clear message.

mod node_util;

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::Duration;

use node_util::*;

#[test]
fn metrics_endpoint_on_loopback_and_domains_op() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let dir = TestDir::new("metrics");
    let me = addr(ip, free_port(ip));
    let mport = free_port(ip);
    let cfg = format!(
        "{}\n[metrics]\nlisten = \"127.0.0.1:{mport}\"\n",
        node_config(&me, &[], &dir.0.join("m.sock"))
    );
    let n = anode().start_node(&dir, "m", &me, &cfg);
    let ok = wait_until(Duration::from_secs(10), || {
        n.log_text().contains("metrics on http://")
    });
    assert!(ok, "no metrics endpoint:\n{}", n.log_text());
    let mut s = TcpStream::connect(("127.0.0.1", mport)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200 OK"), "{resp}");
    assert!(
        resp.contains("# TYPE anode_domain_cpu_ns_total counter"),
        "{resp}"
    );
    // Both EEs run under the NodeOS by default: each reports its own domain.
    let ees = n.json(&["domains"]);
    let names: Vec<&str> = ees
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["ee"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["plan+nodeos", "capsule+nodeos"], "{ees}");
}

#[test]
fn non_loopback_metrics_are_refused() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let dir = TestDir::new("metrics-bad");
    let me = addr(ip, free_port(ip));
    let cfg = format!(
        "{}\n[metrics]\nlisten = \"0.0.0.0:9464\"\n",
        node_config(&me, &[], &dir.0.join("b.sock"))
    );
    let path = dir.file("b.toml", &cfg);
    let out = anode().run(
        &["node", "--config", path.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(err.contains("127.0.0.1:9464"), "{err}");
}
