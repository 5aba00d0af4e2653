//! Driver configuration: the socket, batching, and optional per-peer egress impairments.
//!
//! Contract: [`DriverConfig::validate`] accepts exactly the configurations the driver can run;
//! `spawn` calls it and turns a [`ConfigError`] into `io::ErrorKind::InvalidInput`.

use std::net::SocketAddr;
use std::time::Duration;

/// Most datagrams one `recvmmsg`/`sendmmsg` call may carry (the kernel's `UIO_MAXIOV`).
pub const MAX_BATCH: usize = 1024;

/// How to run one node on one UDP socket.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverConfig {
    /// Where the UDP socket is bound. For a node this is normally its node address; port 0
    /// picks a free port (see `NodeHandle::local_addr`). `[::]` binds dual-stack.
    pub bind: SocketAddr,
    /// Datagrams per `recvmmsg`/`sendmmsg` (1..=1024, default 32).
    pub batch: usize,
    /// Socket receive and send buffer size in bytes (default 4 MiB). As root the driver uses
    /// `SO_RCVBUFFORCE`/`SO_SNDBUFFORCE`, which ignore `net.core.rmem_max`.
    pub socket_buffer: usize,
    /// Optional netem-like egress impairment per peer (for the emulator's realtime mode).
    pub impairments: Vec<Impairment>,
    /// Seed of the impairment RNG (loss decisions), so runs are repeatable.
    pub seed: u64,
    /// Capacity of the event channel (at least 1, default 4096). When it is full, events are
    /// dropped and counted; the data path never blocks on a slow consumer.
    pub event_capacity: usize,
    /// The kernel fast path for passive transit (default off; `anode node` asks for
    /// [`KernelTransit::Auto`](crate::KernelTransit::Auto)).
    pub kernel_transit: crate::KernelTransit,
    /// UDP segmentation offload (default on): consecutive datagrams of one size to one peer
    /// leave as one `UDP_SEGMENT` send, and the socket takes coalesced receives (`UDP_GRO`).
    /// Where an interface cannot segment (the kernel answers EIO), sends fall back to one
    /// datagram each, once and for good.
    pub udp_offload: bool,
    /// Busy polling (default zero: off): before the data-path thread sleeps in `ppoll` it
    /// polls the socket without blocking for up to this long after its last work, so a
    /// datagram arriving meanwhile is taken without a thread wake-up (lower latency at the
    /// cost of a CPU spinning while idle). At most [`MAX_BUSY_POLL`].
    pub busy_poll: std::time::Duration,
}

/// Longest busy poll.
pub const MAX_BUSY_POLL: std::time::Duration = std::time::Duration::from_secs(1);

impl DriverConfig {
    /// Defaults for a socket bound to `bind`.
    pub fn new(bind: SocketAddr) -> Self {
        DriverConfig {
            bind,
            batch: 32,
            socket_buffer: 4 << 20,
            impairments: Vec::new(),
            seed: 0,
            event_capacity: 4096,
            kernel_transit: crate::KernelTransit::Off,
            udp_offload: true,
            busy_poll: std::time::Duration::ZERO,
        }
    }

    /// Checks the values make sense; the error says what to change.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(ConfigError::Batch(self.batch));
        }
        if self.event_capacity == 0 {
            return Err(ConfigError::EventCapacity);
        }
        if self.socket_buffer > i32::MAX as usize {
            return Err(ConfigError::SocketBuffer(self.socket_buffer));
        }
        if self.busy_poll > MAX_BUSY_POLL {
            return Err(ConfigError::BusyPoll(self.busy_poll));
        }
        for (i, imp) in self.impairments.iter().enumerate() {
            if !(0.0..=1.0).contains(&imp.loss) {
                return Err(ConfigError::Loss {
                    peer: imp.peer,
                    loss: imp.loss,
                });
            }
            if imp.rate_bps == Some(0) {
                return Err(ConfigError::Rate(imp.peer));
            }
            if self
                .impairments
                .iter()
                .skip(i + 1)
                .any(|o| o.peer == imp.peer)
            {
                return Err(ConfigError::DuplicatePeer(imp.peer));
            }
        }
        Ok(())
    }
}

