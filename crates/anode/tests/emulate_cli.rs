//! `anode emulate` and `anode demo` as a user runs them.

use std::path::PathBuf;
use std::process::Command;

fn anode() -> Command {
    Command::new(env!("CARGO_BIN_EXE_anode"))
}

fn topo(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../topologies")
        .join(name)
}

#[test]
fn demo_exits_0_and_tells_the_story() {
    let t0 = std::time::Instant::now();
    let out = anode().arg("demo").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    for want in [
        "routing has converged",
        "hello from a",
        "sent 4, delivered 4, lost 0",
        "the link b-c fails",
        "routing repaired after",
        "traffic resumed",
        "link comes back",
        "All 5 expectations held.",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("FAIL"));
}

#[test]
fn demo_json_is_deterministic() {
    let a = anode().args(["demo", "--json"]).output().unwrap();
    let b = anode().args(["demo", "--json"]).output().unwrap();
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(v["checks"]["failed"], 0);
    assert_eq!(v["mode"], "virtual-time");
}

#[test]
fn emulate_runs_the_example_files() {
    for f in ["ring5.toml", "line4.toml", "demo.toml"] {
        let out = anode().arg("emulate").arg(topo(f)).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{f}: {text}");
        assert!(text.contains("Checks: all"), "{f}: {text}");
        let j1 = anode()
            .arg("emulate")
            .arg(topo(f))
            .arg("--json")
            .output()
            .unwrap();
        let j2 = anode()
            .arg("emulate")
            .arg(topo(f))
            .arg("--json")
            .output()
            .unwrap();
        assert_eq!(j1.stdout, j2.stdout, "{f}: --json not byte-identical");
    }
}

#[test]
fn failed_check_exits_1() {
    let dir = std::env::temp_dir().join(format!("anode-emu-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("fails.toml");
    std::fs::write(
        &f,
        "[network]\nduration_ms = 3000\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\n[[step]]\nat_ms = 2000\naction = \"expect\"\ncheck = \"unreachable\"\nfrom = \"a\"\nto = \"b\"\n",
    )
    .unwrap();
    let out = anode().arg("emulate").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAIL"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 of 1 expect checks failed"));
    // A bad file: file, line and fix on stderr, exit 1.
    std::fs::write(&f, "[network]\nduration_ms = 3000\nspeed = 3\n").unwrap();
    let out = anode().arg("emulate").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fails.toml:3:1: unknown field `speed`"),
        "{err}"
    );
    assert!(err.contains("fix:"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
