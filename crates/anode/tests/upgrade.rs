//! `anode upgrade` on real `anode node` processes, a line a - b - c on loopback UDP: the
//! middle node's process is replaced twice while a capsule flood crosses it, and the
//! receiver's once while it counts the flood in its soft state; not one capsule is lost,
//! the count carries on, and whoever holds the first pid can still stop the node. A new
//! binary that does not start leaves the node running in its old process.

mod node_util;

use std::time::Duration;

use node_util::*;

const T: Duration = Duration::from_secs(30);

/// `anode flood` from `a` to `c` in a thread: `count` capsules at `rate` a second.
fn flood(
    a: &NodeProc,
    c: &NodeProc,
    count: u32,
    rate: u32,
) -> std::thread::JoinHandle<serde_json::Value> {
    let sock = path_str(&a.socket);
    let dst = c.addr.clone();
    std::thread::spawn(move || {
        let (count, rate) = (count.to_string(), rate.to_string());
        let args = [
            "flood",
            &dst,
            "--count",
            &count,
            "--rate",
            &rate,
            "--size",
            "64",
            "--status-ms",
            "200",
            "--json",
            "--socket",
            &sock,
        ];
        let (good, out, err) = run_cli(&args, Duration::from_secs(60));
        assert!(good, "anode flood: {err}\n{out}");
        let last = out.lines().last().expect("a summary");
        serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {last}"))
    })
}

fn upgrade(n: &NodeProc) -> serde_json::Value {
    let u = n.json(&["upgrade"]);
    assert!(u["refused"].as_array().unwrap().is_empty(), "{u}");
    assert_ne!(u["old_pid"], u["new_pid"], "{u}");
    u
}

fn pid_alive(pid: u64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn upgrading_nodes_under_a_capsule_flood_loses_no_capsule() {
    let dir = TestDir::new("upgrade");
    let nodes = start_line(&dir, &["a", "b", "c"], |_| String::new());
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    assert!(wait_until(T, || a.has_route(&c.addr) && c.has_route(&a.addr)));

    // 3,000 capsules at 1,000 a second; b is replaced after 0.8 s and again after 1.6 s,
    // c (which counts the flow in its soft state) after 2.2 s.
    let f = flood(a, c, 3000, 1000);
    std::thread::sleep(Duration::from_millis(800));
    // (On a loaded machine b may still be building the code it fetched: wait for it, so
    // the first upgrade carries the code over.)
    let built = |n: &NodeProc| {
        n.json(&["code", "list"])
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["in_memory"] == true)
    };
    assert!(wait_until(T, || built(b)), "{}", b.log_text());
    let u1 = upgrade(b);
    assert_eq!(u1["old_pid"].as_u64(), Some(u64::from(b.proc.id())));
    assert!(u1["neighbors"].as_u64().unwrap() == 2, "{u1}");
    assert!(u1["routes"].as_u64().unwrap() >= 2, "{u1}");
    assert!(
        u1["code_objects"].as_u64().unwrap() >= 1,
        "the flood code: {u1}"
    );
    std::thread::sleep(Duration::from_millis(800));
    let u2 = upgrade(b);
    assert_eq!(
        u2["old_pid"], u1["new_pid"],
        "the successor is upgraded in turn"
    );
    std::thread::sleep(Duration::from_millis(600));
    let u3 = upgrade(c);
    let s = f.join().expect("flood");
    // 3,000 data capsules and the flow's start and end.
    assert_eq!(s["sent"].as_u64(), Some(3002), "{s}");
    assert_eq!(
        s["delivered"].as_u64(),
        Some(3002),
        "every capsule arrived and the receiver's count carried on: {s}\nb: {u1}\n{u2}\nc: {u3}\nlog b:\n{}",
        b.log_text()
    );

    // The new processes serve the nodes; the old ones wait for them.
    assert!(a.has_route(&c.addr) && c.has_route(&a.addr));
    let (p0, p1, p2) = (
        u1["old_pid"].as_u64().unwrap(),
        u1["new_pid"].as_u64().unwrap(),
        u2["new_pid"].as_u64().unwrap(),
    );
    assert!(pid_alive(p0) && pid_alive(p1) && pid_alive(p2));
    // `anode stop` at b stops the newest process, and the chain of waiting ones with it.
    let stopped = b.json(&["stop"]);
    assert!(stopped["stopping"].is_string(), "{stopped}");
    assert!(wait_until(T, || !pid_alive(p2) && !pid_alive(p1)));
    assert!(
        !b.socket.exists(),
        "the last process removed the socket file"
    );
    let log = b.log_text();
    assert!(log.contains("handed over to pid"), "{log}");
    assert!(log.contains("took the node over"), "{log}");
}

