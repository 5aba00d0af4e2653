//! One Ethernet link: an AF_PACKET socket bound to an interface, with a TPACKET_V3 receive
//! ring and batched transmit by `sendmmsg(2)`.
//!
//! Transmit choice: forwarded frames are sent with `sendmmsg` whose iovecs point straight
//! into the receive ring, so user space copies nothing; the kernel copies each frame once
//! into an skb. A `PACKET_TX_RING` would need a user-space copy from the receive ring into
//! the transmit ring (then the kernel builds skbs over the ring pages) and a `send` to kick
//! it: the same number of copies and syscalls per batch. `PACKET_QDISC_BYPASS` skips the
//! qdisc layer (as a router's fast path should; the driver's queue still applies), and
//! `PACKET_IGNORE_OUTGOING` keeps our own transmissions out of our receive ring.
//!
//! Receive sockets: by default one socket bound to `ETH_P_ALL` receives every frame. Under
//! the kernel fast path ([`crate::fastpath`]) that would not do: `ETH_P_ALL` sockets are taps
//! the kernel feeds *before* TC ingress, so every frame the fast path forwards would also be
//! copied into the ring (and forwarded a second time). [`Receive::Protocols`] opens one
//! socket per EtherType instead (IPv4, IPv6, ARP and any diverted EtherType): protocol
//! sockets are fed *after* TC ingress, so they see exactly the frames the fast path passed
//! on. The first socket (IPv4) also transmits.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use anode_ip::MacAddr;
use anode_ip::wire::EtherType;

use crate::ring::{RingConfig, RxRing};
use crate::sys;

/// Counters of one link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Batches taken from the ring (V3: blocks; V2: runs of ready slots).
    pub rx_blocks: u64,
    /// Frames received.
    pub rx_frames: u64,
    /// Frames longer than the ring's frame size (dropped; the slots are sized for the
    /// interface's MTU when the link is opened, so only after a later MTU increase).
    pub rx_truncated: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// `sendmmsg` calls.
    pub tx_calls: u64,
    /// Frames that could not be sent (queue full after retries, or an error).
    pub tx_dropped: u64,
    /// Frames the kernel passed to the socket (`PACKET_STATISTICS` `tp_packets`, which
    /// counts the dropped ones too).
    pub ring_packets: u64,
    /// Frames the kernel dropped because the receive ring was full (`tp_drops`).
    pub ring_drops: u64,
    /// Socket errors reported by `poll` and cleared (e.g. `ENETDOWN` when the interface
    /// went down; the socket keeps working once it is up again).
    pub sock_errors: u64,
}

impl LinkStats {
    /// The counters as (name, value) pairs, for machine-readable reports.
    pub fn entries(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("rx_blocks", self.rx_blocks),
            ("rx_frames", self.rx_frames),
            ("rx_truncated", self.rx_truncated),
            ("tx_frames", self.tx_frames),
            ("tx_calls", self.tx_calls),
            ("tx_dropped", self.tx_dropped),
            ("ring_packets", self.ring_packets),
            ("ring_drops", self.ring_drops),
            ("sock_errors", self.sock_errors),
        ]
    }

    /// One line for the exit report of link `name`.
    pub fn line(&self, name: &str) -> String {
        format!(
            "link {name}: rx {} frames in {} batches ({} truncated), tx {} frames in {} calls ({} dropped), ring: kernel passed {} dropped {} (ring full), socket errors {}",
            self.rx_frames,
            self.rx_blocks,
            self.rx_truncated,
            self.tx_frames,
            self.tx_calls,
            self.tx_dropped,
            self.ring_packets,
            self.ring_drops,
            self.sock_errors
        )
    }
}

/// Which frames a link's receive sockets take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Receive {
    /// One `ETH_P_ALL` socket: every frame (no kernel fast path in front).
    All,
    /// One socket per EtherType (IPv4 first: it also transmits). IPv4 and IPv6 get the
    /// configured ring; the others a ring of 1/16 of its blocks (control traffic).
    Protocols(Vec<u16>),
}

impl Receive {
    /// IPv4, IPv6 and ARP, plus `extra` EtherTypes (e.g. ANEP directly over Ethernet).
    pub fn ip_and(extra: &[u16]) -> Receive {
        let mut v = vec![EtherType::IPV4, EtherType::IPV6, EtherType::ARP];
        for e in extra {
            if !v.contains(e) {
                v.push(*e);
            }
        }
        Receive::Protocols(v)
    }
}

/// One receive socket and its ring.
#[derive(Debug)]
pub(crate) struct RxSock {
    pub(crate) fd: OwnedFd,
    pub(crate) ring: RxRing,
}

