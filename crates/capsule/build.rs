//! Builds the capsule protocols of the guest workspace (`../../guest/protocols`) with
//! `anode-guest-build` (release, `wasm32-unknown-unknown`, nested `--locked` cargo with the
//! outer build's flags removed, its own target directory under `OUT_DIR`), and copies each
//! protocol's `.wasm` to `OUT_DIR/guest/<name>.wasm` for `src/protocols.rs` to embed.

use anode_guest_build::{GuestWorkspace, copy_into};

const PROTOCOLS: &[&str] = &[
    "ping",
    "traceroute",
    "flood",
    "multicast",
    "counter",
    "forward",
    "portmap",
    "routefn",
    "store",
];

fn main() {
    let guest = GuestWorkspace::from_build_env();
    guest.rerun_if_changed(&["protocols"]);
    // Only the capsule protocols (and the SDK they use): other crates of the guest workspace
    // are built by their own owners' build steps.
    let packages: Vec<String> = PROTOCOLS
        .iter()
        .map(|p| format!("anode-proto-{p}"))
        .collect();
    let staged = guest.build("protocols", &packages).and_then(|built| {
        let files = PROTOCOLS
            .iter()
            .zip(&packages)
            .map(|(p, pkg)| (built.wasm(pkg), format!("{p}.wasm")));
        copy_into(&guest.out_dir().join("guest"), files)
    });
    if let Err(e) = staged {
        panic!("{e}");
    }
}
