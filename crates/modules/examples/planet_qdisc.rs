//! Runs `topologies/planet-qdisc.toml` (PLANet §V-A) and writes the bandwidth-over-time
//! figure: `cargo run --release -p anode-modules --example planet_qdisc -- [OUT.svg]`.

use anode_modules::planet;

fn main() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/planet-qdisc.toml"
    );
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "docs/modules-planet-qdisc.svg".into());
    let src = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => return eprintln!("{path}: {e}"),
    };
    let r = match planet::run(&src, "topologies/planet-qdisc.toml") {
        Ok(r) => r,
        Err(e) => return eprintln!("{e}"),
    };
    for (name, a, b) in [
        ("S alone (FCFS)", 3.0, 6.0),
        ("FCFS, MS on", 7.0, 12.0),
        ("round robin", 13.0, 22.0),
        ("RR, S stopped", 23.0, 25.0),
        ("FCFS again", 26.0, 30.0),
    ] {
        println!(
            "{name:>16}: S {:5.1} Mbps  MS {:5.1} Mbps",
            planet::mean(&r.s, a, b),
            planet::mean(&r.ms, a, b)
        );
    }
    if let Err(e) = std::fs::write(&out, planet::figure(&r)) {
        eprintln!("{out}: {e}");
    } else {
        println!("wrote {out} (all steps ok: {})", r.passed);
    }
}
