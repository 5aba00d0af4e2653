//! AF_XDP sockets: the kernel's XDP hook hands frames to user space through rings over a
//! shared packet area (the UMEM), and user space transmits from that area.
//!
//! - [`Umem`] (`umem.rs`): the packet area, cut into chunks, with the state of every chunk.
//! - [`XskSocket`] (here): one socket bound to one receive queue of one interface, with its
//!   four rings (`ring.rs`), mapped at the offsets `getsockopt(XDP_MMAP_OFFSETS)` gives:
//!   fill (free chunks for the kernel to receive into), rx (received frames), tx (frames to
//!   send), completion (chunks sent). The first socket of a UMEM registers it
//!   (`XDP_UMEM_REG`); others share it (`XDP_SHARED_UMEM`, with their own fill and
//!   completion rings when they are on another device or queue).
//! - [`XskProgram`] (`prog.rs`): the XDP program (`bpf/xsk.c`) that redirects every frame of
//!   an interface to the socket of its receive queue.
//! - [`XskForwarder`] (`fwd.rs`): the IP router over two or more such sockets, with the
//!   same hooks, waker and exit report ([`crate::Stopped`]) as the AF_PACKET
//!   [`crate::DataPath`]: `anode router --links xsk`, and `anode-xskfwd`.
//!
//! ## Binding
//! [`BindPref::Auto`] binds with `XDP_ZEROCOPY` first (the driver DMAs straight into the
//! UMEM) and falls back to `XDP_COPY` (the kernel copies each frame from the XDP buffer into
//! the UMEM, and builds an skb from the UMEM for each frame sent); [`XskSocket::mode`] says
//! which one the kernel granted (read back with `XDP_OPTIONS`). veth has no zero-copy
//! support, so on the netns testbed every socket is in copy mode. In copy mode transmission
//! happens inside `sendto` (the "kick"), up to the socket's budget of frames per call: 32 by
//! default, raised with `XDP_MAX_TX_SKB_BUDGET` (Linux 6.17) where the kernel has it.
//!
//! ## Contracts
//! - Every ring offset and size from the kernel is checked before the ring is used; every
//!   address and length in a descriptor is checked against the UMEM and the chunk's state
//!   ([`Umem`]) before a byte is touched.
//! - A socket's rings are used by one thread (the forwarder's); the kernel is the other side.
//! - Drop order: sockets before the UMEM they use (the kernel pins the UMEM's pages for as
//!   long as a socket uses them, so the reverse would be safe too, only wasteful).

mod fwd;
mod prog;
mod ring;
mod umem;

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

pub use fwd::{
    CHUNK_SIZES, PortStats, UmemPref, XskConfig, XskForwarder, XskInfo, XskReport, chunk_size_for,
    iface_mac_mtu, max_mtu, router_for,
};
pub use prog::{XSKS_MAX, XdpAttach, XdpPref, XskProgram};
pub use umem::Umem;

use ring::{ConsRing, Offsets, ProdRing};

