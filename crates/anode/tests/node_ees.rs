//! Three `anode node` processes in a line a–b–c running the capsule and PLAN EEs: `anode
//! ping` (the first capsule demand-loads the code hop by hop), `anode traceroute`, `anode
//! flood --count 200`, `anode code list|show|evict`, and `anode plan inject` of ping/noeval
//! and ping/eval. Every wait is bounded (the node_util helpers kill commands after a limit).

mod node_util;

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use node_util::*;

fn plan(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plan/programs/ping")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn capsule_tools_and_plan_inject_across_three_nodes() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let dir = TestDir::new("ees");
    let (aa, ba, ca) = (
        addr(ip, free_port(ip)),
        addr(ip, free_port(ip)),
        addr(ip, free_port(ip)),
    );
    let cfg = |me: &str, peers: &[(&str, &str)], name: &str| {
        let mut s = node_config(me, peers, &dir.0.join(format!("{name}.sock")));
        s.push_str(&format!(
            "\n[capsule]\ncache_dir = \"{}\"\n",
            dir.0.join(format!("code-{name}")).display()
        ));
        s
    };
    let a = anode().start_node(&dir, "a", &aa, &cfg(&aa, &[("to-b", &ba)], "a"));
    let b = anode().start_node(
        &dir,
        "b",
        &ba,
        &cfg(&ba, &[("to-a", &aa), ("to-c", &ca)], "b"),
    );
    let c = anode().start_node(&dir, "c", &ca, &cfg(&ca, &[("to-b", &ba)], "c"));
    let ok = wait_until(Duration::from_secs(15), || {
        a.has_route(&ca) && c.has_route(&aa)
    });
    assert!(ok, "no routes\na:\n{}\nc:\n{}", a.log_text(), c.log_text());

    // Fresh caches: only a gets the ping code (from the tool); b and c load it on demand.
    assert_eq!(c.json(&["code", "list"]).as_array().unwrap().len(), 0);
    let p = a.json(&["ping", &ca, "-c", "4", "-i", "0.05"]);
    assert_eq!(p["sent"], 4);
    assert_eq!(p["received"], 4, "{p}");
    assert_eq!(p["code_was_cached"], false, "{p}");
    let rtts: Vec<f64> = p["rtt_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let cached = rtts[1..].iter().sum::<f64>() / 3.0;
    assert!(
        rtts[0] > cached,
        "the first ping loads code hop by hop: first {} ms, cached {cached} ms",
        rtts[0]
    );
    assert!(p["min_ms"].as_f64().unwrap() <= p["avg_ms"].as_f64().unwrap());
    assert!(p["mdev_ms"].as_f64().is_some(), "{p}");
    // A second run finds the code cached at the source.
    let p2 = a.json(&["ping", &ca, "-c", "1"]);
    assert_eq!(p2["code_was_cached"], true, "{p2}");
    let stats = b.json(&["stats"]);
    assert!(stats["counters"]["to_ee"].as_u64().unwrap() >= 8, "{stats}");
    let at_c = c.json(&["code", "list"]);
    let list = at_c.as_array().unwrap();
    assert_eq!(list.len(), 1, "c demand-loaded the ping code: {at_c}");
    let hash = list[0]["hash"].as_str().unwrap().to_string();
    assert!(list[0]["on_disk"].as_bool().unwrap());
    assert_eq!(b.json(&["code", "show", &hash])["hash"], hash.as_str());

    // Hop-limited probes, as IP traceroute: b answers hop 1, c (the destination) hop 2.
    let t = a.json(&["traceroute", &ca, "-q", "2"]);
    assert_eq!(t["reached"], true, "{t}");
    let hops: Vec<&str> = t["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["addr"].as_str().unwrap())
        .collect();
    assert_eq!(hops, [ba.as_str(), ca.as_str()], "{t}");
    assert_eq!(t["hops"][0]["rtt_ms"].as_array().unwrap().len(), 2, "{t}");
    // One route-recording capsule: every node it passed, the source first.
    let r = a.json(&["traceroute", &ca, "--record"]);
    let hops: Vec<&str> = r["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert_eq!(hops, [aa.as_str(), ba.as_str(), ca.as_str()]);

    let f = a.json(&[
        "flood",
        &ca,
        "--size",
        "1024",
        "--count",
        "300",
        "--status-ms",
        "100",
        "--rate",
        "1000",
    ]);
    // 300 KB at 1 MB/s: more than one burst (200 KB) of the NodeOS's default 2 MB/s share
    // per protocol, within its rate at every hop.
    assert_eq!(f["sent"], 302, "{f}");
    assert_eq!(
        f["delivered"], 302,
        "loopback loses nothing at this rate: {f}"
    );
    assert!(f["rate_pps"].as_f64().unwrap() > 0.0);

    let ev = c.json(&["code", "evict", &hash]);
    assert_eq!(ev["removed"], true);
    let ev = c.json(&["code", "evict", &hash]);
    assert_eq!(ev["removed"], false);

    let entry = format!("ping({aa}, {ca})");
    for prog in ["noeval.plan", "eval.plan"] {
        let r = a.json(&[
            "plan",
            "inject",
            &plan(prog),
            "--entry",
            &entry,
            "--rb",
            "16",
            "--expect",
            "1",
            "--timeout",
            "5",
        ]);
        assert_eq!(r["prints"], serde_json::json!(["Success"]), "{prog}: {r}");
        assert_eq!(r["errors"], serde_json::json!([]), "{prog}: {r}");
    }
    // A program that does not type-check never reaches the node.
    let bad = dir.file("bad.plan", "fun f(x : int) : int = x ^ \"s\"\n");
    let out = anode().run(
        &[
            "plan",
            "inject",
            &bad.to_string_lossy(),
            "--entry",
            "f(1)",
            "--socket",
            &a.socket.to_string_lossy(),
        ],
        Duration::from_secs(10),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.plan"));
}
