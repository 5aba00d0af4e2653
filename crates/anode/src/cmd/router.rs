//! `anode router --config FILE`: anode as an IPv4/IPv6 router on real interfaces. The
//! router itself is `anode_node::router` (its module docs describe the config file); this
//! module maps the options and prints the counters on exit (text, or `--json`).

use std::path::PathBuf;

use anode_ether::{RingVersion, signals};
use anode_node::router::{FastPathMode, LinkType, RouterOptions, RunningRouter};

use super::CmdResult;

/// Arguments of `anode router`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Router configuration (TOML: interfaces with addresses, static routes, optional node).
    #[arg(long)]
    config: PathBuf,
    /// Print the counters as JSON on exit (with --check: the check's report).
    #[arg(long)]
    json: bool,
    /// Check the config file (addresses, routes, the node's address and links against the
    /// interfaces: the peering rule), print what it sets up, and exit; opens nothing, needs
    /// no root.
    #[arg(long)]
    check: bool,
    /// Receive ring layout: v2 (per-frame slots, a packet is handled as soon as it arrives)
    /// or v3 (blocks, handed over when full or after --retire-ms).
    #[arg(long, default_value = "v2")]
    ring: RingVersion,
    /// V3 only: block retire timeout of the receive rings in milliseconds.
    #[arg(long, default_value_t = 1)]
    retire_ms: u32,
    /// V2 only: the most frames taken from a ring in one batch.
    #[arg(long, default_value_t = 256)]
    batch: u32,
    /// Ring block size in bytes (a multiple of the page size).
    #[arg(long, default_value_t = 1 << 16)]
    block_size: u32,
    /// Number of ring blocks (ring memory per interface = block size x blocks).
    #[arg(long, default_value_t = 512)]
    block_nr: u32,
    /// Run the data-path thread (AF_PACKET or AF_XDP) under SCHED_FIFO at this priority
    /// (1-99; 0 = normal scheduling): keeps it running under overload instead of the threads
    /// that fill its receive rings. Needs CAP_SYS_NICE.
    #[arg(long, default_value_t = 0)]
    rt_priority: i32,
    /// Kernel fast path for plain IP: tc (eBPF on TC ingress, the default), xdp, or off
    /// (every packet through the user-space router). Without the flag a fast path that
    /// cannot be loaded is reported and the router runs without it. Not with --links xsk.
    #[arg(long, value_enum)]
    fast_path: Option<FastPathMode>,
    /// How the interfaces are owned: packet (AF_PACKET rings, the default; the kernel fast
    /// path in front) or xsk (AF_XDP sockets: every frame through the user-space router,
    /// ~1.4x the packets of `packet --fast-path off` on veth; no kernel fast path, as
    /// XDP runs before it; MTU at most 3818). The ring options apply to packet only.
    #[arg(long, value_enum, default_value = "packet")]
    links: LinkType,
}

/// Runs `anode router`.
pub fn run(a: Args) -> CmdResult {
    if a.check {
        let c = anode_node::router::check(&a.config)?;
        if a.json {
            println!(
                "{}",
                serde_json::to_string(&c).map_err(|e| format!("cannot encode JSON: {e}"))?
            );
        } else {
            print!("{}", c.text());
        }
        if c.problems.is_empty() {
            if !a.json {
                println!("{}: ok", a.config.display());
            }
            return Ok(());
        }
        let list: Vec<String> = c.problems.iter().map(|p| format!("  {p}")).collect();
        return Err(format!(
            "{}: {} problem(s):\n{}",
            a.config.display(),
            c.problems.len(),
            list.join("\n")
        ));
    }
    let opts = RouterOptions {
        config: a.config,
        ring: a.ring,
        retire_ms: a.retire_ms,
        batch: a.batch,
        block_size: a.block_size,
        block_nr: a.block_nr,
        rt_priority: a.rt_priority,
        fast_path: a.fast_path,
        links: a.links,
    };
    super::install_signals()?;
    let r = RunningRouter::start(&opts)?;
    if let Some(path) = r.control_socket() {
        eprintln!(
            "anode router: node control socket {} (anode status --socket {})",
            path.display(),
            path.display()
        );
    }
    eprintln!(
        "anode router: routing between {} (SIGINT/SIGTERM to stop)",
        r.interfaces().join(", ")
    );
    r.wait(signals::stop_requested);
    let st = r.stop()?;
    report(&st, a.json);
    Ok(())
}

fn report(st: &anode_ether::Stopped, json: bool) {
    let c = st.router.counters();
    if json {
        let mut m = serde_json::Map::new();
        for (k, v) in c.entries() {
            m.insert(k, v.into());
        }
        m.insert("csum_fixed".into(), st.csum_fixed.into());
        m.insert("hooks".into(), st.hooks_report.clone().into());
        m.insert("fast_path".into(), st.fast_path_report.clone().into());
        let mut links = serde_json::Map::new();
        for (name, entries) in st.links.entries() {
            let counters: serde_json::Map<String, serde_json::Value> = entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.into()))
                .collect();
            links.insert(name, counters.into());
        }
        m.insert("links".into(), links.into());
        m.insert(
            "link_type".into(),
            match &st.links {
                anode_ether::LinkReport::Packet(_) => "packet",
                anode_ether::LinkReport::Xsk(_) => "xsk",
            }
            .into(),
        );
        if let Some(x) = st.xsk() {
            m.insert("af_xdp".into(), x.info.to_string().into());
        }
        println!("{}", serde_json::Value::Object(m));
    } else {
        println!("anode router counters:");
        for (k, v) in c.entries() {
            println!("  {k:<28} {v}");
        }
        println!("  {:<28} {}", "csum_fixed", st.csum_fixed);
        for l in st.hooks_report.iter().chain(&st.fast_path_report) {
            println!("  {l}");
        }
        for l in st.links.lines() {
            println!("  {l}");
        }
    }
}
