//! The IP router over AF_XDP sockets: one socket per interface (queue `XskConfig::queue`),
//! the redirect program on every interface, and one thread that runs every received frame
//! through [`IpRouter::handle_frame`] in place in the UMEM.
//!
//! ## The path of a frame
//! The XDP program redirects it into a chunk the forwarder gave the kernel on the
//! interface's fill ring; it appears on the rx ring (up to `batch` taken per socket per
//! round); the router rewrites it in place. Forwarded: if both sockets use the same UMEM
//! (`XDP_SHARED_UMEM`), its descriptor (address moved by the verdict's start, its length)
//! goes onto the outgoing socket's tx ring as it is, and the chunk comes back on that
//! socket's completion ring once sent; otherwise it is copied into a free chunk of the other
//! UMEM and its own chunk is freed at once. Consumed or diverted: the chunk is freed. Frames
//! the router generates (ARP, NDP, ICMP, released queued packets) are copied into free
//! chunks of their interface's UMEM. After each round every socket with descriptors on its
//! tx ring gets one `sendto` (the kick; in copy mode the kernel transmits inside it, up to
//! its budget), repeated next round if the kernel left some.
//!
//! ## Invariants
//! - Every chunk is in exactly one place (free list, a fill ring, an rx ring, a tx ring, a
//!   completion ring, or the current frame), which [`Umem`] checks on every transition;
//!   descriptors from the kernel that do not match are counted (`bad_rx`, `bad_completion`)
//!   and ignored.
//! - A chunk is freed or put on a tx ring before the rx ring slot naming it is released, and
//!   a forwarded frame's bytes are not touched after its descriptor is published.
//! - Each fill ring is topped up at the start of every round and again after the rx
//!   batches, keeping `batch` chunks per interface in the free list for generated and
//!   copied frames.
//! - One thread owns the router, the sockets and the UMEMs; only the stop flag and the
//!   waker are shared.
//!
//! ## The rest of the round
//! Everything but the sockets is the AF_PACKET data path's ([`crate::DataPath`]), through the
//! same `Core`: diverted frames go to the [`Hooks`] (set with [`XskForwarder::set_hooks`],
//! e.g. `anode router`'s local node and service modules), the router's and the hooks' timers
//! run every round, a [`Waker`] (an eventfd in the poll set) makes the loop run a round at
//! once, `--rt-priority` is [`XskForwarder::set_realtime`], and the loop ends with the same
//! [`Stopped`] report, its link counters being [`LinkReport::Xsk`]. There is no kernel fast
//! path in front: the redirect program takes every frame at XDP, before TC.

use std::fmt;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;
use std::time::Instant;

use anode_ip::wire::MacAddr;
use anode_ip::{IfaceId, InterfaceConfig, IpCidr, IpRouter, RouterConfig, Transmit};

use crate::datapath::Core;
use crate::{Hooks, LinkReport, NoHooks, Stopped, Waker};

use super::prog::{XdpAttach, XdpPref, XskProgram};
use super::umem::Umem;
use super::{BindMode, KernelStats, SocketConfig, UmemOf, XskError, XskSocket};

/// `XDP_PACKET_HEADROOM`: where the kernel puts a received frame in its chunk (copy mode).
const XDP_HEADROOM: usize = 256;

/// What a frame carries beyond its MTU: the Ethernet header and two VLAN tags.
const FRAME_OVERHEAD: usize = 14 + 8;

/// The chunk sizes the forwarder takes, smallest first.
pub const CHUNK_SIZES: [u32; 2] = [2048, 4096];

/// The largest MTU whose frames fit a chunk of `chunk_size` bytes (after the kernel's
/// headroom): 1770 for 2048, 3818 for 4096.
pub fn max_mtu(chunk_size: u32) -> usize {
    (chunk_size as usize).saturating_sub(XDP_HEADROOM + FRAME_OVERHEAD)
}

/// The smallest chunk size of [`CHUNK_SIZES`] whose frames an MTU of `mtu` fits, if any
/// (multi-buffer AF_XDP, which would carry larger frames across chunks, is not used).
pub fn chunk_size_for(mtu: usize) -> Option<u32> {
    CHUNK_SIZES.into_iter().find(|&c| max_mtu(c) >= mtu)
}

