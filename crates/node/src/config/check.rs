//! Semantic checks of a parsed config file: each problem points at the offending key.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anode_core::{LinkConfig, NodeConfig};
use anode_io::KernelTransit;
use anode_wire::NodeAddr;
use toml::Spanned;

use super::locate::{Pos, key_pos, pos_of, section_pos};
use super::raw::RawFile;
use super::{NodeFile, StaticRoute};

/// Bounds of `[capsule] max_code_bytes`.
const MIN_CODE_BYTES: u32 = 1 << 10;
const MAX_CODE_BYTES: u32 = 64 << 20;
/// Most threads `[capsule] workers` may ask for.
const MAX_CAPSULE_WORKERS: u64 = 64;

/// Largest UDP payload over IPv4.
const MAX_MTU: usize = 65507;
/// Smallest MTU that carries a routing update and a useful datagram.
const MIN_MTU: usize = 256;
/// Longest Unix socket path (`sun_path` less the terminating NUL).
const MAX_SOCKET_PATH: usize = 107;

/// One problem, at a place.
#[derive(Debug)]
pub(super) struct Problem {
    pub pos: Pos,
    pub what: String,
    pub fix: String,
}

/// A problem at the place `s` was written in `text` (the other config modules' helper).
pub(super) fn at<T>(text: &str, s: &Spanned<T>, what: String, fix: &str) -> Problem {
    Problem {
        pos: pos_of(text, s.span().start),
        what,
        fix: fix.into(),
    }
}

/// The ed25519 public key written (in hex) at `k`; else a problem there saying
/// "`what` 'HEX' is not an ed25519 public key (why)" and `fix`.
pub(super) fn public_key(
    text: &str,
    k: &Spanned<String>,
    what: &str,
    fix: &str,
) -> Result<ed25519_dalek::VerifyingKey, Problem> {
    let hexkey = k.get_ref().trim();
    anode_modules::parse_public(hexkey).map_err(|e| {
        at(
            text,
            k,
            format!("{what} '{hexkey}' is not an ed25519 public key ({e})"),
            fix,
        )
    })
}

struct Ctx<'a> {
    text: &'a str,
}

impl Ctx<'_> {
    fn at<T>(&self, s: &Spanned<T>, what: String, fix: impl Into<String>) -> Problem {
        Problem {
            pos: pos_of(self.text, s.span().start),
            what,
            fix: fix.into(),
        }
    }
}

