//! Builds the capsule protocols of the guest workspace (`../../guest/protocols`) for `wasm32-unknown-unknown` in release mode
//! with its own target directory under `OUT_DIR`, and copies each protocol's `.wasm` to
//! `OUT_DIR/guest/<name>.wasm` for `src/protocols.rs` to embed.
//!
//! The nested cargo runs `--locked` against the committed `guest/Cargo.lock`, with the outer
//! build's flags, wrappers and target directory removed from its environment so that only
//! `guest/.cargo/config.toml` applies. It needs the `wasm32-unknown-unknown` target, which the
//! repository's `rust-toolchain.toml` installs.

use std::path::PathBuf;
use std::process::Command;
use std::{env, fs};

const PROTOCOLS: &[&str] = &[
    "ping",
    "traceroute",
    "flood",
    "multicast",
    "counter",
    "forward",
    "portmap",
    "routefn",
];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let guest = manifest.join("../../guest");
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default());
    let target_dir = out.join("guest-target");
    println!(
        "cargo:rerun-if-changed={}",
        guest.join("Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        guest.join("Cargo.lock").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        guest.join(".cargo/config.toml").display()
    );
    println!("cargo:rerun-if-changed={}", guest.join("sdk").display());
    println!(
        "cargo:rerun-if-changed={}",
        guest.join("protocols").display()
    );

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&guest)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "wasm32-unknown-unknown",
            "--target-dir",
        ])
        .arg(&target_dir);
    // Only the capsule protocols (and the SDK they use): other crates of the guest workspace
    // are built by their own owners' build steps.
    for p in PROTOCOLS {
        cmd.args(["-p", &format!("anode-proto-{p}")]);
    }
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "CARGO_PROFILE_RELEASE_LTO",
        "CARGO_PROFILE_RELEASE_OPT_LEVEL",
        "CARGO_PROFILE_RELEASE_PANIC",
        "CARGO_PROFILE_RELEASE_CODEGEN_UNITS",
        "CARGO_LLVM_COV",
        "RUSTC_BOOTSTRAP",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "building the guest protocols failed ({s}); is the wasm32-unknown-unknown target \
             installed? (`rustup target add wasm32-unknown-unknown`)"
        ),
        Err(e) => panic!("cannot run cargo for the guest protocols: {e}"),
    }
    let built = target_dir.join("wasm32-unknown-unknown/release");
    let dest = out.join("guest");
    if let Err(e) = fs::create_dir_all(&dest) {
        panic!("cannot create {}: {e}", dest.display());
    }
    for p in PROTOCOLS {
        let from = built.join(format!("anode_proto_{p}.wasm"));
        let to = dest.join(format!("{p}.wasm"));
        if let Err(e) = fs::copy(&from, &to) {
            panic!("cannot copy {} to {}: {e}", from.display(), to.display());
        }
    }
}
