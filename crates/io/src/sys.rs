//! The only module with `unsafe`: the UDP socket, the wake-up eventfd, `ppoll`, and batches of
//! `mmsghdr` for `recvmmsg`/`sendmmsg`, all through `libc`.
//!
//! Invariants:
//! - A [`MsgBatch`]'s three arrays are allocated once with the batch size and never resized,
//!   so the pointers an `mmsghdr` holds into them stay valid while the batch lives (moving the
//!   batch moves only the `Vec` headers, not the heap arrays). The pointers into payload
//!   buffers are refreshed before every system call, from buffers the caller keeps alive
//!   across that call.
//! - A received buffer's length is set only to what the kernel reported it wrote (and never
//!   above the capacity the kernel was given).
//! - A [`MsgBatch`] holds raw pointers, so it is not `Send`: it is built on the data-path
//!   thread and stays there.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

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

/// Reusable `mmsghdr`/`iovec`/`sockaddr_storage` arrays for one batch.
pub(crate) struct MsgBatch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
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
            iovs: vec![i; n],
            addrs: vec![a; n],
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Points message `i` at `iov_base/iov_len` and at its address slot.
    fn link(&mut self, i: usize, base: *mut libc::c_void, len: usize, namelen: libc::socklen_t) {
        let (Some(h), Some(iov), Some(a)) = (
            self.hdrs.get_mut(i),
            self.iovs.get_mut(i),
            self.addrs.get_mut(i),
        ) else {
            return;
        };
        iov.iov_base = base;
        iov.iov_len = len;
        h.msg_hdr.msg_name = (&raw mut *a).cast();
        h.msg_hdr.msg_namelen = namelen;
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_control = std::ptr::null_mut();
        h.msg_hdr.msg_controllen = 0;
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
            self.link(
                i,
                p.cast(),
                cap,
                size_of::<libc::sockaddr_storage>() as libc::socklen_t,
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

    /// Sets message `i` to send `buf` to `dst`. False if this socket cannot reach `dst`'s
    /// address family (nothing is set then).
    pub(crate) fn set_send(&mut self, i: usize, buf: &[u8], dst: SocketAddr, v6: bool) -> bool {
        let Some(a) = self.addrs.get_mut(i) else {
            return false;
        };
        let Some(len) = to_storage(dst, v6, a) else {
            return false;
        };
        // The kernel only reads a send buffer; the pointer is `*mut` by the C signature.
        self.link(i, buf.as_ptr().cast_mut().cast(), buf.len(), len);
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
            assert!(out.set_send(i, p, bb, false));
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
