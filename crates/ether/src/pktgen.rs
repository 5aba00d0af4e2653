//! A raw Ethernet UDP traffic generator (`anode-pktgen`), for the router benchmarks: it
//! writes one pre-built IPv4/UDP frame (valid checksums) straight onto an interface through
//! an AF_PACKET socket that receives nothing and bypasses the qdisc, so a sender costs no IP
//! or UDP stack work in its own namespace. Two transmit mechanisms, to compare them:
//!
//! - [`TxMode::Sendmmsg`]: one `sendmmsg` per batch, every iovec pointing at the same frame
//!   (the kernel copies each into an skb);
//! - [`TxMode::TxRing`]: a `PACKET_TX_RING` (TPACKET_V2) whose slots all hold the frame,
//!   written once at setup; a batch marks `n` slots `TP_STATUS_SEND_REQUEST` and one
//!   `send(2)` hands them over (the kernel still copies each into an skb, no iovec walk).
//!
//! Contract: [`Sender::send_batch`] never blocks (the socket is non-blocking) and returns how
//! many frames the kernel accepted; a full device queue shows as fewer than asked.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};

use anode_ip::wire::{EtherType, EthernetRepr, Ipv4Repr, MacAddr, UdpRepr};

use crate::sys;

/// How frames are handed to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxMode {
    /// `sendmmsg` of iovecs.
    Sendmmsg,
    /// `PACKET_TX_RING` slots and one `send`.
    TxRing,
}

impl std::str::FromStr for TxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sendmmsg" => Ok(TxMode::Sendmmsg),
            "txring" => Ok(TxMode::TxRing),
            _ => Err(format!("unknown tx mode {s}: use sendmmsg or txring")),
        }
    }
}

/// What to send.
#[derive(Debug, Clone)]
pub struct FrameSpec {
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Destination MAC (the router's interface).
    pub dst_mac: MacAddr,
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// UDP payload bytes.
    pub payload: usize,
}

/// Why a frame could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// The payload does not fit one jumbo Ethernet frame (MTU 9000).
    #[error("UDP payload of {0} bytes does not fit a 9000-byte MTU frame (at most 8972)")]
    TooBig(usize),
    /// The frame does not fit a slot of the transmit ring.
    #[error(
        "a {0}-byte frame does not fit a PACKET_TX_RING slot (at most 1514 bytes: use --mode sendmmsg)"
    )]
    TooBigForRing(usize),
    /// A system call failed.
    #[error("{what}: {source}")]
    Sys {
        /// The call.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
}

/// The largest UDP payload: a 9000-byte MTU (jumbo) frame. The interface's MTU must allow
/// it (the kernel refuses longer frames with `EMSGSIZE`). Frames of a page or more become
/// non-linear skbs (only the Ethernet header in the linear part).
pub const MAX_PAYLOAD: usize = 9000 - 20 - 8;

/// Builds the frame of `spec`: Ethernet, IPv4 (DF set, TTL 64) and UDP with checksums.
pub fn build_frame(spec: &FrameSpec) -> Result<Vec<u8>, GenError> {
    if spec.payload > MAX_PAYLOAD {
        return Err(GenError::TooBig(spec.payload));
    }
    let mut f = vec![0u8; 14 + 20 + 8 + spec.payload];
    let bad = |_| GenError::TooBig(spec.payload);
    EthernetRepr {
        src: spec.src_mac,
        dst: spec.dst_mac,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut f)
    .map_err(bad)?;
    let (ip, udp) = f.split_at_mut(14).1.split_at_mut(20);
    Ipv4Repr {
        src: spec.src,
        dst: spec.dst,
        protocol: 17,
        ttl: 64,
        tos: 0,
        ident: 0,
        dont_frag: true,
        payload_len: 8 + spec.payload,
    }
    .emit(ip)
    .map_err(bad)?;
    let body: Vec<u8> = (0..spec.payload).map(|i| i as u8).collect();
    UdpRepr {
        src_port: spec.src_port,
        dst_port: spec.dst_port,
    }
    .emit(udp, spec.src.into(), spec.dst.into(), &body)
    .map_err(bad)?;
    Ok(f)
}

const SLOT: usize = 2048;
const SLOTS: usize = 1024;
/// Where a TPACKET_V2 transmit slot's frame starts (TPACKET2_HDRLEN - sizeof(sockaddr_ll)).
const TX_DATA: usize = 32;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const PACKET_TX_RING: libc::c_int = 13;

/// One sending socket.
pub struct Sender {
    fd: OwnedFd,
    frame: Vec<u8>,
    ring: Option<(sys::Mmap, usize)>,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("tx_ring", &self.ring.is_some())
            .finish()
    }
}

// SAFETY: the iovecs point into `frame`, owned by the same struct and never reallocated
// after `open`; the ring mapping is used by one thread at a time.
unsafe impl Send for Sender {}

fn sys_err(what: &'static str) -> impl FnOnce(io::Error) -> GenError {
    move |source| GenError::Sys { what, source }
}