/// `XDP_MAX_TX_SKB_BUDGET` (linux/if_xdp.h, Linux 6.17): frames one `sendto` transmits in
/// copy mode (32..=tx ring size; 32 without it). Not in libc 0.2.191.
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// What went wrong setting up AF_XDP.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    /// No such interface.
    #[error("interface {name}: not found ({source})")]
    NoInterface {
        /// Name.
        name: String,
        /// Cause.
        source: io::Error,
    },
    /// The interface's MAC or MTU could not be read.
    #[error("interface {name}: cannot read its {what}")]
    Attribute {
        /// Name.
        name: String,
        /// The attribute.
        what: &'static str,
    },
    /// A socket call failed.
    #[error(
        "AF_XDP socket on {name}: {what} failed: {source} (AF_XDP needs root, CONFIG_XDP_SOCKETS and Linux >= 5.4)"
    )]
    Socket {
        /// Interface.
        name: String,
        /// The call.
        what: &'static str,
        /// Cause.
        source: io::Error,
    },
    /// The kernel refused to bind the socket in every mode tried.
    #[error("binding the AF_XDP socket to {name} queue {queue}: {reason}")]
    Bind {
        /// Interface.
        name: String,
        /// Receive queue.
        queue: u32,
        /// What each attempt got.
        reason: String,
    },
    /// Loading the XDP program or writing its map failed.
    #[error("the AF_XDP redirect program: {reason}")]
    Program {
        /// Why.
        reason: String,
    },
    /// Attaching the XDP program failed in every mode tried.
    #[error("attaching the AF_XDP redirect program to {name}: {reason}")]
    Attach {
        /// Interface.
        name: String,
        /// What each attempt got.
        reason: String,
    },
    /// An interface's MTU needs frames larger than a UMEM chunk holds.
    #[error(
        "interface {name}: MTU {mtu} needs frames larger than a {chunk_size}-byte AF_XDP chunk holds (MTU {max_mtu} at most, after the kernel's 256 bytes of headroom; multi-buffer AF_XDP is not used)"
    )]
    FrameTooLarge {
        /// Interface.
        name: String,
        /// Its MTU.
        mtu: usize,
        /// The chunk size.
        chunk_size: u32,
        /// The largest MTU such a chunk carries.
        max_mtu: usize,
    },
    /// The configuration cannot work (sizes, interface list).
    #[error("AF_XDP forwarder configuration: {reason}")]
    Config {
        /// Why.
        reason: String,
    },
    /// The router refused an interface or route.
    #[error("router configuration: {reason}")]
    Router {
        /// Why.
        reason: String,
    },
}

/// How the kernel moves frames between the device and the UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindMode {
    /// The driver receives into and transmits from the UMEM (`XDP_ZEROCOPY`).
    ZeroCopy,
    /// The kernel copies: XDP buffer -> UMEM on receive, UMEM -> skb on transmit (`XDP_COPY`).
    Copy,
}

impl fmt::Display for BindMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindMode::ZeroCopy => "zero-copy (XDP_ZEROCOPY)",
            BindMode::Copy => "copy (XDP_COPY)",
        })
    }
}

/// Which bind modes to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindPref {
    /// `XDP_ZEROCOPY`, else `XDP_COPY`.
    #[default]
    Auto,
    /// `XDP_COPY` only.
    Copy,
    /// `XDP_ZEROCOPY` only.
    ZeroCopy,
}

impl std::str::FromStr for BindPref {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BindPref::Auto),
            "copy" => Ok(BindPref::Copy),
            "zerocopy" | "zero-copy" => Ok(BindPref::ZeroCopy),
            _ => Err(format!("bind mode {s:?}: expected auto, copy or zerocopy")),
        }
    }
}

/// Ring sizes and options of one socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketConfig {
    /// Entries of each of the four rings (a power of two).
    pub ring_size: u32,
    /// Bind modes to try.
    pub bind: BindPref,
    /// Frames per `sendto` in copy mode (`XDP_MAX_TX_SKB_BUDGET`; 0 leaves the kernel's 32).
    pub tx_budget: u32,
}

impl Default for SocketConfig {
    fn default() -> Self {
        SocketConfig {
            ring_size: 4096,
            bind: BindPref::Auto,
            tx_budget: 64,
        }
    }
}

/// The UMEM a new socket uses.
#[derive(Debug, Clone, Copy)]
pub enum UmemOf<'a> {
    /// Registers this UMEM on the new socket (`XDP_UMEM_REG`).
    Own(&'a Umem),
    /// Shares the UMEM of this bound socket (`XDP_SHARED_UMEM`) from another device or
    /// queue: the new socket has fill and completion rings of its own (on the same device
    /// and queue the kernel would share the owner's and refuse ours).
    Share(&'a XskSocket),
}

/// Kernel counters of one socket (`XDP_STATISTICS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Frames dropped for other reasons than the ones below.
    pub rx_dropped: u64,
    /// Frames dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty (a frame was dropped).
    pub rx_fill_ring_empty: u64,
    /// Invalid descriptors on the rx side.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors on the tx ring (skipped by the kernel).
    pub tx_invalid_descs: u64,
    /// Times a kick found the tx ring empty.
    pub tx_ring_empty: u64,
}

