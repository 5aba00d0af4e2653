//! The PLAN service packages on two live `anode node` processes over loopback, driven with
//! the CLI as a user would: names (`getHostByName` from `[plan.hosts]`), neighbor
//! resolution as a PLAN program (`crates/plan/programs/arp.plan`, beside the native
//! neighbor discovery), and authentication (`authEval` of a chunk signed with
//! `anode plan sign` by a key in `[plan] trusted_keys`).

mod node_util;

use std::net::IpAddr;
use std::time::Duration;

use node_util::*;

/// `anode plan inject FILE --entry ENTRY` expecting one answer within 5 s, RB 8.
fn inject_args<'a>(file: &'a str, entry: &'a str) -> Vec<&'a str> {
    vec![
        "plan",
        "inject",
        file,
        "--entry",
        entry,
        "--rb",
        "8",
        "--expect",
        "1",
        "--timeout",
        "5",
    ]
}

/// `anode plan inject` that may fail: its JSON report.
fn inject_failing(n: &NodeProc, file: &str, entry: &str) -> serde_json::Value {
    let socket = n.socket.to_string_lossy();
    let mut args = inject_args(file, entry);
    args.extend(["--json", "--socket", &socket]);
    let out = anode().run(&args, Duration::from_secs(10));
    assert!(!out.status.success(), "it worked");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {:?} stderr {:?}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn inject(n: &NodeProc, file: &str, entry: &str) -> serde_json::Value {
    n.json(&inject_args(file, entry))
}

#[test]
fn names_arp_and_signed_chunks_on_live_nodes() {
    let ip: IpAddr = "127.0.0.1".parse().expect("loopback");
    let dir = TestDir::new("plan-packages");
    let (aa, ba) = (addr(ip, free_port(ip)), addr(ip, free_port(ip)));

    let out = anode().run(
        &["keygen", "--out", &dir.path("plan").to_string_lossy()],
        Duration::from_secs(10),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let public = std::fs::read_to_string(dir.path("plan.pub")).expect("plan.pub");
    let public = public.trim();

    let mut cfg_a = node_config(&aa, &[("to-b", &ba)], &dir.path("a.sock"));
    cfg_a.push_str(&format!(
        "\n[plan]\ntrusted_keys = [\"{public}\"]\n[plan.hosts]\nb = \"{ba}\"\n"
    ));
    let a = anode().start_node(&dir, "a", &aa, &cfg_a);
    let b = anode().start_node(
        &dir,
        "b",
        &ba,
        &node_config(&ba, &[("to-a", &aa)], &dir.path("b.sock")),
    );
    let ok = wait_until(Duration::from_secs(15), || {
        a.has_route(&ba) && b.has_route(&aa)
    });
    assert!(ok, "a and b did not become neighbors\n{}", a.log_text());

    // Names: a resolves "b" from its [plan.hosts]; an unknown name is named in the error.
    let names = dir.file(
        "names.plan",
        "fun show(n : string) = print(hostToString(getHostByName(n)))\n",
    );
    let names = names.to_string_lossy();
    let r = inject(&a, &names, "show(\"b\")");
    assert_eq!(r["prints"], serde_json::json!([ba]), "{r}");
    let r = inject_failing(&a, &names, "show(\"nowhere\")");
    let err = r["errors"][0].as_str().unwrap_or_default();
    assert!(
        err.contains("UnknownHost") && err.contains("nowhere"),
        "{r}"
    );

    // Neighbor resolution as a PLAN program, at b: its query goes out over every link, the
    // neighbor's answer comes back over the link that reaches it.
    let arp = concat!(env!("CARGO_MANIFEST_DIR"), "/../plan/programs/arp.plan");
    let r = inject(&b, arp, "resolve()");
    assert_eq!(
        r["prints"],
        serde_json::json!([format!("resolved {aa} on <dev 0>\n")]),
        "{r}"
    );

    // Authentication: a runs a chunk signed by the key it trusts, and refuses a forgery.
    let auth = dir.file(
        "auth.plan",
        "fun secret() = print(\"ran signed code\")\n\
         fun test(k : string, sig : string) = authEval(|secret|(), keyFromHex(k), blobFromHex(sig))\n",
    );
    let auth = auth.to_string_lossy();
    let out = anode().run(
        &[
            "plan",
            "sign",
            &auth,
            "--chunk",
            "secret()",
            "--key",
            &dir.path("plan.key").to_string_lossy(),
            "--json",
        ],
        Duration::from_secs(10),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let signed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(signed["key"], public);
    let sig = signed["signature"].as_str().expect("a signature");
    let r = inject(&a, &auth, &format!("test(\"{public}\", \"{sig}\")"));
    assert_eq!(r["prints"], serde_json::json!(["ran signed code"]), "{r}");
    let mut forged = sig.to_string();
    forged.replace_range(0..2, if sig.starts_with("00") { "01" } else { "00" });
    let r = inject_failing(&a, &auth, &format!("test(\"{public}\", \"{forged}\")"));
    let err = r["errors"][0].as_str().unwrap_or_default();
    assert!(err.contains("AuthFailed"), "{r}");
    assert_eq!(r["prints"], serde_json::json!([]), "{r}");
}
