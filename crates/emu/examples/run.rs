//! Runs a topology file in virtual time and prints the text report (or JSON with `--json`).
//! `cargo run -p anode-emu --example run -- topologies/ring5.toml`
fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    args.retain(|a| a != "--json");
    let Some(path) = args.first() else {
        eprintln!("usage: run TOPOLOGY.toml [--json]");
        std::process::exit(2);
    };
    let r = anode_emu::Topology::load(std::path::Path::new(path)).and_then(anode_emu::run);
    match r {
        Ok(r) if json => print!("{}", r.to_json()),
        Ok(r) => print!("{}", r.to_text()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
