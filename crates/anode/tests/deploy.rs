//! Deploying a module along a path of real `anode node` processes (loopback UDP, a line of
//! six nodes a - b - c - d - e - f): `anode module deploy` from a to f installs a 200 KB
//! package on every node, each fetching it from the node before it (windows of chunks);
//! a second deploy refreshes it (`present`); a stranger's key is refused at every hop; a
//! replayed request is refused at every hop; without a refresh the modules are gone within
//! ttl + 1 s everywhere; `anode module undeploy` removes a new deployment along the path;
//! `anode module deployments` shows what is deployed and the counters.

mod node_util;

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anode_ctl::{Client, StreamItem};
use anode_modules::deploy::NewRequest;
use anode_wire::anep::TYPE_DEPLOY;
use anode_wire::deploy::{Message, Op};
use node_util::*;

const T: Duration = Duration::from_secs(20);

fn s(p: &Path) -> String {
    path_str(p)
}

/// `anode ARGS`: (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    run_cli(args, T)
}

fn ok(args: &[&str]) -> String {
    let (good, out, err) = run(args);
    assert!(good, "anode {args:?}: {err}\n{out}");
    out
}

/// The built-in `counter` module with a 200,000-byte custom section appended to its code
/// (valid WebAssembly: a custom section is skipped by the compiler), signed with `secret`.
fn big_package(dir: &TestDir, secret: &str) -> String {
    sized_package(dir, secret, 200_000, "counter-big.amod")
}

/// The counter module padded to `payload` bytes more, signed with `secret`, as DIR/`file`.
fn sized_package(dir: &TestDir, secret: &str, payload: usize, file: &str) -> String {
    let p = anode_modules::builtin::package("counter").unwrap();
    let mut code = p.code.clone();
    let name = b"padding";
    let size = 1 + name.len() + payload;
    code.push(0);
    let mut n = size;
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            code.push(b);
            break;
        }
        code.push(b | 0x80);
    }
    code.push(name.len() as u8);
    code.extend_from_slice(name);
    code.extend((0..payload).map(|i| (i % 251) as u8));
    let mut pkg = anode_modules::Package::new(p.manifest_text.clone(), code).unwrap();
    pkg.sign(&anode_modules::read_key(Path::new(secret)).unwrap());
    let out = dir.path(file);
    pkg.write(&out).unwrap();
    s(&out)
}

/// The JSON lines of a `deploy`/`undeploy --json` run: (per-hop results, summary, success).
fn deploy_json(args: &[&str]) -> (Vec<serde_json::Value>, serde_json::Value, bool) {
    let (good, out, err) = run(args);
    let mut lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{err}")))
        .collect();
    let summary = lines.pop().unwrap_or_else(|| panic!("no output: {err}"));
    (lines, summary, good)
}

fn outcomes(hops: &[serde_json::Value]) -> Vec<String> {
    hops.iter()
        .map(|h| h["outcome"].as_str().unwrap().to_string())
        .collect()
}

fn has_counter(n: &NodeProc) -> bool {
    n.json(&["module", "list"])
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "counter")
}

