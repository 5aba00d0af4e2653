//! `anode router --config FILE`: anode as an IPv4/IPv6 router on real interfaces.
//!
//! The interfaces named in the file are opened through AF_PACKET (`anode-ether`) and the
//! sans-IO `anode_ip::IpRouter` forwards between them on one data-path thread. In front of
//! it, by default, an eBPF program on TC ingress forwards plain IP packets from the
//! router's own tables in the kernel and passes everything else on to it (`--fast-path`,
//! `router/fastpath.rs`). With a
//! `[node]` section, a local anode node also runs: ANEP over UDP port 3322 addressed to the
//! router and ANEP directly over Ethernet (EtherType 0x88B5) are diverted to it by the
//! router's filters; its packets leave as UDP from the router's addresses or as Ethernet
//! frames to the peer's MAC. Counters are printed on SIGINT/SIGTERM (`--json` for JSON).
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

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anode_core::{Event, LinkConfig, LinkId, Node, NodeConfig};
use anode_ether::{DataPath, EtherLink, Hooks, Receive, RingConfig, RingVersion};
use anode_ip::learn::PrefixAd;
use anode_ip::wire::{EtherType, Ipv4Cidr, Ipv4Packet, Ipv6Cidr, Ipv6Packet, MacAddr, UdpPacket};
use anode_ip::{
    ANEP_UDP_PORT, ETHERTYPE_ANEP, Filter, FilterId, IfaceId, InterfaceConfig, IpCidr, IpRouter,
    RouteOrigin, RouterConfig,
};
use anode_wire::NodeAddr;
use serde::Deserialize;

use super::CmdResult;
use crate::signals;

mod fastpath;
mod modules;
mod prefixes;

use modules::{IpFilterSection, IpModules, ModuleSection, ModulesSection};
use prefixes::PrefixExchange;

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
    /// Run the data-path thread under SCHED_FIFO at this priority (1-99; 0 = normal
    /// scheduling): keeps it running under overload instead of the threads that fill its
    /// receive rings. Needs CAP_SYS_NICE.
    #[arg(long, default_value_t = 0)]
    rt_priority: i32,
    /// Kernel fast path for plain IP: tc (eBPF on TC ingress, the default), xdp, or off
    /// (every packet through the user-space router). Without the flag a fast path that
    /// cannot be loaded is reported and the router runs without it.
    #[arg(long, value_enum)]
    fast_path: Option<fastpath::FastPathMode>,
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSection {
    address: NodeAddr,
    #[serde(default, rename = "link")]
    links: Vec<NodeLinkSection>,
    #[serde(default, rename = "send")]
    sends: Vec<NodeSendSection>,
    #[serde(default = "default_advertise_ms")]
    advertise_ms: u64,
    #[serde(default)]
    advertise_static: bool,
    routing: Option<anode_core::RoutingConfig>,
}

