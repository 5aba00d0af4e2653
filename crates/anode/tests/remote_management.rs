//! Remote management on a real `anode node` (loopback TCP): a node with `[remote] listen`
//! and two trusted keys answers `anode --node HOST:PORT --key FILE ...` (status, modules
//! installed from packages on the client's side, the module list, a service lookup),
//! refuses what a key may not do (shutdown; a system module without the `system` class),
//! refuses another key, an unsigned line, a replayed, an expired and
//! a wrongly addressed request, each with its reason, counts them by reason in `anode
//! stats` and /metrics, and logs every remote action. A node without `[remote]` has no
//! TCP listener at all.

mod node_util;

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anode_ctl::remote::seal;
use node_util::*;

const T: Duration = Duration::from_secs(10);

fn s(p: &Path) -> String {
    path_str(p)
}

/// `anode ARGS`: (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    run_cli(args, T)
}

fn ok(args: &[&str]) -> String {
    let (good, out, err) = run(args);
    assert!(good, "anode {args:?}: {err}");
    out
}

/// The built-in module `name`, packed and signed with `secret`.
fn package(dir: &TestDir, name: &str, secret: &str) -> String {
    let out = s(&dir.path(&format!("{name}.amod")));
    ok(&["module", "pack", "--builtin", name, "--out", &out]);
    ok(&["module", "sign", &out, "--key", secret]);
    out
}