#[test]
fn a_module_is_deployed_along_a_path_refreshed_refused_expired_and_undeployed() {
    let dir = TestDir::new("deploy");
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let names = ["a", "b", "c", "d", "e", "f"];
    let metrics = addr(ip, free_port(ip));
    let (ops_key, ops_pub) = keygen(&dir, "ops");
    let (stranger_key, _) = keygen(&dir, "stranger");
    let (publisher_key, publisher_pub) = keygen(&dir, "publisher");
    let nodes = start_line(&dir, &names, |i| {
        let mut config = format!(
            "\n[modules]\ntrusted_keys = [\"{publisher_pub}\"]\nstate_dir = \"{}\"\n\n\
             [[deploy.key]]\nkey = \"{ops_pub}\"\nname = \"ops\"\n",
            s(&dir.path(&format!("modules-{}", names[i])))
        );
        if i == 5 {
            config.push_str(&format!("\n[metrics]\nlisten = \"{metrics}\"\n"));
        }
        config
    });
    let (a, f) = (&nodes[0], &nodes[5]);
    assert!(
        wait_until(Duration::from_secs(15), || a.has_route(&f.addr)
            && f.has_route(&a.addr)),
        "no route a <-> f:\n{}",
        a.log_text()
    );
    let pkg = big_package(&dir, &publisher_key);
    let sock = s(&a.socket);
    let deploy = |key: &str, ttl: &str| {
        deploy_json(&[
            "module", "deploy", &pkg, "--to", &f.addr, "--sign", key, "--ttl", ttl, "--socket",
            &sock, "--json",
        ])
    };

    // Every node fetches 200 KB from the node before it, installs and starts the module.
    let (hops, sum, good) = deploy(&ops_key, "3");
    assert!(good, "{hops:?} {sum}");
    assert_eq!(outcomes(&hops), vec!["installed"; 6], "{hops:?}");
    assert_eq!(sum["done"], true);
    eprintln!(
        "deploy, every hop fetching: last result after {} ms",
        sum["last_ms"]
    );
    for n in &nodes {
        assert!(has_counter(n), "{}", n.log_text());
    }
    let listed = f.json(&["module", "list"]);
    assert_eq!(listed[0]["origin"], "deployed", "{listed}");
    let fd = f.json(&["module", "deployments"]);
    assert_eq!(fd["deployed"][0]["name"], "counter", "{fd}");
    assert_eq!(fd["deployed"][0]["by"], "ops", "{fd}");
    assert!(
        fd["counters"]["fetched_bytes"].as_u64().unwrap() >= 200_000,
        "{fd}"
    );
    check_metrics(&metrics);
    let ad = a.json(&["module", "deployments"]);
    assert_eq!(
        ad["counters"]["fetched_bytes"], 0,
        "the origin had it: {ad}"
    );

    // A refresh: present everywhere.
    let (hops, sum, good) = deploy(&ops_key, "3");
    let refreshed = Instant::now();
    assert!(good, "{hops:?}");
    assert_eq!(outcomes(&hops), vec!["present"; 6], "{hops:?}");
    eprintln!(
        "refresh, package cached: last result after {} ms",
        sum["last_ms"]
    );

    // A stranger's key: refused at every hop, with the reason, and counted.
    let (hops, _, good) = deploy(&stranger_key, "3");
    assert!(!good);
    assert_eq!(outcomes(&hops), vec!["refused"; 6], "{hops:?}");
    assert!(
        hops.iter()
            .all(|h| h["reason"].as_str().unwrap().starts_with("unknown_key"))
    );

    // A replayed request: the second copy is refused at every hop.
    replay_is_refused(a, f, &ops_key);

    // Soft state: no refresh, so gone everywhere within ttl + 1 s of the refresh.
    let gone = wait_until(Duration::from_secs(6), || {
        nodes.iter().all(|n| !has_counter(n))
    });
    assert!(
        gone,
        "still installed {:?} after the refresh",
        refreshed.elapsed()
    );
    assert!(refreshed.elapsed() <= Duration::from_secs(4) + Duration::from_millis(500));
    assert_eq!(f.json(&["module", "deployments"])["counters"]["expired"], 1);

    // Deploy again (cached everywhere), then undeploy along the path.
    let (hops, _, good) = deploy(&ops_key, "60");
    assert!(good, "{hops:?}");
    assert_eq!(outcomes(&hops), vec!["installed"; 6], "{hops:?}");
    let (hops, _, good) = deploy_json(&[
        "module", "undeploy", "counter", "--to", &f.addr, "--sign", &ops_key, "--socket", &sock,
        "--json",
    ]);
    assert!(good, "{hops:?}");
    assert_eq!(outcomes(&hops), vec!["removed"; 6], "{hops:?}");
    for n in &nodes {
        assert!(!has_counter(n));
    }
    let text = ok(&["module", "deployments", "--socket", &s(&f.socket)]);
    assert!(text.contains("nothing deployed here"), "{text}");
    assert!(text.contains("refused/unknown_key 1"), "{text}");
}

