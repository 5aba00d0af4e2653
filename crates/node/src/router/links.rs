//! `--links`: how `anode router` owns its interfaces.
//!
//! - `packet` (the default): AF_PACKET TPACKET_V2 rings and `sendmmsg`
//!   (`anode_ether::DataPath`), with the kernel fast path (`--fast-path`) in front.
//! - `xsk`: AF_XDP sockets (`anode_ether::xsk::XskForwarder`): an XDP program on every
//!   interface redirects every frame into a UMEM shared by the sockets, the router rewrites
//!   it there and it leaves from the outgoing socket's tx ring. Measured on the veth testbed
//!   at 1.4x the packets of `packet --fast-path off` on the same CPU (85 % / 84 % of kernel
//!   forwarding at 64 / 1472 B; 1.9x / 1.8x when each has a CPU of its own;
//!   docs/benchmarks.md).
//!   No kernel fast path: XDP runs before TC, so the redirect takes every frame before a TC
//!   program could forward it, and an XDP fast path would have to share the hook. So
//!   `--links xsk` means `--fast-path off`, and an explicit `--fast-path tc|xdp` is refused.
//!   One socket on queue 0 of each interface: an interface with more receive queues is
//!   refused (frames on the others would reach the kernel's stack, not the router).
//!   Frames must fit one UMEM chunk (2048 or 4096 bytes, chosen for the largest MTU): MTUs
//!   above 3818 are refused (multi-buffer AF_XDP is not used); `--links packet` takes them.
//!
//! Both run the same `IpRouter`, hooks (the router's node, service modules), waker, real-time
//! priority and exit report ([`anode_ether::Stopped`]); [`Engine`] is whichever was built.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;

use anode_ether::xsk::{self, XskConfig, XskForwarder};
use anode_ether::{DataPath, EtherLink, Hooks, Receive, RingConfig, Stopped, Waker};
use anode_ip::IpRouter;
use anode_ip::wire::MacAddr;

use super::fastpath::{self, FastPathMode};

/// Which sockets carry the router's frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LinkType {
    /// AF_PACKET TPACKET_V2 rings, `sendmmsg` (the default; the kernel fast path in front).
    Packet,
    /// AF_XDP sockets (no kernel fast path: every frame through the user-space router).
    Xsk,
}

/// The kernel fast path to run with `links`, `given` being `--fast-path`: AF_XDP links
/// take every frame at XDP, before a fast path could, so they run without one, and an
/// explicit `tc` or `xdp` is an error that says so.
pub fn fast_path_for(
    links: LinkType,
    given: Option<FastPathMode>,
) -> Result<Option<FastPathMode>, String> {
    match (links, given) {
        (LinkType::Packet, m) => Ok(m),
        (LinkType::Xsk, None | Some(FastPathMode::Off)) => Ok(Some(FastPathMode::Off)),
        (LinkType::Xsk, Some(m)) => Err(format!(
            "--links xsk cannot run with --fast-path {}: AF_XDP links put an XDP program on \
             every interface that redirects every frame to user space, and XDP runs before \
             the kernel fast path could forward a frame (tc), or would need the same hook \
             (xdp). Leave out --fast-path (with --links xsk every frame goes through the \
             user-space router), or use --links packet to keep the kernel fast path.",
            match m {
                FastPathMode::Tc => "tc",
                FastPathMode::Xdp => "xdp",
                FastPathMode::Off => "off",
            }
        )),
    }
}

/// The interfaces being opened, in router order.
pub enum Links {
    /// AF_PACKET links, opened one by one.
    Packet {
        ring: RingConfig,
        receive: Receive,
        links: Vec<EtherLink>,
    },
    /// AF_XDP: the names and the largest MTU so far (the sockets open in [`Links::start`],
    /// once the router has every interface).
    Xsk { names: Vec<String>, max_mtu: usize },
}

impl Links {
    /// No interfaces yet. `fast` is the fast path that will run ([`fast_path_for`]): with
    /// one, AF_PACKET links receive by protocol (after TC ingress).
    pub fn new(kind: LinkType, ring: RingConfig, fast: Option<FastPathMode>) -> Links {
        match kind {
            LinkType::Packet => Links::Packet {
                ring,
                receive: if fastpath::wanted(fast) {
                    // Tagged frames the kernel did not untag arrive under their TPID.
                    Receive::ip_and(&[
                        anode_ip::ETHERTYPE_ANEP,
                        anode_ip::wire::EtherType::VLAN,
                        anode_ip::wire::EtherType::QINQ,
                    ])
                } else {
                    Receive::All
                },
                links: Vec::new(),
            },
            LinkType::Xsk => Links::Xsk {
                names: Vec::new(),
                max_mtu: 0,
            },
        }
    }