/// Checks `raw` (parsed from `text`) and builds the node file.
pub(super) fn check(path: &Path, text: &str, raw: RawFile) -> Result<NodeFile, Problem> {
    let cx = Ctx { text };
    let address = *raw.node.address.get_ref();
    let mut node = NodeConfig::new(address);
    if let Some(v) = raw.node.default_rb {
        node.default_rb = v;
    }
    if let Some(v) = raw.node.max_tx_queue {
        node.max_tx_queue = v;
    }
    if let Some(v) = raw.node.max_events {
        node.max_events = v;
    }
    node.routing = raw.routing;
    if address.is_unspecified() || address.ip().is_unspecified() || address.port() == 0 {
        return Err(cx.at(
            &raw.node.address,
            format!("address '{address}' is not an address peers can send to"),
            "give this node's reachable IP and UDP port, e.g. \"127.0.0.1:4001\"; put a wildcard like \"[::]:4001\" in bind instead",
        ));
    }
    if let Err(e) = node.validate() {
        return Err(validate_problem(text, &e.0));
    }
    let bind = check_bind(&cx, &raw, address)?;
    let links = check_links(&cx, &raw, address, bind, node.routing.infinity)?;
    let routes = check_routes(&cx, &raw, address, &links, node.routing.infinity)?;
    let impairments = super::impair::check(text, &raw.links)?;
    check_ports(&cx, &raw)?;
    let socket = check_socket(&cx, path, &raw, address)?;
    let control = check_control(&cx, &raw)?;
    let metrics = check_metrics(&cx, &raw)?;
    let code_cache = check_code_cache(&cx, path, &raw, address)?;
    let code_cache_max_bytes = match &raw.capsule.cache_max_bytes {
        None => super::DEFAULT_CACHE_MAX_BYTES,
        Some(b) if *b.get_ref() < 1 << 20 => {
            return Err(cx.at(
                b,
                format!("capsule cache_max_bytes = {} is below 1 MiB", b.get_ref()),
                "give room for a few code objects, e.g. 268435456 (256 MiB)",
            ));
        }
        Some(b) => *b.get_ref(),
    };
    let code_max_bytes = match &raw.capsule.max_code_bytes {
        None => anode_capsule::LoaderConfig::default().max_code_bytes,
        Some(b) if !(MIN_CODE_BYTES..=MAX_CODE_BYTES).contains(b.get_ref()) => {
            return Err(cx.at(
                b,
                format!(
                    "capsule max_code_bytes = {} is outside 1 KiB - 64 MiB",
                    b.get_ref()
                ),
                "give a size like 1048576 (1 MiB, the default) or 33554432 (32 MiB)",
            ));
        }
        Some(b) => *b.get_ref(),
    };
    let capsule_files = check_capsule_files(&cx, &raw)?;
    let capsule_workers = match &raw.capsule.workers {
        None => 1,
        Some(w) if !(1..=MAX_CAPSULE_WORKERS).contains(w.get_ref()) => {
            return Err(cx.at(
                w,
                format!(
                    "capsule workers = {} is outside 1 - {MAX_CAPSULE_WORKERS}",
                    w.get_ref()
                ),
                "give the threads that run capsules, the node thread included, e.g. 2 on a 2-core machine (1: every capsule on the node thread)",
            ));
        }
        Some(w) => usize::try_from(*w.get_ref()).unwrap_or(1),
    };
    let modules =
        super::modules::check(path, text, &raw.modules, &raw.module_list, address.port())?;
    let nodeos = super::nodeos::check(path, text, &raw.nodeos)?;
    let plan = super::plan::check(path, text, &raw.plan, address.port())?;
    let dataplane = check_dataplane(&cx, &raw)?;
    let busy_poll = check_busy_poll(&cx, &raw)?;
    let remote = super::remote::check(text, &raw.remote)?;
    let deploy = super::deploy::check(text, &raw.deploy)?;
    Ok(NodeFile {
        path: path.to_path_buf(),
        node,
        bind,
        links,
        impairments,
        routes,
        socket,
        control,
        metrics,
        code_cache,
        code_cache_max_bytes,
        code_max_bytes,
        capsule_files,
        capsule_workers,
        modules,
        nodeos,
        plan,
        dataplane,
        udp_offload: raw.dataplane.udp_offload.unwrap_or(true),
        busy_poll,
        remote,
        deploy,
    })
}

/// `[dataplane] busy_poll_us`: at most one second.
fn check_busy_poll(cx: &Ctx<'_>, raw: &RawFile) -> Result<std::time::Duration, Problem> {
    let Some(us) = &raw.dataplane.busy_poll_us else {
        return Ok(std::time::Duration::ZERO);
    };
    let d = std::time::Duration::from_micros(*us.get_ref());
    if d > anode_io::MAX_BUSY_POLL {
        return Err(cx.at(
            us,
            format!(
                "[dataplane] busy_poll_us {} is more than one second",
                us.get_ref()
            ),
            "give 0 (off) or up to 1000000 microseconds; 50 to 1000 is usual",
        ));
    }
    Ok(d)
}

