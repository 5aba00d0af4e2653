//! `sendmmsg`/`recvmmsg` on a `std::net::UdpSocket`, for the traffic generator and the sink.
//!
//! Invariants: a [`BatchSender`] owns its packets and a [`BatchReceiver`] its buffers; the
//! `mmsghdr`/`iovec` arrays point into those heap allocations, which are never resized or
//! dropped while the struct lives, so the pointers stay valid when the struct moves. Both
//! hold raw pointers and are therefore not `Send` (each tool is single-threaded).

use std::io;
use std::mem::{size_of, zeroed};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// Sets the socket's receive and send buffers to `bytes`, bypassing `*mem_max` when root.
pub fn set_buffers(sock: &UdpSocket, bytes: usize) {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        for opt in [force, plain] {
            // SAFETY: `v` is a live c_int and its exact size is passed; the kernel only reads.
            let r = unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&raw const v).cast::<libc::c_void>(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r == 0 {
                break;
            }
        }
    }
}

fn zeroed_arrays(n: usize) -> (Vec<libc::mmsghdr>, Vec<libc::iovec>) {
    // SAFETY: all-zero is a valid mmsghdr and iovec (null pointers, zero lengths).
    let (h, i) = unsafe { (zeroed::<libc::mmsghdr>(), zeroed::<libc::iovec>()) };
    (vec![h; n], vec![i; n])
}

/// Sends a fixed set of packets again and again on a connected socket.
pub struct BatchSender {
    packets: Vec<Vec<u8>>,
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
}

impl std::fmt::Debug for BatchSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchSender")
            .field("packets", &self.packets.len())
            .finish()
    }
}

impl BatchSender {
    /// Prepares one `mmsghdr` per packet (no address: the socket must be connected).
    pub fn new(packets: Vec<Vec<u8>>) -> Self {
        let (mut hdrs, mut iovs) = zeroed_arrays(packets.len());
        for ((h, iov), p) in hdrs.iter_mut().zip(iovs.iter_mut()).zip(&packets) {
            iov.iov_base = p.as_ptr().cast_mut().cast();
            iov.iov_len = p.len();
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
        }
        BatchSender {
            packets,
            hdrs,
            iovs,
        }
    }

    /// Number of prepared packets (the largest `n` for [`BatchSender::send`]).
    pub fn len(&self) -> usize {
        self.packets.len()
    }

    /// True if there are no packets.
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// Writes `ns` into the last [`crate::packet::STAMP_LEN`] bytes of the first `n` packets
    /// (in place: the iovecs stay valid).
    pub fn stamp(&mut self, n: usize, ns: u64) {
        for p in self.packets.iter_mut().take(n) {
            let len = p.len();
            if let Some(t) = p.get_mut(len.saturating_sub(crate::packet::STAMP_LEN)..) {
                t.copy_from_slice(&ns.to_be_bytes());
            }
        }
    }

    /// `sendmmsg` of the first `n` packets; returns how many went.
    pub fn send(&mut self, sock: &UdpSocket, n: usize) -> io::Result<usize> {
        let n = n.min(self.hdrs.len());
        debug_assert_eq!(self.iovs.len(), self.hdrs.len());
        // SAFETY: the first `n` headers point at this struct's iovecs, which point at its
        // packets; all live across the call, and the kernel only reads them.
        let r = unsafe {
            libc::sendmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                0,
            )
        };
        usize::try_from(r).map_err(|_| io::Error::last_os_error())
    }
}

/// Receives batches into its own buffers.
pub struct BatchReceiver {
    bufs: Vec<Vec<u8>>,
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
}

impl std::fmt::Debug for BatchReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchReceiver")
            .field("batch", &self.bufs.len())
            .finish()
    }
}

impl BatchReceiver {
    /// `batch` buffers of `buf_len` bytes.
    pub fn new(batch: usize, buf_len: usize) -> Self {
        let mut bufs: Vec<Vec<u8>> = (0..batch).map(|_| vec![0u8; buf_len]).collect();
        let (mut hdrs, mut iovs) = zeroed_arrays(batch);
        for ((h, iov), b) in hdrs.iter_mut().zip(iovs.iter_mut()).zip(bufs.iter_mut()) {
            iov.iov_base = b.as_mut_ptr().cast();
            iov.iov_len = b.len();
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
        }
        BatchReceiver { bufs, hdrs, iovs }
    }

    /// `recvmmsg` with `MSG_WAITFORONE` (blocks for the first datagram up to the socket's read
    /// timeout); returns how many arrived.
    pub fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        debug_assert_eq!(self.iovs.len(), self.hdrs.len());
        for h in &mut self.hdrs {
            h.msg_len = 0;
            h.msg_hdr.msg_flags = 0;
        }
        // SAFETY: every header points at this struct's iovecs and, through them, at its
        // initialised buffers of the stated lengths; all live across the call.
        let r = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        usize::try_from(r).map_err(|_| io::Error::last_os_error())
    }

    /// The `i`th datagram of the last batch.
    pub fn datagram(&self, i: usize) -> &[u8] {
        match (self.hdrs.get(i), self.bufs.get(i)) {
            (Some(h), Some(b)) => b.get(..h.msg_len as usize).unwrap_or(b),
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn loopback_batch() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        set_buffers(&tx, 1 << 20);
        let pk: Vec<Vec<u8>> = (1..=4u8).map(|i| vec![i; usize::from(i) * 3]).collect();
        let mut s = BatchSender::new(pk.clone());
        assert_eq!(s.len(), 4);
        assert_eq!(s.send(&tx, 3).unwrap(), 3);
        let mut r = BatchReceiver::new(8, 2048);
        let mut got = Vec::new();
        while got.len() < 3 {
            let n = r.recv(&rx).unwrap();
            got.extend((0..n).map(|i| r.datagram(i).to_vec()));
        }
        assert_eq!(got, pk[..3]);
        assert_eq!(r.datagram(99), b"");
    }
}
