//! Compiles the kernel fast path (`bpf/fastpath.c`), the transit fast path (`bpf/transit.c`) and the AF_XDP redirect program
//! (`bpf/xsk.c`) into eBPF objects in `OUT_DIR`, which `src/fastpath` and `src/xsk` embed
//! with `include_bytes!`; all the same way. Needs clang with the BPF target (`clang-14`
//! or `clang`; the environment variable `CLANG` names another) and the kernel UAPI headers
//! (linux-libc-dev); `scripts/setup.sh` installs both.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-changed=bpf/anode_bpf.h");
    for name in ["fastpath", "xsk", "transit"] {
        compile(name);
    }
}

/// Compiles `bpf/NAME.c` into `OUT_DIR/NAME.o`.
fn compile(name: &str) {
    let src = format!("bpf/{name}.c");
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join(format!("{name}.o"));

    let candidates: Vec<String> = match env::var("CLANG") {
        Ok(c) if !c.is_empty() => vec![c],
        _ => vec!["clang-14".into(), "clang".into()],
    };
    let clang = candidates.iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(clang) = clang else {
        panic!(
            "anode-ether needs clang to compile its eBPF programs ({src}); tried {candidates:?}. \
             Run scripts/setup.sh (it installs the apt package clang) or set CLANG=/path/to/clang."
        );
    };

    let mut cmd = Command::new(clang);
    cmd.args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"]);
    // The UAPI headers include <asm/types.h>, which lives under the multiarch directory.
    if let Some(dir) = multiarch_include() {
        cmd.arg(format!("-I{dir}"));
    }
    cmd.arg("-c").arg(&src).arg("-o").arg(&out);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running {clang} for {src}: {e}"));
    if !status.success() {
        panic!("{clang} failed to compile {src} ({status})");
    }
}

/// `/usr/include/<multiarch>` of the build host, if it has one.
fn multiarch_include() -> Option<String> {
    let from_gcc = Command::new("gcc")
        .arg("-print-multiarch")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    let guess = || {
        let arch = env::var("CARGO_CFG_TARGET_ARCH").ok()?;
        Some(format!("{arch}-linux-gnu"))
    };
    let m = from_gcc.or_else(guess)?;
    let dir = format!("/usr/include/{m}");
    std::path::Path::new(&dir).is_dir().then_some(dir)
}