/// `[capsule] file_quota_bytes`, `file_quota_count`, `file_max_bytes`: the bounds of each
/// code object's files (ABI v2). `file_quota_count = 0` leaves code objects no files at all.
fn check_capsule_files(
    cx: &Ctx<'_>,
    raw: &RawFile,
) -> Result<anode_capsule::files::FileLimits, Problem> {
    let mut limits = anode_capsule::files::FileLimits::default();
    let c = &raw.capsule;
    let bounded = |v: &Option<Spanned<u64>>, max: u64, key: &str, fix: &str| match v {
        Some(b) if *b.get_ref() > max => Err(cx.at(
            b,
            format!("capsule {key} = {} is more than {max}", b.get_ref()),
            fix,
        )),
        Some(b) => Ok(Some(*b.get_ref() as usize)),
        None => Ok(None),
    };
    if let Some(b) = bounded(
        &c.file_quota_bytes,
        64 << 20,
        "file_quota_bytes",
        "give a quota up to 67108864 (64 MiB); the default is 1048576",
    )? {
        limits.max_bytes = b;
        limits.max_file_bytes = limits.max_file_bytes.min(b);
    }
    if let Some(n) = bounded(
        &c.file_quota_count,
        4096,
        "file_quota_count",
        "give a count up to 4096; the default is 64",
    )? {
        limits.max_files = n;
    }
    let most = limits.max_bytes.min(16 << 20) as u64;
    if let Some(b) = bounded(
        &c.file_max_bytes,
        most,
        "file_max_bytes",
        "one file can hold at most file_quota_bytes (and 16 MiB)",
    )? {
        limits.max_file_bytes = b;
    }
    Ok(limits)
}

/// `[dataplane] mode`: where packets that only pass through are forwarded.
fn check_dataplane(cx: &Ctx<'_>, raw: &RawFile) -> Result<KernelTransit, Problem> {
    let Some(m) = &raw.dataplane.mode else {
        return Ok(KernelTransit::Auto);
    };
    match m.get_ref().as_str() {
        "auto" => Ok(KernelTransit::Auto),
        "tc" => Ok(KernelTransit::Tc),
        "socket" => Ok(KernelTransit::Off),
        "xdp" => Err(cx.at(
            m,
            "dataplane mode \"xdp\" is not available for ANEP transit".to_string(),
            "use \"tc\" (the UDP checksum helpers the rewrite needs exist only at TC, which is also the faster hook on veth) or \"auto\"",
        )),
        other => Err(cx.at(
            m,
            format!("dataplane mode \"{other}\" is not one anode knows"),
            "give \"auto\" (the kernel fast path where it loads, else sockets), \"tc\" (kernel fast path or fail) or \"socket\"",
        )),
    }
}

/// Every node address in the file names its port: a bare IP would silently mean port 3322.
fn check_ports(cx: &Ctx<'_>, raw: &RawFile) -> Result<(), Problem> {
    let mut addrs = vec![("[node] address", &raw.node.address)];
    for l in &raw.links {
        addrs.push(("[[link]] peer", &l.peer));
    }
    for r in &raw.routes {
        addrs.push(("[[route]] dest", &r.dest));
        addrs.push(("[[route]] via", &r.via));
    }
    for (what, a) in addrs {
        let text = cx.text.get(a.span()).unwrap_or("").trim().trim_matches('"');
        if text.parse::<SocketAddr>().is_err() {
            return Err(cx.at(
                a,
                format!("{what} '{text}' has no port"),
                format!(
                    "write IP:PORT, e.g. \"{}\" (a node address is its UDP socket)",
                    a.get_ref()
                ),
            ));
        }
    }
    Ok(())
}

/// `[control] max_connections` (1..=65536) and `idle_timeout_s` (at least 1).
fn check_control(cx: &Ctx<'_>, raw: &RawFile) -> Result<crate::control::Limits, Problem> {
    let mut l = crate::control::Limits::default();
    if let Some(m) = &raw.control.max_connections {
        if !(1..=65_536).contains(m.get_ref()) {
            return Err(cx.at(
                m,
                format!("max_connections = {} is out of range", m.get_ref()),
                "give 1 to 65536 (default 256)",
            ));
        }
        l.max_connections = *m.get_ref();
    }
    if let Some(t) = &raw.control.idle_timeout_s {
        if *t.get_ref() == 0 {
            return Err(cx.at(
                t,
                "idle_timeout_s = 0 would close every connection at once".into(),
                "give seconds, e.g. 300 (the default)",
            ));
        }
        l.idle = std::time::Duration::from_secs(*t.get_ref());
    }
    Ok(l)
}

