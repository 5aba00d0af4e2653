//! Driver statistics: atomics the data path adds to once per batch, read as a snapshot.
//!
//! Invariant: every datagram the socket delivered is counted in `rx_datagrams` and then either
//! handed to the node or counted in `unknown_peer_drops` / `truncated_drops`; every datagram the
//! node asked to send is counted in exactly one of `tx_datagrams`, `send_errors`,
//! `impairment_loss_drops`, `impairment_queue_drops` (or is still held by an impairment).

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! stats {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// A snapshot of the driver's counters.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct DriverStats {
            $($(#[doc = $doc])* pub $name: u64,)*
        }

        /// The live counters, shared by the data-path thread and the handle.
        #[derive(Debug, Default)]
        pub(crate) struct SharedStats {
            $(pub(crate) $name: AtomicU64,)*
        }

        impl SharedStats {
            pub(crate) fn snapshot(&self) -> DriverStats {
                DriverStats { $($name: self.$name.load(Ordering::Relaxed),)* }
            }

            /// Adds a batch's local tallies.
            pub(crate) fn add(&self, d: &DriverStats) {
                $(if d.$name != 0 { self.$name.fetch_add(d.$name, Ordering::Relaxed); })*
            }
        }

        impl DriverStats {
            /// (name, value) pairs, for reports.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

stats! {
    /// Datagrams received from the socket.
    rx_datagrams,
    /// Their bytes.
    rx_bytes,
    /// `recvmmsg` calls that returned at least one datagram.
    rx_batches,
    /// Datagrams sent.
    tx_datagrams,
    /// Their bytes.
    tx_bytes,
    /// `sendmmsg` calls that sent at least one datagram.
    tx_batches,
    /// All system calls of the data path (recvmmsg, sendmmsg, ppoll, eventfd reads).
    syscalls,
    /// `ppoll` calls (the loop went idle).
    polls,
    /// Datagrams from a source that is no link's peer, dropped.
    unknown_peer_drops,
    /// Datagrams larger than the receive buffer, dropped.
    truncated_drops,
    /// Datagrams the node asked to send that could not be sent.
    send_errors,
    /// Receive calls that failed with an error other than EINTR/EAGAIN.
    recv_errors,
    /// System calls interrupted (EINTR), retried.
    eintr,
    /// Send or receive calls that would have blocked (EAGAIN).
    eagain,
    /// ICMP port unreachable reported on the socket (ECONNREFUSED).
    econnrefused,
    /// Kernel out of buffers (ENOBUFS/ENOMEM).
    enobufs,
    /// Node events dropped because the event channel was full (or no one listens).
    event_drops,
    /// Datagrams an impairment lost on purpose.
    impairment_loss_drops,
    /// Datagrams an impairment tail-dropped (its queue was full).
    impairment_queue_drops,
    /// `NodeHandle::call` closures run.
    calls,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_and_snapshot() {
        let s = SharedStats::default();
        let d = DriverStats {
            rx_datagrams: 3,
            syscalls: 2,
            ..Default::default()
        };
        s.add(&d);
        s.add(&d);
        let snap = s.snapshot();
        assert_eq!(snap.rx_datagrams, 6);
        assert_eq!(snap.syscalls, 4);
        assert_eq!(snap.tx_datagrams, 0);
        assert!(snap.fields().contains(&("rx_datagrams", 6)));
    }
}
