//! The only module with `unsafe`: the UDP socket, the wake-up eventfd, `ppoll`, and batches of
//! `mmsghdr` for `recvmmsg`/`sendmmsg`, all through `libc`.
//!
//! Invariants:
//! - A [`MsgBatch`]'s arrays are allocated once with the batch size and never resized,
//!   so the pointers an `mmsghdr` holds into them stay valid while the batch lives (moving the
//!   batch moves only the `Vec` headers, not the heap arrays). The pointers into payload
//!   buffers are refreshed before every system call, from buffers the caller keeps alive
//!   across that call.
//! - A received buffer's length is set only to what the kernel reported it wrote (and never
//!   above the capacity the kernel was given).
//! - A [`MsgBatch`] holds raw pointers, so it is not `Send`: it is built on the data-path
//!   thread and stays there.
//! - UDP segmentation offload: a message may carry up to [`MAX_SEGS`] datagrams as one
//!   `UDP_SEGMENT` send (each its own iovec, all of the size given but the last, which may be
//!   shorter); with `UDP_GRO` on, a received message may hold several datagrams of the size
//!   its control message names ([`MsgBatch::received_segment`]), which the caller splits.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// `SOL_UDP` options (linux/udp.h), which the libc crate does not name for glibc targets.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// Most datagrams one segmented send may carry (the kernel's `UDP_MAX_SEGMENTS` is 64 or,
/// since 6.x, 128; 64 is accepted everywhere).
pub(crate) const MAX_SEGS: usize = 64;
/// Most payload bytes one segmented send may carry (an IPv6 packet's 65,535-byte payload
/// less the UDP header; IPv4's limit is 28 bytes lower and checked by the kernel too).
pub(crate) const MAX_GSO_BYTES: usize = 65_000;
/// Bytes of control buffer per message: one `cmsghdr` with an `int` (UDP_GRO) or a `u16`
/// (UDP_SEGMENT), rounded up.
const CTRL_LEN: usize = 32;