/// `--repo URL`: every node fetches the package from the repository at once instead of hop
/// by hop from the node before it; with a repository that does not answer, each falls back
/// to the path. Either way every hop installs the module.
#[test]
fn a_deploy_naming_a_repository_fetches_from_it_or_falls_back_to_the_path() {
    let dir = TestDir::new("deploy-repo");
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let names = ["a", "b", "c", "d", "e", "f"];
    let (ops_key, ops_pub) = keygen(&dir, "ops");
    let (publisher_key, publisher_pub) = keygen(&dir, "publisher");
    let nodes = start_line(&dir, &names, |i| {
        format!(
            "\n[modules]\ntrusted_keys = [\"{publisher_pub}\"]\nstate_dir = \"{}\"\n\n\
             [[deploy.key]]\nkey = \"{ops_pub}\"\nname = \"ops\"\n",
            s(&dir.path(&format!("modules-{}", names[i])))
        )
    });
    let (a, f) = (&nodes[0], &nodes[5]);
    assert!(wait_until(Duration::from_secs(15), || a.has_route(&f.addr)
        && f.has_route(&a.addr)));
    let sock = s(&a.socket);
    let counters = |n: &NodeProc| n.json(&["module", "deployments"])["counters"].clone();

    // A repository that does not answer: each node falls back to the node before it.
    let first = sized_package(&dir, &publisher_key, 150_000, "first.amod");
    let (hops, _, good) = deploy_json(&[
        "module",
        "deploy",
        &first,
        "--to",
        &f.addr,
        "--sign",
        &ops_key,
        "--ttl",
        "60",
        "--repo",
        "http://127.0.0.1:1",
        "--socket",
        &sock,
        "--json",
    ]);
    assert!(good, "{hops:?}");
    assert_eq!(outcomes(&hops), vec!["installed"; 6], "{hops:?}");
    let fc = counters(f);
    assert!(fc["repo_failures"].as_u64().unwrap() >= 1, "{fc}");
    assert!(fc["fetched_bytes"].as_u64().unwrap() >= 150_000, "{fc}");

    // A repository serving the next version: every node takes it from there.
    let repo_dir = dir.0.join("repo");
    std::fs::create_dir_all(&repo_dir).unwrap();
    let second = sized_package(&dir, &publisher_key, 200_000, "second.amod");
    std::fs::copy(&second, repo_dir.join("counter-1.0.0.amod")).unwrap();
    let listen = addr(ip, free_port(ip));
    let _repo = Proc::new(
        std::process::Command::new(BIN)
            .args(["repo", "serve", &s(&repo_dir), "--listen", &listen])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(&listen).is_ok()
    }));
    let url = format!("http://{listen}");
    let before: Vec<u64> = nodes
        .iter()
        .map(|n| counters(n)["fetched_bytes"].as_u64().unwrap())
        .collect();
    let (hops, sum, good) = deploy_json(&[
        "module", "deploy", &second, "--to", &f.addr, "--sign", &ops_key, "--ttl", "60", "--repo",
        &url, "--socket", &sock, "--json",
    ]);
    assert!(good, "{hops:?}");
    assert_eq!(
        outcomes(&hops),
        vec!["installed"; 6],
        "an upgrade everywhere: {hops:?}"
    );
    eprintln!(
        "deploy, every hop fetching from the repository: last result after {} ms",
        sum["last_ms"]
    );
    for (n, b) in nodes.iter().zip(before).skip(1) {
        let c = counters(n);
        assert!(c["repo_bytes"].as_u64().unwrap() >= 200_000, "{c}");
        assert_eq!(
            c["fetched_bytes"].as_u64().unwrap(),
            b,
            "not from the path: {c}"
        );
    }
    // A repository URL that is not http is refused before anything is sent.
    let (good, _, err) = run(&[
        "module", "deploy", &second, "--to", &f.addr, "--sign", &ops_key, "--repo", "ftp://x",
        "--socket", &sock,
    ]);
    assert!(!good && err.contains("only http://"), "{err}");
}