/// Whether the sockets share one UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UmemPref {
    /// Shared if the kernel allows it across the devices, else one per socket.
    #[default]
    Auto,
    /// One UMEM for all sockets (`XDP_SHARED_UMEM`): forwarding copies nothing in user space.
    Shared,
    /// One UMEM per socket: forwarded frames are copied into the outgoing socket's UMEM.
    Separate,
}

impl std::str::FromStr for UmemPref {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(UmemPref::Auto),
            "shared" => Ok(UmemPref::Shared),
            "separate" | "copy" => Ok(UmemPref::Separate),
            _ => Err(format!("UMEM {s:?}: expected auto, shared or separate")),
        }
    }
}

/// What the forwarder opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XskConfig {
    /// Interfaces in the router's order: `ifaces[i]` is `IfaceId(i)`.
    pub ifaces: Vec<String>,
    /// The receive queue bound on each interface (veth has one, 0).
    pub queue: u32,
    /// UMEM chunks per interface (a shared UMEM has this many times the interfaces). At
    /// least twice the ring size; four times (the default) never runs short, as a chunk of
    /// one socket can be on its fill, rx, tx or completion ring, each up to the ring size.
    /// The default (16384 chunks of 2 KiB, rings of 4096) is 32 MiB per interface, the
    /// memory of one default TPACKET ring.
    pub chunks: u32,
    /// Bytes per chunk (2048 or 4096): the frame, after the kernel's 256 bytes of headroom,
    /// must fit.
    pub chunk_size: u32,
    /// Rings, bind mode, transmit budget.
    pub socket: SocketConfig,
    /// Shared or separate UMEMs.
    pub umem: UmemPref,
    /// XDP attach mode.
    pub xdp: XdpPref,
    /// Most frames taken from one rx ring per round.
    pub batch: u32,
}

impl Default for XskConfig {
    fn default() -> Self {
        XskConfig {
            ifaces: Vec::new(),
            queue: 0,
            chunks: 16384,
            chunk_size: 2048,
            socket: SocketConfig::default(),
            umem: UmemPref::Auto,
            xdp: XdpPref::Auto,
            batch: 64,
        }
    }
}

/// Counters of one interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames taken from the rx ring.
    pub rx_frames: u64,
    /// Non-empty rx batches.
    pub rx_batches: u64,
    /// Forwarded frames sent from the UMEM chunk they arrived in (shared UMEM).
    pub tx_in_place: u64,
    /// Forwarded frames copied in from another UMEM.
    pub tx_copied: u64,
    /// Frames the router generated, copied into a chunk.
    pub tx_generated: u64,
    /// Descriptors put on the tx ring (the three above, minus drops).
    pub tx_frames: u64,
    /// Chunks back on the completion ring (sent).
    pub tx_completed: u64,
    /// `sendto` kicks.
    pub kicks: u64,
    /// Kicks answered EAGAIN / EBUSY / ENOBUFS (the rest stays on the ring for the next).
    pub kicks_again: u64,
    /// Kicks that failed otherwise (e.g. ENETDOWN).
    pub kick_errors: u64,
    /// Frames dropped: the tx ring was full.
    pub drop_tx_full: u64,
    /// Frames dropped: no free chunk to copy into.
    pub drop_no_chunk: u64,
    /// Frames dropped: larger than a chunk (generated frames).
    pub drop_too_big: u64,
    /// rx descriptors refused (outside the UMEM, across a chunk, chunk not on a fill ring).
    pub bad_rx: u64,
    /// Completions refused (outside the UMEM, chunk not on a tx ring).
    pub bad_completion: u64,
    /// The kernel's counters for the socket, read when the forwarder stops.
    pub kernel: KernelStats,
}