#[test]
fn a_failed_upgrade_leaves_the_node_running_and_a_signal_stops_a_chain() {
    let dir = TestDir::new("upgrade-fail");
    let (a, b) = anode().start_pair(&dir);
    let sock = path_str(&b.socket);
    let (good, out, err) = run_cli(&["upgrade", "--binary", "/bin/false", "--socket", &sock], T);
    assert!(!good, "{out}");
    assert!(
        err.contains("failed while starting") && err.contains("goes on"),
        "{err}"
    );
    let (good, out, err) = run_cli(
        &["upgrade", "--binary", "/nonexistent", "--socket", &sock],
        T,
    );
    assert!(!good && err.contains("/nonexistent"), "{out}{err}");
    // Still the same process, still forwarding.
    assert_eq!(b.json(&["status"])["address"], b.addr.as_str());
    assert!(a.has_route(&b.addr));
    let u = upgrade(&b);
    let new = u["new_pid"].as_u64().unwrap();
    assert!(pid_alive(new));
    // SIGTERM to the pid its starter holds stops the node in its new process too.
    b.proc.signal(libc::SIGTERM);
    assert!(wait_until(T, || !pid_alive(new)), "{}", b.log_text());
    assert!(!b.socket.exists());
}

/// Modules survive an upgrade as they were: an installed module's guest state (the packet
/// counter's count) and a module deployed along a path, with the lifetime it had left.
#[test]
fn modules_keep_their_state_and_deployed_modules_stay_across_an_upgrade() {
    let dir = TestDir::new("upgrade-modules");
    let (publisher_key, publisher_pub) = keygen(&dir, "publisher");
    let (ops_key, ops_pub) = keygen(&dir, "ops");
    let nodes = start_line(&dir, &["a", "b"], |i| {
        format!(
            "\n[modules]\ntrusted_keys = [\"{publisher_pub}\"]\nstate_dir = \"{}\"\n\n\
             [[deploy.key]]\nkey = \"{ops_pub}\"\nname = \"ops\"\n",
            path_str(&dir.path(&format!("modules-{i}")))
        )
    });
    let (a, b) = (&nodes[0], &nodes[1]);
    assert!(wait_until(T, || a.has_route(&b.addr)));
    let pack = |name: &str| {
        let out = path_str(&dir.path(&format!("{name}.amod")));
        let (good, _, err) = run_cli(&["module", "pack", "--builtin", name, "--out", &out], T);
        assert!(good, "{err}");
        let (good, _, err) = run_cli(&["module", "sign", &out, "--key", &publisher_key], T);
        assert!(good, "{err}");
        out
    };
    let (counter, null) = (pack("counter"), pack("null"));
    b.json(&["module", "install", &counter]);
    let sock = path_str(&a.socket);
    for _ in 0..7 {
        let (good, _, err) = run_cli(&["send", &b.addr, "--port", "9", "x", "--socket", &sock], T);
        assert!(good, "{err}");
    }
    let count = |n: &NodeProc| {
        n.json(&["module", "call", "counter", "0"])["result"]
            .as_i64()
            .unwrap()
    };
    assert!(wait_until(T, || count(b) >= 7));
    let (good, out, err) = run_cli(
        &[
            "module", "deploy", &null, "--to", &b.addr, "--sign", &ops_key, "--ttl", "600",
            "--socket", &sock,
        ],
        T,
    );
    assert!(good, "{out}{err}");
    assert_eq!(
        b.json(&["module", "deployments"])["deployed"][0]["name"],
        "null"
    );
    // (The deploy request passed the counter too.)
    let before = count(b);
    assert!(before >= 7);

    let u = upgrade(b);
    assert!(u["refused"].as_array().unwrap().is_empty(), "{u}");
    assert_eq!(count(b), before, "the counter's count carried over: {u}");
    let d = b.json(&["module", "deployments"]);
    assert_eq!(d["deployed"][0]["name"], "null", "{d}");
    let left = d["deployed"][0]["expires_in_ms"].as_u64().unwrap_or(0);
    assert!(
        left > 590_000 && left <= 600_000,
        "the lifetime it had left: {d}"
    );
    let list = b.json(&["module", "list"]);
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"counter") && names.contains(&"null"),
        "{list}"
    );
    // And the counter goes on counting in the new process.
    let (good, _, _) = run_cli(&["send", &b.addr, "--port", "9", "x", "--socket", &sock], T);
    assert!(good);
    assert!(wait_until(T, || count(b) == before + 1));
}
