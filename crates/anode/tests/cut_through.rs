//! NodeOS cut-through channels on real `anode node` processes, a line a - b - c on loopback
//! UDP: `anode flood --cut-through` from a to c makes the flood code at b open a channel for
//! the flow after its first capsules, and b forwards the rest on the fast path without
//! running the code: `anode channels` at b shows the channel with (nearly) every capsule of
//! the flood on it, while the receiver counts every capsule. Without the flag no channel opens.

mod node_util;

use std::time::Duration;

use node_util::*;

const T: Duration = Duration::from_secs(30);

fn flood(a: &NodeProc, c: &NodeProc, extra: &[&str]) -> serde_json::Value {
    let sock = path_str(&a.socket);
    let mut args = vec![
        "flood",
        &c.addr,
        "--count",
        "2000",
        "--rate",
        "4000",
        "--size",
        "64",
        "--status-ms",
        "200",
        "--json",
        "--socket",
        &sock,
    ];
    args.extend_from_slice(extra);
    let (good, out, err) = run_cli(&args, T);
    assert!(good, "anode flood: {err}\n{out}");
    let last = out.lines().last().expect("a summary");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {last}"))
}

fn channels(n: &NodeProc) -> Vec<serde_json::Value> {
    n.json(&["channels"]).as_array().unwrap().clone()
}

fn runs_at(n: &NodeProc) -> u64 {
    n.json(&["stats"])["counters"]["to_ee"].as_u64().unwrap()
}

#[test]
fn a_cut_through_flood_passes_the_middle_node_on_channels() {
    let dir = TestDir::new("cut-through");
    let nodes = start_line(&dir, &["a", "b", "c"], |_| String::new());
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    assert!(wait_until(T, || a.has_route(&c.addr) && c.has_route(&a.addr)));

    // Without the flag: every capsule runs the code at b, no channel.
    let before = runs_at(b);
    let s = flood(a, c, &[]);
    assert!(s["delivered"].as_u64().unwrap() >= 1900, "{s}");
    assert!(channels(b).is_empty());
    assert!(runs_at(b) - before >= 1900);

    // With it: one channel at b, owned by the flood code's domain, carrying the flow.
    let before = runs_at(b);
    let s = flood(a, c, &["--cut-through"]);
    let delivered = s["delivered"].as_u64().unwrap();
    assert!(delivered >= 1900, "{s}");
    let ch = channels(b);
    assert_eq!(ch.len(), 1, "{ch:?}");
    let ch = &ch[0];
    assert_eq!(ch["kind"], "cut");
    assert_eq!(ch["type_id"], 0x0A03);
    assert!(
        ch["domain"].as_str().unwrap().starts_with("capsule/"),
        "{ch}"
    );
    assert_eq!(
        ch["keys"].as_array().unwrap().len(),
        3,
        "source, flow, code"
    );
    assert!(ch["expires_in_ms"].as_u64().unwrap() > 50_000, "{ch}");
    let on_channel = ch["packets"].as_u64().unwrap();
    let ran = runs_at(b) - before;
    assert!(
        on_channel >= 1800,
        "{on_channel} of the flood's capsules on the channel (goal: >= 90% of 2000); {ran} ran at b"
    );
    assert!(ran <= 50, "{ran} capsules of the flow ran the code at b");
    // The receiver is never cut through: c has no channel and ran every capsule.
    assert!(channels(c).is_empty());
    let stats = b.json(&["stats"]);
    assert!(stats["counters"]["cut_through"].as_u64().unwrap() >= on_channel);
    let text = run_cli(&["channels", "--socket", &path_str(&b.socket)], T).1;
    assert!(text.contains("cut") && text.contains("capsule/"), "{text}");
}