impl PortStats {
    /// The counters as (name, value) pairs, for machine-readable reports.
    pub fn entries(&self) -> Vec<(&'static str, u64)> {
        let k = &self.kernel;
        vec![
            ("rx_frames", self.rx_frames),
            ("rx_batches", self.rx_batches),
            ("tx_in_place", self.tx_in_place),
            ("tx_copied", self.tx_copied),
            ("tx_generated", self.tx_generated),
            ("tx_frames", self.tx_frames),
            ("tx_completed", self.tx_completed),
            ("kicks", self.kicks),
            ("kicks_again", self.kicks_again),
            ("kick_errors", self.kick_errors),
            ("drop_tx_full", self.drop_tx_full),
            ("drop_no_chunk", self.drop_no_chunk),
            ("drop_too_big", self.drop_too_big),
            ("bad_rx", self.bad_rx),
            ("bad_completion", self.bad_completion),
            ("kernel_rx_dropped", k.rx_dropped),
            ("kernel_rx_ring_full", k.rx_ring_full),
            ("kernel_rx_fill_ring_empty", k.rx_fill_ring_empty),
            ("kernel_rx_invalid_descs", k.rx_invalid_descs),
            ("kernel_tx_invalid_descs", k.tx_invalid_descs),
            ("kernel_tx_ring_empty", k.tx_ring_empty),
        ]
    }
}

/// How the forwarder ended up set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XskInfo {
    /// Bind mode per interface.
    pub bind: Vec<BindMode>,
    /// XDP attach mode per interface.
    pub xdp: Vec<XdpAttach>,
    /// All sockets share one UMEM.
    pub shared_umem: bool,
    /// Frames per `sendto` per interface (`None`: the kernel's default of 32).
    pub tx_budget: Vec<Option<u32>>,
    /// What was refused on the way (zero-copy, shared UMEM, the budget, native XDP).
    pub notes: Vec<String>,
}

impl fmt::Display for XskInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: Vec<String>| v.join(", ");
        write!(
            f,
            "AF_XDP: bind {}; XDP {}; UMEM {}; tx budget {}",
            list(self.bind.iter().map(|b| b.to_string()).collect()),
            list(self.xdp.iter().map(|x| x.to_string()).collect()),
            if self.shared_umem {
                "shared (XDP_SHARED_UMEM: forwarded in place)"
            } else {
                "one per socket (forwarded frames copied)"
            },
            list(
                self.tx_budget
                    .iter()
                    .map(|b| b.map_or("32 (default)".into(), |b| b.to_string()))
                    .collect()
            ),
        )?;
        for n in &self.notes {
            write!(f, "\n  note: {n}")?;
        }
        Ok(())
    }
}

/// The AF_XDP sockets of a stopped forwarder ([`LinkReport::Xsk`]).
#[derive(Debug)]
pub struct XskReport {
    /// Per-interface counters, by name.
    pub ports: Vec<(String, PortStats)>,
    /// The setup.
    pub info: XskInfo,
}

impl XskReport {
    /// One line per interface, for reports.
    pub fn lines(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|(name, s)| {
                format!(
                    "link {name}: rx {} frames in {} batches; tx {} frames ({} in place, {} copied, {} generated), {} completed, {} kicks ({} again, {} errors); dropped: tx ring full {}, no chunk {}, too big {}; refused descriptors: rx {}, completion {}; kernel: rx dropped {}, rx ring full {}, fill ring empty {}, invalid rx/tx descriptors {}/{}",
                    s.rx_frames,
                    s.rx_batches,
                    s.tx_frames,
                    s.tx_in_place,
                    s.tx_copied,
                    s.tx_generated,
                    s.tx_completed,
                    s.kicks,
                    s.kicks_again,
                    s.kick_errors,
                    s.drop_tx_full,
                    s.drop_no_chunk,
                    s.drop_too_big,
                    s.bad_rx,
                    s.bad_completion,
                    s.kernel.rx_dropped,
                    s.kernel.rx_ring_full,
                    s.kernel.rx_fill_ring_empty,
                    s.kernel.rx_invalid_descs,
                    s.kernel.tx_invalid_descs,
                )
            })
            .collect()
    }
}

/// The MAC address and MTU of interface `name` in the calling thread's network namespace.
pub fn iface_mac_mtu(name: &str) -> Result<(MacAddr, usize), XskError> {
    let (mac, mtu) = crate::sys::if_mac_mtu(name).map_err(|e| match e.raw_os_error() {
        Some(libc::ENODEV) => XskError::NoInterface {
            name: name.into(),
            source: e,
        },
        _ => XskError::Attribute {
            name: name.into(),
            what: "MAC address and MTU",
        },
    })?;
    Ok((MacAddr(mac), mtu))
}