/// One AF_XDP socket bound to one queue of one interface.
#[derive(Debug)]
pub struct XskSocket {
    pub(crate) rx: ConsRing<libc::xdp_desc>,
    pub(crate) tx: ProdRing<libc::xdp_desc>,
    pub(crate) fill: ProdRing<u64>,
    pub(crate) comp: ConsRing<u64>,
    /// Last: the rings are unmapped before the socket closes.
    fd: OwnedFd,
    name: String,
    ifindex: u32,
    queue: u32,
    mode: BindMode,
    shared: bool,
    tx_budget: Option<u32>,
    notes: Vec<String>,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// getsockopt(2) into a plain-old-data value; the length the kernel wrote.
fn getsockopt<T: Copy>(fd: &OwnedFd, name: libc::c_int, val: &mut T) -> io::Result<usize> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `val` points to a live, writable `T` of `len` bytes for the call; the kernel
    // writes at most `len` bytes and reports how many.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (val as *mut T).cast(),
            &mut len,
        )
    })?;
    Ok(len as usize)
}

fn ring_offsets(r: &libc::xdp_ring_offset) -> Offsets {
    Offsets {
        producer: r.producer,
        consumer: r.consumer,
        desc: r.desc,
        flags: Some(r.flags),
    }
}

fn ring_offsets_v1(r: &libc::xdp_ring_offset_v1) -> Offsets {
    Offsets {
        producer: r.producer,
        consumer: r.consumer,
        desc: r.desc,
        flags: None,
    }
}

/// The four rings' offsets: (rx, tx, fill, completion).
fn mmap_offsets(fd: &OwnedFd) -> io::Result<[Offsets; 4]> {
    // SAFETY: xdp_mmap_offsets is plain old data; all-zero is valid.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let n = getsockopt(fd, libc::XDP_MMAP_OFFSETS, &mut off)?;
    if n == std::mem::size_of::<libc::xdp_mmap_offsets>() {
        return Ok([
            ring_offsets(&off.rx),
            ring_offsets(&off.tx),
            ring_offsets(&off.fr),
            ring_offsets(&off.cr),
        ]);
    }
    // Before Linux 5.4: no flags words.
    // SAFETY: as above.
    let mut v1: libc::xdp_mmap_offsets_v1 = unsafe { std::mem::zeroed() };
    let n = getsockopt(fd, libc::XDP_MMAP_OFFSETS, &mut v1)?;
    if n != std::mem::size_of::<libc::xdp_mmap_offsets_v1>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("XDP_MMAP_OFFSETS returned {n} bytes"),
        ));
    }
    Ok([
        ring_offsets_v1(&v1.rx),
        ring_offsets_v1(&v1.tx),
        ring_offsets_v1(&v1.fr),
        ring_offsets_v1(&v1.cr),
    ])
}