/// An Ethernet interface owned through AF_PACKET.
#[derive(Debug)]
pub struct EtherLink {
    /// Interface name.
    pub name: String,
    /// Its kernel interface index.
    pub ifindex: u32,
    /// Its MAC address.
    pub mac: MacAddr,
    /// Its MTU.
    pub mtu: usize,
    /// Receive sockets; the first also transmits. Never empty.
    pub(crate) rx: Vec<RxSock>,
    /// Counters.
    pub stats: LinkStats,
}

/// Why a link could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// No such interface.
    #[error("interface {name}: not found ({source})")]
    NoInterface {
        /// Name.
        name: String,
        /// Cause.
        source: io::Error,
    },
    /// A socket call failed (usually: not root / no CAP_NET_RAW).
    #[error("interface {name}: {what} failed: {source} (AF_PACKET needs root or CAP_NET_RAW)")]
    Socket {
        /// Name.
        name: String,
        /// The call.
        what: &'static str,
        /// Cause.
        source: io::Error,
    },
    /// The interface's MAC or MTU could not be read.
    #[error("interface {name}: cannot read {what}")]
    Attribute {
        /// Name.
        name: String,
        /// The attribute.
        what: &'static str,
    },
}

impl EtherLink {
    /// Opens `name` with one socket receiving every frame ([`Receive::All`]).
    pub fn open(name: &str, ring: RingConfig) -> Result<EtherLink, LinkError> {
        Self::open_with(name, ring, &Receive::All)
    }

    /// Opens `name`: sockets, rings, options, all-multicast membership, bind.
    pub fn open_with(name: &str, ring: RingConfig, rx: &Receive) -> Result<EtherLink, LinkError> {
        let sock = |what, source| LinkError::Socket {
            name: name.to_string(),
            what,
            source,
        };
        let ifindex = sys::ifindex(name).map_err(|source| LinkError::NoInterface {
            name: name.into(),
            source,
        })?;
        let mac: MacAddr = sys::sysfs(name, "address")
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(LinkError::Attribute {
                name: name.into(),
                what: "MAC address",
            })?;
        let mtu: usize = sys::sysfs(name, "mtu")
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(LinkError::Attribute {
                name: name.into(),
                what: "MTU",
            })?;
        // Slots that hold a whole frame of this interface (jumbo MTUs included).
        let ring = ring.for_mtu(mtu);
        let protocols: Vec<u16> = match rx {
            Receive::All => vec![sys::ETH_P_ALL],
            Receive::Protocols(p) if p.is_empty() => vec![sys::ETH_P_ALL],
            Receive::Protocols(p) => p.clone(),
        };
        let mut socks = Vec::with_capacity(protocols.len());
        for (k, proto) in protocols.iter().enumerate() {
            let fd = sys::packet_socket().map_err(|e| sock("socket(AF_PACKET)", e))?;
            let mut cfg = ring;
            if !matches!(*proto, sys::ETH_P_ALL | EtherType::IPV4 | EtherType::IPV6) {
                cfg.block_nr = (cfg.block_nr / 16).max(2);
            }
            let ring = RxRing::new(&fd, cfg).map_err(|e| sock("PACKET_RX_RING", e))?;
            // Older kernels lack it; then our own frames come back and are dropped as not
            // addressed to us (the router checks the destination MAC).
            let _ = sys::setsockopt(&fd, libc::SOL_PACKET, sys::PACKET_IGNORE_OUTGOING, &1i32);
            if k == 0 {
                sys::setsockopt(&fd, libc::SOL_PACKET, sys::PACKET_QDISC_BYPASS, &1i32)
                    .map_err(|e| sock("PACKET_QDISC_BYPASS", e))?;
                let _ = sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &(4i32 << 20));
                // SAFETY: packet_mreq is plain old data; all-zero is valid.
                let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
                mreq.mr_ifindex = ifindex;
                mreq.mr_type = sys::PACKET_MR_ALLMULTI;
                sys::setsockopt(&fd, libc::SOL_PACKET, sys::PACKET_ADD_MEMBERSHIP, &mreq)
                    .map_err(|e| sock("PACKET_ADD_MEMBERSHIP", e))?;
            }
            sys::bind(&fd, ifindex, *proto).map_err(|e| sock("bind", e))?;
            socks.push(RxSock { fd, ring });
        }
        Ok(EtherLink {
            name: name.into(),
            ifindex: ifindex as u32,
            mac,
            mtu,
            rx: socks,
            stats: LinkStats::default(),
        })
    }

    /// Adds the kernel's ring counters since the last call (`PACKET_STATISTICS` reads and
    /// resets them) to [`LinkStats`].
    pub fn update_ring_stats(&mut self) {
        for s in &self.rx {
            if let Ok(st) = sys::packet_stats(&s.fd) {
                self.stats.ring_packets += u64::from(st.packets);
                self.stats.ring_drops += u64::from(st.drops);
            }
        }
    }

    /// The transmitting socket.
    pub(crate) fn raw_fd(&self) -> i32 {
        self.rx.first().map_or(-1, |s| s.fd.as_raw_fd())
    }
}
