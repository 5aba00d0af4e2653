//! `anode router --config FILE`: anode as an IPv4/IPv6 router on real interfaces.
//!
//! The interfaces named in the file are opened through AF_PACKET (`anode-ether`) and the
//! sans-IO `anode_ip::IpRouter` forwards between them on one data-path thread. In front of
//! it, by default, an eBPF program on TC ingress forwards plain IP packets from the
//! router's own tables in the kernel and passes everything else on to it (`--fast-path`,
//! `router/fastpath.rs`). `--links xsk` opens them through AF_XDP sockets instead
//! (`router/links.rs`): every frame goes through the user-space router, at 1.4x the packets
//! of `--links packet --fast-path off` on the same CPU (85 % of kernel forwarding on the
//! veth testbed; 1.8-1.9x with a CPU of its own), with no kernel fast
//! path (the XDP redirect runs before TC; `--fast-path tc|xdp` with it is refused) and MTUs
//! up to 3818; everything below (node, modules, control socket, report) is the same. With a
//! `[node]` section, a local anode node also runs (`router/node.rs`): ANEP over UDP port
//! 3322 addressed to the router and ANEP directly over Ethernet (EtherType 0x88B5) are
//! diverted to it by the router's filters; its packets leave as UDP from the router's
//! addresses or as Ethernet frames to the peer's MAC. The node runs the capsule and PLAN
//! EEs under the NodeOS like `anode node`, so capsules and PLAN programs carried inside IP
//! run on the router, and with `control` it serves a control socket for the CLI. Counters
//! are printed on SIGINT/SIGTERM or `anode stop --socket` (`--json` for JSON).
//!
//! ```toml
//! [router]                 # optional
//! icmp_rate = 100          # ICMP errors per second (token bucket) ...
//! icmp_burst = 50          # ... and its depth
//!
//! [[interface]]
//! name = "r0"              # the Linux interface; its MAC and MTU are used unless given
//! ipv4 = ["198.18.1.2/24"]
//! ipv6 = ["2001:2:0:1::2/64"]
//!
//! [[route]]
//! prefix = "198.19.0.0/16"
//! via = "198.18.2.2"
//! metric = 1
//!
//! [node]                   # optional: a local anode node behind the filters
//! address = "198.18.1.2:3322"
//! control = "/run/anode/router.sock"  # optional: its control socket (anode ping --socket ...)
//! ees = true               # the capsule and PLAN EEs (default true)
//! capsule_cache = "code"   # capsule code cache (default: as anode node's, by port)
//! [node.nodeos]            # optional: the keys of a node file's [nodeos]
//! memory_bytes = 67108864
//! [[node.link]]            # a peer over UDP ...
//! peer = "198.18.1.1:3322"
//! [[node.link]]            # ... or directly over Ethernet (one link per peer MAC)
//! peer = "198.18.2.2:3322"
//! interface = "r1"
//! mac = "02:00:00:00:00:02"
//! [[node.send]]            # optional: the node sends a datagram (tests, demos) ...
//! to = "198.18.2.2:3322"   # ... to this node
//! port = 7                 # ... application port
//! payload = "hello"
//! every_ms = 200           # ... repeatedly (until routes converge), default 200
//! count = 50               # ... this many times, default 50
//! ```
//!
//! More `[node]` keys: `advertise_ms` (default 1000; 0 turns it off) is the interval of the
//! prefix exchange: the node advertises the router's connected prefixes (and its static
//! routes with `advertise_static = true`) to every node it has a route to, and the prefixes
//! other routers advertise are installed as learned routes through the distance-vector next
//! hop (see `router/prefixes.rs` and `anode_ip::learn`); `[node.routing]` sets the
//! distance-vector timers (`hello_interval_ms`, `dead_interval_ms`, ... as in `anode node`).
//!
//! With `[modules]`, `[[module]]` and `[[ip_filter]]`, IP packets matching a filter go
//! through signed service modules (`router/modules.rs` has the format and the verdicts);
//! the rest stay on the fast path. The exit report includes what the modules did.
//!
//! The node's neighbor changes, routing-table changes, learned IP routes and datagrams
//! delivered to it are printed on stderr (`anode router: node ...`,
//! `anode router: learned routes: ...`).
//!
//! The interfaces should carry no kernel IP addresses (anode owns the addresses; otherwise
//! the kernel would answer ARP and ping too) and IPv6 should be disabled on them in the
//! kernel (`sysctl net.ipv6.conf.IF.disable_ipv6=1`); kernel forwarding should be off.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anode_ether::{Hooks, RingConfig, RingVersion};
use anode_ip::learn::PrefixAd;
use anode_ip::wire::{Ipv4Cidr, Ipv6Cidr, MacAddr};
use anode_ip::{FilterId, IfaceId, InterfaceConfig, IpCidr, IpRouter, RouteOrigin, RouterConfig};
use serde::Deserialize;

