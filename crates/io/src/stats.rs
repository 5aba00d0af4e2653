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
    /// Sends that carried several datagrams as one (`UDP_SEGMENT`).
    tx_segmented_sends,
    /// Datagrams they carried.
    tx_segmented_datagrams,
    /// Receives that held several datagrams (`UDP_GRO`).
    rx_coalesced_receives,
    /// Datagrams they held.
    rx_coalesced_datagrams,
    /// Packets the kernel fast path forwarded (they never reached the socket).
    kernel_forwarded,
    /// Their ANEP bytes.
    kernel_forwarded_bytes,
    /// Kernel fast path: passed on to the socket, not UDP to the node's address and port.
    kernel_pass_not_node,
    /// Kernel fast path: passed on to the socket, an ANEP or transit header the node would refuse.
    kernel_pass_malformed,
    /// Kernel fast path: passed on to the socket, ANEP options (maybe an integrity checksum).
    kernel_pass_anep_options,
    /// Kernel fast path: passed on to the socket, control, an unknown Type ID, or an EE's while cut-through channels exist.
    kernel_pass_type,
    /// Kernel fast path: passed on to the socket, from no enabled link's peer.
    kernel_pass_peer,
    /// Kernel fast path: passed on to the socket, evaluate at every hop, or EE routing.
    kernel_pass_active,
    /// Kernel fast path: passed on to the socket, addressed to the node.
    kernel_pass_for_node,
    /// Kernel fast path: passed on to the socket, resource bound 0.
    kernel_pass_rb_exhausted,
    /// Kernel fast path: passed on to the socket, no route in the node's table.
    kernel_pass_no_route,
    /// Kernel fast path: passed on to the socket, next hop's link down, impaired, paced, of the other family, or MTU too small.
    kernel_pass_next_hop,
    /// Kernel fast path: passed on to the socket, the kernel has no neighbor entry for the next hop yet.
    kernel_pass_no_neighbor,
    /// Kernel fast path: passed on to the socket, hooks or a capture: all to the node.
    kernel_pass_punt_all,
    /// Kernel fast path: passed on to the socket, a helper failed.
    kernel_pass_error,
}

impl DriverStats {
    /// Adds `n` to the kernel fast path's pass counter named `reason`
    /// (`anode_ether::transit` names them).
    pub(crate) fn add_kernel_pass(&mut self, reason: &str, n: u64) {
        let c = match reason {
            "not_node" => &mut self.kernel_pass_not_node,
            "malformed" => &mut self.kernel_pass_malformed,
            "anep_options" => &mut self.kernel_pass_anep_options,
            "type" => &mut self.kernel_pass_type,
            "peer" => &mut self.kernel_pass_peer,
            "active" => &mut self.kernel_pass_active,
            "for_node" => &mut self.kernel_pass_for_node,
            "rb_exhausted" => &mut self.kernel_pass_rb_exhausted,
            "no_route" => &mut self.kernel_pass_no_route,
            "next_hop" => &mut self.kernel_pass_next_hop,
            "no_neighbor" => &mut self.kernel_pass_no_neighbor,
            "punt_all" => &mut self.kernel_pass_punt_all,
            "error" => &mut self.kernel_pass_error,
            _ => return,
        };
        *c += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_pass_reason_has_its_own_counter() {
        let mut d = DriverStats::default();
        for (i, (_, name)) in anode_ether::transit::PASS_REASONS.iter().enumerate() {
            d.add_kernel_pass(name, 1 << i);
        }
        let fields: Vec<(&str, u64)> = d
            .fields()
            .into_iter()
            .filter(|(n, _)| n.starts_with("kernel_pass_"))
            .collect();
        assert_eq!(fields.len(), anode_ether::transit::PASS_REASONS.len());
        for (i, (_, name)) in anode_ether::transit::PASS_REASONS.iter().enumerate() {
            let field = format!("kernel_pass_{name}");
            assert!(
                fields.contains(&(field.as_str(), 1 << i)),
                "{name}: {fields:?}"
            );
        }
    }

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
