//! `[capsule] workers` in real `anode node`s: a line of three nodes, each running capsules
//! with two threads. Capsules of code that works a while per capsule (so each node holds them
//! per receive batch and runs them in batches), sent with `anode capsule send`, all run at
//! every node and end at the destination; its metrics count the batches. Light code (the
//! active ping) runs at once, as with one thread, and its replies come back.

mod node_util;

use std::time::Duration;

use node_util::*;

/// 5,000 loop iterations per capsule, then forward; at the destination, the capsule ends.
fn heavy() -> Vec<u8> {
    wat::parse_str(anode_testkit::fixtures::busy_forward_wat()).unwrap()
}

fn counter(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{body}"))
}

#[test]
fn heavy_capsules_cross_nodes_running_capsules_with_two_workers() {
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
    let p = a.json(&["ping", &c.addr, "-c", "5", "-i", "0.02"]);
    assert_eq!(p["received"], 5, "{p}\n{}", nodes[1].log_text());

    let wasm = dir.path("heavy.wasm");
    std::fs::write(&wasm, heavy()).unwrap();
    let sock = path_str(&a.socket);
    let wasm = path_str(&wasm);
    let args = "capsule send DEST --code WASM --hex 00 -c 40 --rate 400 --wait 0 --socket SOCK";
    let args: Vec<&str> = args
        .split(' ')
        .map(|w| match w {
            "DEST" => c.addr.as_str(),
            "WASM" => wasm.as_str(),
            "SOCK" => sock.as_str(),
            w => w,
        })
        .collect();
    let out = anode().run(&args, Duration::from_secs(30));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("40 sent, 0 dropped"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every capsule ran at b and at c (one packet each in the protocol's domain), none
    // dropped.
    let hash: String = anode_capsule::code_hash(&heavy())
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    for n in &nodes[1..] {
        let ran = wait_until(Duration::from_secs(5), || {
            let st = n.json(&["stats"]);
            st["domains"].to_string().contains(&hash)
                && st["domains"][1]["domains"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d["principal"] == format!("capsule/{hash}") && d["packets"] == 40)
        });
        let st = n.json(&["stats"]);
        assert!(ran, "{st}");
        assert_eq!(st["counters"]["drops"], serde_json::json!({}), "{st}");
    }
    let port: u16 = metrics.rsplit(':').next().unwrap().parse().unwrap();
    let body = anode_testkit::http::get(("127.0.0.1", port), "/metrics");
    // The first capsule ran at once (its code's weight not known yet), the rest in batches.
    let batches = counter(&body, "anode_capsule_batches_total");
    assert!(batches >= 10.0, "{batches} batches\n{body}");
}
