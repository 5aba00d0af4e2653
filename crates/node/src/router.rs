//! `anode router --config FILE`: anode as an IPv4/IPv6 router on real interfaces (the
//! command's options are [`RouterOptions`]; [`RunningRouter`] runs it).
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

use crate::control::ControlServer;

mod check;
mod fastpath;
mod links;
mod modules;
mod node;
mod prefixes;

pub use check::{RouterCheck, check};
pub use fastpath::FastPathMode;
pub use links::LinkType;
use modules::{IpFilterSection, IpModules, ModuleSection, ModulesSection};
use node::{NodeHooks, NodeSection};

/// How `anode router` runs (its command-line options).
#[derive(Debug, Clone)]
pub struct RouterOptions {
    /// Router configuration (TOML: interfaces with addresses, static routes, optional node).
    pub config: PathBuf,
    /// Receive ring layout (`--links packet`).
    pub ring: RingVersion,
    /// V3 only: block retire timeout of the receive rings in milliseconds.
    pub retire_ms: u32,
    /// V2 only: the most frames taken from a ring in one batch.
    pub batch: u32,
    /// Ring block size in bytes (a multiple of the page size).
    pub block_size: u32,
    /// Number of ring blocks.
    pub block_nr: u32,
    /// SCHED_FIFO priority of the data-path thread (1-99; 0 = normal scheduling).
    pub rt_priority: i32,
    /// Kernel fast path for plain IP (`None`: tc if it loads, else none, said once).
    pub fast_path: Option<FastPathMode>,
    /// How the interfaces are owned.
    pub links: LinkType,
}

impl RouterOptions {
    /// The defaults of `anode router --config FILE`.
    pub fn new(config: PathBuf) -> RouterOptions {
        RouterOptions {
            config,
            ring: RingVersion::V2,
            retire_ms: 1,
            batch: 256,
            block_size: 1 << 16,
            block_nr: 512,
            rt_priority: 0,
            fast_path: None,
            links: LinkType::Packet,
        }
    }
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

/// The router being started: the IP router with its interfaces and routes, the links, and
/// what the config says to run behind the filters.
struct Setup {
    text: String,
    cfg: FileConfig,
    router: IpRouter,
    links: links::Links,
    own: PrefixAd,
}

/// A running router: its data-path thread and, with a `[node] control`, the node's control
/// server.
#[derive(Debug)]
pub struct RunningRouter {
    handle: std::thread::JoinHandle<anode_ether::Stopped>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    server: Option<ControlServer>,
    control: Option<PathBuf>,
    interfaces: Vec<String>,
}

impl RunningRouter {
    /// Reads the config, opens the interfaces, builds the router (and its node and modules)
    /// and starts the data path.
    pub fn start(a: &RouterOptions) -> Result<RunningRouter, String> {
        let fast = links::fast_path_for(a.links, a.fast_path)?;
        let mut s = setup(a, fast)?;
        let iface_names: Vec<String> = s.cfg.interfaces.iter().map(|i| i.name.clone()).collect();
        let modules = IpModules::load(
            &a.config,
            &s.cfg.modules,
            &s.cfg.module_list,
            &s.cfg.ip_filters,
            &mut s.router,
        )?;
        let (node, control) = match &s.cfg.node {
            None => (None, None),
            Some(n) => {
                let built = NodeHooks::build(node::NodeSetup {
                    file: &a.config,
                    text: &s.text,
                    section: n,
                    interfaces: &iface_names,
                    own: &s.own,
                    router: &mut s.router,
                    now: Instant::now(),
                })?;
                (Some(built.hooks), built.control)
            }
        };
        let hooks: Box<dyn Hooks> = if node.is_none() && modules.is_none() {
            Box::new(anode_ether::NoHooks)
        } else {
            Box::new(RouterHooks { node, modules })
        };
        let mut dp = s.links.start(s.router, hooks, fast)?;
        if a.rt_priority > 0 {
            if a.rt_priority > 99 {
                return Err(format!(
                    "--rt-priority {}: give 1..99 (SCHED_FIFO priorities), or 0 for normal scheduling",
                    a.rt_priority
                ));
            }
            dp.set_realtime(a.rt_priority);
        }
        let (server, control) = match control {
            None => (None, None),
            Some(pending) => {
                let waker = dp
                    .waker()
                    .map_err(|e| format!("cannot create the data path's waker (eventfd): {e}"))?;
                let path = pending.path().to_path_buf();
                (Some(pending.serve(waker)?), Some(path))
            }
        };
        let stop = dp.stop_flag();
        let handle = dp
            .spawn()
            .map_err(|e| format!("cannot start the data-path thread: {e}"))?;
        Ok(RunningRouter {
            handle,
            stop,
            server,
            control,
            interfaces: iface_names,
        })
    }

