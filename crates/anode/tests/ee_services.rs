//! The execution environments as services on a real `anode node`: `anode module ees` lists
//! them (kind ee, category standard, packets), `anode module stop capsule` makes the node drop
//! capsules (counted as `ee_stopped`) and ends the EE's protocol domains (without banning
//! their principals), `start` brings it back with fresh domains, and a built-in EE cannot be
//! removed. They answer on a node without service modules.

mod node_util;

use std::time::Duration;

use node_util::*;

fn ping(a: &NodeProc, to: &str) -> bool {
    let s = path_str(&a.socket);
    let (good, _, _) = run_cli(
        &["ping", to, "-c", "1", "--timeout", "1", "--socket", &s],
        Duration::from_secs(10),
    );
    good
}

fn drops(n: &NodeProc, reason: &str) -> u64 {
    n.json(&["stats"])["counters"]["drops"][reason]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn an_ee_is_stopped_and_started_like_a_service() {
    let dir = TestDir::new("ee-services");
    let (a, b) = anode().start_pair(&dir);
    assert!(ping(&a, &b.addr), "{}", b.log_text());

    let ees = b.json(&["module", "ees"]);
    let rows: Vec<(&str, &str, &str, &str)> = ees
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["kind"].as_str().unwrap(),
                e["category"].as_str().unwrap(),
                e["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        rows.contains(&("capsule", "ee", "standard", "active")),
        "{ees}"
    );
    assert!(
        rows.contains(&("plan", "ee", "standard", "active")),
        "{ees}"
    );
    let capsule = |l: &serde_json::Value| {
        l.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "capsule")
            .cloned()
            .unwrap()
    };
    assert!(capsule(&ees)["packets"].as_u64().unwrap() >= 1, "{ees}");

    // The ping protocol's domain under the capsule EE.
    let protocol_domains = |n: &NodeProc| -> Vec<String> {
        let d = n.json(&["domains"]);
        let cap = d
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["ee"].as_str().unwrap().starts_with("capsule"))
            .cloned()
            .unwrap_or_else(|| panic!("{d}"));
        cap["domains"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["principal"].as_str().unwrap().to_string())
            .filter(|p| p.starts_with("capsule/"))
            .collect()
    };
    assert_eq!(protocol_domains(&b).len(), 1);

    let stopped = b.json(&["module", "stop", "capsule"]);
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    assert!(protocol_domains(&b).is_empty(), "its domains end with it");
    let d = b.json(&["domains"]).to_string();
    assert!(d.contains("its execution environment was stopped"), "{d}");
    assert!(!ping(&a, &b.addr), "a stopped capsule EE answers no ping");
    assert!(drops(&b, "ee_stopped") >= 1, "{}", b.json(&["stats"]));
    // `anode drops` says who dropped them and why, in words.
    let rows = b.json(&["drops"]);
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["reason"] == "ee_stopped")
        .cloned()
        .unwrap_or_else(|| panic!("no ee_stopped row: {rows}"));
    assert_eq!(row["by"], "node", "{row}");
    assert!(row["count"].as_u64().unwrap() >= 1, "{row}");
    assert!(
        row["meaning"].as_str().unwrap().contains("stopped"),
        "{row}"
    );
    let s = path_str(&b.socket);
    let (good, out, _) = run_cli(&["drops", "--all", "--socket", &s], Duration::from_secs(10));
    assert!(good, "{out}");
    for reason in [
        "ee_stopped",
        "fuel_exhausted",
        "uncaught_exception",
        "bandwidth",
    ] {
        assert!(
            out.contains(reason),
            "{reason} missing from `anode drops --all`:\n{out}"
        );
    }
    assert_eq!(b.json(&["module", "info", "capsule"])["state"], "stopped");

    let (good, _, err) = run_cli(
        &[
            "module",
            "remove",
            "capsule",
            "--socket",
            &path_str(&b.socket),
        ],
        Duration::from_secs(10),
    );
    assert!(!good && err.contains("cannot be removed"), "{err}");

    assert_eq!(b.json(&["module", "start", "capsule"])["state"], "active");
    assert!(ping(&a, &b.addr), "started again: {}", b.log_text());
    assert_eq!(
        protocol_domains(&b).len(),
        1,
        "a fresh domain, not a banned one"
    );
    assert_eq!(capsule(&b.json(&["module", "ees"]))["state"], "active");
}
