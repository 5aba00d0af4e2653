//! Authenticated PLAN principals on real nodes: two `anode node` processes a–b on loopback,
//! b's policy file names one signer (`["plan/key/<hex>"]`). `anode plan inject --sign` at a
//! sends a ping evaluated at b: b runs it in the signer's domain, with that table's limits;
//! the same packet unsigned, or signed by a key b's policy does not name, runs in a's
//! source domain (`plan/<a's address>`, unauthenticated, a member of the group
//! `plan/unauthenticated`). Every wait is bounded.

mod node_util;

use std::time::Duration;

use node_util::*;

/// b's domains of the PLAN EE, as `anode domains --json` lists them.
fn plan_domains(b: &NodeProc) -> Vec<serde_json::Value> {
    let ees = b.json(&["domains"]);
    let plan = ees
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ee"] == "plan+nodeos")
        .unwrap_or_else(|| panic!("no PLAN EE: {ees}"))
        .clone();
    plan["domains"].as_array().unwrap().clone()
}

fn packets_of(doms: &[serde_json::Value], principal: &str) -> u64 {
    doms.iter()
        .find(|d| d["principal"] == principal)
        .map_or(0, |d| d["packets"].as_u64().unwrap())
}

#[test]
fn signed_plan_packets_run_as_their_signer_and_unsigned_ones_as_their_source() {
    let dir = TestDir::new("plan-principals");
    let (op_key, op_pub) = keygen(&dir, "op");
    let (stranger_key, _) = keygen(&dir, "stranger");
    let signer = format!("plan/key/{op_pub}");
    dir.file(
        "b-policy.toml",
        &format!("[\"{signer}\"]\nmemory_bytes = 524288\ncpu_share = 1\n"),
    );
    let nodes = start_line(&dir, &["a", "b"], |i| {
        if i == 1 {
            "\n[nodeos]\npolicy = \"b-policy.toml\"\n".to_string()
        } else {
            String::new()
        }
    });
    let (a, b) = (&nodes[0], &nodes[1]);
    assert!(
        wait_until(Duration::from_secs(15), || a.has_route(&b.addr)),
        "no route\na:\n{}",
        a.log_text()
    );
    let program = path_str(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plan/programs/ping/noeval.plan"),
    );
    let entry = format!("ping({}, {})", a.addr, b.addr);
    let ping = |key: Option<&str>, port: &str| {
        let mut args = vec![
            "plan",
            "inject",
            &program,
            "--entry",
            &entry,
            "--eval-at",
            &b.addr,
            "--rb",
            "8",
            "--port",
            port,
            "--timeout",
            "5",
            "--expect",
            "1",
        ];
        if let Some(k) = key {
            args.extend(["--sign", k]);
        }
        let r = a.json(&args);
        assert_eq!(r["prints"][0], "Success", "{args:?}: {r}");
    };

    // Signed by the key b names: b runs it in the signer's domain, with its policy.
    ping(Some(&op_key), "7101");
    let doms = plan_domains(b);
    let d = doms
        .iter()
        .find(|d| d["principal"] == signer.as_str())
        .unwrap_or_else(|| panic!("no domain for {signer}: {doms:?}"));
    assert_eq!(d["packets"], 1, "{d}");
    assert_eq!(d["memory_limit"], 524288, "the signer's own policy: {d}");
    assert_eq!(d["authenticated"], true, "{d}");
    let source = format!("plan/{}", a.addr);
    assert_eq!(packets_of(&doms, &source), 0, "{doms:?}");

    // Unsigned, and signed by a key b does not name: both are a's, unauthenticated.
    ping(None, "7102");
    ping(Some(&stranger_key), "7103");
    let doms = plan_domains(b);
    assert_eq!(packets_of(&doms, &source), 2, "{doms:?}");
    assert_eq!(packets_of(&doms, &signer), 1, "{doms:?}");
    assert_eq!(
        doms.iter()
            .filter(|d| d["principal"].as_str().unwrap().starts_with("plan/key/"))
            .count(),
        1,
        "only named keys get domains: {doms:?}"
    );
    let src = doms
        .iter()
        .find(|d| d["principal"] == source.as_str())
        .unwrap();
    assert_eq!(src["authenticated"], false, "{src}");
    // Unauthenticated sources are members of their group, under the EE's domain; the signer
    // is a child of the EE's domain itself.
    let id_of = |p: &str| doms.iter().find(|d| d["principal"] == p).unwrap()["id"].clone();
    assert_eq!(src["parent"], id_of("plan/unauthenticated"), "{doms:?}");
    let group = doms
        .iter()
        .find(|d| d["principal"] == "plan/unauthenticated")
        .unwrap();
    assert_eq!(group["parent"], id_of("plan"), "{doms:?}");
    let signer_dom = doms
        .iter()
        .find(|d| d["principal"] == signer.as_str())
        .unwrap();
    assert_eq!(signer_dom["parent"], id_of("plan"), "{doms:?}");
    // The table marks both.
    let (ok, table, err) = run_cli(
        &["domains", "--socket", &path_str(&b.socket)],
        Duration::from_secs(10),
    );
    assert!(ok, "{err}");
    assert!(
        table.contains(&format!("{source} (unauthenticated)")) && table.contains("(signed)"),
        "{table}"
    );

    // A key file that is not one: a clear error, nothing sent.
    let bad = dir.file("bad.key", "not a key\n");
    let (ok, _, err) = run_cli(
        &[
            "plan",
            "inject",
            &program,
            "--entry",
            &entry,
            "--sign",
            &path_str(&bad),
            "--socket",
            &path_str(&a.socket),
        ],
        Duration::from_secs(10),
    );
    assert!(!ok);
    assert!(err.contains("anode keygen"), "{err}");
}