impl Sender {
    /// Opens a send-only packet socket on `iface` for `frame`, batches of up to `batch`.
    pub fn open(
        iface: &str,
        frame: Vec<u8>,
        mode: TxMode,
        batch: usize,
    ) -> Result<Sender, GenError> {
        let ifindex = sys::ifindex(iface).map_err(sys_err("if_nametoindex"))?;
        let fd = sys::packet_socket().map_err(sys_err("socket(AF_PACKET)"))?;
        sys::setsockopt(&fd, libc::SOL_PACKET, sys::PACKET_QDISC_BYPASS, &1i32)
            .map_err(sys_err("PACKET_QDISC_BYPASS"))?;
        let _ = sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &(4i32 << 20));
        let ring = match mode {
            TxMode::Sendmmsg => None,
            TxMode::TxRing => {
                if frame.len() > 1514 {
                    return Err(GenError::TooBigForRing(frame.len()));
                }
                sys::setsockopt(&fd, libc::SOL_PACKET, sys::PACKET_VERSION, &sys::TPACKET_V2)
                    .map_err(sys_err("PACKET_VERSION"))?;
                let req = libc::tpacket_req {
                    tp_block_size: (SLOT * 32) as u32,
                    tp_block_nr: (SLOTS / 32) as u32,
                    tp_frame_size: SLOT as u32,
                    tp_frame_nr: SLOTS as u32,
                };
                sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_TX_RING, &req)
                    .map_err(sys_err("PACKET_TX_RING"))?;
                let m = sys::Mmap::ring(&fd, SLOT * SLOTS).map_err(sys_err("mmap"))?;
                for i in 0..SLOTS {
                    // SAFETY: slot i lies inside the SLOT * SLOTS mapping; the frame fits a
                    // slot (checked above: at most 1514 bytes < SLOT - TX_DATA); the kernel
                    // owns no slot yet (all are TP_STATUS_AVAILABLE).
                    unsafe {
                        let s = m.ptr.add(i * SLOT);
                        std::ptr::copy_nonoverlapping(frame.as_ptr(), s.add(TX_DATA), frame.len());
                    }
                }
                Some((m, 0))
            }
        };
        // Bind with protocol 0: the socket receives nothing.
        // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a valid sockaddr_ll and the length is its size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(GenError::Sys {
                what: "bind",
                source: io::Error::last_os_error(),
            });
        }
        let mut s = Sender {
            fd,
            frame,
            ring,
            iov: Vec::with_capacity(batch),
            msgs: Vec::with_capacity(batch),
        };
        let (ptr, len) = (s.frame.as_ptr(), s.frame.len());
        for _ in 0..batch.max(1) {
            s.iov.push(libc::iovec {
                iov_base: ptr as *mut libc::c_void,
                iov_len: len,
            });
        }
        for v in s.iov.iter_mut() {
            // SAFETY: mmsghdr is plain old data; all-zero is valid (no name, no control).
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = v as *mut libc::iovec;
            m.msg_hdr.msg_iovlen = 1;
            s.msgs.push(m);
        }
        Ok(s)
    }

    /// Sends up to `n` frames (at most the batch size); returns how many the kernel took.
    pub fn send_batch(&mut self, n: usize) -> usize {
        let n = n.min(self.msgs.len());
        if n == 0 {
            return 0;
        }
        let fd = self.fd.as_raw_fd();
        let flen = self.frame.len() as u32;
        match self.ring.as_mut() {
            None => {
                // SAFETY: `msgs[..n]` are initialized and point at `frame`, alive and
                // unmodified for the call.
                let r = unsafe {
                    libc::sendmmsg(
                        fd,
                        self.msgs.as_mut_ptr(),
                        n as libc::c_uint,
                        libc::MSG_DONTWAIT,
                    )
                };
                usize::try_from(r).unwrap_or(0)
            }
            Some((m, next)) => {
                let mut queued = 0;
                for _ in 0..n {
                    // SAFETY: slot `next` is inside the mapping; its tpacket2_hdr status
                    // (offset 0) and tp_len (4) are u32s at a 2048-aligned address; volatile
                    // because the kernel writes the status concurrently.
                    let done = unsafe {
                        let h = m.ptr.add(*next * SLOT).cast::<u32>();
                        if std::ptr::read_volatile(h) != TP_STATUS_AVAILABLE {
                            false
                        } else {
                            std::ptr::write_volatile(h.add(1), flen);
                            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                            std::ptr::write_volatile(h, TP_STATUS_SEND_REQUEST);
                            true
                        }
                    };
                    if !done {
                        break;
                    }
                    queued += 1;
                    *next = (*next + 1) % SLOTS;
                }
                if queued > 0 {
                    // SAFETY: send(2) with no buffer kicks the TX ring of `fd`.
                    unsafe { libc::send(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT) };
                }
                queued
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_ip::wire::{EthernetFrame, Ipv4Packet, UdpPacket};

    #[test]
    fn frame_has_valid_checksums_and_lengths() {
        let spec = FrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src: "198.18.1.1".parse().unwrap(),
            dst: "198.18.2.2".parse().unwrap(),
            src_port: 1000,
            dst_port: 9000,
            payload: 64,
        };
        let f = build_frame(&spec).unwrap();
        assert_eq!(f.len(), 14 + 20 + 8 + 64);
        let e = EthernetFrame::new_checked(&f[..]).unwrap();
        let p = Ipv4Packet::new_checked(e.payload()).unwrap();
        assert!(p.verify_checksum());
        let u = UdpPacket::new_checked(p.payload()).unwrap();
        assert!(u.verify_checksum(spec.src.into(), spec.dst.into()));
        // Jumbo frames up to a 9000-byte MTU; one byte more is refused.
        let jumbo = build_frame(&FrameSpec {
            payload: MAX_PAYLOAD,
            ..spec
        })
        .unwrap();
        assert_eq!(jumbo.len(), 14 + 9000);
        assert!(
            build_frame(&FrameSpec {
                payload: MAX_PAYLOAD + 1,
                ..spec
            })
            .is_err()
        );
    }
}