fn bind(fd: &OwnedFd, ifindex: u32, queue: u32, flags: u16, shared_fd: u32) -> io::Result<()> {
    // SAFETY: sockaddr_xdp is plain old data; all-zero is valid.
    let mut sa: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
    sa.sxdp_family = libc::AF_XDP as u16;
    sa.sxdp_flags = flags;
    sa.sxdp_ifindex = ifindex;
    sa.sxdp_queue_id = queue;
    sa.sxdp_shared_umem_fd = shared_fd;
    // SAFETY: `sa` is a valid sockaddr_xdp and the length passed is its size.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Registers `umem` on the socket (`XDP_UMEM_REG`; the pre-5.11 layout if the kernel wants it).
fn register(fd: &OwnedFd, umem: &Umem) -> io::Result<()> {
    let reg = libc::xdp_umem_reg {
        addr: umem.addr(),
        len: umem.len() as u64,
        chunk_size: umem.chunk_size(),
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    match crate::sys::setsockopt(fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let v1 = libc::xdp_umem_reg_v1 {
                addr: reg.addr,
                len: reg.len,
                chunk_size: reg.chunk_size,
                headroom: 0,
            };
            crate::sys::setsockopt(fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &v1)
        }
        r => r,
    }
}

impl XskSocket {
    /// Opens an AF_XDP socket on queue `queue` of interface `name` over `umem`: registers or
    /// shares the UMEM, sets up and maps the four rings, binds (see the module docs for the
    /// modes), and raises the transmit budget if the kernel allows.
    pub fn open(
        name: &str,
        queue: u32,
        umem: UmemOf<'_>,
        cfg: &SocketConfig,
    ) -> Result<XskSocket, XskError> {
        let fail = |what, source| XskError::Socket {
            name: name.to_string(),
            what,
            source,
        };
        let ifindex = crate::sys::ifindex(name).map_err(|source| XskError::NoInterface {
            name: name.into(),
            source,
        })? as u32;
        if !cfg.ring_size.is_power_of_two() {
            return Err(XskError::Config {
                reason: format!("ring size {} is not a power of two", cfg.ring_size),
            });
        }
        // SAFETY: plain socket(2) call with constant arguments; a non-negative return is a
        // fresh descriptor we own.
        let raw =
            cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
                .map_err(|e| fail("socket(AF_XDP)", e))?;
        // SAFETY: `raw` was just returned by socket(2) and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        if let UmemOf::Own(u) = umem {
            register(&fd, u).map_err(|e| fail("XDP_UMEM_REG", e))?;
        }
        let size = cfg.ring_size as libc::c_int;
        for (opt, what) in [
            (libc::XDP_UMEM_FILL_RING, "XDP_UMEM_FILL_RING"),
            (libc::XDP_UMEM_COMPLETION_RING, "XDP_UMEM_COMPLETION_RING"),
            (libc::XDP_RX_RING, "XDP_RX_RING"),
            (libc::XDP_TX_RING, "XDP_TX_RING"),
        ] {
            crate::sys::setsockopt(&fd, libc::SOL_XDP, opt, &size).map_err(|e| fail(what, e))?;
        }
        let [o_rx, o_tx, o_fill, o_comp] =
            mmap_offsets(&fd).map_err(|e| fail("XDP_MMAP_OFFSETS", e))?;
        let n = cfg.ring_size;
        let rx = ConsRing::new(&fd, libc::XDP_PGOFF_RX_RING as u64, o_rx, n)
            .map_err(|e| fail("mmap(rx ring)", e))?;
        let tx = ProdRing::new(&fd, libc::XDP_PGOFF_TX_RING as u64, o_tx, n)
            .map_err(|e| fail("mmap(tx ring)", e))?;
        let fill = ProdRing::new(&fd, libc::XDP_UMEM_PGOFF_FILL_RING, o_fill, n)
            .map_err(|e| fail("mmap(fill ring)", e))?;
        let comp = ConsRing::new(&fd, libc::XDP_UMEM_PGOFF_COMPLETION_RING, o_comp, n)
            .map_err(|e| fail("mmap(completion ring)", e))?;

        let mut notes = Vec::new();
        let shared = matches!(umem, UmemOf::Share(_));
        match umem {
            UmemOf::Own(_) => {
                let wake = libc::XDP_USE_NEED_WAKEUP;
                let tries: &[(u16, &str)] = match cfg.bind {
                    BindPref::Auto => &[
                        (libc::XDP_ZEROCOPY | wake, "XDP_ZEROCOPY"),
                        (libc::XDP_COPY | wake, "XDP_COPY"),
                    ],
                    BindPref::ZeroCopy => &[(libc::XDP_ZEROCOPY | wake, "XDP_ZEROCOPY")],
                    BindPref::Copy => &[(libc::XDP_COPY | wake, "XDP_COPY")],
                };
                let mut refused = Vec::new();
                let mut bound = false;
                for &(flags, what) in tries {
                    match bind(&fd, ifindex, queue, flags, 0) {
                        Ok(()) => {
                            bound = true;
                            break;
                        }
                        Err(e) => refused.push(format!("{what} refused: {e}")),
                    }
                }
                if !bound {
                    return Err(XskError::Bind {
                        name: name.into(),
                        queue,
                        reason: refused.join("; "),
                    });
                }
                notes.extend(refused);
            }
            UmemOf::Share(owner) => {
                let ofd = u32::try_from(owner.fd.as_raw_fd()).unwrap_or(0);
                bind(&fd, ifindex, queue, libc::XDP_SHARED_UMEM, ofd).map_err(|e| {
                    XskError::Bind {
                        name: name.into(),
                        queue,
                        reason: format!("XDP_SHARED_UMEM with {}: {e}", owner.name),
                    }
                })?;
            }
        }
        // SAFETY: xdp_options is plain old data; all-zero is valid.
        let mut opts: libc::xdp_options = unsafe { std::mem::zeroed() };
        getsockopt(&fd, libc::XDP_OPTIONS, &mut opts).map_err(|e| fail("XDP_OPTIONS", e))?;
        let mode = if opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
            BindMode::ZeroCopy
        } else {
            BindMode::Copy
        };
        let tx_budget = if cfg.tx_budget == 0 {
            None
        } else {
            let b = cfg.tx_budget.clamp(32, n);
            match crate::sys::setsockopt(&fd, libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &b) {
                Ok(()) => Some(b),
                Err(e) => {
                    notes.push(format!(
                        "XDP_MAX_TX_SKB_BUDGET refused ({e}): 32 frames per sendto"
                    ));
                    None
                }
            }
        };
        Ok(XskSocket {
            rx,
            tx,
            fill,
            comp,
            fd,
            name: name.into(),
            ifindex,
            queue,
            mode,
            shared,
            tx_budget,
            notes,
        })
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its ifindex.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The receive queue it is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// The mode the kernel granted.
    pub fn mode(&self) -> BindMode {
        self.mode
    }

    /// It shares another socket's UMEM.
    pub fn shared(&self) -> bool {
        self.shared
    }

    /// Frames per `sendto`, if raised with `XDP_MAX_TX_SKB_BUDGET`.
    pub fn tx_budget(&self) -> Option<u32> {
        self.tx_budget
    }

    /// What was refused on the way (bind modes, the budget).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Starts transmission of what the tx ring holds (`sendto`, non-blocking). In copy mode
    /// the kernel sends up to the budget of frames inside this call; `EAGAIN` / `EBUSY` /
    /// `ENOBUFS` mean "not all of it, kick again", which the caller sees as descriptors left
    /// on the ring.
    pub fn kick(&self) -> io::Result<()> {
        // SAFETY: sendto with no buffer and no address: only a wake-up for the socket.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Wakes the receive side when the kernel asks for it on the fill ring (zero-copy
    /// drivers; never needed in copy mode, where the XDP hook receives by itself).
    pub fn wake_rx(&self) {
        if self.fill.needs_wakeup() {
            // SAFETY: recvfrom with no buffer: only a wake-up for the socket.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    /// The kernel's counters for this socket.
    pub fn kernel_stats(&self) -> io::Result<KernelStats> {
        // SAFETY: xdp_statistics is plain old data; all-zero is valid.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        // Older kernels write only the first three fields; the rest stay zero.
        getsockopt(&self.fd, libc::XDP_STATISTICS, &mut s)?;
        Ok(KernelStats {
            rx_dropped: s.rx_dropped,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty: s.rx_fill_ring_empty_descs,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            tx_ring_empty: s.tx_ring_empty_descs,
        })
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
