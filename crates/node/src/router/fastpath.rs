//! `--fast-path`: the kernel fast path in front of the router (`anode_ether::fastpath`).
//!
//! With `tc` (the default) an eBPF program on the TC ingress hook of every routed interface
//! forwards plain IP packets from the router's own tables (routes, static and learned; the
//! ARP/ND cache; filters), which the data path keeps in sync; every packet it does not
//! forward (ARP, NDP, packets for the router, TTL expiry, options, fragments, filtered
//! packets, unresolved next hops, ...) continues to the user-space router unchanged. `xdp`
//! attaches the same program at XDP (for NICs whose driver runs XDP natively; on veth it is
//! slower than TC, see docs/benchmarks.md). `off` forwards every packet in user space.
//! Without the flag, a fast path that cannot be loaded (no CAP_BPF, old kernel) is reported
//! and the router forwards in user space; with `--fast-path tc|xdp` it is an error.

use anode_ether::fastpath::{FastPath, Hook};
use anode_ether::{EtherLink, FastPathSync};

/// Where plain IP is forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FastPathMode {
    /// eBPF on TC ingress (the default).
    Tc,
    /// eBPF at XDP (native where the driver supports it).
    Xdp,
    /// No kernel fast path: every frame through the user-space router.
    Off,
}

/// The loaded program, as the data path drives it, and the sync notes last printed.
struct Kernel(FastPath, Vec<String>);

impl FastPathSync for Kernel {
    fn sync(&mut self, table: &anode_ip::FastTable) -> Result<(), String> {
        match self.0.sync(table) {
            Ok(r) => {
                if r.notes != self.1 {
                    for n in &r.notes {
                        eprintln!("anode router: fast path: {n}");
                    }
                    self.1 = r.notes;
                }
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    fn take_used(&mut self) -> Vec<anode_ip::router::NeighKey> {
        self.0.take_used()
    }

    fn report(&self) -> Vec<String> {
        match self.0.stats() {
            Ok(s) => s.report(),
            Err(e) => vec![format!("fast path: counters unreadable: {e}")],
        }
    }
}

/// Whether the links must receive by protocol (any mode but `off`).
pub fn wanted(mode: Option<FastPathMode>) -> bool {
    mode != Some(FastPathMode::Off)
}

/// Loads and attaches the fast path on `links` (in router interface order).
pub fn start(
    mode: Option<FastPathMode>,
    links: &[EtherLink],
) -> Result<Option<Box<dyn FastPathSync>>, String> {
    let hook = match mode.unwrap_or(FastPathMode::Tc) {
        FastPathMode::Off => return Ok(None),
        FastPathMode::Tc => Hook::Tc,
        FastPathMode::Xdp => Hook::Xdp,
    };
    let ifindexes: Vec<u32> = links.iter().map(|l| l.ifindex).collect();
    match FastPath::load(hook, &ifindexes) {
        Ok(fp) => {
            eprintln!(
                "anode router: kernel fast path ({}) on {}",
                if hook == Hook::Tc {
                    "tc ingress"
                } else {
                    "xdp"
                },
                links
                    .iter()
                    .map(|l| l.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Ok(Some(Box::new(Kernel(fp, Vec::new()))))
        }
        Err(e) if mode.is_none() => {
            eprintln!(
                "anode router: kernel fast path unavailable ({e}); forwarding every packet in user space (--fast-path off chooses that without this message)"
            );
            Ok(None)
        }
        Err(e) => Err(format!(
            "--fast-path: {e} (--fast-path off forwards in user space instead)"
        )),
    }
}
