//! Thin wrappers over the Linux calls the links need (AF_PACKET sockets, socket options,
//! mmap, poll, sendmmsg) and the kernel's TPACKET_V2/V3 ring layouts (`linux/if_packet.h`).
//! Every `unsafe` block says why it is sound.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `TPACKET_V2` in `enum tpacket_versions`.
pub const TPACKET_V2: libc::c_int = 1;
/// `TPACKET_V3` in `enum tpacket_versions`.
pub const TPACKET_V3: libc::c_int = 2;
/// `PACKET_VERSION`.
pub const PACKET_VERSION: libc::c_int = 10;
/// `PACKET_RX_RING`.
pub const PACKET_RX_RING: libc::c_int = 5;
/// `PACKET_STATISTICS`.
pub const PACKET_STATISTICS: libc::c_int = 6;
/// `PACKET_QDISC_BYPASS`.
pub const PACKET_QDISC_BYPASS: libc::c_int = 20;
/// `PACKET_IGNORE_OUTGOING`.
pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `PACKET_ADD_MEMBERSHIP`.
pub const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
/// `PACKET_MR_ALLMULTI`.
pub const PACKET_MR_ALLMULTI: libc::c_ushort = 2;
/// Block owned by user space.
pub const TP_STATUS_USER: u32 = 1;
/// Block owned by the kernel.
pub const TP_STATUS_KERNEL: u32 = 0;
/// The frame's transport checksum is not filled in yet (checksum offload on the sender).
pub const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
/// `ETH_P_ALL`.
pub const ETH_P_ALL: u16 = 0x0003;

/// `struct tpacket_req` (TPACKET_V2 rings).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TpacketReq {
    pub block_size: u32,
    pub block_nr: u32,
    pub frame_size: u32,
    pub frame_nr: u32,
}

/// Offsets in `struct tpacket2_hdr` (`tp_status` is at 0).
pub mod pkt2 {
    /// `tp_len`.
    pub const LEN: usize = 4;
    /// `tp_snaplen`.
    pub const SNAPLEN: usize = 8;
    /// `tp_mac` (u16).
    pub const MAC: usize = 12;
}

/// `struct tpacket_stats_v3` (V2 fills only the first two words).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TpacketStats {
    pub packets: u32,
    pub drops: u32,
    pub freeze_q_cnt: u32,
}

/// Reads and resets the socket's ring statistics (`PACKET_STATISTICS`).
pub fn packet_stats(fd: &OwnedFd) -> io::Result<TpacketStats> {
    let mut st = TpacketStats::default();
    let mut len = std::mem::size_of::<TpacketStats>() as libc::socklen_t;
    // SAFETY: `st` is a live, writable TpacketStats of `len` bytes; the kernel writes at
    // most `len` bytes and updates `len`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            (&mut st as *mut TpacketStats).cast(),
            &mut len,
        )
    })?;
    Ok(st)
}

/// `struct tpacket_req3`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TpacketReq3 {
    pub block_size: u32,
    pub block_nr: u32,
    pub frame_size: u32,
    pub frame_nr: u32,
    pub retire_blk_tov: u32,
    pub sizeof_priv: u32,
    pub feature_req_word: u32,
}

/// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then `tpacket_hdr_v1`).
pub mod block {
    /// `hdr.bh1.block_status`.
    pub const STATUS: usize = 8;
    /// `hdr.bh1.num_pkts`.
    pub const NUM_PKTS: usize = 12;
    /// `hdr.bh1.offset_to_first_pkt`.
    pub const FIRST: usize = 16;
}