/// `[metrics] listen`: loopback only.
fn check_metrics(cx: &Ctx<'_>, raw: &RawFile) -> Result<Option<SocketAddr>, Problem> {
    let Some(l) = &raw.metrics.listen else {
        return Ok(None);
    };
    let cfg = anode_nodeos::metrics::MetricsConfig {
        listen: Some(l.get_ref().clone()),
    };
    cfg.listen_addr().map_err(|e| {
        cx.at(
            l,
            e.to_string(),
            "use a loopback address such as \"127.0.0.1:9464\", or remove [metrics] to keep metrics off",
        )
    })
}

/// Places a `NodeConfig::validate` message at the first key it names that the file sets.
fn validate_problem(text: &str, msg: &str) -> Problem {
    const KEYS: &[(&str, &str)] = &[
        ("routing", "hello_interval_ms"),
        ("routing", "dead_interval_ms"),
        ("routing", "update_interval_ms"),
        ("routing", "route_timeout_ms"),
        ("routing", "gc_interval_ms"),
        ("routing", "triggered_delay_ms"),
        ("routing", "infinity"),
        ("node", "default_rb"),
        ("node", "max_tx_queue"),
        ("node", "max_events"),
    ];
    let mut named: Vec<(usize, &str, &str)> = KEYS
        .iter()
        .filter_map(|(s, k)| msg.find(k).map(|i| (i, *s, *k)))
        .collect();
    named.sort();
    let pos = named
        .iter()
        .find_map(|(_, s, k)| key_pos(text, s, k))
        .or_else(|| named.first().and_then(|(_, s, _)| section_pos(text, s)))
        .unwrap_or(Pos { line: 1, col: 1 });
    let msg = msg.strip_prefix("routing: ").unwrap_or(msg);
    let (what, fix) = match msg.split_once("; ") {
        Some((w, f)) => (w.to_string(), f.to_string()),
        None => (
            msg.to_string(),
            "change the value; examples/node-a.toml has working timers".to_string(),
        ),
    };
    Problem { pos, what, fix }
}

fn check_bind(cx: &Ctx<'_>, raw: &RawFile, address: NodeAddr) -> Result<SocketAddr, Problem> {
    let Some(b) = &raw.node.bind else {
        return Ok(address.socket_addr());
    };
    let s = b.get_ref().trim();
    let parsed = s.parse::<SocketAddr>().ok().or_else(|| {
        let ip = s.trim_start_matches('[').trim_end_matches(']');
        ip.parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, address.port()))
    });
    match parsed {
        Some(sa) if sa.port() != 0 => Ok(sa),
        Some(_) => Err(cx.at(
            b,
            format!("bind '{s}' has port 0"),
            "bind the port peers send to, e.g. bind = \"0.0.0.0:4001\"",
        )),
        None => Err(cx.at(
            b,
            format!("bind '{s}' is not a socket address"),
            "write IP:PORT, e.g. \"0.0.0.0:4001\" or \"[::]:4001\", or leave bind out to bind the node address",
        )),
    }
}

fn same_family_ok(bind: SocketAddr, peer: NodeAddr) -> bool {
    match (bind.ip(), peer.ip()) {
        (IpAddr::V4(_), IpAddr::V6(_)) => false,
        // A specific IPv6 bind cannot reach IPv4 peers; the wildcard `[::]` is dual-stack.
        (IpAddr::V6(b), IpAddr::V4(_)) => b.is_unspecified(),
        _ => true,
    }
}

