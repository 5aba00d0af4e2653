//! `[capsule] workers` in real `anode node`s: a line of three nodes, each running capsules
//! with two threads (held per receive batch, then run); active pings across it all come back,
//! and the destination's metrics count the batches its ping code ran in.

mod node_util;

use std::time::Duration;

use node_util::*;

#[test]
fn pings_cross_a_node_running_capsules_with_two_workers() {
    let dir = TestDir::new("workers");
    let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let metrics = addr(ip, free_port(ip));
    let names = ["a", "b", "c"];
    let nodes = start_line(&dir, &names, |i| {
        let code = dir.path(&format!("code-{}", names[i]));
        let mut s = format!(
            "\n[capsule]\ncache_dir = \"{}\"\nworkers = 2\n",
            path_str(&code)
        );
        if i == 2 {
            s.push_str(&format!("\n[metrics]\nlisten = \"{metrics}\"\n"));
        }
        s
    });
    let (a, c) = (&nodes[0], &nodes[2]);
    assert!(
        wait_until(Duration::from_secs(15), || a.has_route(&c.addr)
            && c.has_route(&a.addr)),
        "no route a <-> c:\n{}",
        nodes[1].log_text()
    );
    let p = a.json(&["ping", &c.addr, "-c", "20", "-i", "0.02"]);
    assert_eq!(p["received"], 20, "{p}\n{}", nodes[1].log_text());
    let port: u16 = metrics.rsplit(':').next().unwrap().parse().unwrap();
    let body = anode_testkit::http::get(("127.0.0.1", port), "/metrics");
    let batches = body
        .lines()
        .find_map(|l| l.strip_prefix("anode_capsule_batches_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no batch counter in\n{body}"));
    // Every ping ran its code at c, in a batch of its own or with others.
    assert!(batches >= 20.0, "{batches} batches\n{body}");
}