/// A netem-like impairment of the datagrams sent to one peer: tail drop when `queue_bytes`
/// are already held, random loss, serialisation at `rate_bps`, then a fixed `delay`.
/// Order of datagrams to one peer is preserved.
#[derive(Debug, Clone, PartialEq)]
pub struct Impairment {
    /// The peer (a link's peer address) whose egress is impaired.
    pub peer: SocketAddr,
    /// One-way delay added to every datagram.
    pub delay: Duration,
    /// Probability (0.0..=1.0) that a datagram is lost.
    pub loss: f64,
    /// Link rate; `None` = unlimited.
    pub rate_bps: Option<u64>,
    /// Most bytes held (waiting for the rate or the delay); more are tail-dropped.
    pub queue_bytes: usize,
}

impl Impairment {
    /// No impairment yet for `peer` (zero delay and loss, unlimited rate, 1 MiB queue).
    pub fn new(peer: SocketAddr) -> Self {
        Impairment {
            peer,
            delay: Duration::ZERO,
            loss: 0.0,
            rate_bps: None,
            queue_bytes: 1 << 20,
        }
    }
}

/// A driver configuration value that does not make sense.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Batch out of range.
    #[error("batch {0} is out of range: give 1 to 1024 datagrams per system call (32 is usual)")]
    Batch(usize),
    /// Event capacity zero.
    #[error("event_capacity must be at least 1 (4096 is usual)")]
    EventCapacity,
    /// Socket buffer too large for the socket option.
    #[error("socket_buffer {0} bytes is too large: at most 2147483647 (4 MiB is usual)")]
    SocketBuffer(usize),
    /// Loss probability out of range.
    #[error("impairment for {peer}: loss {loss} must be a probability between 0.0 and 1.0")]
    Loss {
        /// The peer.
        peer: SocketAddr,
        /// The bad value.
        loss: f64,
    },
    /// Zero rate.
    #[error("impairment for {0}: rate_bps must be above 0 (or None for unlimited)")]
    Rate(SocketAddr),
    /// Two impairments for one peer.
    #[error("impairment for {0} is given twice: give one per peer")]
    DuplicatePeer(SocketAddr),
    /// Busy polling too long.
    #[error("busy_poll {0:?} is too long: at most 1 s (50 us to 1 ms is usual)")]
    BusyPoll(std::time::Duration),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9))
    }

    #[test]
    fn defaults_validate() {
        let c = DriverConfig::new(addr());
        assert_eq!(c.batch, 32);
        assert_eq!(c.socket_buffer, 4 << 20);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn bad_values_are_rejected_with_reasons() {
        let mut c = DriverConfig::new(addr());
        c.batch = 0;
        assert_eq!(c.validate(), Err(ConfigError::Batch(0)));
        c.batch = 2000;
        assert!(c.validate().unwrap_err().to_string().contains("1 to 1024"));
        c.batch = 8;
        c.event_capacity = 0;
        assert_eq!(c.validate(), Err(ConfigError::EventCapacity));
        c.event_capacity = 1;
        let mut imp = Impairment::new(addr());
        imp.loss = 1.5;
        c.impairments = vec![imp.clone()];
        assert!(matches!(c.validate(), Err(ConfigError::Loss { .. })));
        imp.loss = 0.5;
        imp.rate_bps = Some(0);
        c.impairments = vec![imp.clone()];
        assert_eq!(c.validate(), Err(ConfigError::Rate(addr())));
        imp.rate_bps = None;
        c.impairments = vec![imp.clone(), imp];
        assert_eq!(c.validate(), Err(ConfigError::DuplicatePeer(addr())));
    }
}