/// A node without the deployment service (no `[modules]`) routes requests, results and
/// packages like any packet, and a node that refuses (no `[[deploy.key]]`: `disabled`) passes
/// the request on: the node after both fetches the package from the last node that has it.
#[test]
fn nodes_without_the_service_or_refusing_pass_the_request_on() {
    let dir = TestDir::new("deploy-pass");
    let names = ["a", "b", "c", "d"];
    let (ops_key, ops_pub) = keygen(&dir, "ops");
    let (publisher_key, publisher_pub) = keygen(&dir, "publisher");
    let nodes = start_line(&dir, &names, |i| {
        let mut config = String::new();
        if i != 1 {
            config.push_str(&format!(
                "\n[modules]\ntrusted_keys = [\"{publisher_pub}\"]\nstate_dir = \"{}\"\n",
                s(&dir.path(&format!("modules-{}", names[i])))
            ));
        }
        if i != 1 && i != 2 {
            config.push_str(&format!("\n[[deploy.key]]\nkey = \"{ops_pub}\"\n"));
        }
        config
    });
    let (a, d) = (&nodes[0], &nodes[3]);
    assert!(wait_until(Duration::from_secs(10), || a.has_route(&d.addr)
        && d.has_route(&a.addr)));
    let pkg = s(&dir.path("null.amod"));
    ok(&["module", "pack", "--builtin", "null", "--out", &pkg]);
    ok(&["module", "sign", &pkg, "--key", &publisher_key]);
    let (hops, sum, good) = deploy_json(&[
        "module",
        "deploy",
        &pkg,
        "--to",
        &d.addr,
        "--sign",
        &ops_key,
        "--socket",
        &s(&a.socket),
        "--json",
    ]);
    assert!(!good, "c refused: {hops:?} {sum}");
    let mut at: Vec<(u64, &str, &str)> = hops
        .iter()
        .map(|h| {
            (
                h["hop"].as_u64().unwrap(),
                h["node"].as_str().unwrap(),
                h["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    at.sort();
    assert_eq!(
        at,
        vec![
            (0, a.addr.as_str(), "installed"),
            (1, nodes[2].addr.as_str(), "refused"),
            (2, d.addr.as_str(), "installed"),
        ],
        "{hops:?}"
    );
    let at_c = hops.iter().find(|h| h["hop"] == 1).unwrap();
    assert!(at_c["reason"].as_str().unwrap().starts_with("disabled"));
    assert!(has_counter_named(d, "null"));
    let (good, _, err) = run(&["module", "deployments", "--socket", &s(&nodes[1].socket)]);
    assert!(!good && err.contains("no deployment service"), "{err}");
}

fn has_counter_named(n: &NodeProc, name: &str) -> bool {
    n.json(&["module", "list"])
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == name)
}

/// The deployment families on the target's /metrics, as the reference parser reads them.
fn check_metrics(metrics: &str) {
    let m = anode_testkit::http::get(metrics, "/metrics");
    let body = m.split_once("\r\n\r\n").unwrap().1;
    let families = anode_testkit::http::openmetrics_families(body);
    for f in [
        "anode_deploy_results counter",
        "anode_deploy_refused counter",
        "anode_deploy_package_bytes counter",
        "anode_deploy_expired counter",
        "anode_deployed_modules gauge",
    ] {
        assert!(families.contains(f), "{f}:\n{families}");
    }
    for line in [
        r#"anode_deploy_results_total{outcome="installed"} 1"#,
        "anode_deployed_modules 1",
    ] {
        assert!(m.contains(line), "{line}:\n{m}");
    }
}

/// Injects one signed undeploy request at `a` twice: every node answers the first (absent)
/// and refuses the second (replayed).
fn replay_is_refused(a: &NodeProc, f: &NodeProc, ops_key: &str) {
    let key = anode_modules::read_key(Path::new(ops_key)).unwrap();
    let mut c = Client::connect(&a.socket, "deploy-test").unwrap();
    c.bind_app(TYPE_DEPLOY, 40_123).unwrap();
    let (req, pkt) = NewRequest {
        op: Op::Undeploy,
        origin: a.addr.parse().unwrap(),
        target: f.addr.parse().unwrap(),
        package: None,
        name: "nothing-here".into(),
        ttl_s: 0,
        reply_port: 40_123,
        unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64,
        valid: Duration::from_secs(30),
        nonce: [0x5a; 16],
        rb: 32,
        repo: String::new(),
    }
    .build(&key)
    .unwrap();
    c.inject(pkt.clone(), false).unwrap();
    c.inject(pkt, false).unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < 12 && Instant::now() < deadline {
        if let Ok(StreamItem::Delivery(d)) = c.next_item(Some(deadline))
            && let Ok(Message::Result(r)) = Message::parse(d.payload.as_bytes())
        {
            assert_eq!(r.nonce, req.nonce);
            seen.push((r.hop, r.outcome.name(), r.reason));
        }
    }
    seen.sort();
    assert_eq!(seen.len(), 12, "{seen:?}");
    for hop in 0..6u8 {
        let at: Vec<_> = seen.iter().filter(|s| s.0 == hop).collect();
        assert_eq!(at[0].1, "absent", "{seen:?}");
        assert_eq!(at[1].1, "refused", "{seen:?}");
        assert!(at[1].2.starts_with("replayed"), "{seen:?}");
    }
    drop(c);
}
