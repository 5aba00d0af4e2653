//! `anode node` runs its EEs under the NodeOS: two node processes a–b on loopback, b with a
//! `[nodeos]` policy file and a metrics endpoint. After `anode ping` capsules from a, b's
//! `anode domains --json` lists the ping protocol's domain (`capsule/<code hash>`) under the
//! capsule EE's domain with the policy file's limits and nonzero packet and CPU counters, and
//! the Prometheus endpoint serves the same domain; both EEs' domains hang under one root (one
//! NodeOS for the node, ids unique). `--check` shows the settings; a bad policy
//! file stops the node with the policy file's line named. Every wait is bounded.

mod node_util;

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::Duration;

use node_util::*;

const POLICY: &str = r#"# b's principals
[capsule]
memory_bytes = 33554432
soft_state_bytes = 8388608
code_bytes = 16777216
max_children = 64
max_channels = 64
cpu_share = 64
channels = ["*"]

["capsule/*"]
memory_bytes = 3145728
code_bytes = 2097152
cpu_share = 2
"#;

fn get_metrics(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp
}

#[test]
fn live_node_shows_protocol_domains_with_counters() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let dir = TestDir::new("nodeos");
    let (aa, ba) = (addr(ip, free_port(ip)), addr(ip, free_port(ip)));
    let mport = free_port(ip);
    dir.file("b-policy.toml", POLICY);
    let code = |n: &str| {
        format!(
            "\n[capsule]\ncache_dir = \"{}\"\n",
            dir.0.join(format!("code-{n}")).display()
        )
    };
    let acfg = node_config(&aa, &[("to-b", &ba)], &dir.0.join("a.sock")) + &code("a");
    let bcfg = node_config(&ba, &[("to-a", &aa)], &dir.0.join("b.sock"))
        + &code("b")
        + &format!(
            "\n[nodeos]\npolicy = \"b-policy.toml\"\nmemory_bytes = 67108864\n\n[metrics]\nlisten = \"127.0.0.1:{mport}\"\n"
        );

    // --check prints what the node would run.
    let bpath = dir.file("b.toml", &bcfg);
    let out = anode().run(
        &["node", "--config", bpath.to_str().unwrap(), "--check"],
        Duration::from_secs(10),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("memory bound 67108864 B") && text.contains("b-policy.toml"),
        "{text}"
    );

    let a = anode().start_node(&dir, "a", &aa, &acfg);
    let b = anode().start_node(&dir, "b", &ba, &bcfg);
    let ok = wait_until(Duration::from_secs(15), || a.has_route(&ba));
    assert!(ok, "no route\na:\n{}", a.log_text());
    let p = a.json(&["ping", &ba, "-c", "5", "-i", "0.02"]);
    assert_eq!(p["received"], 5, "{p}");

    let ees = b.json(&["domains"]);
    let ees = ees.as_array().unwrap();
    let names: Vec<&str> = ees.iter().map(|e| e["ee"].as_str().unwrap()).collect();
    assert_eq!(names, ["plan+nodeos", "capsule+nodeos"], "{ees:?}");
    // One NodeOS for the node: one domain tree, each EE's domain a child of the node's
    // root (0), domain ids unique across the EEs.
    for (e, own) in ees.iter().zip(["plan", "capsule"]) {
        let d = e["domains"].as_array().unwrap();
        let own = d.iter().find(|d| d["principal"] == own).unwrap();
        assert_eq!(own["parent"], 0, "{e}");
    }
    let mut ids: Vec<u64> = ees
        .iter()
        .flat_map(|e| e["domains"].as_array().unwrap())
        .map(|d| d["id"].as_u64().unwrap())
        .collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "{ees:?}");
    let cap = &ees[1];
    // The capsule EE's own domain got its policy-file share; its NodeOS bound is that share.
    assert_eq!(cap["memory_limit"], 33554432, "{cap}");
    let doms = cap["domains"].as_array().unwrap();
    let ee_dom = doms.iter().find(|d| d["principal"] == "capsule").unwrap();
    let proto = doms
        .iter()
        .find(|d| d["principal"].as_str().unwrap().starts_with("capsule/"))
        .unwrap_or_else(|| panic!("no protocol domain: {cap}"));
    assert_eq!(proto["parent"], ee_dom["id"], "{cap}");
    assert_eq!(proto["memory_limit"], 3145728, "capsule/* policy: {proto}");
    assert!(proto["packets"].as_u64().unwrap() >= 5, "{proto}");
    assert!(proto["bytes"].as_u64().unwrap() > 0, "{proto}");
    assert!(proto["cpu_ns"].as_u64().unwrap() > 0, "{proto}");
    // The protocol's code is charged to it.
    assert!(proto["memory_bytes"].as_u64().unwrap() > 0, "{proto}");

    let principal = proto["principal"].as_str().unwrap();
    let resp = get_metrics(mport);
    assert!(resp.starts_with("HTTP/1.1 200 OK"), "{resp}");
    let line = resp
        .lines()
        .find(|l| {
            l.starts_with("anode_domain_packets_total")
                && l.contains(&format!("principal=\"{principal}\""))
        })
        .unwrap_or_else(|| panic!("no packets line for {principal}:\n{resp}"));
    let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= 5, "{line}");

    // `anode stats` carries the same domains.
    let st = b.json(&["stats"]);
    assert_eq!(st["domains"].as_array().unwrap().len(), 2, "{st}");
}

