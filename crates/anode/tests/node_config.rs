//! Bad config files stop `anode node` with `FILE:LINE:COL: what; fix`, before it opens
//! anything; `--check` accepts the shipped examples.

mod node_util;

use std::time::Duration;

use node_util::*;

/// Runs `anode node --config` on `text` and returns (exit code, stderr, the file's path).
fn refuse(dir: &TestDir, name: &str, text: &str) -> (Option<i32>, String, String) {
    let p = dir.file(name, text);
    let ps = p.to_string_lossy().into_owned();
    let out = anode().run(&["node", "--config", &ps], Duration::from_secs(10));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        ps,
    )
}

const HEAD: &str = "[node]\naddress = \"127.0.0.1:4101\"\n";

#[test]
fn unknown_key() {
    let dir = TestDir::new("cfg-unknown");
    let (code, err, p) = refuse(
        &dir,
        "a.toml",
        &format!("{HEAD}[[link]]\npeer = \"127.0.0.1:4102\"\ncots = 3\n"),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("{p}:5:1: unknown field `cots`")),
        "{err}"
    );
    assert!(err.contains("spelling"), "{err}");
}

#[test]
fn bad_address() {
    let dir = TestDir::new("cfg-addr");
    let (code, err, p) = refuse(
        &dir,
        "a.toml",
        "# a node\n[node]\naddress = \"localhost:4101\"\n",
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("{p}:3:11:")), "{err}");
    assert!(err.contains("not a node address; write IPv4 as"), "{err}");
}

#[test]
fn link_to_self() {
    let dir = TestDir::new("cfg-self");
    let (code, err, p) = refuse(
        &dir,
        "a.toml",
        &format!("{HEAD}\n[[link]]\nname = \"me\"\npeer = \"127.0.0.1:4101\"\n"),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("{p}:6:8:")), "{err}");
    assert!(
        err.contains("own address") && err.contains("set peer to the neighbor's"),
        "{err}"
    );
}

#[test]
fn dead_interval_below_hello() {
    let dir = TestDir::new("cfg-dead");
    let text = format!("{HEAD}[routing]\nhello_interval_ms = 500\ndead_interval_ms = 400\n");
    let (code, err, p) = refuse(&dir, "a.toml", &text);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("{p}:5:1: dead_interval_ms (400) must exceed hello_interval_ms (500); 3-4 times is usual")), "{err}");
}

#[test]
fn route_via_stranger_and_missing_file() {
    let dir = TestDir::new("cfg-route");
    let text = format!(
        "{HEAD}[[link]]\npeer = \"127.0.0.1:4102\"\n[[route]]\ndest = \"127.0.0.1:4109\"\nvia = \"127.0.0.1:4105\"\n"
    );
    let (code, err, p) = refuse(&dir, "a.toml", &text);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("{p}:7:7:")), "{err}");
    assert!(err.contains("not the peer of any [[link]]"), "{err}");
    let out = anode().run(
        &["node", "--config", "/nonexistent/x.toml"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.toml: cannot read"));
}

#[test]
fn examples_check() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for f in ["node-a.toml", "node-b.toml"] {
        let p = root.join(f).to_string_lossy().into_owned();
        let out = anode().run(
            &["node", "--check", "--config", &p],
            Duration::from_secs(10),
        );
        let so = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(so.contains(": ok") && so.contains("link 0"), "{so}");
    }
}
