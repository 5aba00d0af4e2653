//! An execution environment in a signed package (a module of kind `ee`) on real `anode node`
//! processes, a line a - b - c on loopback UDP: the built-in `hopcount` EE (ANEP Type ID
//! 0x0A10) installed at b and c counts the hops that ran it in each packet's payload;
//! `anode send --ee 0x0A10 [--every-hop]` sends such packets; `anode module ees` lists the EE
//! beside the built-in ones; an upgrade in the middle of a flood hands the EE's state over
//! and loses no packet; a stopped EE's packets are dropped as `ee_stopped`; a removed one's
//! are forwarded like any unknown type.

mod node_util;

use std::path::Path;
use std::time::Duration;

use node_util::*;

const T: Duration = Duration::from_secs(20);

fn ok(args: &[&str]) -> String {
    let (good, out, err) = run_cli(args, T);
    assert!(good, "anode {args:?}: {err}\n{out}");
    out
}

fn s(p: &Path) -> String {
    path_str(p)
}

/// The built-in `hopcount` EE at `version`, signed with `key`.
fn hopcount(dir: &TestDir, version: &str, key: &str) -> String {
    let p = anode_modules::builtin::package("hopcount").unwrap();
    let text = p.manifest_text.replace(
        "version = \"1.0.0\"\n",
        &format!("version = \"{version}\"\n"),
    );
    let mut pkg = anode_modules::Package::new(text, p.code.clone()).unwrap();
    pkg.sign(&anode_modules::read_key(Path::new(key)).unwrap());
    let out = dir.path(&format!("hopcount-{version}.amod"));
    pkg.write(&out).unwrap();
    s(&out)
}

/// `anode send` from `from` to `to` port 9 under the EE's Type ID, payload 0000.
fn send(from: &NodeProc, to: &NodeProc, extra: &[&str]) {
    let sock = s(&from.socket);
    let mut a = vec![
        "send", &to.addr, "--port", "9", "--ee", "0x0A10", "--hex", "0000", "--socket", &sock,
    ];
    a.extend_from_slice(extra);
    ok(&a);
}

/// The hop counts in the payloads a listener got.
fn counts(got: &[serde_json::Value]) -> Vec<String> {
    got.iter()
        .map(|d| {
            assert_eq!(d["type_id"], 0x0A10, "{d}");
            d["payload"].as_str().unwrap().to_string()
        })
        .collect()
}

/// The packets the `hopcount` EE at `node` handled (its service op 0, kept across upgrades).
fn handled(node: &NodeProc) -> u64 {
    let out = ok(&[
        "module",
        "call",
        "hopcount",
        "0",
        "0",
        "--socket",
        &s(&node.socket),
    ]);
    out.trim().parse().expect("a count")
}

fn counter(node: &NodeProc, path: &[&str]) -> u64 {
    let v = node.json(&["stats"]);
    let mut c = &v["counters"];
    for p in path {
        c = &c[p];
    }
    c.as_u64().unwrap_or(0)
}

#[test]
fn an_ee_from_a_signed_package_runs_upgrades_under_a_flood_stops_and_goes() {
    let dir = TestDir::new("ee-packages");
    let names = ["a", "b", "c"];
    let (key, public) = keygen(&dir, "publisher");
    let nodes = start_line(&dir, &names, |i| {
        format!(
            "\n[modules]\ntrusted_keys = [\"{public}\"]\nstate_dir = \"{}\"\n",
            s(&dir.path(&format!("modules-{}", names[i])))
        )
    });
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    assert!(wait_until(T, || a.has_route(&c.addr)));
    let v1 = hopcount(&dir, "1.0.0", &key);
    for n in [b, c] {
        ok(&["module", "install", &v1, "--socket", &s(&n.socket)]);
    }

    // Listed beside the built-in EEs, with its Type ID.
    let ees = b.json(&["module", "ees"]);
    let ees = ees.as_array().unwrap();
    let hc = ees
        .iter()
        .find(|e| e["name"] == "hopcount")
        .expect("listed");
    assert_eq!(hc["kind"], "ee");
    assert_eq!(hc["category"], "standard");
    assert_eq!(hc["state"], "active");
    assert_eq!(hc["provides"][0], "ee/0x0A10");
    assert!(ees.iter().any(|e| e["name"] == "capsule"), "{ees:?}");

    // At every hop: b and c ran it; to the destination only: c.
    let l = c.listen(9, 2);
    send(a, c, &["--every-hop"]);
    send(a, c, &[]);
    let got = counts(&listened(l));
    assert_eq!(got, ["0002", "0001"]);

    // Upgraded at b in the middle of a flood of 600 every-hop packets: every one arrives,
    // counted twice, and the new version carries on the old one's count.
    let before = handled(b);
    let l = c.listen(9, 600);
    let mut flood = {
        let sock = s(&a.socket);
        let mut cmd = anode().command(&[
            "send",
            &c.addr,
            "--port",
            "9",
            "--ee",
            "0x0A10",
            "--every-hop",
            "--hex",
            "0000",
            "--count",
            "600",
            "--rate",
            "1000",
            "--socket",
            &sock,
        ]);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        Proc::spawn(&mut cmd)
    };
    let v2 = hopcount(&dir, "1.1.0", &key);
    let seen = |n: &NodeProc| n.json(&["module", "info", "hopcount"])["packets"].as_u64();
    let start = seen(b).unwrap();
    assert!(wait_until(T, || seen(b).unwrap() >= start + 50), "no flood");
    ok(&["module", "upgrade", &v2, "--socket", &s(&b.socket)]);
    assert!(
        !flood.exited(),
        "the flood ended before the upgrade: not a test of it"
    );
    let out = flood.finish(T);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = counts(&listened(l));
    assert_eq!(got.len(), 600);
    assert!(got.iter().all(|g| g == "0002"), "{got:?}");
    let info = b.json(&["module", "info", "hopcount"]);
    assert_eq!(info["version"], "1.1.0");
    assert_eq!(handled(b), before + 600);

    // Stopped at b: its packets are dropped there, counted; started again: they pass.
    ok(&["module", "stop", "hopcount", "--socket", &s(&b.socket)]);
    let stopped = counter(b, &["drops", "ee_stopped"]);
    send(a, c, &["--every-hop"]);
    assert!(wait_until(T, || counter(b, &["drops", "ee_stopped"]) == stopped + 1));
    ok(&["module", "start", "hopcount", "--socket", &s(&b.socket)]);

    // Removed at b: b forwards its packets like any unknown type; c still runs it.
    ok(&["module", "remove", "hopcount", "--socket", &s(&b.socket)]);
    let passed = counter(b, &["unknown_type_forwarded"]);
    let l = c.listen(9, 1);
    send(a, c, &["--every-hop"]);
    assert_eq!(counts(&listened(l)), ["0001"]);
    assert_eq!(counter(b, &["unknown_type_forwarded"]), passed + 1);
    let ees = b.json(&["module", "ees"]);
    assert!(
        !ees.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "hopcount"),
        "{ees}"
    );

    // --every-hop without --ee is a usage error; a plain datagram needs no EE.
    let (good, _, err) = run_cli(
        &[
            "send",
            &c.addr,
            "--port",
            "9",
            "--every-hop",
            "x",
            "--socket",
            &s(&a.socket),
        ],
        T,
    );
    assert!(!good && err.contains("--ee"), "{err}");
}
