//! The kernel fast path for passive transit, driven from the data-path thread
//! (`anode_ether::transit`): chosen at spawn ([`KernelTransit`]), kept in step with the node
//! after every change of what it mirrors, and its counters added to [`DriverStats`].
//!
//! Contract: the program only ever forwards what the node would forward on its fast path
//! (see `bpf/transit.c`); this module's job is that its table is never older than the node's
//! state by more than one loop iteration of the data path (a routing event, a link going
//! down, hooks, a qdisc or a capture appearing), plus a resync every [`RESYNC`] in case a
//! change escaped the key.
//!
//! Limits: the program is attached to the interfaces present when the node starts (an
//! interface added later carries the node's traffic through its socket until a restart);
//! the next hops' route and neighbor entries are asked of the kernel at each sync (two
//! rtnetlink round trips per peer, on this thread, never per packet).

use std::fs;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anode_core::{Node, TransitView};
use anode_ether::transit::{TransitPath, TransitPeer, TransitStats, TransitTable, l2_path};
use anode_wire::NodeAddr;

use crate::DriverStats;

/// Whether the UDP driver puts the kernel fast path for passive transit in front of its
/// socket (`[dataplane] mode` of `anode node`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelTransit {
    /// Sockets only.
    #[default]
    Off,
    /// TC ingress on every interface but `lo`; failing to load is an error.
    Tc,
    /// TC where it can be loaded (root, an address that is not loopback, an interface to
    /// attach to), else sockets with one log line saying why.
    Auto,
}

/// How often the table is rewritten even when nothing seemed to change.
const RESYNC: Duration = Duration::from_secs(2);
/// How often the program's counters are read into the driver's.
const STATS_EVERY: Duration = Duration::from_millis(250);

/// What, when it changes, means the table must be rebuilt: the forwarding table's version,
/// the links (peer, up, MTU), the node's transit view and whether a capture is open.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Key {
    fib: u64,
    links: Vec<(NodeAddr, bool, usize)>,
    view: TransitView,
    capturing: bool,
}

impl Key {
    /// True if `node` (with `view`) is still what this key describes. Allocates nothing.
    fn matches(&self, node: &Node, view: &TransitView, capturing: bool) -> bool {
        self.fib == node.fib().version()
            && self.capturing == capturing
            && self.view == *view
            && node
                .links()
                .map(|(_, c, up)| (c.peer, up, c.mtu))
                .eq(self.links.iter().copied())
    }

    fn of(node: &Node, view: TransitView, capturing: bool) -> Key {
        Key {
            fib: node.fib().version(),
            links: node.links().map(|(_, c, up)| (c.peer, up, c.mtu)).collect(),
            view,
            capturing,
        }
    }
}

/// A loaded transit fast path and what the driver knows about it.
#[derive(Debug)]
pub(crate) struct Kernel {
    tp: TransitPath,
    key: Option<Key>,
    synced_at: Instant,
    stats_at: Instant,
    seen: TransitStats,
    impaired: Vec<NodeAddr>,
}

/// Interfaces of the calling thread's network namespace, but `lo`.
fn interfaces() -> Vec<(String, u32)> {
    let Ok(dir) = fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut v: Vec<(String, u32)> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let idx = fs::read_to_string(e.path().join("ifindex")).ok()?;
            Some((name, idx.trim().parse().ok()?))
        })
        .filter(|(n, _)| n != "lo")
        .collect();
    v.sort_by_key(|(_, i)| *i);
    v
}