/// Sends one raw line over TCP to `to` and returns the node's one-line answer as JSON.
fn exchange(to: SocketAddr, lines: &[String]) -> Vec<serde_json::Value> {
    let mut c = TcpStream::connect_timeout(&to, T).unwrap();
    c.set_read_timeout(Some(T)).unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    lines
        .iter()
        .map(|l| {
            c.write_all(format!("{l}\n").as_bytes()).unwrap();
            let mut answer = String::new();
            r.read_line(&mut answer).unwrap();
            serde_json::from_str(&answer).unwrap()
        })
        .collect()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn a_trusted_key_manages_the_node_and_everything_else_is_refused_with_its_reason() {
    let dir = TestDir::new("remote");
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let me = addr(ip, free_port(ip));
    let remote: SocketAddr = addr(ip, free_port(ip)).parse().unwrap();
    let metrics = addr(ip, free_port(ip));
    let (ops_key, ops_pub) = keygen(&dir, "ops");
    let (intruder_key, _) = keygen(&dir, "intruder");
    let (publisher_key, publisher_pub) = keygen(&dir, "publisher");
    let (admin_key, admin_pub) = keygen(&dir, "admin");
    let config = format!(
        "{}\n[modules]\ntrusted_keys = [\"{publisher_pub}\"]\nstate_dir = \"{}\"\n\n\
         [remote]\nlisten = \"{remote}\"\n\n[[remote.key]]\nkey = \"{ops_pub}\"\nname = \"ops\"\n\
         may = [\"read\", \"manage\"]\n\n[[remote.key]]\nkey = \"{admin_pub}\"\nname = \"admin\"\n\
         may = [\"read\", \"manage\", \"system\"]\n\n[metrics]\nlisten = \"{metrics}\"\n",
        node_config(&me, &[], &dir.path("n.sock")),
        s(&dir.path("modules"))
    );
    let node = anode().start_node(&dir, "n", &me, &config);
    let to = remote.to_string();

    // `anode --node HOST:PORT --key FILE COMMAND`, and the flags after the command.
    let st: serde_json::Value =
        serde_json::from_str(&ok(&["--node", &to, "--key", &ops_key, "status", "--json"])).unwrap();
    assert_eq!(st["address"], me.as_str(), "{st}");
    let pkg = package(&dir, "null", &publisher_key);
    ok(&["module", "install", &pkg, "--node", &to, "--key", &ops_key]);

    // The service hierarchy: a system module (a queue discipline) needs the `system` class.
    let fcfs = package(&dir, "fcfs", &publisher_key);
    let (good, _, err) = run(&["module", "install", &fcfs, "--node", &to, "--key", &ops_key]);
    assert!(
        !good && err.contains("may not 'module_install fcfs (a system module)'"),
        "{err}"
    );
    ok(&[
        "module", "install", &fcfs, "--node", &to, "--key", &admin_key,
    ]);
    let counter = package(&dir, "flowcount", &publisher_key);
    ok(&[
        "module", "install", &counter, "--node", &to, "--key", &ops_key,
    ]);
    let found: serde_json::Value = serde_json::from_str(&ok(&[
        "module",
        "services",
        "--interface",
        "flow-counter",
        "--range",
        "^1.0",
        "--json",
        "--node",
        &to,
        "--key",
        &ops_key,
    ]))
    .unwrap();
    assert_eq!(found[0]["provider"], "flowcount", "{found}");
    assert_eq!(found[0]["category"], "function", "{found}");
    let list: serde_json::Value = serde_json::from_str(&ok(&[
        "module", "list", "--json", "--node", &to, "--key", &ops_key,
    ]))
    .unwrap();
    assert!(
        list.as_array().unwrap().iter().any(|m| m["name"] == "null"),
        "{list}"
    );

    // What the key may not do, and a key the node does not trust.
    let (good, _, err) = run(&["--node", &to, "--key", &ops_key, "stop"]);
    assert!(!good && err.contains("may not 'shutdown'"), "{err}");
    let (good, _, err) = run(&["--node", &to, "--key", &intruder_key, "status"]);
    assert!(!good && err.contains("is not trusted"), "{err}");
    let (good, _, err) = run(&["--node", &to, "status"]);
    assert!(!good && err.contains("--key"), "{err}");

    // Raw lines: unsigned, replayed, expired, signed for another address.
    let key = anode_modules::read_key(Path::new(&ops_key)).unwrap();
    let hello = r#"{"id":1,"op":"hello","protocol":1,"client":"raw"}"#;
    let fresh = seal(&key, remote, hello, [1; 16], unix_now() + 30);
    let answers = exchange(
        remote,
        &[
            hello.to_string(),
            fresh.clone(),
            fresh,
            seal(&key, remote, hello, [2; 16], unix_now() - 5),
            seal(
                &key,
                "127.0.0.2:9".parse().unwrap(),
                hello,
                [3; 16],
                unix_now() + 30,
            ),
        ],
    );
    let msg = |i: usize| {
        answers[i]["error"]["message"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(msg(0).contains("not a signed request"), "{}", answers[0]);
    assert_eq!(answers[1]["result"]["kind"], "hello", "{}", answers[1]);
    assert!(msg(2).contains("replay refused"), "{}", answers[2]);
    assert_eq!(answers[2]["error"]["code"], "unauthorized");
    assert_eq!(answers[2]["id"], 1, "the refusal answers the request's id");
    assert!(msg(3).contains("expired"), "{}", answers[3]);
    assert!(msg(4).contains("is for 127.0.0.2:9"), "{}", answers[4]);

    // The node is still up (the stop was refused), counted every request, logged them.
    let stats = node.json(&["stats"]);
    let r = &stats["control"]["remote"];
    // status, module install and module list: a hello and a request each; stop's hello;
    // the raw hello.
    assert!(r["accepted"].as_u64().unwrap() >= 8, "{r}");
    for (reason, n) in [
        ("not_permitted", 2),
        ("unknown_key", 1),
        ("malformed", 1),
        ("replayed", 1),
        ("expired", 1),
        ("wrong_node", 1),
        ("bad_signature", 0),
    ] {
        assert_eq!(r["refused"][reason], n, "{reason}: {r}");
    }
    let m = anode_testkit::http::get(metrics.as_str(), "/metrics");
    assert!(
        m.contains(r#"anode_remote_requests_total{result="replayed"} 1"#),
        "{m}"
    );
    let log = node.log_text();
    assert!(
        log.contains("remote control request") && log.contains("module_install"),
        "{log}"
    );
    // Refusals are logged at most a line a second, each line saying how many it stands for.
    assert!(log.contains("remote control request refused"), "{log}");
    let list = node.json(&["module", "list"]);
    let cats: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["category"].as_str().unwrap())
        .collect();
    assert_eq!(cats, ["user", "system", "function"], "{list}");
}

#[test]
fn a_node_without_remote_has_no_listener_and_the_config_is_checked() {
    let dir = TestDir::new("remote-off");
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let me = addr(ip, free_port(ip));
    let port = free_port(ip);
    let (_, some_pub) = keygen(&dir, "k");
    let cfg = dir.file("n.toml", &node_config(&me, &[], &dir.path("n.sock")));
    let out = ok(&["node", "--config", &s(&cfg), "--check", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["remote"].is_null(), "{v}");
    let _node = anode().start_node(&dir, "n", &me, &std::fs::read_to_string(&cfg).unwrap());
    assert!(TcpStream::connect(addr(ip, port)).is_err());

    for (extra, says) in [
        (
            format!("[remote]\nlisten = \"127.0.0.1:{port}\"\n"),
            "no [[remote.key]] may act",
        ),
        (
            "[[remote.key]]\nkey = \"00\"\nmay = [\"read\"]\n".to_string(),
            "remote management is off",
        ),
        (
            format!(
                "[remote]\nlisten = \"127.0.0.1:{port}\"\n[[remote.key]]\nkey = \"{some_pub}\"\nmay = [\"root\"]\n"
            ),
            "not a class",
        ),
    ] {
        let text = format!("{}\n{extra}", node_config(&me, &[], &dir.path("m.sock")));
        let bad = dir.file("bad.toml", &text);
        let (good, _, err) = run(&["node", "--config", &s(&bad), "--check"]);
        assert!(!good && err.contains(says), "{extra}: {err}");
        assert!(err.contains("bad.toml:"), "file:line in {err}");
    }
}