fn default_advertise_ms() -> u64 {
    1000
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSendSection {
    to: NodeAddr,
    port: u16,
    payload: String,
    #[serde(default = "default_every_ms")]
    every_ms: u64,
    #[serde(default = "default_count")]
    count: u32,
}

fn default_every_ms() -> u64 {
    200
}

fn default_count() -> u32 {
    50
}

/// A datagram the node sends on a schedule.
struct Send {
    cfg: NodeSendSection,
    next: Instant,
    left: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeLinkSection {
    peer: NodeAddr,
    interface: Option<String>,
    mac: Option<String>,
}

/// How a node link reaches its peer.
#[derive(Debug, Clone, Copy)]
enum Carrier {
    Udp(SocketAddr),
    Ether(IfaceId, MacAddr),
}

/// The local node behind the router's filters.
struct NodeHooks {
    node: Node,
    carriers: Vec<Carrier>,
    udp_filter: FilterId,
    ether_filter: FilterId,
    unmatched: u64,
    sends: Vec<Send>,
    route_changes: u64,
    prefixes: Option<PrefixExchange>,
}

impl NodeHooks {
    fn link_for_udp(&self, from: SocketAddr) -> Option<LinkId> {
        self.node.link_by_peer(&NodeAddr::from(from))
    }

    fn link_for_mac(&self, iface: IfaceId, mac: MacAddr) -> Option<LinkId> {
        self.carriers
            .iter()
            .position(|c| matches!(c, Carrier::Ether(i, m) if *i == iface && *m == mac))
            .map(|i| LinkId(i as u32))
    }

    fn flush(&mut self, now: Instant, router: &mut IpRouter) {
        while let Some(t) = self.node.poll_transmit() {
            let r = match self.carriers.get(t.link.0 as usize) {
                Some(Carrier::Udp(dst)) => router.send_udp(now, None, ANEP_UDP_PORT, *dst, &t.buf),
                Some(Carrier::Ether(iface, mac)) => {
                    router.send_ether(*iface, *mac, ETHERTYPE_ANEP, &t.buf)
                }
                None => continue,
            };
            if let Err(e) = r {
                tracing::debug!("node transmit on {} dropped: {}", t.link, e.as_str());
            }
        }
        while let Some(ev) = self.node.poll_event() {
            match &ev {
                Event::NeighborUp { link, addr } => {
                    eprintln!("anode router: node neighbor up {addr} on {link}");
                }
                Event::NeighborDown { link, addr } => {
                    eprintln!("anode router: node neighbor down {addr} on {link}");
                }
                Event::Delivered(d) if PrefixExchange::is_ad_port(d.port) => {
                    if let Some(p) = self.prefixes.as_mut() {
                        p.receive(now, d.src, d.payload());
                    }
                }
                Event::Delivered(d) => eprintln!(
                    "anode router: node delivered {} bytes from {} to port {}: {}",
                    d.payload().len(),
                    d.src,
                    d.port,
                    String::from_utf8_lossy(d.payload())
                ),
                Event::Log { .. } => tracing::info!("node: {ev:?}"),
            }
        }
        let changes = self.node.route_changes();
        if changes != self.route_changes {
            self.route_changes = changes;
            if let Some(p) = self.prefixes.as_mut() {
                p.routes_changed(now);
            }
            let routes: Vec<String> = self
                .node
                .routes()
                .iter()
                .map(|r| match &r.next_hop {
                    Some(nh) => format!("{} via {:?} metric {}", r.dest, nh, r.metric),
                    None => format!("{} local", r.dest),
                })
                .collect();
            eprintln!("anode router: node routes: {}", routes.join("; "));
        }
    }

    fn send_due(&mut self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for s in self.sends.iter_mut().filter(|s| s.left > 0) {
            if s.next <= now {
                s.left -= 1;
                s.next = now + Duration::from_millis(s.cfg.every_ms.max(1));
                if let Err(e) = self.node.send_datagram(
                    now,
                    s.cfg.to,
                    s.cfg.port,
                    0,
                    None,
                    s.cfg.payload.as_bytes(),
                ) {
                    tracing::debug!("node datagram to {} dropped: {e:?}", s.cfg.to);
                }
            }
            if s.left > 0 {
                next = Some(next.map_or(s.next, |n| n.min(s.next)));
            }
        }
        next
    }
}

fn udp_source(frame: &[u8], l3: usize) -> Option<(SocketAddr, std::ops::Range<usize>)> {
    let pkt = frame.get(l3..)?;
    let (src, l4) = match pkt.first()? >> 4 {
        4 => {
            let p = Ipv4Packet::new_checked(pkt).ok()?;
            (
                IpAddr::V4(p.src()),
                l3 + p.header_len()..l3 + usize::from(p.total_len()),
            )
        }
        6 => {
            let p = Ipv6Packet::new_checked(pkt).ok()?;
            let u = p.upper_layer().ok()?;
            (
                IpAddr::V6(p.src()),
                l3 + u.offset..l3 + 40 + usize::from(p.payload_len()),
            )
        }
        _ => return None,
    };
    let u = UdpPacket::new_checked(frame.get(l4.clone())?).ok()?;
    let start = l4.start + 8;
    Some((
        SocketAddr::new(src, u.src_port()),
        start..l4.start + usize::from(u.len()),
    ))
}

impl Hooks for NodeHooks {
    fn divert(
        &mut self,
        now: Instant,
        router: &mut IpRouter,
        iface: IfaceId,
        filter: FilterId,
        frame: &[u8],
        l3_offset: usize,
    ) {
        let (link, body) = if filter == self.udp_filter {
            match udp_source(frame, l3_offset) {
                Some((from, range)) => (self.link_for_udp(from), frame.get(range)),
                None => (None, None),
            }
        } else if filter == self.ether_filter {
            let src = MacAddr(
                frame
                    .get(6..12)
                    .and_then(|s| s.try_into().ok())
                    .unwrap_or([0; 6]),
            );
            (self.link_for_mac(iface, src), frame.get(l3_offset..))
        } else {
            (None, None)
        };
        match (link, body) {
            (Some(l), Some(b)) => self.node.handle_packet(now, l, b.to_vec()),
            _ => self.unmatched += 1,
        }
        self.flush(now, router);
    }

    fn poll(&mut self, now: Instant, router: &mut IpRouter) -> Option<Instant> {
        if self.node.poll_timeout().is_some_and(|t| t <= now) {
            self.node.handle_timeout(now);
        }
        let send = self.send_due(now);
        let ads = self
            .prefixes
            .as_mut()
            .map(|p| p.poll(now, &mut self.node, router));
        self.flush(now, router);
        [self.node.poll_timeout(), send, ads]
            .into_iter()
            .flatten()
            .min()
    }
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
                n.unmatched
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
    let mut links = Vec::new();
    let mut own = PrefixAd::default();
    let receive = if fastpath::wanted(a.fast_path) {
        // Tagged frames the kernel did not untag arrive under their TPID (802.1Q, 802.1ad).
        Receive::ip_and(&[ETHERTYPE_ANEP, EtherType::VLAN, EtherType::QINQ])
    } else {
        Receive::All
    };
    for i in &cfg.interfaces {
        let link = EtherLink::open_with(&i.name, ring, &receive).map_err(|e| e.to_string())?;
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
            None => link.mac,
        };
        router
            .add_interface(InterfaceConfig {
                name: i.name.clone(),
                mac,
                mtu: i.mtu.unwrap_or(link.mtu),
                ipv4,
                ipv6,
            })
            .map_err(|e| e.to_string())?;
        links.push(link);
    }
    for r in &cfg.routes {
        let prefix: IpCidr = r
            .prefix
            .parse()
            .map_err(|e| format!("route {}: {e}", r.prefix))?;
        router
            .add_route(prefix, r.via, r.metric, RouteOrigin::Static)
            .map_err(|e| e.to_string())?;
        if cfg.node.as_ref().is_some_and(|n| n.advertise_static) {
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
    let node = match &cfg.node {
        None => None,
        Some(n) => {
            let mut nc = NodeConfig::new(n.address);
            if let Some(r) = n.routing {
                r.validate().map_err(|e| format!("[node.routing]: {e}"))?;
                nc.routing = r;
            }
            let mut node = Node::new(nc, now).map_err(|e| e.to_string())?;
            let prefixes = if n.advertise_ms == 0 {
                None
            } else {
                own.to_bytes().map_err(|e| {
                    format!(
                        "{}: {e}: advertise fewer addresses and prefixes, or set \
                         [node] advertise_ms = 0 to turn the prefix exchange off",
                        a.config.display()
                    )
                })?;
                Some(PrefixExchange::new(
                    own.clone(),
                    Duration::from_millis(n.advertise_ms),
                    now,
                ))
            };
            let mut carriers = Vec::new();
            for l in &n.links {
                let carrier = match (&l.interface, &l.mac) {
                    (Some(ifname), Some(mac)) => {
                        let idx = cfg
                            .interfaces
                            .iter()
                            .position(|i| &i.name == ifname)
                            .ok_or_else(|| {
                                format!("node link {}: no interface {ifname}", l.peer)
                            })?;
                        Carrier::Ether(IfaceId(idx as u32), parse_mac(mac)?)
                    }
                    (None, None) => Carrier::Udp(l.peer.socket_addr()),
                    _ => {
                        return Err(format!(
                            "node link {}: give both interface and mac (Ethernet) or neither (UDP)",
                            l.peer
                        ));
                    }
                };
                let mut lc = LinkConfig::new(l.peer);
                lc.name = match carrier {
                    Carrier::Udp(_) => format!("udp:{}", l.peer),
                    Carrier::Ether(i, m) => format!("ether:{i}:{m}"),
                };
                node.add_link(lc, now);
                carriers.push(carrier);
            }
            let udp_filter = router.add_filter(Filter::LocalUdp {
                port: n.address.port(),
            });
            let ether_filter = router.add_filter(Filter::EtherType(ETHERTYPE_ANEP));
            Some(NodeHooks {
                node,
                carriers,
                udp_filter,
                ether_filter,
                unmatched: 0,
                sends: n
                    .sends
                    .iter()
                    .map(|c| Send {
                        cfg: c.clone(),
                        next: now,
                        left: c.count,
                    })
                    .collect(),
                route_changes: 0,
                prefixes,
            })
        }
    };
    let hooks: Box<dyn Hooks> = if node.is_none() && modules.is_none() {
        Box::new(anode_ether::NoHooks)
    } else {
        Box::new(RouterHooks { node, modules })
    };
    signals::install().map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let fast = fastpath::start(a.fast_path, &links)?;
    let mut dp = DataPath::new(links, router, hooks);
    if let Some(f) = fast {
        dp.set_fast_path(f);
    }
    if a.rt_priority > 0 {
        if a.rt_priority > 99 {
            return Err(format!(
                "--rt-priority {}: give 1..99 (SCHED_FIFO priorities), or 0 for normal scheduling",
                a.rt_priority
            ));
        }
        dp.set_realtime(a.rt_priority);
    }
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
    while !signals::stop_requested() && !handle.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
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
        for (name, s) in &st.links {
            links.insert(
                name.clone(),
                serde_json::json!({
                    "rx_blocks": s.rx_blocks, "rx_frames": s.rx_frames,
                    "rx_truncated": s.rx_truncated, "tx_frames": s.tx_frames,
                    "tx_calls": s.tx_calls, "tx_dropped": s.tx_dropped,
                    "ring_packets": s.ring_packets, "ring_drops": s.ring_drops,
                    "sock_errors": s.sock_errors,
                }),
            );
        }
        m.insert("links".into(), links.into());
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
        for (name, s) in &st.links {
            println!(
                "  link {name}: rx {} frames in {} batches ({} truncated), tx {} frames in {} calls ({} dropped), ring: kernel passed {} dropped {} (ring full), socket errors {}",
                s.rx_frames,
                s.rx_blocks,
                s.rx_truncated,
                s.tx_frames,
                s.tx_calls,
                s.tx_dropped,
                s.ring_packets,
                s.ring_drops,
                s.sock_errors
            );
        }
    }
}
