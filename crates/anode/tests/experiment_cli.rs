//! `anode experiment`: the papers' experiments from the command line.
//!
//! - `list_names_all_ten`: `list --json` names the ten experiments with paper, figure and
//!   method; the table lists them too.
//! - `an_unknown_experiment_is_refused`: `run nope` fails and says where the names are.
//! - `emulated_queue_swap_writes_its_report`: `run planet-queue-swap --quick` (emulator, no
//!   root) writes NAME.md (the paper's values beside anode's), NAME.svg and NAME.json and an
//!   index that lists every experiment; `report` redraws them from the JSON alone.
//! - `ping_latency_in_namespaces`: `run pan-ping-latency --quick` as root builds its
//!   namespace line, measures, writes the report and leaves no namespace behind (ignored
//!   without root). `scripts/experiments.sh` runs all ten with the release build.

use std::time::Duration;

use anode_testkit::netns;
use anode_testkit::process::{Anode, TestDir};
use serde_json::Value;

fn anode() -> Anode {
    Anode::new(env!("CARGO_BIN_EXE_anode"))
}

fn ok(args: &[&str], limit: Duration) -> (String, String) {
    let out = anode().run(args, limit);
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "anode {args:?} failed:\n{o}\n{e}");
    (o, e)
}

#[test]
fn list_names_all_ten() {
    let (out, _) = ok(&["experiment", "list", "--json"], Duration::from_secs(10));
    let v: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v.len(), 10, "{out}");
    for want in [
        "pan-ping-latency",
        "pan-flood-throughput",
        "netserv-mlffr",
        "planet-switching",
        "planet-eval-overhead",
        "planet-bandwidth-hops",
        "planet-queue-swap",
        "planet-route-scouts",
        "openet-aping",
        "nodeos-forwarding-paths",
    ] {
        let e = v
            .iter()
            .find(|e| e["name"] == want)
            .unwrap_or_else(|| panic!("{want} not listed"));
        assert!(e["paper"].is_string() && e["figure"].is_string() && e["summary"].is_string());
        assert!(["emulator", "loopback", "netns"].contains(&e["method"].as_str().unwrap()));
        assert_eq!(e["needs_root"], e["method"] == "netns");
    }
    let (table, _) = ok(&["experiment", "list"], Duration::from_secs(10));
    assert!(
        table.starts_with("name")
            && table.contains("planet-queue-swap")
            && table.contains("emulator"),
        "{table}"
    );
}

#[test]
fn an_unknown_experiment_is_refused() {
    let out = anode().run(&["experiment", "run", "nope"], Duration::from_secs(10));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no experiment named 'nope'") && err.contains("anode experiment list"),
        "{err}"
    );
}

fn report(dir: &TestDir, name: &str) -> Value {
    for ext in ["md", "svg", "json"] {
        assert!(
            dir.path(&format!("{name}.{ext}")).is_file(),
            "{name}.{ext} missing"
        );
    }
    let svg = std::fs::read_to_string(dir.path(&format!("{name}.svg"))).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("<polyline"),
        "an SVG with lines"
    );
    serde_json::from_str(&std::fs::read_to_string(dir.path(&format!("{name}.json"))).unwrap())
        .unwrap()
}

#[test]
fn emulated_queue_swap_writes_its_report() {
    let dir = TestDir::new("experiment-queue");
    let out = dir.0.to_string_lossy().into_owned();
    let (stdout, stderr) = ok(
        &[
            "experiment",
            "run",
            "planet-queue-swap",
            "--quick",
            "--out",
            &out,
        ],
        Duration::from_secs(300),
    );
    assert!(
        stderr.contains("[1/1] planet-queue-swap"),
        "progress on stderr: {stderr}"
    );
    assert!(
        stdout.contains("S's share of the congested router"),
        "{stdout}"
    );
    let j = report(&dir, "planet-queue-swap");
    assert_eq!(j["method"], "emulator");
    assert_eq!(j["quick"], true);
    let rows = j["outcome"]["rows"].as_array().unwrap();
    let rr = rows
        .iter()
        .find(|r| {
            r["quantity"]
                .as_str()
                .unwrap()
                .starts_with("S -> D, round robin installed")
        })
        .unwrap();
    assert_eq!(rr["paper"], 13.0);
    assert!(
        rr["anode"].as_f64().unwrap() > 13.0,
        "S gets its bandwidth back under round robin: {rr}"
    );
    let md = std::fs::read_to_string(dir.path("planet-queue-swap.md")).unwrap();
    assert!(md.contains("| quantity | paper | anode | anode / paper | same-run baseline |"));
    let idx = std::fs::read_to_string(dir.path("README.md")).unwrap();
    assert!(
        idx.contains("[planet-queue-swap](planet-queue-swap.md)") && idx.contains("openet-aping")
    );
}

#[test]
#[ignore = "needs root and netns"]
fn ping_latency_in_namespaces() {
    netns::require("ping_latency_in_namespaces", &["ip"], false);
    let dir = TestDir::new("experiment-ping");
    let out = dir.0.to_string_lossy().into_owned();
    ok(
        &[
            "experiment",
            "run",
            "pan-ping-latency",
            "--quick",
            "--out",
            &out,
        ],
        Duration::from_secs(300),
    );
    let j = report(&dir, "pan-ping-latency");
    assert_eq!(j["method"], "netns");
    let series = j["outcome"]["series"].as_array().unwrap();
    let kernel = series
        .iter()
        .find(|s| s["label"].as_str().unwrap().starts_with("kernel/passive"))
        .unwrap();
    assert_eq!(
        kernel["points"].as_array().unwrap().len(),
        3,
        "three sizes in a quick run"
    );
    // The experiment's namespaces are named ax<pid><tag>-<host>; none may be left.
    let left = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let names = String::from_utf8_lossy(&left.stdout);
    assert!(
        !names.lines().any(|l| l.starts_with("ax")),
        "namespaces left: {names}"
    );
}
