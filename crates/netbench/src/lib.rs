//! # anode-netbench: tools for the netns forwarding benchmark
//!
//! Contract: The netns testbed's generator, sink and forwarder: bounded in time, traffic only
//! to the addresses given.
//!
//! - `anode-blast`: sends pre-built ANEP datagram packets ([`packet::datagram_of_size`]) with
//!   `sendmmsg`, paced at a given rate ([`pace::Pacer`]) or at full speed, for N seconds.
//! - `anode-sink`: counts the ANEP datagrams arriving on a bound address with `recvmmsg`
//!   until idle or a time limit.
//! - `anode-fwd-node`: an anode node with statically configured neighbors run by `anode-io`,
//!   the forwarder under test (until the `anode node` command can stand in for it).
//!
//! The same generator and sink measure every forwarder (kernel, C `fwd`, anode), so the
//! comparison is fair. `scripts/bench-netns.sh` drives them. Every tool is bounded in time.

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod mmsg;
pub mod pace;
pub mod packet;

/// `CLOCK_MONOTONIC` in nanoseconds. One clock for every network namespace of a host, so a
/// sender's stamp and a receiver's reading in two namespaces give the one-way latency.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// True if `x` is a number in `(0, max]` (false for NaN).
pub fn positive_at_most(x: f64, max: f64) -> bool {
    x > 0.0 && x <= max
}

/// A tool failed; the message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A packet size the ANEP datagram format cannot produce.
    #[error(
        "size {size} is impossible: an ANEP datagram is {min} to {max} bytes (8 ANEP + 72 transit + 4 datagram header + payload)"
    )]
    Size {
        /// Asked for.
        size: usize,
        /// Smallest.
        min: usize,
        /// Largest.
        max: usize,
    },
    /// The wire format refused to build the packet.
    #[error("could not build the ANEP packet: {0}")]
    Wire(#[from] anode_wire::WireError),
    /// A socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl BenchError {
    /// Wraps an I/O error with what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| BenchError::Io { what, source }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ranges() {
        assert!(super::positive_at_most(5.0, 60.0));
        assert!(!super::positive_at_most(0.0, 60.0));
        assert!(!super::positive_at_most(61.0, 60.0));
        assert!(!super::positive_at_most(f64::NAN, 60.0));
    }
}