fn check_links(
    cx: &Ctx<'_>,
    raw: &RawFile,
    address: NodeAddr,
    bind: SocketAddr,
    infinity: u16,
) -> Result<Vec<LinkConfig>, Problem> {
    let mut peers = BTreeSet::new();
    let mut names = BTreeSet::new();
    let mut out = Vec::new();
    for (i, l) in raw.links.iter().enumerate() {
        let peer = *l.peer.get_ref();
        if peer == address {
            return Err(cx.at(
                &l.peer,
                format!("link {} has peer {peer}, this node's own address", i + 1),
                "a link joins this node to another one: set peer to the neighbor's [node] address",
            ));
        }
        if peer.ip().is_unspecified() || peer.port() == 0 {
            return Err(cx.at(
                &l.peer,
                format!("link peer '{peer}' is not an address a datagram can go to"),
                "give the neighbor's IP and UDP port, e.g. \"127.0.0.1:4002\"",
            ));
        }
        if !same_family_ok(bind, peer) {
            return Err(cx.at(
                &l.peer,
                format!(
                    "this node's socket ({bind}) cannot reach peer {peer}: the IP versions differ"
                ),
                "use peers of the node address's IP version, or bind = \"[::]:PORT\" for both",
            ));
        }
        if !peers.insert(peer) {
            return Err(cx.at(
                &l.peer,
                format!("two links have peer {peer}"),
                "keep one [[link]] per neighbor",
            ));
        }
        let mut cfg = LinkConfig::new(peer);
        cfg.static_neighbor = l.static_neighbor;
        if let Some(n) = &l.name {
            let name = n.get_ref().trim().to_string();
            if name.parse::<u32>().is_ok() || name.chars().any(char::is_whitespace) {
                return Err(cx.at(
                    n,
                    format!("link name '{name}' is a number or has spaces"),
                    "use a word like \"to-b\" (link numbers are already names: `anode link down 0`)",
                ));
            }
            if !name.is_empty() && !names.insert(name.clone()) {
                return Err(cx.at(
                    n,
                    format!("two links are named '{name}'"),
                    "give each link its own name",
                ));
            }
            cfg.name = name;
        }
        if let Some(m) = &l.mtu {
            let mtu = *m.get_ref();
            if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
                return Err(cx.at(
                    m,
                    format!("mtu {mtu} is outside {MIN_MTU}..={MAX_MTU}"),
                    "use 1472 for paths over Ethernet (1500 less IP and UDP headers), or leave mtu out",
                ));
            }
            cfg.mtu = mtu;
        }
        if let Some(c) = &l.cost {
            let cost = *c.get_ref();
            if cost == 0 || cost >= infinity {
                return Err(cx.at(
                    c,
                    format!("cost {cost} is outside 1..{infinity} (infinity)"),
                    "use a cost of at least 1 and below [routing] infinity; 1 is usual",
                ));
            }
            cfg.cost = cost;
        }
        out.push(cfg);
    }
    Ok(out)
}

fn check_routes(
    cx: &Ctx<'_>,
    raw: &RawFile,
    address: NodeAddr,
    links: &[LinkConfig],
    infinity: u16,
) -> Result<Vec<StaticRoute>, Problem> {
    let mut dests = BTreeSet::new();
    let mut out = Vec::new();
    for r in &raw.routes {
        let (dest, via) = (*r.dest.get_ref(), *r.via.get_ref());
        if dest == address {
            return Err(cx.at(
                &r.dest,
                format!("route to {dest}, this node itself"),
                "remove this [[route]]: a node always reaches itself",
            ));
        }
        if !links.iter().any(|l| l.peer == via) {
            let peers: Vec<String> = links.iter().map(|l| format!("\"{}\"", l.peer)).collect();
            let fix = if peers.is_empty() {
                format!("add a [[link]] with peer = \"{via}\" first: a route goes via a neighbor")
            } else {
                format!(
                    "route via a [[link]] peer ({}), or add a [[link]] with peer = \"{via}\"",
                    peers.join(", ")
                )
            };
            return Err(cx.at(
                &r.via,
                format!("route via {via}, which is not the peer of any [[link]]"),
                fix,
            ));
        }
        if !dests.insert(dest) {
            return Err(cx.at(
                &r.dest,
                format!("two routes to {dest}"),
                "keep one [[route]] per destination",
            ));
        }
        let metric = match &r.metric {
            Some(m) if *m.get_ref() == 0 || *m.get_ref() >= infinity => {
                return Err(cx.at(
                    m,
                    format!("metric {} is outside 1..{infinity} (infinity)", m.get_ref()),
                    "use a metric of at least 1 and below [routing] infinity",
                ));
            }
            Some(m) => *m.get_ref(),
            None => 1,
        };
        out.push(StaticRoute { dest, via, metric });
    }
    Ok(out)
}