/// An [`IpRouter`] (default settings) over the named interfaces, in order, with their
/// addresses; each interface's MAC and MTU are read from the kernel, so call it on a thread
/// in the interfaces' network namespace. The names then go to [`XskConfig::ifaces`] in the same
/// order.
pub fn router_for(ifaces: &[(String, Vec<IpCidr>)]) -> Result<IpRouter, XskError> {
    let mut router = IpRouter::new(RouterConfig::default());
    for (name, addrs) in ifaces {
        let (mac, mtu) = iface_mac_mtu(name)?;
        let (mut ipv4, mut ipv6) = (Vec::new(), Vec::new());
        for a in addrs {
            match a {
                IpCidr::V4(c) => ipv4.push(*c),
                IpCidr::V6(c) => ipv6.push(*c),
            }
        }
        router
            .add_interface(InterfaceConfig {
                name: name.clone(),
                mac,
                mtu,
                ipv4,
                ipv6,
            })
            .map_err(|e| XskError::Router {
                reason: e.to_string(),
            })?;
    }
    Ok(router)
}

/// One interface: its socket, which UMEM it uses, its counters.
#[derive(Debug)]
struct Port {
    sock: XskSocket,
    umem: usize,
    stats: PortStats,
}

/// The AF_XDP forwarder; see the module docs.
pub struct XskForwarder {
    /// The router, hooks, timers, waker and stop flag (shared with [`crate::DataPath`]).
    core: Core,
    /// Detached first on drop (before the sockets close).
    progs: Vec<XskProgram>,
    ports: Vec<Port>,
    /// Descriptors to put on each port's tx ring at the end of the round (their chunks are
    /// held by user space until then).
    pending: Vec<Vec<libc::xdp_desc>>,
    /// Last: unmapped after the sockets close.
    umems: Vec<Umem>,
    info: XskInfo,
    batch: u32,
    /// Chunks kept in each UMEM's free list for generated and copied frames.
    reserve: usize,
}

impl fmt::Debug for XskForwarder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XskForwarder")
            .field("ports", &self.ports)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

fn config(reason: String) -> XskError {
    XskError::Config { reason }
}

