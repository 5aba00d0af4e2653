//! Your own protocol in three commands: `anode new protocol NAME`, `cargo build --release`
//! in the new crate, `anode emulate topology.toml`, and its echo replies come back through
//! three emulated nodes; the same .wasm then runs on two real nodes with `anode capsule
//! send`. Uses the repository's pinned toolchain (rust-toolchain.toml), which scripts/setup.sh
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

#[test]
fn scaffold_builds_and_runs_in_the_emulator_and_on_real_nodes() {
    let dir = TestDir::new("new-protocol");
    let out = anode()
        .command(&["new", "protocol", "hello"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crate_dir = dir.0.join("hello");
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
