//! Your own protocol in three commands: `anode new protocol NAME`, `cargo build --release`
//! in the new crate, `anode emulate topology.toml`, and its echo replies come back through
//! three emulated nodes; the same .wasm then runs on two real nodes with `anode capsule
//! send`. Likewise your own service module (`anode new module NAME`): emulated, then packed,
//! signed and installed on a real node, where it drops every 2nd datagram. Uses the repository's pinned toolchain (rust-toolchain.toml), which scripts/setup.sh
//! gives the wasm32 target.

mod node_util;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use node_util::*;

/// The channel rust-toolchain.toml pins.
fn pinned_toolchain() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rust-toolchain.toml");
    let text = std::fs::read_to_string(p).unwrap();
    let line = text.lines().find(|l| l.starts_with("channel")).unwrap();
    line.split('"').nth(1).unwrap().to_string()
}

/// `anode new KIND NAME` in `dir`, then `cargo build --release` in the new crate.
fn scaffold_and_build(dir: &TestDir, kind: &str, name: &str) -> std::path::PathBuf {
    let out = anode()
        .command(&["new", kind, name])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crate_dir = dir.0.join(name);
    let mut build = Command::new("cargo");
    build
        .args(["build", "--release", "--offline", "--quiet"])
        .current_dir(&crate_dir)
        .env("RUSTUP_TOOLCHAIN", pinned_toolchain());
    for k in [
        "CARGO_TARGET_DIR",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
    ] {
        build.env_remove(k);
    }
    let out = build.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    crate_dir
}

#[test]
fn scaffold_builds_and_runs_in_the_emulator_and_on_real_nodes() {
    let dir = TestDir::new("new-protocol");
    let crate_dir = scaffold_and_build(&dir, "protocol", "hello");
    let src = std::fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
    assert!(src.lines().count() <= 40, "the protocol stays short");

    let out = anode()
        .command(&["emulate", "topology.toml"])
        .current_dir(&crate_dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("3 sent, 3 delivered to port 9"), "{text}");

    // The same code on two real nodes.
    let (a, b) = anode().start_pair(&dir);
    let b_addr = b.addr.clone();
    let wasm = crate_dir.join("target/wasm32-unknown-unknown/release/hello.wasm");
    let sock = a.socket.to_string_lossy().into_owned();
    let out = anode().run(
        &[
            "capsule",
            "send",
            &b_addr,
            "--code",
            &wasm.to_string_lossy(),
            "--hex",
            "0000096869",
            "--port",
            "9",
            "--wait",
            "2",
            "--json",
            "--socket",
            &sock,
        ],
        Duration::from_secs(20),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["deliveries"], 1, "{text}");
}

#[test]
fn module_scaffold_runs_in_the_emulator_and_installs_signed_on_a_real_node() {
    let dir = TestDir::new("new-module");
    let crate_dir = scaffold_and_build(&dir, "module", "thin");
    let src = std::fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
    assert!(src.lines().count() <= 45, "the module stays short");
    let run = |args: &[&str]| {
        let out = anode()
            .command(args)
            .current_dir(&crate_dir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "anode {args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let text = run(&["emulate", "topology.toml"]);
    assert!(
        text.contains("install-module thin at b: thin active"),
        "{text}"
    );
    assert!(text.contains("exactly 5: PASS"), "{text}");

    // The README's way onto a real node: pack the crate, sign, trust the key, install.
    run(&["module", "pack", "."]);
    run(&["keygen", "--out", "me"]);
    run(&["module", "sign", "thin-0.1.0.amod", "--key", "me.key"]);
    let pubhex = std::fs::read_to_string(crate_dir.join("me.pub")).unwrap();
    let (a, b) = anode().start_pair(&dir);
    let amod = crate_dir
        .join("thin-0.1.0.amod")
        .to_string_lossy()
        .into_owned();
    let refused = anode().run(
        &[
            "module",
            "install",
            &amod,
            "--socket",
            &a.socket.to_string_lossy(),
        ],
        Duration::from_secs(10),
    );
    assert!(
        !refused.status.success(),
        "an untrusted publisher is refused"
    );
    drop((a, b));
    let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let (ha, hb) = (addr(ip, free_port(ip)), addr(ip, free_port(ip)));
    let cfg = node_config(&ha, &[("to-b", &hb)], &dir.path("a2.sock"));
    let cfg = format!("{cfg}\n[modules]\ntrusted_keys = [\"{}\"]\n", pubhex.trim());
    let a = anode().start_node(&dir, "a2", &ha, &cfg);
    let _b = anode().start_node(
        &dir,
        "b2",
        &hb,
        &node_config(&hb, &[("to-a", &ha)], &dir.path("b2.sock")),
    );
    assert!(wait_until(Duration::from_secs(10), || a.has_route(&hb)));
    a.json(&["module", "install", &amod]);
    let sock = a.socket.to_string_lossy().into_owned();
    let mut refused = 0;
    for i in 0..6 {
        let msg = format!("d{i}");
        let args = ["send", &hb, &msg, "--port", "7", "--socket", &sock];
        let out = anode().run(&args, Duration::from_secs(10));
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("hook_dropped"), "{err}");
            refused += 1;
        }
    }
    assert_eq!(refused, 3, "every 2nd datagram is dropped at the hook");
    let seen = a.json(&["module", "call", "thin", "1"]);
    let dropped = a.json(&["module", "call", "thin", "0"]);
    assert_eq!(seen["result"], 6, "{seen}");
    assert_eq!(dropped["result"], 3, "{dropped}");
}