    /// Opens (AF_PACKET) or checks (AF_XDP) interface `name`, whose router MTU will be
    /// `mtu` if given; returns its MAC address and kernel MTU.
    pub fn add(&mut self, name: &str, mtu: Option<usize>) -> Result<(MacAddr, usize), String> {
        match self {
            Links::Packet {
                ring,
                receive,
                links,
            } => {
                let link = EtherLink::open_with(name, *ring, receive).map_err(|e| e.to_string())?;
                let found = (link.mac, link.mtu);
                links.push(link);
                Ok(found)
            }
            Links::Xsk { names, max_mtu } => {
                let (mac, kernel_mtu) = xsk::iface_mac_mtu(name).map_err(|e| e.to_string())?;
                let queues = rx_queues(name);
                if queues > 1 {
                    return Err(format!(
                        "interface {name}: {queues} receive queues; --links xsk binds one AF_XDP \
                         socket to queue 0 only, and frames on the others would go to the \
                         kernel's stack instead of the router: give it one queue (ethtool -L \
                         {name} combined 1), or use --links packet"
                    ));
                }
                let need = kernel_mtu.max(mtu.unwrap_or(0));
                if xsk::chunk_size_for(need).is_none() {
                    let big = xsk::CHUNK_SIZES.last().copied().unwrap_or(4096);
                    return Err(format!(
                        "interface {name}: MTU {need} is too large for --links xsk: AF_XDP \
                         carries a frame in one UMEM chunk of at most {big} bytes, which holds \
                         an MTU of {} at most after the kernel's headroom (multi-buffer AF_XDP \
                         is not used); use --links packet for this MTU",
                        xsk::max_mtu(big)
                    ));
                }
                names.push(name.to_string());
                *max_mtu = (*max_mtu).max(need);
                Ok((mac, kernel_mtu))
            }
        }
    }

    /// The router's data path over these links, with `hooks`; `fast` as for
    /// [`Links::new`] (only AF_PACKET links run one). Call it in the interfaces' network
    /// namespace.
    pub fn start(
        self,
        router: IpRouter,
        hooks: Box<dyn Hooks>,
        fast: Option<FastPathMode>,
    ) -> Result<Engine, String> {
        match self {
            Links::Packet { links, .. } => {
                let fp = fastpath::start(fast, &links)?;
                let mut dp = DataPath::new(links, router, hooks);
                if let Some(f) = fp {
                    dp.set_fast_path(f);
                }
                Ok(Engine::Packet(dp))
            }
            Links::Xsk { names, max_mtu } => {
                let cfg = XskConfig {
                    ifaces: names,
                    chunk_size: xsk::chunk_size_for(max_mtu).unwrap_or(4096),
                    ..XskConfig::default()
                };
                let mut fwd = XskForwarder::open(router, &cfg)
                    .map_err(|e| format!("--links xsk: {e} (--links packet uses AF_PACKET)"))?;
                eprintln!("anode router: {}", fwd.info());
                fwd.set_hooks(hooks);
                Ok(Engine::Xsk(fwd))
            }
        }
    }
}

/// The receive queues of interface `name` (sysfs of the process's namespace); 1 when it
/// cannot be read.
fn rx_queues(name: &str) -> usize {
    std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(1)
}

/// The router's data path, over either link type.
pub enum Engine {
    /// AF_PACKET.
    Packet(DataPath),
    /// AF_XDP.
    Xsk(XskForwarder),
}

impl Engine {
    /// See [`DataPath::waker`].
    pub fn waker(&mut self) -> std::io::Result<Waker> {
        match self {
            Engine::Packet(d) => d.waker(),
            Engine::Xsk(x) => x.waker(),
        }
    }

    /// See [`DataPath::set_realtime`].
    pub fn set_realtime(&mut self, priority: i32) {
        match self {
            Engine::Packet(d) => d.set_realtime(priority),
            Engine::Xsk(x) => x.set_realtime(priority),
        }
    }

    /// See [`DataPath::stop_flag`].
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        match self {
            Engine::Packet(d) => d.stop_flag(),
            Engine::Xsk(x) => x.stop_flag(),
        }
    }

    /// Runs the data path on its own thread.
    pub fn spawn(self) -> std::io::Result<JoinHandle<Stopped>> {
        match self {
            Engine::Packet(d) => d.spawn(),
            Engine::Xsk(x) => x.spawn(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xsk_links_refuse_a_kernel_fast_path_and_default_to_none() {
        for m in [FastPathMode::Tc, FastPathMode::Xdp] {
            let e = fast_path_for(LinkType::Xsk, Some(m)).unwrap_err();
            assert!(e.contains("--links xsk cannot run with --fast-path"), "{e}");
            assert!(e.contains("XDP runs before"), "why: {e}");
            assert!(
                e.contains("Leave out --fast-path") && e.contains("--links packet"),
                "what to do: {e}"
            );
        }
        assert_eq!(
            fast_path_for(LinkType::Xsk, None),
            Ok(Some(FastPathMode::Off))
        );
        assert_eq!(
            fast_path_for(LinkType::Xsk, Some(FastPathMode::Off)),
            Ok(Some(FastPathMode::Off))
        );
        assert_eq!(fast_path_for(LinkType::Packet, None), Ok(None));
        assert_eq!(
            fast_path_for(LinkType::Packet, Some(FastPathMode::Tc)),
            Ok(Some(FastPathMode::Tc))
        );
    }
}