#[test]
fn bad_policy_file_stops_the_node_naming_its_line() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let dir = TestDir::new("nodeos-bad");
    let me = addr(ip, free_port(ip));
    dir.file(
        "p.toml",
        "[capsule]\nmax_children = 4\n\n[\"capsule/*\"]\nmemory = 5\n",
    );
    let cfg = node_config(&me, &[], &dir.0.join("x.sock")) + "\n[nodeos]\npolicy = \"p.toml\"\n";
    let path = dir.file("x.toml", &cfg);
    let out = anode().run(
        &["node", "--config", path.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("x.toml:"), "{err}");
    assert!(err.contains("p.toml:5:1"), "{err}");
    assert!(err.contains("unknown field `memory`"), "{err}");
}

#[test]
fn keygen_policy_sign_verify_and_a_node_takes_the_signed_policy() {
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let dir = TestDir::new("nodeos-signed");
    let base = dir.0.join("op");
    let ok = |args: &[&str]| {
        let out = anode().run(args, Duration::from_secs(10));
        assert!(
            out.status.success(),
            "anode {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    ok(&["keygen", "--out", base.to_str().unwrap()]);
    let pubhex = std::fs::read_to_string(dir.0.join("op.pub")).unwrap();
    let pubhex = pubhex.trim();
    let limits = dir.file("limits.toml", "memory_bytes = 2097152\ncpu_share = 4\n");
    let signed = dir.0.join("proto.signed");
    ok(&[
        "policy",
        "sign",
        limits.to_str().unwrap(),
        "--principal",
        "capsule/*",
        "--key",
        dir.0.join("op.key").to_str().unwrap(),
        "--out",
        signed.to_str().unwrap(),
    ]);
    let v = ok(&[
        "policy",
        "verify",
        signed.to_str().unwrap(),
        "--trust",
        pubhex,
    ]);
    assert!(v.contains("ok, policy of \"capsule/*\""), "{v}");

    // A node trusting the key takes it; tampered, it refuses to start and says so.
    let me = addr(ip, free_port(ip));
    let cfg = node_config(&me, &[], &dir.0.join("s.sock"))
        + &format!("\n[nodeos]\ntrusted_keys = [\"{pubhex}\"]\nsigned = [\"proto.signed\"]\n");
    let path = dir.file("s.toml", &cfg);
    let check = ok(&["node", "--config", path.to_str().unwrap(), "--check"]);
    assert!(check.contains("nodeos"), "{check}");
    let text = std::fs::read_to_string(&signed).unwrap();
    std::fs::write(&signed, text.replace("cpu_share = 4", "cpu_share = 9")).unwrap();
    let out = anode().run(
        &["node", "--config", path.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("s.toml:") && err.contains("tampered with"),
        "{err}"
    );
    let out = anode().run(
        &[
            "policy",
            "verify",
            signed.to_str().unwrap(),
            "--trust",
            pubhex,
        ],
        Duration::from_secs(10),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tampered with"));
}