impl XskForwarder {
    /// Opens a socket on every interface of `cfg` (the router's interfaces, in order),
    /// attaches the redirect program to each, and fills the fill rings. Call it in the
    /// network namespace of the interfaces; the forwarder then runs anywhere.
    pub fn open(router: IpRouter, cfg: &XskConfig) -> Result<XskForwarder, XskError> {
        let n = cfg.ifaces.len();
        if n == 0 || n != router.interfaces().count() {
            return Err(config(format!(
                "{n} interfaces for a router with {}",
                router.interfaces().count()
            )));
        }
        let ring = cfg.socket.ring_size;
        if !(1..=ring).contains(&cfg.batch) {
            return Err(config(format!("batch {} outside 1..={ring}", cfg.batch)));
        }
        if cfg.chunks < ring.saturating_mul(2) {
            return Err(config(format!(
                "{} chunks per interface: at least twice the ring size ({ring})",
                cfg.chunks
            )));
        }
        for (_, ic) in router.interfaces() {
            if ic.mtu > max_mtu(cfg.chunk_size) {
                return Err(XskError::FrameTooLarge {
                    name: ic.name.clone(),
                    mtu: ic.mtu,
                    chunk_size: cfg.chunk_size,
                    max_mtu: max_mtu(cfg.chunk_size),
                });
            }
        }
        let umem_err = |e: std::io::Error| config(format!("allocating a UMEM: {e}"));
        let mut notes = Vec::new();
        let mut umems = Vec::new();
        let mut ports: Vec<Port> = Vec::with_capacity(n);
        let shared_chunks = match cfg.umem {
            UmemPref::Separate => cfg.chunks,
            _ => cfg.chunks.saturating_mul(n as u32),
        };
        for (i, name) in cfg.ifaces.iter().enumerate() {
            let first = ports.first();
            let sock = match (first, cfg.umem) {
                (Some(owner), UmemPref::Shared | UmemPref::Auto) => {
                    match XskSocket::open(name, cfg.queue, UmemOf::Share(&owner.sock), &cfg.socket)
                    {
                        Ok(s) => Ok((s, owner.umem)),
                        Err(e) if cfg.umem == UmemPref::Auto => {
                            notes.push(format!("{e}: {name} gets a UMEM of its own"));
                            Err(())
                        }
                        Err(e) => return Err(e),
                    }
                }
                _ => Err(()),
            };
            let (sock, u) = match sock {
                Ok(s) => s,
                Err(()) => {
                    let chunks = if i == 0 { shared_chunks } else { cfg.chunks };
                    umems.push(Umem::new(chunks, cfg.chunk_size).map_err(umem_err)?);
                    let u = umems.len() - 1;
                    let own = umems.get(u).ok_or_else(|| config("UMEM missing".into()))?;
                    (
                        XskSocket::open(name, cfg.queue, UmemOf::Own(own), &cfg.socket)?,
                        u,
                    )
                }
            };
            for note in sock.notes() {
                notes.push(format!("{name}: {note}"));
            }
            ports.push(Port {
                sock,
                umem: u,
                stats: PortStats::default(),
            });
        }
        let mut fwd = XskForwarder {
            core: Core::new(router, Box::new(NoHooks)),
            progs: Vec::with_capacity(n),
            pending: (0..n).map(|_| Vec::with_capacity(ring as usize)).collect(),
            ports,
            umems,
            info: XskInfo {
                bind: Vec::new(),
                xdp: Vec::new(),
                shared_umem: false,
                tx_budget: Vec::new(),
                notes,
            },
            batch: cfg.batch,
            reserve: cfg.batch as usize * n,
        };
        // Chunks on the fill rings before the first frame is redirected.
        fwd.refill();
        for p in &fwd.ports {
            let prog = XskProgram::attach(
                p.sock.name(),
                p.sock.ifindex(),
                &[(p.sock.queue(), &p.sock.as_fd())],
                cfg.xdp,
            )?;
            if let Some(note) = prog.note() {
                fwd.info.notes.push(format!("{}: {note}", p.sock.name()));
            }
            fwd.progs.push(prog);
        }
        fwd.info.bind = fwd.ports.iter().map(|p| p.sock.mode()).collect();
        fwd.info.xdp = fwd.progs.iter().map(|p| p.mode()).collect();
        fwd.info.shared_umem = fwd.umems.len() == 1 && n > 1;
        fwd.info.tx_budget = fwd.ports.iter().map(|p| p.sock.tx_budget()).collect();
        Ok(fwd)
    }

    /// How it is set up.
    pub fn info(&self) -> &XskInfo {
        &self.info
    }

    /// Hands diverted frames to `hooks` and polls them every round (by default they are
    /// dropped: [`NoHooks`]). The router's filters decide what is diverted.
    pub fn set_hooks(&mut self, hooks: Box<dyn Hooks>) {
        self.core.set_hooks(hooks);
    }

    /// A [`Waker`] for this forwarder (the same one on every call); see
    /// [`crate::DataPath::waker`].
    pub fn waker(&mut self) -> std::io::Result<Waker> {
        self.core.waker()
    }

    /// Runs the forwarder's thread under `SCHED_FIFO` at `priority` (1..=99), as
    /// [`crate::DataPath::set_realtime`] does.
    pub fn set_realtime(&mut self, priority: i32) {
        self.core.set_realtime(priority);
    }

