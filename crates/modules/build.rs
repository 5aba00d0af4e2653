//! Builds the guest workspace (`../../guest`) for `wasm32-unknown-unknown` like
//! `crates/capsule/build.rs` does (same nested cargo invocation, `--locked`, outer flags
//! removed), and copies each service module's `.wasm` and `manifest.toml` to
//! `OUT_DIR/modules/` for `src/builtin.rs` to embed.

use std::path::PathBuf;
use std::process::Command;
use std::{env, fs};

const MODULES: &[&str] = &[
    "counter",
    "null",
    "spin",
    "fcfs",
    "rr",
    "drr",
    "prio",
    "flowcount",
    "ratelimit",
    "flowpin",
    "verdicts",
    "mix",
    "knob",
];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let guest = manifest.join("../../guest");
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default());
    let target_dir = out.join("guest-target");
    for p in ["Cargo.toml", "Cargo.lock", ".cargo/config.toml", "modules"] {
        println!("cargo:rerun-if-changed={}", guest.join(p).display());
    }
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&guest)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "wasm32-unknown-unknown",
        ])
        .args(
            MODULES
                .iter()
                .flat_map(|m| ["-p".to_string(), format!("anode-mod-{m}")]),
        )
        .arg("--target-dir")
        .arg(&target_dir);
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
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "building the guest modules failed ({s}); is the wasm32-unknown-unknown target \
             installed? (`rustup target add wasm32-unknown-unknown`)"
        ),
        Err(e) => panic!("cannot run cargo for the guest modules: {e}"),
    }
    let built = target_dir.join("wasm32-unknown-unknown/release");
    let dest = out.join("modules");
    if let Err(e) = fs::create_dir_all(&dest) {
        panic!("cannot create {}: {e}", dest.display());
    }
    for m in MODULES {
        let pairs = [
            (
                built.join(format!("anode_mod_{m}.wasm")),
                dest.join(format!("{m}.wasm")),
            ),
            (
                guest.join(format!("modules/{m}/manifest.toml")),
                dest.join(format!("{m}.toml")),
            ),
        ];
        for (from, to) in pairs {
            if let Err(e) = fs::copy(&from, &to) {
                panic!("cannot copy {} to {}: {e}", from.display(), to.display());
            }
        }
    }
}