/// A non-blocking, close-on-exec UDP socket.
#[derive(Debug)]
pub(crate) struct UdpSocket {
    fd: OwnedFd,
    v6: bool,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` is a live c_int and we pass its exact size; the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&raw const v).cast::<libc::c_void>(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

impl UdpSocket {
    /// Creates the socket, sizes its buffers and binds it. An IPv6 socket is made dual-stack
    /// (`IPV6_V6ONLY` off), so `[::]` also serves IPv4 peers as v4-mapped addresses.
    pub(crate) fn bind(addr: SocketAddr, buffer: usize) -> io::Result<Self> {
        let v6 = addr.is_ipv6();
        let domain = if v6 { libc::AF_INET6 } else { libc::AF_INET };
        // SAFETY: plain system call with constant arguments; the result is checked.
        let raw = cvt(unsafe {
            libc::socket(
                domain,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::IPPROTO_UDP,
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sock = UdpSocket { fd, v6 };
        if v6 {
            setsockopt_int(raw, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0)?;
        }
        let b = libc::c_int::try_from(buffer).unwrap_or(libc::c_int::MAX);
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            // FORCE needs CAP_NET_ADMIN; without it the plain option is capped by *mem_max.
            if setsockopt_int(raw, libc::SOL_SOCKET, force, b).is_err() {
                setsockopt_int(raw, libc::SOL_SOCKET, plain, b)?;
            }
        }
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
        let len = to_storage(addr, v6, &mut ss).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "address family mismatch")
        })?;
        // SAFETY: `ss` holds a valid sockaddr of `len` bytes.
        cvt(unsafe { libc::bind(raw, (&raw const ss).cast::<libc::sockaddr>(), len) })?;
        Ok(sock)
    }

    /// Adopts a UDP socket another process bound and handed over (`anode upgrade`): it must
    /// be a datagram socket bound to `addr`'s port; it is made non-blocking (and, for IPv4
    /// addresses, must be an IPv4 or dual-stack socket, as [`UdpSocket::bind`] makes them).
    pub(crate) fn adopt(fd: OwnedFd, addr: SocketAddr) -> io::Result<Self> {
        let raw = fd.as_raw_fd();
        let mut ty: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `ty`/`len` describe a writable c_int; the kernel writes at most `len` bytes.
        cvt(unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                (&raw mut ty).cast::<libc::c_void>(),
                &mut len,
            )
        })?;
        if ty != libc::SOCK_DGRAM {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the socket handed over is not a datagram socket",
            ));
        }
        // SAFETY: fcntl on a descriptor we own; the flags are read, then written back.
        let fl = cvt(unsafe { libc::fcntl(raw, libc::F_GETFL) })?;
        // SAFETY: as above.
        cvt(unsafe { libc::fcntl(raw, libc::F_SETFL, fl | libc::O_NONBLOCK) })?;
        let probe = UdpSocket { fd, v6: false };
        let local = probe.local_addr()?;
        if local.port() != addr.port() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the socket handed over is bound to {local}, not to port {}",
                    addr.port()
                ),
            ));
        }
        Ok(UdpSocket {
            v6: local.is_ipv6(),
            fd: probe.fd,
        })
    }

    /// A second descriptor of the same socket (close-on-exec), for a hand-over.
    pub(crate) fn try_clone_fd(&self) -> io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// The bound address.
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `ss`/`len` describe a writable buffer of the size given.
        cvt(unsafe {
            libc::getsockname(
                self.fd.as_raw_fd(),
                (&raw mut ss).cast::<libc::sockaddr>(),
                &mut len,
            )
        })?;
        from_storage(&ss, len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unknown address family"))
    }

    /// True for an AF_INET6 socket.
    pub(crate) fn is_v6(&self) -> bool {
        self.v6
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Turns on UDP generic receive offload: the kernel may hand several datagrams of one
    /// flow to one receive, with their size in a control message.
    pub(crate) fn enable_gro(&self) -> io::Result<()> {
        setsockopt_int(self.raw(), libc::SOL_UDP, UDP_GRO, 1)
    }
}

/// An eventfd that wakes the data-path thread out of `ppoll`.
#[derive(Debug)]
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: plain system call; the result is checked.
        let raw = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    /// Makes the eventfd readable. Never blocks (a full counter already means "readable").
    pub(crate) fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of a live u64, as eventfd requires.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), (&raw const one).cast(), 8) };
    }

    /// Resets the counter.
    pub(crate) fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64, as eventfd requires.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), (&raw mut v).cast(), 8) };
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Which of the two descriptors `poll2` found ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ready {
    /// The socket has datagrams (or a pending error).
    pub socket: bool,
    /// The eventfd was notified.
    pub wake: bool,
}

/// `ppoll` on the socket (readable or error) and the eventfd (readable), up to `timeout`
/// (`None` = no limit), at nanosecond resolution.
pub(crate) fn poll2(sock: RawFd, wake: RawFd, timeout: Option<Duration>) -> io::Result<Ready> {
    let mut fds = [
        libc::pollfd {
            fd: sock,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a live array of 2 pollfd; `tsp` is null or points to a live timespec.
    cvt(unsafe { libc::ppoll(fds.as_mut_ptr(), 2, tsp, std::ptr::null()) })?;
    let [s, w] = fds;
    Ok(Ready {
        socket: s.revents & (libc::POLLIN | libc::POLLERR) != 0,
        wake: w.revents & libc::POLLIN != 0,
    })
}

/// Waits up to `timeout` for `fd` to be writable.
pub(crate) fn poll_out(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `p` is one live pollfd.
    let r = cvt(unsafe { libc::poll(&mut p, 1, ms) })?;
    Ok(r > 0 && p.revents & libc::POLLOUT != 0)
}

/// Writes `addr` as a sockaddr for a socket of the given family (IPv4 to an IPv6 socket as
/// v4-mapped; v4-mapped IPv6 to an IPv4 socket as IPv4). `None` if the socket cannot reach it.
pub(crate) fn to_storage(
    addr: SocketAddr,
    v6_socket: bool,
    out: &mut libc::sockaddr_storage,
) -> Option<libc::socklen_t> {
    let v6 = |ip: Ipv6Addr, port: u16, flow: u32, scope: u32, out: &mut libc::sockaddr_storage| {
        // SAFETY: all-zero is a valid sockaddr_in6.
        let mut s: libc::sockaddr_in6 = unsafe { zeroed() };
        s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        s.sin6_port = port.to_be();
        s.sin6_flowinfo = flow;
        s.sin6_addr.s6_addr = ip.octets();
        s.sin6_scope_id = scope;
        // SAFETY: sockaddr_storage is larger than and aligned at least as sockaddr_in6.
        unsafe { (&raw mut *out).cast::<libc::sockaddr_in6>().write(s) };
        size_of::<libc::sockaddr_in6>() as libc::socklen_t
    };
    let v4 = |ip: Ipv4Addr, port: u16, out: &mut libc::sockaddr_storage| {
        // SAFETY: all-zero is a valid sockaddr_in.
        let mut s: libc::sockaddr_in = unsafe { zeroed() };
        s.sin_family = libc::AF_INET as libc::sa_family_t;
        s.sin_port = port.to_be();
        s.sin_addr.s_addr = u32::from(ip).to_be();
        // SAFETY: sockaddr_storage is larger than and aligned at least as sockaddr_in.
        unsafe { (&raw mut *out).cast::<libc::sockaddr_in>().write(s) };
        size_of::<libc::sockaddr_in>() as libc::socklen_t
    };
    match (addr, v6_socket) {
        (SocketAddr::V4(a), false) => Some(v4(*a.ip(), a.port(), out)),
        (SocketAddr::V4(a), true) => Some(v6(a.ip().to_ipv6_mapped(), a.port(), 0, 0, out)),
        (SocketAddr::V6(a), true) => Some(v6(*a.ip(), a.port(), a.flowinfo(), a.scope_id(), out)),
        (SocketAddr::V6(a), false) => a.ip().to_ipv4_mapped().map(|ip| v4(ip, a.port(), out)),
    }
}

/// Reads a sockaddr the kernel wrote.
pub(crate) fn from_storage(
    ss: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    let len = len as usize;
    match libc::c_int::from(ss.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family and length say the storage holds a sockaddr_in; storage is
            // aligned at least as sockaddr_in.
            let s = unsafe { &*(&raw const *ss).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
                u16::from_be(s.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let s = unsafe { &*(&raw const *ss).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(s.sin6_addr.s6_addr),
                u16::from_be(s.sin6_port),
                s.sin6_flowinfo,
                s.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Reusable `mmsghdr`/`iovec`/`sockaddr_storage`/control arrays for one batch: message `i`
/// uses `iovs[i * MAX_SEGS..]` and `ctrl[i]`.
pub(crate) struct MsgBatch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    /// Control buffers, `u64`-aligned as `cmsghdr` needs.
    ctrl: Vec<[u64; CTRL_LEN / 8]>,
}

impl std::fmt::Debug for MsgBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgBatch")
            .field("len", &self.hdrs.len())
            .finish()
    }
}

impl MsgBatch {
    /// Arrays for `n` messages.
    pub(crate) fn new(n: usize) -> Self {
        // SAFETY: all-zero is a valid value of these plain C structs (null pointers, zero
        // lengths).
        let (h, i, a) = unsafe {
            (
                zeroed::<libc::mmsghdr>(),
                zeroed::<libc::iovec>(),
                zeroed::<libc::sockaddr_storage>(),
            )
        };
        MsgBatch {
            hdrs: vec![h; n],
            iovs: vec![i; n * MAX_SEGS],
            addrs: vec![a; n],
            ctrl: vec![[0; CTRL_LEN / 8]; n],
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Points message `i` at its first `n_iov` iovecs, its address slot and (`ctrl_len` > 0)
    /// the first `ctrl_len` bytes of its control buffer.
    fn link_iovs(&mut self, i: usize, n_iov: usize, namelen: libc::socklen_t, ctrl_len: usize) {
        let (Some(h), Some(iov), Some(a), Some(c)) = (
            self.hdrs.get_mut(i),
            self.iovs.get_mut(i * MAX_SEGS),
            self.addrs.get_mut(i),
            self.ctrl.get_mut(i),
        ) else {
            return;
        };
        h.msg_hdr.msg_name = (&raw mut *a).cast();
        h.msg_hdr.msg_namelen = namelen;
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = n_iov;
        if ctrl_len == 0 {
            h.msg_hdr.msg_control = std::ptr::null_mut();
        } else {
            h.msg_hdr.msg_control = c.as_mut_ptr().cast();
        }
        h.msg_hdr.msg_controllen = ctrl_len;
        h.msg_hdr.msg_flags = 0;
        h.msg_len = 0;
    }

    /// `recvmmsg(MSG_DONTWAIT)` into the spare capacity of `bufs` (each cleared first). On
    /// success returns `n`; `bufs[..n]` then hold the datagrams (see [`MsgBatch::received`]).
    pub(crate) fn recv(&mut self, fd: RawFd, bufs: &mut [Vec<u8>]) -> io::Result<usize> {
        let n = bufs.len().min(self.capacity());
        for (i, b) in bufs.iter_mut().take(n).enumerate() {
            b.clear();
            let (p, cap) = (b.as_mut_ptr(), b.capacity());
            if let Some(iov) = self.iovs.get_mut(i * MAX_SEGS) {
                iov.iov_base = p.cast();
                iov.iov_len = cap;
            }
            self.link_iovs(
                i,
                1,
                size_of::<libc::sockaddr_storage>() as libc::socklen_t,
                CTRL_LEN,
            );
        }
        // SAFETY: the first `n` headers point at live iovecs and address slots of this batch,
        // and the iovecs at the spare capacity of `bufs`, which outlive the call.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let r = usize::try_from(r).map_err(|_| io::Error::last_os_error())?;
        for (h, b) in self.hdrs.iter().zip(bufs.iter_mut()).take(r) {
            let len = (h.msg_len as usize).min(b.capacity());
            // SAFETY: the kernel wrote `msg_len` bytes (at most the capacity it was given)
            // at the start of the buffer, so they are initialised.
            unsafe { b.set_len(len) };
        }
        Ok(r)
    }

    /// Source and truncation flag of received message `i`.
    pub(crate) fn received(&self, i: usize) -> (Option<SocketAddr>, bool) {
        match (self.hdrs.get(i), self.addrs.get(i)) {
            (Some(h), Some(a)) => (
                from_storage(a, h.msg_hdr.msg_namelen),
                h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            ),
            _ => (None, false),
        }
    }

    /// The segment size of received message `i` if the kernel coalesced several datagrams
    /// into it (`UDP_GRO`): every `size` bytes of it are one datagram, the last possibly
    /// shorter. `None`: one datagram.
    pub(crate) fn received_segment(&self, i: usize) -> Option<usize> {
        let h = self.hdrs.get(i)?;
        if h.msg_hdr.msg_control.is_null() || h.msg_hdr.msg_controllen == 0 {
            return None;
        }
        // SAFETY: `msg_control`/`msg_controllen` describe this message's control buffer as
        // the kernel filled it (it lowers `msg_controllen` to what it wrote); the CMSG
        // macros stay within that length.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&raw const h.msg_hdr);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                    let size = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                    return usize::try_from(size).ok().filter(|s| *s > 0);
                }
                c = libc::CMSG_NXTHDR(&raw const h.msg_hdr, c);
            }
        }
        None
    }

    /// Sets message `i` to send the datagrams `bufs` (1 to [`MAX_SEGS`], all of `bufs[0]`'s
    /// length but the last, which may be shorter) to `dst`: with more than one, as one
    /// `UDP_SEGMENT` send the kernel cuts into datagrams of that length. False if this
    /// socket cannot reach `dst`'s address family or `bufs` do not fit (nothing is set then).
    pub(crate) fn set_send_segments<'a>(
        &mut self,
        i: usize,
        bufs: impl Iterator<Item = &'a [u8]> + Clone,
        dst: SocketAddr,
        v6: bool,
    ) -> bool {
        let Some(seg) = bufs.clone().next().map(<[u8]>::len) else {
            return false;
        };
        let (mut count, mut total, mut closed) = (0, 0, false);
        for b in bufs.clone() {
            // Every datagram but the last is `seg` long; the last may be shorter.
            if closed || b.len() > seg || b.is_empty() {
                return false;
            }
            closed = b.len() < seg;
            count += 1;
            total += b.len();
        }
        let fits = count <= MAX_SEGS && (count == 1 || total <= MAX_GSO_BYTES);
        let Ok(seg16) = u16::try_from(seg) else {
            return false;
        };
        let Some(a) = self.addrs.get_mut(i) else {
            return false;
        };
        if !fits {
            return false;
        }
        let Some(len) = to_storage(dst, v6, a) else {
            return false;
        };
        let Some(iovs) = self.iovs.get_mut(i * MAX_SEGS..i * MAX_SEGS + count) else {
            return false;
        };
        for (iov, b) in iovs.iter_mut().zip(bufs) {
            // The kernel only reads a send buffer; the pointer is `*mut` by the C signature.
            iov.iov_base = b.as_ptr().cast_mut().cast();
            iov.iov_len = b.len();
        }
        if count == 1 {
            self.link_iovs(i, 1, len, 0);
            return true;
        }
        // SAFETY: CMSG_SPACE/CMSG_LEN are pure size computations.
        let (space, clen) = unsafe {
            (
                libc::CMSG_SPACE(size_of::<u16>() as u32) as usize,
                libc::CMSG_LEN(size_of::<u16>() as u32) as usize,
            )
        };
        let Some(c) = self.ctrl.get_mut(i) else {
            return false;
        };
        if space > CTRL_LEN {
            return false;
        }
        *c = [0; CTRL_LEN / 8];
        // SAFETY: the control buffer is CTRL_LEN >= `space` bytes, u64-aligned (as cmsghdr
        // needs), zeroed; one cmsghdr and its u16 are written within it.
        unsafe {
            let hdr = c.as_mut_ptr().cast::<libc::cmsghdr>();
            (*hdr).cmsg_level = libc::SOL_UDP;
            (*hdr).cmsg_type = UDP_SEGMENT;
            (*hdr).cmsg_len = clen as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(hdr).cast::<u16>(), seg16);
        }
        self.link_iovs(i, count, len, space);
        true
    }

    /// `sendmmsg` of messages `from..to` (set with [`MsgBatch::set_send`] from buffers that
    /// are still alive). Returns how many were sent.
    pub(crate) fn send(&mut self, fd: RawFd, from: usize, to: usize) -> io::Result<usize> {
        let to = to.min(self.capacity());
        if from >= to {
            return Ok(0);
        }
        let Some(first) = self.hdrs.get_mut(from) else {
            return Ok(0);
        };
        // SAFETY: headers `from..to` were set by `set_send` and point at live iovecs,
        // addresses and buffers the caller keeps alive across this call; `to - from` is within
        // the array.
        let r = unsafe { libc::sendmmsg(fd, first, (to - from) as libc::c_uint, 0) };
        usize::try_from(r).map_err(|_| io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddr_roundtrip_and_mapping() {
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
        let a: SocketAddr = "198.18.0.1:3322".parse().unwrap();
        let l = to_storage(a, false, &mut ss).unwrap();
        assert_eq!(from_storage(&ss, l), Some(a));
        let l = to_storage(a, true, &mut ss).unwrap();
        assert_eq!(
            from_storage(&ss, l),
            Some("[::ffff:198.18.0.1]:3322".parse().unwrap())
        );
        let b: SocketAddr = "[2001:2::1]:7".parse().unwrap();
        assert_eq!(to_storage(b, false, &mut ss), None);
        let l = to_storage(b, true, &mut ss).unwrap();
        assert_eq!(from_storage(&ss, l), Some(b));
        let m: SocketAddr = "[::ffff:10.0.0.1]:5".parse().unwrap();
        let l = to_storage(m, false, &mut ss).unwrap();
        assert_eq!(from_storage(&ss, l), Some("10.0.0.1:5".parse().unwrap()));
        assert_eq!(from_storage(&ss, 2), None);
    }

    #[test]
    fn batch_send_and_receive_on_loopback() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let bb = b.local_addr().unwrap();
        let mut out = MsgBatch::new(4);
        let payloads: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 10 + usize::from(i)]).collect();
        for (i, p) in payloads.iter().enumerate() {
            assert!(out.set_send_segments(i, std::iter::once(p.as_slice()), bb, false));
        }
        assert_eq!(out.send(a.raw(), 0, 3).unwrap(), 3);
        let mut inb = MsgBatch::new(4);
        let mut bufs: Vec<Vec<u8>> = (0..4).map(|_| Vec::with_capacity(64)).collect();
        assert!(
            poll2(b.raw(), b.raw(), Some(Duration::from_secs(2)))
                .unwrap()
                .socket
        );
        let n = inb.recv(b.raw(), &mut bufs).unwrap();
        assert_eq!(n, 3);
        assert_eq!(bufs[..3], payloads[..]);
        assert_eq!(inb.received(0), (Some(a.local_addr().unwrap()), false));
        let e = inb.recv(b.raw(), &mut bufs).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    /// Five datagrams (the last shorter) as one segmented send: a plain receiver gets five
    /// datagrams, a `UDP_GRO` receiver one coalesced receive it splits into the same five.
    #[test]
    fn segmented_sends_arrive_as_datagrams_or_one_coalesced_receive() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let plain = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let gro = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        gro.enable_gro().unwrap();
        let payloads: Vec<Vec<u8>> = (0..5u8)
            .map(|i| vec![i; if i == 4 { 300 } else { 1000 }])
            .collect();
        let mut out = MsgBatch::new(2);
        for (i, to) in [&plain, &gro].into_iter().enumerate() {
            let bufs = payloads.iter().map(Vec::as_slice);
            assert!(out.set_send_segments(i, bufs, to.local_addr().unwrap(), false));
        }
        assert_eq!(out.send(a.raw(), 0, 2).unwrap(), 2);
        let wait = |s: &UdpSocket| {
            assert!(
                poll2(s.raw(), s.raw(), Some(Duration::from_secs(2)))
                    .unwrap()
                    .socket
            );
        };
        let mut inb = MsgBatch::new(8);
        let mut bufs: Vec<Vec<u8>> = (0..8).map(|_| Vec::with_capacity(65536)).collect();
        wait(&plain);
        let mut got = Vec::new();
        while got.len() < 5 {
            let n = inb.recv(plain.raw(), &mut bufs).unwrap();
            for (i, b) in bufs.iter().enumerate().take(n) {
                assert_eq!(inb.received_segment(i), None);
                got.push(b.clone());
            }
        }
        assert_eq!(got, payloads);
        wait(&gro);
        let n = inb.recv(gro.raw(), &mut bufs).unwrap();
        assert_eq!(n, 1, "one coalesced receive");
        assert_eq!(inb.received_segment(0), Some(1000));
        let split: Vec<Vec<u8>> = bufs[0].chunks(1000).map(<[u8]>::to_vec).collect();
        assert_eq!(split, payloads);
        // Unequal sizes before the last, or too many, are refused.
        let bad = [&payloads[4][..], &payloads[0][..]];
        assert!(!out.set_send_segments(0, bad.into_iter(), a.local_addr().unwrap(), false));
        let many = vec![&payloads[0][..]; MAX_SEGS + 1];
        assert!(!out.set_send_segments(0, many.into_iter(), a.local_addr().unwrap(), false));
    }

    #[test]
    fn eventfd_wakes_poll() {
        let s = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), 1 << 16).unwrap();
        let e = EventFd::new().unwrap();
        let r = poll2(s.raw(), e.raw(), Some(Duration::from_millis(1))).unwrap();
        assert!(!r.wake && !r.socket);
        e.notify();
        let r = poll2(s.raw(), e.raw(), Some(Duration::from_secs(1))).unwrap();
        assert!(r.wake);
        e.drain();
        let r = poll2(s.raw(), e.raw(), Some(Duration::ZERO)).unwrap();
        assert!(!r.wake);
    }
}
