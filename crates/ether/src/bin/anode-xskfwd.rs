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

const USAGE: &str = "usage: anode-xskfwd --iface NAME=ADDR/LEN[,ADDR/LEN...] (one per interface, in order) [--route PREFIX=GATEWAY]... [--umem auto|shared|separate] [--bind auto|copy|zerocopy] [--xdp auto|driver|skb] [--batch 64] [--ring 4096] [--chunks 16384] [--chunk-size 2048] [--tx-budget 64] [--queue 0] [--secs 0]";

struct Args {
    ifaces: Vec<(String, Vec<IpCidr>)>,
    routes: Vec<(IpCidr, std::net::IpAddr)>,
    cfg: XskConfig,
    secs: f64,
}

fn parse() -> Result<Args, String> {
    let mut a = std::env::args().skip(1);
    let mut cfg = XskConfig::default();
    let (mut ifaces, mut routes, mut secs) = (Vec::new(), Vec::new(), 0.0f64);
    while let Some(k) = a.next() {
        let v = a.next().ok_or(format!("{k} needs a value; {USAGE}"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{k} {v}: {e}; {USAGE}");
        match k.as_str() {
            "--iface" => {
                let (name, addrs) = v
                    .split_once('=')
                    .ok_or_else(|| bad(&"expected NAME=ADDRS"))?;
                let addrs = addrs
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse::<IpCidr>().map_err(|e| bad(&e)))
                    .collect::<Result<Vec<_>, _>>()?;
                ifaces.push((name.to_string(), addrs));
            }
            "--route" => {
                let (p, g) = v
                    .split_once('=')
                    .ok_or_else(|| bad(&"expected PREFIX=GATEWAY"))?;
                routes.push((
                    p.parse().map_err(|e| bad(&e))?,
                    g.parse().map_err(|e| bad(&e))?,
                ));
            }
            "--umem" => cfg.umem = v.parse::<UmemPref>().map_err(|e| bad(&e))?,
            "--bind" => cfg.socket.bind = v.parse().map_err(|e| bad(&e))?,
            "--xdp" => cfg.xdp = v.parse().map_err(|e| bad(&e))?,
            "--batch" => cfg.batch = v.parse().map_err(|e| bad(&e))?,
            "--ring" => cfg.socket.ring_size = v.parse().map_err(|e| bad(&e))?,
            "--chunks" => cfg.chunks = v.parse().map_err(|e| bad(&e))?,
            "--chunk-size" => cfg.chunk_size = v.parse().map_err(|e| bad(&e))?,
            "--tx-budget" => cfg.socket.tx_budget = v.parse().map_err(|e| bad(&e))?,
            "--queue" => cfg.queue = v.parse().map_err(|e| bad(&e))?,
            "--secs" => secs = v.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown option {k}; {USAGE}")),
        }
    }
    if ifaces.is_empty() {
        return Err(format!("no --iface; {USAGE}"));
    }
    if !(0.0..=86400.0).contains(&secs) {
        return Err(format!("--secs {secs}: give 0..86400 (0: no limit)"));
    }
    cfg.ifaces = ifaces.iter().map(|(n, _)| n.clone()).collect();
    Ok(Args {
        ifaces,
        routes,
        cfg,
        secs,
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
