//! `[metrics] listen`: an `anode node` process serves OpenMetrics text on loopback that the
//! Prometheus client library's reference parser reads (python3 `prometheus_client`), with
//! the node's packets, drops, domains, code cache, routes and links after a capsule ping;
//! other paths answer 404; `anode domains --json` answers; a non-loopback `listen` is refused
//! with a clear message.

mod node_util;

use std::net::IpAddr;
use std::time::Duration;

use node_util::*;

fn get(port: u16, path: &str) -> String {
    anode_testkit::http::get(("127.0.0.1", port), path)
}

#[test]
fn metrics_endpoint_on_loopback_and_domains_op() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let dir = TestDir::new("metrics");
    let (me, peer) = (addr(ip, free_port(ip)), addr(ip, free_port(ip)));
    let mport = free_port(ip);
    let cfg = format!(
        "{}\n[metrics]\nlisten = \"127.0.0.1:{mport}\"\n",
        node_config(&me, &[("to-b", &peer)], &dir.0.join("m.sock"))
    );
    let n = anode().start_node(&dir, "m", &me, &cfg);
    let b = anode().start_node(
        &dir,
        "b",
        &peer,
        &node_config(&peer, &[("to-m", &me)], &dir.0.join("b.sock")),
    );
    let ok = wait_until(Duration::from_secs(10), || {
        n.log_text().contains("metrics on http://") && n.has_route(&peer)
    });
    assert!(ok, "no metrics endpoint or route:\n{}", n.log_text());
    assert_eq!(
        n.json(&["ping", &peer, "-c", "3", "-i", "0.05"])["received"],
        3
    );
    let resp = get(mport, "/metrics");
    assert!(resp.starts_with("HTTP/1.1 200 OK"), "{resp}");
    assert!(resp.contains("application/openmetrics-text"), "{resp}");
    let body = resp.split_once("\r\n\r\n").unwrap().1;
    let families = anode_testkit::http::openmetrics_families(body);
    let names: Vec<&str> = families
        .lines()
        .filter_map(|l| l.split(' ').next())
        .collect();
    for want in [
        "anode_received_packets",
        "anode_packets_by_path",
        "anode_domain_cpu_seconds",
        "anode_domain_memory_bytes",
        "anode_code_load_seconds",
        "anode_capsule_runs",
        "anode_capsule_file_bytes",
        "anode_routes",
        "anode_routing_protocol",
        "anode_link_neighbor_up",
        "anode_control_connections",
        "anode_udp_driver",
    ] {
        assert!(names.contains(&want), "{want} missing: {families}");
    }
    assert!(
        names.iter().filter(|n| n.starts_with("anode_")).count() >= 20,
        "{families}"
    );
    // The ping's capsules ran here, its code came over a demand load or was cached.
    let runs = body
        .lines()
        .find(|l| l.starts_with("anode_capsule_runs_total"))
        .unwrap();
    assert!(!runs.ends_with(" 0"), "{runs}");
    assert!(
        body.contains("anode_link_neighbor_up{link=\"to-b\"} 1"),
        "{body}"
    );
    // The routing protocol's own counters (distance vector by default): the first tables
    // went out as updates, then digests (`update_interval_ms` = 300 in the test config).
    let updates = body
        .lines()
        .find(|l| l.starts_with("anode_routing_protocol_total{counter=\"updates_sent\"}"))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(!updates.ends_with(" 0"), "{updates}");
    let st = n.json(&["stats"]);
    assert_eq!(st["routing"]["protocol_dv"], 1, "{st}");
    assert!(st["routing"]["routes"].as_u64().unwrap() >= 1, "{st}");
    assert!(get(mport, "/nope").starts_with("HTTP/1.1 404"));
    dashboard_names_exist(&names);
    drop(b);
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

/// Every metric docs/grafana/anode.json queries is a family the node serves.
fn dashboard_names_exist(families: &[&str]) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/grafana/anode.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut used = std::collections::BTreeSet::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for (i, _) in expr.match_indices("anode_") {
                let name: String = expr[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let family = ["_total", "_bucket"]
                    .iter()
                    .fold(name.clone(), |n, suffix| {
                        n.strip_suffix(suffix).map_or(n.clone(), str::to_string)
                    });
                used.insert(family);
            }
        }
    }
    assert!(used.len() >= 15, "{used:?}");
    for f in &used {
        assert!(
            families.contains(&f.as_str()),
            "the dashboard queries {f}, which the node does not serve"
        );
    }
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