    /// The router node's control socket, if it serves one.
    pub fn control_socket(&self) -> Option<&std::path::Path> {
        self.control.as_deref()
    }

    /// The interfaces it routes between, in order.
    pub fn interfaces(&self) -> &[String] {
        &self.interfaces
    }

    /// Waits (checking every 50 ms) until `requested` returns true, the data path ends, or
    /// a control client asks for a shutdown.
    pub fn wait(&self, mut requested: impl FnMut() -> bool) {
        while !requested()
            && !self.handle.is_finished()
            && !self.server.as_ref().is_some_and(|s| s.shutdown_requested())
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the control server and the data path; returns the data path's report.
    pub fn stop(self) -> Result<anode_ether::Stopped, String> {
        if let Some(s) = self.server {
            s.stop();
        }
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle
            .join()
            .map_err(|_| "the data-path thread panicked".to_string())
    }
}

/// Reads the config and builds the IP router over the opened interfaces.
fn setup(a: &RouterOptions, fast: Option<FastPathMode>) -> Result<Setup, String> {
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
    let mut s = Setup {
        router: IpRouter::new(rc),
        links: links::Links::new(a.links, ring_config(a)?, fast),
        own: PrefixAd::default(),
        text,
        cfg,
    };
    for i in &s.cfg.interfaces {
        add_interface(i, &mut s.links, &mut s.router, &mut s.own)?;
    }
    let advertise_static = s
        .cfg
        .node
        .as_ref()
        .is_some_and(NodeSection::advertise_static);
    for r in &s.cfg.routes {
        let prefix: IpCidr = r
            .prefix
            .parse()
            .map_err(|e| format!("route {}: {e}", r.prefix))?;
        s.router
            .add_route(prefix, r.via, r.metric, RouteOrigin::Static)
            .map_err(|e| e.to_string())?;
        if advertise_static {
            s.own.prefixes.push((prefix.network(), r.metric));
        }
    }
    Ok(s)
}

/// The receive rings' layout from the options (block size checked against the page size).
fn ring_config(a: &RouterOptions) -> Result<RingConfig, String> {
    // SAFETY: sysconf has no preconditions.
    let page = u32::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    if a.block_size == 0 || !a.block_size.is_multiple_of(page) {
        return Err(format!(
            "--block-size {}: must be a positive multiple of the page size ({page}), e.g. {}",
            a.block_size,
            1 << 16
        ));
    }
    Ok(RingConfig {
        version: a.ring,
        retire_ms: a.retire_ms.max(1),
        batch: a.batch.max(1),
        block_size: a.block_size,
        block_nr: a.block_nr.max(1),
        // Each link sizes its slots for its MTU (RingConfig::for_mtu).
        ..RingConfig::default()
    })
}

/// Opens interface `i`, adds it to the router and its addresses and prefixes to `own`.
fn add_interface(
    i: &IfaceSection,
    links: &mut links::Links,
    router: &mut IpRouter,
    own: &mut PrefixAd,
) -> Result<(), String> {
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
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::FileConfig;

    #[test]
    fn the_example_router_config_parses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/router.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let cfg: FileConfig = toml::from_str(&text).unwrap();
        assert_eq!(cfg.interfaces.len(), 2);
    }
}