/// Packets `node` dropped as replays (`anode stats --json`, every EE's count).
fn replayed(node: &NodeProc) -> u64 {
    fn sum(v: &serde_json::Value) -> u64 {
        match v {
            serde_json::Value::Object(m) => m
                .iter()
                .map(|(k, x)| match x.as_u64() {
                    Some(n) if k.ends_with("replayed") => n,
                    _ => sum(x),
                })
                .sum(),
            serde_json::Value::Array(a) => a.iter().map(sum).sum(),
            _ => 0,
        }
    }
    sum(&node.json(&["stats"]))
}

/// A signed packet b accepted is a replay after b restarts, also after a crash (kill -9):
/// b keeps its signers' replay windows in `[plan] state_file` (written within a second of a
/// change and at a clean stop, checked at start).
#[test]
fn a_signed_packet_accepted_before_a_restart_is_still_a_replay_after_it() {
    let dir = TestDir::new("plan-replay");
    let (op_key, op_pub) = keygen(&dir, "op");
    let signer = format!("plan/key/{op_pub}");
    dir.file("b-policy.toml", &format!("[\"{signer}\"]\ncpu_share = 1\n"));
    let b_extra =
        "\n[nodeos]\npolicy = \"b-policy.toml\"\n\n[plan]\nstate_file = \"b-plan.json\"\n";
    let mut nodes = start_line(&dir, &["a", "b"], |i| {
        if i == 1 { b_extra } else { "" }.to_string()
    });
    let a = nodes.remove(0);
    let b_addr = nodes[0].addr.clone();
    let b_config = std::fs::read_to_string(dir.path("b.toml")).unwrap();
    let program = path_str(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plan/programs/ping/noeval.plan"),
    );
    let entry = format!("ping({}, {})", a.addr, b_addr);
    // Injects the ping signed with sequence number `seq`; what came back to a.
    let ping = |seq: &str, port: &str| -> usize {
        assert!(
            wait_until(Duration::from_secs(15), || a.has_route(&b_addr)),
            "no route\na:\n{}",
            a.log_text()
        );
        let r = a.json(&[
            "plan",
            "inject",
            &program,
            "--entry",
            &entry,
            "--eval-at",
            &b_addr,
            "--rb",
            "8",
            "--port",
            port,
            "--timeout",
            "1.5",
            "--expect",
            "1",
            "--sign",
            &op_key,
            "--seq",
            seq,
        ]);
        r["prints"].as_array().map_or(0, Vec::len)
    };
    assert_eq!(ping("1000", "7201"), 1, "first use of 1000");
    assert_eq!(ping("1000", "7202"), 0, "1000 again: a replay");
    assert_eq!(replayed(&nodes[0]), 1);
    // Past the keeper's second, then a crash: no clean stop writes anything.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(dir.path("b-plan.json").exists(), "{}", nodes[0].log_text());
    let b = nodes.remove(0);
    b.proc.signal(libc::SIGKILL);
    let _ = b.proc.finish(Duration::from_secs(10));
    // The dead process's socket file stays behind; the new one binds afresh.
    let _ = std::fs::remove_file(dir.path("b.sock"));
    let b = anode().start_node(&dir, "b", &b_addr, &b_config);
    assert_eq!(
        ping("1000", "7203"),
        0,
        "1000 after the restart: still a replay"
    );
    assert_eq!(replayed(&b), 1, "dropped as a replay, not lost otherwise");
    assert_eq!(ping("1001", "7204"), 1, "a new number runs");
    assert!(
        b.log_text().contains("restored the state of EE"),
        "{}",
        b.log_text()
    );

    // A file that does not check (edited to move the window back) is not trusted: b says so
    // and starts without it.
    b.proc.signal(libc::SIGTERM);
    let _ = b.proc.finish(Duration::from_secs(10));
    let kept = std::fs::read_to_string(dir.path("b-plan.json")).unwrap();
    assert!(
        kept.contains("\"top\":1001"),
        "a clean stop wrote the last window: {kept}"
    );
    dir.file("b-plan.json", &kept.replace("\"top\":1001", "\"top\":999"));
    let _ = std::fs::remove_file(dir.path("b.sock"));
    let b = anode().start_node(&dir, "b", &b_addr, &b_config);
    assert!(
        wait_until(Duration::from_secs(5), || b
            .log_text()
            .contains("not trusted")),
        "{}",
        b.log_text()
    );
}