/// Loads the program for a node bound at `bind` with address `me`, per `mode`. `Ok(None)`:
/// sockets only (off, or `auto` could not load it: logged once).
pub(crate) fn start(
    mode: KernelTransit,
    bind: SocketAddr,
    me: NodeAddr,
    impaired: Vec<NodeAddr>,
) -> std::io::Result<Option<Kernel>> {
    if mode == KernelTransit::Off {
        return Ok(None);
    }
    let why_not = if me.socket_addr().ip().is_loopback() || bind.ip().is_loopback() {
        Some("the node's address is a loopback address".to_string())
    } else {
        None
    };
    let ifs = interfaces();
    let why_not = why_not.or_else(|| {
        ifs.is_empty()
            .then(|| "there is no network interface but lo".to_string())
    });
    let loaded = match why_not {
        Some(w) => Err(w),
        None => {
            let idx: Vec<u32> = ifs.iter().map(|(_, i)| *i).collect();
            TransitPath::load(&idx).map_err(|e| e.to_string())
        }
    };
    match (loaded, mode) {
        (Ok(tp), _) => {
            let names: Vec<&str> = ifs.iter().map(|(n, _)| n.as_str()).collect();
            tracing::info!(
                interfaces = %names.join(","),
                "data plane: kernel fast path for passive transit at TC ingress"
            );
            let now = Instant::now();
            Ok(Some(Kernel {
                tp,
                key: None,
                synced_at: now,
                stats_at: now,
                seen: TransitStats::default(),
                impaired,
            }))
        }
        (Err(why), KernelTransit::Auto) => {
            tracing::info!("data plane: sockets only (kernel fast path not loaded: {why})");
            Ok(None)
        }
        (Err(why), _) => Err(std::io::Error::other(format!(
            "data plane mode tc: the kernel fast path for passive transit could not be loaded: {why}"
        ))),
    }
}

fn table(node: &Node, v: &TransitView, impaired: &[NodeAddr], capturing: bool) -> TransitTable {
    let mut t = TransitTable {
        me: node.address().to_bytes(),
        punt_all: v.hooks || capturing,
        punt_ee: v.cut_through,
        ee_types: v.ee_types.clone(),
        ..TransitTable::default()
    };
    for (id, c, up) in node.links() {
        let punt = v.qdisc_links.contains(&id) || impaired.contains(&c.peer);
        t.peers.insert(
            c.peer.to_bytes(),
            TransitPeer {
                mtu: u32::try_from(c.mtu).unwrap_or(u32::MAX),
                up,
                punt,
                // Unknown (no route or neighbor entry in the kernel yet): packets to this peer
                // go to the node, whose own sends resolve it for the next sync.
                l2: l2_path(c.peer.socket_addr().ip()).ok(),
            },
        );
    }
    for (dst, e) in node.fib().entries() {
        t.routes.insert(dst, e.hop.addr.to_bytes());
    }
    t
}

impl Kernel {
    /// Rewrites the table if what it mirrors changed (or [`RESYNC`] passed).
    pub(crate) fn sync(&mut self, node: &Node, capturing: bool, now: Instant) {
        let view = node.transit_view();
        if self
            .key
            .as_ref()
            .is_some_and(|k| k.matches(node, &view, capturing))
            && now.duration_since(self.synced_at) < RESYNC
        {
            return;
        }
        let t = table(node, &view, &self.impaired, capturing);
        match self.tp.sync(&t) {
            Ok(notes) => {
                for n in notes {
                    tracing::warn!("data plane: {n}");
                }
                self.key = Some(Key::of(node, view, capturing));
            }
            Err(e) => {
                // Tell the program to leave everything to the socket; try again next time.
                tracing::warn!(error = %e, "data plane: updating the kernel fast path failed");
                let all = TransitTable {
                    punt_all: true,
                    ..t
                };
                let _ = self.tp.sync(&all);
                self.key = None;
            }
        }
        self.synced_at = now;
    }

    /// Adds what the program counted since the last call to `st` (every [`STATS_EVERY`], or
    /// now if `force`).
    pub(crate) fn count(&mut self, st: &mut DriverStats, now: Instant, force: bool) {
        if !force && now.duration_since(self.stats_at) < STATS_EVERY {
            return;
        }
        self.stats_at = now;
        let Ok(s) = self.tp.stats() else {
            return;
        };
        st.kernel_forwarded += s.forwarded.saturating_sub(self.seen.forwarded);
        st.kernel_forwarded_bytes += s.forwarded_bytes.saturating_sub(self.seen.forwarded_bytes);
        for (name, v) in &s.passed {
            let d = v.saturating_sub(self.seen.passed.get(name).copied().unwrap_or(0));
            st.add_kernel_pass(name, d);
        }
        self.seen = s;
    }
}
