//! [`RoutingStats`]: counters of the routing protocol's own work, for `anode stats`, the
//! metrics endpoint and whoever tunes the protocol (how much of the control traffic is
//! digests, how often a receiver was out of step, how many LSA copies were duplicates).
//!
//! Contract: every counter only grows, by exactly the messages or records it names, as they
//! are queued for sending or accepted from an up neighbor (messages from anyone else are
//! ignored and not counted here); [`RoutingStats::fields`] lists the counters of one
//! protocol, by name, in a fixed order.

use crate::Protocol;

/// See the module docs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoutingStats {
    /// Distance vector: Routes messages sent that carry routes (triggered updates and the
    /// parts of full tables).
    pub updates_sent: u64,
    /// Distance vector: full tables begun (their first message).
    pub full_tables_sent: u64,
    /// Distance vector: periodic digests sent instead of a full table.
    pub digests_sent: u64,
    /// Distance vector: requests for a neighbor's full table sent.
    pub requests_sent: u64,
    /// Distance vector: Routes messages received that carry routes.
    pub updates_received: u64,
    /// Distance vector: digests received.
    pub digests_received: u64,
    /// Distance vector: digests that found this node out of step with the sender (a lost
    /// message, a restart): the node asked for the table instead of refreshing.
    pub digests_out_of_step: u64,
    /// Distance vector: requests received.
    pub requests_received: u64,
    /// Link state: LSAs received from neighbors (every copy).
    pub lsas_received: u64,
    /// Link state: LSAs stored because they were newer than the copy held (or new).
    pub lsas_installed: u64,
    /// Link state: LSA fragments this node originated.
    pub lsas_originated: u64,
    /// Link state: LSA messages sent (floods, a new neighbor's database, sync answers).
    pub lsa_messages_sent: u64,
    /// Link state: database digests sent.
    pub db_digests_sent: u64,
    /// Link state: database summaries sent (a neighbor's digest differed).
    pub summaries_sent: u64,
    /// Link state: SPF runs.
    pub spf_runs: u64,
}

impl RoutingStats {
    /// The counters `protocol` keeps, by name, in a fixed order.
    pub fn fields(&self, protocol: Protocol) -> Vec<(&'static str, u64)> {
        match protocol {
            Protocol::Dv => vec![
                ("updates_sent", self.updates_sent),
                ("full_tables_sent", self.full_tables_sent),
                ("digests_sent", self.digests_sent),
                ("requests_sent", self.requests_sent),
                ("updates_received", self.updates_received),
                ("digests_received", self.digests_received),
                ("digests_out_of_step", self.digests_out_of_step),
                ("requests_received", self.requests_received),
            ],
            Protocol::Ls => vec![
                ("lsas_received", self.lsas_received),
                ("lsas_installed", self.lsas_installed),
                ("lsas_originated", self.lsas_originated),
                ("lsa_messages_sent", self.lsa_messages_sent),
                ("db_digests_sent", self.db_digests_sent),
                ("summaries_sent", self.summaries_sent),
                ("spf_runs", self.spf_runs),
            ],
        }
    }
}
