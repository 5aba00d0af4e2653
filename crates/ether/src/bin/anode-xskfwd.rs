//! anode-xskfwd: the IP router (`anode_ip::IpRouter`, as `anode router` runs it) over AF_XDP
//! sockets instead of TPACKET rings, for measuring one against the other
//! (`scripts/bench-router.sh` mode `xsk`). See `anode_ether::xsk`.
//!
//! ```text
//! anode-xskfwd --iface r0=198.18.1.2/24,2001:2:0:1::2/64 --iface r1=198.18.2.1/24,2001:2:0:2::1/64
//!              [--route PREFIX=GATEWAY]... [--umem auto|shared|separate]
//!              [--bind auto|copy|zerocopy] [--xdp auto|driver|skb] [--batch 64] [--ring 4096]
//!              [--chunks 16384] [--chunk-size 2048] [--tx-budget 64] [--queue 0] [--secs 0]
//! ```
//!
//! Interfaces are the router's in the order given. It prints its setup (bind mode, XDP
//! mode, whether the UMEM is shared) and `ready`, runs until SIGINT / SIGTERM (or `--secs`
//! seconds, 0: no limit), then prints the router's counters and one line per interface.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anode_ether::signals;
use anode_ether::xsk::{UmemPref, XskConfig, XskForwarder, router_for};
use anode_ip::{IpCidr, RouteOrigin};

/// The IP router over AF_XDP sockets (`anode_ether::xsk`).
#[derive(Debug, clap::Parser)]
#[command(name = "anode-xskfwd", version)]
struct Cli {
    /// An interface and its addresses, NAME=ADDR/LEN[,ADDR/LEN...]; one per interface, in
    /// order.
    #[arg(long = "iface", required = true, value_parser = parse_iface)]
    ifaces: Vec<(String, Vec<IpCidr>)>,
    /// A static route, PREFIX=GATEWAY; repeatable.
    #[arg(long = "route", value_parser = parse_route)]
    routes: Vec<(IpCidr, std::net::IpAddr)>,
    /// UMEM: auto, shared or separate.
    #[arg(long)]
    umem: Option<String>,
    /// Socket bind mode: auto, copy or zerocopy.
    #[arg(long)]
    bind: Option<String>,
    /// XDP attach mode: auto, driver or skb.
    #[arg(long)]
    xdp: Option<String>,
    /// Frames per batch.
    #[arg(long)]
    batch: Option<u32>,
    /// Ring size.
    #[arg(long)]
    ring: Option<u32>,
    /// UMEM chunks.
    #[arg(long)]
    chunks: Option<u32>,
    /// UMEM chunk size.
    #[arg(long)]
    chunk_size: Option<u32>,
    /// Frames sent per socket per round.
    #[arg(long)]
    tx_budget: Option<u32>,
    /// The queue to bind.
    #[arg(long)]
    queue: Option<u32>,
    /// Seconds to run (0: until SIGINT/SIGTERM).
    #[arg(long, default_value_t = 0.0)]
    secs: f64,
}

fn parse_iface(v: &str) -> Result<(String, Vec<IpCidr>), String> {
    let (name, addrs) = v.split_once('=').ok_or("expected NAME=ADDR/LEN[,...]")?;
    let addrs = addrs
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<IpCidr>().map_err(|e| format!("{s}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((name.to_string(), addrs))
}

fn parse_route(v: &str) -> Result<(IpCidr, std::net::IpAddr), String> {
    let (p, g) = v.split_once('=').ok_or("expected PREFIX=GATEWAY")?;
    Ok((
        p.parse().map_err(|e| format!("{p}: {e}"))?,
        g.parse().map_err(|e| format!("{g}: {e}"))?,
    ))
}

struct Args {
    ifaces: Vec<(String, Vec<IpCidr>)>,
    routes: Vec<(IpCidr, std::net::IpAddr)>,
    cfg: XskConfig,
    secs: f64,
}

fn parse() -> Result<Args, String> {
    let c = <Cli as clap::Parser>::parse();
    let mut cfg = XskConfig::default();
    let bad = |k: &str, e: &dyn std::fmt::Display| format!("--{k}: {e}");
    if let Some(v) = &c.umem {
        cfg.umem = v.parse::<UmemPref>().map_err(|e| bad("umem", &e))?;
    }
    if let Some(v) = &c.bind {
        cfg.socket.bind = v.parse().map_err(|e| bad("bind", &e))?;
    }
    if let Some(v) = &c.xdp {
        cfg.xdp = v.parse().map_err(|e| bad("xdp", &e))?;
    }
    if let Some(v) = c.batch {
        cfg.batch = v;
    }
    if let Some(v) = c.ring {
        cfg.socket.ring_size = v;
    }
    if let Some(v) = c.chunks {
        cfg.chunks = v;
    }
    if let Some(v) = c.chunk_size {
        cfg.chunk_size = v;
    }
    if let Some(v) = c.tx_budget {
        cfg.socket.tx_budget = v;
    }
    if let Some(v) = c.queue {
        cfg.queue = v;
    }
    if !(0.0..=86400.0).contains(&c.secs) {
        return Err(format!("--secs {}: give 0..86400 (0: no limit)", c.secs));
    }
    cfg.ifaces = c.ifaces.iter().map(|(n, _)| n.clone()).collect();
    Ok(Args {
        ifaces: c.ifaces,
        routes: c.routes,
        cfg,
        secs: c.secs,
    })
}

fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("anode-xskfwd: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = signals::install() {
        eprintln!("anode-xskfwd: installing signal handlers: {e}");
        return ExitCode::FAILURE;
    }
    let mut router = match router_for(&a.ifaces) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("anode-xskfwd: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (prefix, gw) in &a.routes {
        if let Err(e) = router.add_route(*prefix, *gw, 1, RouteOrigin::Static) {
            eprintln!("anode-xskfwd: route {prefix} via {gw}: {e}");
            return ExitCode::FAILURE;
        }
    }
    let fwd = match XskForwarder::open(router, &a.cfg) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("anode-xskfwd: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("anode-xskfwd: {}", fwd.info());
    println!("ready");
    let stop = fwd.stop_flag();
    let handle = match fwd.spawn() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("anode-xskfwd: starting the forwarder thread: {e}");
            return ExitCode::FAILURE;
        }
    };
    let start = Instant::now();
    while !signals::stop_requested()
        && !handle.is_finished()
        && (a.secs == 0.0 || start.elapsed().as_secs_f64() < a.secs)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let st = match handle.join() {
        Ok(s) => s,
        Err(_) => {
            eprintln!("anode-xskfwd: the forwarder thread panicked");
            return ExitCode::FAILURE;
        }
    };
    println!("anode-xskfwd counters:");
    for (k, v) in st.router.counters().entries() {
        println!("  {k:<28} {v}");
    }
    for l in st.links.lines() {
        println!("  {l}");
    }
    ExitCode::SUCCESS
}
