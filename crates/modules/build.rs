//! Builds the service modules of the guest workspace (`../../guest/modules`) with
//! `anode-guest-build`, as `crates/capsule/build.rs` builds the protocols, and copies each
//! module's `.wasm` and `manifest.toml` to `OUT_DIR/modules/` for `src/builtin.rs` to embed,
//! with the list of names (`OUT_DIR/builtin_list.rs`).

use anode_guest_build::{GuestWorkspace, copy_into};

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
    "liststats",
    "hopcount",
    "tally",
];

fn main() {
    let guest = GuestWorkspace::from_build_env();
    guest.rerun_if_changed(&["modules"]);
    let packages: Vec<String> = MODULES.iter().map(|m| format!("anode-mod-{m}")).collect();
    let staged = guest.build("modules", &packages).and_then(|built| {
        let files = MODULES.iter().zip(&packages).flat_map(|(m, pkg)| {
            [
                (built.wasm(pkg), format!("{m}.wasm")),
                (
                    guest.root().join(format!("modules/{m}/manifest.toml")),
                    format!("{m}.toml"),
                ),
            ]
        });
        copy_into(&guest.out_dir().join("modules"), files)
    });
    if let Err(e) = staged {
        panic!("{e}");
    }
    // The list `src/builtin.rs` embeds, written once here.
    let names: Vec<String> = MODULES.iter().map(|m| format!("{m:?}")).collect();
    let list = format!("builtin!({});\n", names.join(", "));
    if let Err(e) = std::fs::write(guest.out_dir().join("builtin_list.rs"), list) {
        panic!("cannot write the built-in module list: {e}");
    }
}