    /// Setting this flag stops the loop within one poll interval (100 ms).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.core.stop_flag()
    }

    /// Runs the loop on a new thread named `anode-xskfwd`.
    pub fn spawn(self) -> std::io::Result<JoinHandle<Stopped>> {
        std::thread::Builder::new()
            .name("anode-xskfwd".into())
            .spawn(move || self.run())
    }

    /// Tops up every fill ring from its UMEM's free list, keeping the reserve.
    fn refill(&mut self) {
        for p in &mut self.ports {
            let Some(u) = self.umems.get_mut(p.umem) else {
                continue;
            };
            let room = p.sock.fill.free() as usize;
            let spare = u.free_chunks().saturating_sub(self.reserve);
            let k = room.min(spare);
            if k == 0 {
                continue;
            }
            for _ in 0..k {
                let Some(a) = u.alloc() else { break };
                if u.give_fill(a) && !p.sock.fill.push(a) {
                    // Cannot happen (room checked): undo.
                    u.release(a);
                }
            }
            p.sock.fill.submit();
            p.sock.wake_rx();
        }
    }

    /// Takes every completion: the chunks go back to the free lists.
    fn complete(&mut self) {
        for p in &mut self.ports {
            let Some(u) = self.umems.get_mut(p.umem) else {
                continue;
            };
            let k = p.sock.comp.available(u32::MAX);
            for j in 0..k {
                if u.complete(p.sock.comp.get(j)) {
                    p.stats.tx_completed += 1;
                } else {
                    p.stats.bad_completion += 1;
                }
            }
            if k > 0 {
                p.sock.comp.release(k);
            }
        }
    }

    /// Handles one received frame of port `i`.
    fn handle_rx(&mut self, now: Instant, i: usize, d: libc::xdp_desc) {
        let Some(ui) = self.ports.get(i).map(|p| p.umem) else {
            return;
        };
        let Some(u) = self.umems.get_mut(ui) else {
            return;
        };
        if !u.take_rx(d.addr, d.len) {
            if let Some(p) = self.ports.get_mut(i) {
                p.stats.bad_rx += 1;
            }
            return;
        }
        // Multi-buffer frames are not enabled (no XDP_USE_SG), so every frame is whole.
        let Some(frame) = u.frame_mut(d.addr, d.len) else {
            u.release(d.addr);
            return;
        };
        let Some((iface, range)) = self.core.handle_frame(now, IfaceId(i as u32), frame) else {
            u.release(d.addr);
            return;
        };
        let (start, len) = (range.start, range.len());
        let o = iface.0 as usize;
        let (Some(uo), Ok(s), Ok(l)) = (
            self.ports.get(o).map(|p| p.umem),
            u64::try_from(start),
            u32::try_from(len),
        ) else {
            u.release(d.addr);
            return;
        };
        if uo == ui {
            let addr = d.addr + s;
            // The router's verdict lies inside the frame it was given; checked anyway.
            if u.fits(addr, l)
                && s + u64::from(l) <= u64::from(d.len)
                && let (Some(q), Some(p)) = (self.pending.get_mut(o), self.ports.get_mut(o))
            {
                q.push(libc::xdp_desc {
                    addr,
                    len: l,
                    options: 0,
                });
                p.stats.tx_in_place += 1;
            } else {
                u.release(d.addr);
            }
            return;
        }
        // Another UMEM: copy into one of its chunks, free ours.
        let Ok([src, dst]) = self.umems.get_disjoint_mut([ui, uo]) else {
            return;
        };
        let copied = copy_into(src, d.addr + s, l, dst);
        src.release(d.addr);
        if let (Some(p), Some(q)) = (self.ports.get_mut(o), self.pending.get_mut(o)) {
            match copied {
                Some(desc) => {
                    q.push(desc);
                    p.stats.tx_copied += 1;
                }
                None => p.stats.drop_no_chunk += 1,
            }
        }
    }

    /// Copies the router's generated frames into chunks of their interfaces' UMEMs.
    fn generated(&mut self, owned: &mut Vec<Transmit>) {
        self.core.generated(owned);
        for t in owned.iter() {
            let o = t.iface.0 as usize;
            if let (Some(p), Some(q)) = (self.ports.get_mut(o), self.pending.get_mut(o))
                && let Some(u) = self.umems.get_mut(p.umem)
            {
                match u32::try_from(t.frame.len()) {
                    Ok(len) if len <= u.chunk_size() => match u.alloc() {
                        Some(a) => {
                            if let Some(buf) = u.frame_mut(a, len) {
                                buf.copy_from_slice(&t.frame);
                                q.push(libc::xdp_desc {
                                    addr: a,
                                    len,
                                    options: 0,
                                });
                                p.stats.tx_generated += 1;
                            } else {
                                u.release(a);
                            }
                        }
                        None => p.stats.drop_no_chunk += 1,
                    },
                    _ => p.stats.drop_too_big += 1,
                }
            }
        }
        self.core.recycle(owned);
    }

    /// Puts the pending descriptors on the tx rings and kicks every socket with frames on
    /// its ring. Returns (progress: some socket sent something, stalled: some socket still
    /// has frames the kernel did not take).
    fn transmit(&mut self) -> (bool, bool) {
        let (mut progress, mut stalled) = (false, false);
        for (p, q) in self.ports.iter_mut().zip(self.pending.iter_mut()) {
            let Some(u) = self.umems.get_mut(p.umem) else {
                continue;
            };
            if !q.is_empty() {
                let mut room = p.sock.tx.free();
                for d in q.drain(..) {
                    if room > 0 && u.give_tx(d.addr) && p.sock.tx.push(d) {
                        room -= 1;
                        p.stats.tx_frames += 1;
                    } else {
                        u.release(d.addr);
                        p.stats.drop_tx_full += 1;
                    }
                }
                p.sock.tx.submit();
            }
            p.sock.tx.free();
            let before = p.sock.tx.outstanding();
            if before == 0 {
                continue;
            }
            // Copy mode sends only when kicked; zero-copy drivers say when they need it.
            if p.sock.mode() == BindMode::Copy || p.sock.tx.needs_wakeup() {
                p.stats.kicks += 1;
                if let Err(e) = p.sock.kick() {
                    match e.raw_os_error() {
                        Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR) => {
                            p.stats.kicks_again += 1
                        }
                        _ => p.stats.kick_errors += 1,
                    }
                }
            }
            p.sock.tx.free();
            let after = p.sock.tx.outstanding();
            progress |= after < before;
            stalled |= after > 0;
        }
        (progress, stalled)
    }

    /// Runs the loop on this thread until the stop flag is set.
    pub fn run(mut self) -> Stopped {
        self.core.enter_thread();
        let mut owned: Vec<Transmit> = Vec::with_capacity(1024);
        let mut pfds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .map(|p| libc::pollfd {
                fd: p.sock.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        pfds.extend(self.core.wake_pollfd());
        while self.core.running() {
            let mut now = Instant::now();
            let mut busy = false;
            self.complete();
            self.refill();
            for i in 0..self.ports.len() {
                let Some(p) = self.ports.get_mut(i) else {
                    continue;
                };
                let k = p.sock.rx.available(self.batch);
                if k == 0 {
                    continue;
                }
                busy = true;
                p.stats.rx_batches += 1;
                p.stats.rx_frames += u64::from(k);
                now = Instant::now();
                for j in 0..k {
                    let Some(d) = self.ports.get(i).map(|p| p.sock.rx.get(j)) else {
                        break;
                    };
                    self.handle_rx(now, i, d);
                }
                if let Some(p) = self.ports.get_mut(i) {
                    p.sock.rx.release(k);
                }
            }
            if busy {
                // The rx slots just released are usable at once: give the kernel chunks for
                // them before the kicks below (which run the receivers' stacks inline).
                self.refill();
            }
            let hook_deadline = self.core.timers(now);
            self.generated(&mut owned);
            let (progress, stalled) = self.transmit();
            busy |= progress;
            if busy {
                continue;
            }
            // Idle: sleep until a frame arrives, the waker fires, the router's or the hooks'
            // next deadline, or (frames stuck on a tx ring) 1 ms, then kick again.
            let cap = if stalled { 1 } else { 100 };
            self.core
                .sleep(&mut pfds, self.ports.len(), hook_deadline, cap);
        }
        self.complete();
        for p in &mut self.ports {
            if let Ok(k) = p.sock.kernel_stats() {
                p.stats.kernel = k;
            }
        }
        let ports = self
            .ports
            .iter()
            .map(|p| (p.sock.name().to_string(), p.stats))
            .collect();
        let XskForwarder {
            core,
            progs,
            ports: socks,
            umems,
            info,
            ..
        } = self;
        // Detach the programs, then close the sockets, then free the UMEMs.
        drop(progs);
        drop(socks);
        drop(umems);
        core.finish(LinkReport::Xsk(XskReport { ports, info }))
    }
}

/// Copies `[addr, addr + len)` of `src` (a chunk user space holds) into a free chunk of
/// `dst`; the descriptor to send it, or `None` when `dst` has no free chunk.
fn copy_into(src: &mut Umem, addr: u64, len: u32, dst: &mut Umem) -> Option<libc::xdp_desc> {
    let from = src.frame_mut(addr, len)?;
    let a = dst.alloc()?;
    match dst.frame_mut(a, len) {
        Some(to) => {
            to.copy_from_slice(from);
            Some(libc::xdp_desc {
                addr: a,
                len,
                options: 0,
            })
        }
        None => {
            dst.release(a);
            None
        }
    }
}