use super::CmdResult;
use anode_ether::signals;

mod fastpath;
mod links;
mod modules;
mod node;
mod prefixes;

use modules::{IpFilterSection, IpModules, ModuleSection, ModulesSection};
use node::{NodeHooks, NodeSection};

/// Arguments of `anode router`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Router configuration (TOML: interfaces with addresses, static routes, optional node).
    #[arg(long)]
    config: PathBuf,
    /// Print the counters as JSON on exit.
    #[arg(long)]
    json: bool,
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
    fast_path: Option<fastpath::FastPathMode>,
    /// How the interfaces are owned: packet (AF_PACKET rings, the default; the kernel fast
    /// path in front) or xsk (AF_XDP sockets: every frame through the user-space router,
    /// ~1.4x the packets of `packet --fast-path off` on veth; no kernel fast path, as
    /// XDP runs before it; MTU at most 3818). The ring options apply to packet only.
    #[arg(long, value_enum, default_value = "packet")]
    links: links::LinkType,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    router: RouterSection,
    #[serde(rename = "interface")]
    interfaces: Vec<IfaceSection>,
    #[serde(default, rename = "route")]
    routes: Vec<RouteSection>,
    node: Option<NodeSection>,
    #[serde(default)]
    modules: ModulesSection,
    #[serde(default, rename = "module")]
    module_list: Vec<ModuleSection>,
    #[serde(default, rename = "ip_filter")]
    ip_filters: Vec<IpFilterSection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouterSection {
    icmp_rate: Option<u32>,
    icmp_burst: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IfaceSection {
    name: String,
    #[serde(default)]
    ipv4: Vec<String>,
    #[serde(default)]
    ipv6: Vec<String>,
    mac: Option<String>,
    mtu: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteSection {
    prefix: String,
    via: IpAddr,
    #[serde(default = "one")]
    metric: u32,
}

fn one() -> u32 {
    1
}

/// Everything behind the router's filters: the local node and the service modules.
struct RouterHooks {
    node: Option<NodeHooks>,
    modules: Option<IpModules>,
}

impl Hooks for RouterHooks {
    fn divert(
        &mut self,
        now: Instant,
        router: &mut IpRouter,
        iface: IfaceId,
        filter: FilterId,
        frame: &[u8],
        l3_offset: usize,
    ) {
        match (&mut self.modules, &mut self.node) {
            (Some(m), _) if m.owns(filter) => m.divert(now, router, iface, frame, l3_offset),
            (_, Some(n)) => n.divert(now, router, iface, filter, frame, l3_offset),
            _ => {}
        }
    }

    fn poll(&mut self, now: Instant, router: &mut IpRouter) -> Option<Instant> {
        self.node.as_mut().and_then(|n| n.poll(now, router))
    }

    fn report(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(m) = &self.modules {
            let c = m.counts();
            v.push(format!(
                "modules: {} packets diverted: {} continued, {} dropped, {} consumed, {} redirects dropped, {} emitted packets dropped, {} malformed",
                c.seen,
                c.continued,
                c.dropped,
                c.consumed,
                c.redirect_dropped,
                c.emits_dropped,
                c.malformed
            ));
            v.extend(m.report().into_iter().map(|l| format!("module {l}")));
        }
        if let Some(n) = &self.node {
            v.push(format!(
                "node: {} diverted frames matched no node link",
                n.unmatched()
            ));
        }
        v
    }
}

fn parse_mac(s: &str) -> Result<MacAddr, String> {
    s.parse()
        .map_err(|e: anode_ip::wire::ethernet::MacParseError| e.to_string())
}

/// Runs `anode router`.
pub fn run(a: Args) -> CmdResult {
    let text = std::fs::read_to_string(&a.config)
        .map_err(|e| format!("cannot read {}: {e}", a.config.display()))?;
    let cfg: FileConfig =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", a.config.display()))?;
    if cfg.interfaces.is_empty() {
        return Err(format!(
            "{}: no [[interface]]: name at least one interface to route between",
            a.config.display()
        ));
    }
    let mut rc = RouterConfig::default();
    if let Some(r) = cfg.router.icmp_rate {
        rc.icmp_rate = r;
    }
    if let Some(b) = cfg.router.icmp_burst {
        rc.icmp_burst = b;
    }
    let fast = links::fast_path_for(a.links, a.fast_path)?;
    let mut router = IpRouter::new(rc);
    // SAFETY: sysconf has no preconditions.
    let page = u32::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    if a.block_size == 0 || !a.block_size.is_multiple_of(page) {
        return Err(format!(
            "--block-size {}: must be a positive multiple of the page size ({page}), e.g. {}",
            a.block_size,
            1 << 16
        ));
    }
    let ring = RingConfig {
        version: a.ring,
        retire_ms: a.retire_ms.max(1),
        batch: a.batch.max(1),
        block_size: a.block_size,
        block_nr: a.block_nr.max(1),
        // Each link sizes its slots for its MTU (RingConfig::for_mtu).
        ..RingConfig::default()
    };
    let mut links = links::Links::new(a.links, ring, fast);
    let mut own = PrefixAd::default();
    for i in &cfg.interfaces {
        let (link_mac, link_mtu) = links.add(&i.name, i.mtu)?;
        let ipv4 = i
            .ipv4
            .iter()
            .map(|s| {
                s.parse::<Ipv4Cidr>()
                    .map_err(|e| format!("interface {}: {e}", i.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ipv6 = i
            .ipv6
            .iter()
            .map(|s| {
                s.parse::<Ipv6Cidr>()
                    .map_err(|e| format!("interface {}: {e}", i.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        own.addrs.extend(ipv4.iter().map(|c| IpCidr::V4(*c)));
        own.addrs.extend(ipv6.iter().map(|c| IpCidr::V6(*c)));
        own.prefixes.extend(
            ipv4.iter()
                .map(|c| (IpCidr::V4(c.network()), 0))
                .chain(ipv6.iter().map(|c| (IpCidr::V6(c.network()), 0))),
        );
        let mac = match &i.mac {
            Some(m) => parse_mac(m)?,
            None => link_mac,
        };
        router
            .add_interface(InterfaceConfig {
                name: i.name.clone(),
                mac,
                mtu: i.mtu.unwrap_or(link_mtu),
                ipv4,
                ipv6,
            })
            .map_err(|e| e.to_string())?;
    }
    for r in &cfg.routes {
        let prefix: IpCidr = r
            .prefix
            .parse()
            .map_err(|e| format!("route {}: {e}", r.prefix))?;
        router
            .add_route(prefix, r.via, r.metric, RouteOrigin::Static)
            .map_err(|e| e.to_string())?;
        if cfg.node.as_ref().is_some_and(NodeSection::advertise_static) {
            own.prefixes.push((prefix.network(), r.metric));
        }
    }
    let now = Instant::now();
    let modules = IpModules::load(
        &a.config,
        &cfg.modules,
        &cfg.module_list,
        &cfg.ip_filters,
        &mut router,
    )?;
    let iface_names: Vec<String> = cfg.interfaces.iter().map(|i| i.name.clone()).collect();
    let (node, control) = match &cfg.node {
        None => (None, None),
        Some(n) => {
            let built = NodeHooks::build(node::NodeSetup {
                file: &a.config,
                text: &text,
                section: n,
                interfaces: &iface_names,
                own: &own,
                router: &mut router,
                now,
            })?;
            (Some(built.hooks), built.control)
        }
    };
    let hooks: Box<dyn Hooks> = if node.is_none() && modules.is_none() {
        Box::new(anode_ether::NoHooks)
    } else {
        Box::new(RouterHooks { node, modules })
    };
    signals::install().map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let mut dp = links.start(router, hooks, fast)?;
    if a.rt_priority > 0 {
        if a.rt_priority > 99 {
            return Err(format!(
                "--rt-priority {}: give 1..99 (SCHED_FIFO priorities), or 0 for normal scheduling",
                a.rt_priority
            ));
        }
        dp.set_realtime(a.rt_priority);
    }
    let server = match control {
        None => None,
        Some(pending) => {
            let waker = dp
                .waker()
                .map_err(|e| format!("cannot create the data path's waker (eventfd): {e}"))?;
            let path = pending.path().to_path_buf();
            let server = pending.serve(waker)?;
            eprintln!(
                "anode router: node control socket {} (anode status --socket {})",
                path.display(),
                path.display()
            );
            Some(server)
        }
    };
    let stop = dp.stop_flag();
    let handle = dp
        .spawn()
        .map_err(|e| format!("cannot start the data-path thread: {e}"))?;
    eprintln!(
        "anode router: routing between {} (SIGINT/SIGTERM to stop)",
        cfg.interfaces
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    while !signals::stop_requested()
        && !handle.is_finished()
        && !server.as_ref().is_some_and(|s| s.shutdown_requested())
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(s) = server {
        s.stop();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let st = handle
        .join()
        .map_err(|_| "the data-path thread panicked".to_string())?;
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