/// Offsets in `struct tpacket3_hdr`.
pub mod pkt {
    /// `tp_next_offset`.
    pub const NEXT: usize = 0;
    /// `tp_snaplen`.
    pub const SNAPLEN: usize = 12;
    /// `tp_len`.
    pub const LEN: usize = 16;
    /// `tp_status`.
    pub const STATUS: usize = 20;
    /// `tp_mac` (u16).
    pub const MAC: usize = 24;
    /// Size of the header.
    pub const HDR: usize = 48;
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// An AF_PACKET raw socket that receives nothing until bound.
pub fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call with constant arguments; a non-negative return is a
    // fresh descriptor we own.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A non-blocking eventfd: readable once written, until read.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain eventfd(2) call; a non-negative return is a fresh descriptor we own.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: `fd` was just returned by eventfd(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes an eventfd readable (never blocks: a full counter is readable already).
pub fn eventfd_notify(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes the 8 bytes of a live u64, as eventfd requires.
    let _ = unsafe { libc::write(fd.as_raw_fd(), (&raw const one).cast(), 8) };
}

/// Resets an eventfd's counter (it is no longer readable).
pub fn eventfd_drain(fd: &OwnedFd) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64, as eventfd requires.
    let _ = unsafe { libc::read(fd.as_raw_fd(), (&raw mut v).cast(), 8) };
}

/// setsockopt(2) with a plain-old-data value.
pub fn setsockopt<T: Copy>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    val: &T,
) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` of `size_of::<T>()` bytes for the duration of the
    // call; the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// The interface index of `name`.
pub fn ifindex(name: &str) -> io::Result<libc::c_int> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i as libc::c_int)
    }
}

/// The MAC address and MTU of interface `name` in the calling thread's network namespace
/// (ioctls on a socket of that namespace; sysfs shows the namespace it was mounted in, which
/// is not the thread's own after a `setns`).
pub fn if_mac_mtu(name: &str) -> io::Result<([u8; 6], usize)> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: plain socket(2) call with constant arguments; a non-negative return is a
    // fresh descriptor we own.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all-zero is valid (an empty name, a zero union).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq with a NUL-terminated name (zeroed past it); the
    // kernel writes the hardware address into its union.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) })?;
    // SAFETY: SIOCGIFHWADDR filled the union's `ifru_hwaddr` member.
    let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(hw.sa_data.iter()) {
        *d = *s as u8;
    }
    // SAFETY: as above; the kernel writes the MTU into the union.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU, &mut req) })?;
    // SAFETY: SIOCGIFMTU filled the union's `ifru_mtu` member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    let mtu = usize::try_from(mtu).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    Ok((mac, mtu))
}

/// Binds a packet socket to one interface, receiving `protocol` (an EtherType, or
/// [`ETH_P_ALL`] for every frame; `ETH_P_ALL` sockets are taps that see a frame before TC
/// ingress, protocol sockets only after it).
pub fn bind(fd: &OwnedFd, ifindex: libc::c_int, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a valid sockaddr_ll and the length passed is its size.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// A shared read-write mapping of a packet socket's ring, unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: the mapping is plain memory shared with the kernel; the owner (one data-path
// thread at a time) is the only user-space accessor.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Maps `len` bytes read-write with `flags` (`MAP_SHARED` or `MAP_PRIVATE`, and more)
    /// from `fd` at `offset` (`fd` -1 and `MAP_ANONYMOUS` for fresh memory). The kernel
    /// checks `fd`, `offset` and `len` against what can be mapped.
    pub fn new(
        len: usize,
        flags: libc::c_int,
        fd: libc::c_int,
        offset: libc::off_t,
    ) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping at an address the kernel picks (nothing existing is
        // replaced); the result is checked for MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap { ptr: p.cast(), len })
    }

    /// Maps `len` bytes of the ring of `fd`, locked in memory if RLIMIT_MEMLOCK allows.
    pub fn ring(fd: &OwnedFd, len: usize) -> io::Result<Mmap> {
        let flags = libc::MAP_SHARED | libc::MAP_POPULATE;
        Mmap::new(len, flags | libc::MAP_LOCKED, fd.as_raw_fd(), 0)
            // MAP_LOCKED can fail under RLIMIT_MEMLOCK: retry without it.
            .or_else(|_| Mmap::new(len, flags, fd.as_raw_fd(), 0))
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; nothing uses them afterwards.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// Reads a sysfs attribute of a network interface.
pub fn sysfs(name: &str, attr: &str) -> io::Result<String> {
    if name.contains('/') || name.is_empty() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    Ok(
        std::fs::read_to_string(format!("/sys/class/net/{name}/{attr}"))?
            .trim()
            .to_string(),
    )
}