fn check_socket(
    cx: &Ctx<'_>,
    path: &Path,
    raw: &RawFile,
    address: NodeAddr,
) -> Result<PathBuf, Problem> {
    let Some(s) = &raw.control.socket else {
        return Ok(anode_ctl::path::default_socket_path(address.port()));
    };
    let given = s.get_ref().trim();
    if given.is_empty() {
        return Err(cx.at(
            s,
            "control socket path is empty".into(),
            "give a path like \"/tmp/anode-a.sock\", or leave socket out for the default",
        ));
    }
    let p = Path::new(given);
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        // Relative to the config file, so the file means the same from any directory.
        path.parent().unwrap_or(Path::new(".")).join(p)
    };
    let len = p.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(cx.at(
            s,
            format!(
                "control socket path is {len} bytes long; Unix sockets allow {MAX_SOCKET_PATH}"
            ),
            "use a shorter path",
        ));
    }
    Ok(p)
}

/// The default capsule code cache of the node whose UDP port is `port`:
/// `$XDG_STATE_HOME/anode/code-PORT`, else `$HOME/.local/state/anode/code-PORT`, else
/// `/tmp/anode-state/code-PORT`.
pub fn default_code_cache(port: u16) -> PathBuf {
    default_state_dir(&format!("code-{port}"))
}

/// `NAME` under the node's state directory: `$XDG_STATE_HOME/anode`, else
/// `$HOME/.local/state/anode`, else `/tmp/anode-state`.
pub fn default_state_dir(name: &str) -> PathBuf {
    let abs = |v: Option<std::ffi::OsString>| v.filter(|d| Path::new(d).is_absolute());
    let base = match (
        abs(std::env::var_os("XDG_STATE_HOME")),
        abs(std::env::var_os("HOME")),
    ) {
        (Some(d), _) => PathBuf::from(d).join("anode"),
        (None, Some(h)) => PathBuf::from(h).join(".local/state/anode"),
        (None, None) => PathBuf::from("/tmp/anode-state"),
    };
    base.join(name)
}

fn check_code_cache(
    cx: &Ctx<'_>,
    path: &Path,
    raw: &RawFile,
    address: NodeAddr,
) -> Result<PathBuf, Problem> {
    state_path(
        path,
        cx.text,
        raw.capsule.cache_dir.as_ref(),
        (
            "capsule cache_dir is empty",
            "give a directory like \"/var/lib/anode/code\", or leave cache_dir out for the default",
        ),
        || default_code_cache(address.port()),
    )
}

/// A path the node keeps state in, as the config file at `path` gives it: relative to the
/// config file's directory (so the file means the same from any directory; an absolute one
/// stays as it is), or `default()` when absent. An empty one is refused with `(what, fix)`.
pub(super) fn state_path(
    path: &Path,
    text: &str,
    given: Option<&Spanned<String>>,
    (what, fix): (&str, &str),
    default: impl FnOnce() -> PathBuf,
) -> Result<PathBuf, Problem> {
    let Some(s) = given else {
        return Ok(default());
    };
    let p = s.get_ref().trim();
    if p.is_empty() {
        return Err(at(text, s, what.into(), fix));
    }
    Ok(path.parent().unwrap_or(Path::new(".")).join(p))
}
