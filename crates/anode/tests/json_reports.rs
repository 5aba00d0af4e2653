//! `--json` on the commands that report without a running node: keygen, module show and
//! verify, policy verify, node --check; and `policy sign` refuses a principal no node knows
//! (a misspelt `capsul/*` used to be signed silently).

use std::path::Path;
use std::process::Command;

fn anode(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_anode"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let (ok, out, err) = anode(dir, args);
    assert!(ok, "anode {args:?}: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

#[test]
fn offline_commands_report_json() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("anode-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let k = json(&dir, &["keygen", "--out", "pub", "--json"]);
    let public = k["public_key"].as_str().unwrap().to_string();
    assert_eq!(public.len(), 64);
    assert!(anode(&dir, &["module", "pack", "--builtin", "counter"]).0);
    assert!(
        anode(
            &dir,
            &["module", "sign", "counter-1.0.0.amod", "--key", "pub.key"]
        )
        .0
    );
    let show = json(&dir, &["module", "show", "counter-1.0.0.amod", "--json"]);
    assert_eq!(show["module"], "counter@1.0.0");
    assert_eq!(show["signed_by"], public.as_str());
    let v = json(
        &dir,
        &[
            "module",
            "verify",
            "counter-1.0.0.amod",
            "--trust",
            &public,
            "--json",
        ],
    );
    assert_eq!(v["ok"], true);

    let limits = repo.join("examples/limits.toml");
    let limits = limits.to_string_lossy();
    let (ok, _, err) = anode(
        &dir,
        &[
            "policy",
            "sign",
            &limits,
            "--principal",
            "capsul/*",
            "--key",
            "pub.key",
        ],
    );
    assert!(!ok && err.contains("names no principal"), "{err}");
    assert!(
        anode(
            &dir,
            &[
                "policy",
                "sign",
                &limits,
                "--principal",
                "capsule/*",
                "--key",
                "pub.key",
                "--out",
                "c.signed",
            ],
        )
        .0
    );
    let p = json(
        &dir,
        &["policy", "verify", "c.signed", "--trust", &public, "--json"],
    );
    assert_eq!(p["principal"], "capsule/*");

    let cfg = repo.join("examples/node-a.toml");
    let c = json(
        &dir,
        &[
            "node",
            "--config",
            &cfg.to_string_lossy(),
            "--check",
            "--json",
        ],
    );
    assert_eq!(c["address"], "127.0.0.1:4001");
    assert_eq!(c["links"][0]["name"], "to-b");
    assert_eq!(c["metrics"], "127.0.0.1:9464");
    assert_eq!(c["routing"]["protocol"], "dv");
    assert!(c["links"][0]["impair"].is_null());

    // A link with an emulated impairment and a link-state node: both shown.
    let imp = dir.join("imp.toml");
    std::fs::write(
        &imp,
        "[node]\naddress = \"127.0.0.1:4201\"\n[routing]\nprotocol = \"ls\"\n[[link]]\npeer = \"127.0.0.1:4202\"\nimpair = { delay_ms = 5, loss = 0.01, rate_mbps = 100 }\n",
    )
    .unwrap();
    let c = json(
        &dir,
        &[
            "node",
            "--config",
            &imp.to_string_lossy(),
            "--check",
            "--json",
        ],
    );
    assert_eq!(c["routing"]["protocol"], "ls");
    assert_eq!(c["links"][0]["impair"]["delay_ms"], 5.0);
    assert_eq!(c["links"][0]["impair"]["rate_bps"], 100_000_000);
    let _ = std::fs::remove_dir_all(&dir);
}
