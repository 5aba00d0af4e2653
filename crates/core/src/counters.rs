//! Counters: what the node did with every packet, drops by reason.

use std::collections::BTreeMap;

macro_rules! drop_reasons {
    ($($(#[doc = $doc:literal])* $name:ident = $text:literal,)*) => {
        /// Why the node dropped a packet. Every drop is counted under one of these.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum DropReason {
            $($(#[doc = $doc])* $name,)*
        }

        impl DropReason {
            /// All reasons, in counter order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$name,)*];

            /// A short stable name (used in reports, JSON and metrics).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(DropReason::$name => $text,)*
                }
            }
        }
    };
}

drop_reasons! {
    /// The ANEP header could not be parsed (truncated, bad version or lengths, bad options).
    MalformedAnep = "malformed_anep",
    /// The transit header could not be parsed.
    MalformedTransit = "malformed_transit",
    /// A control message could not be parsed.
    MalformedControl = "malformed_control",
    /// The EE-specific header could not be parsed.
    MalformedEe = "malformed_ee",
    /// The ANEP integrity checksum did not verify.
    BadChecksum = "bad_checksum",
    /// Unknown Type ID with the discard flag set.
    UnknownTypeDiscarded = "unknown_type_discarded",
    /// Unknown Type ID, forward asked for, but no destination identifier option.
    UnknownTypeNoDestination = "unknown_type_no_destination",
    /// No route to the destination.
    NoRoute = "no_route",
    /// Resource bound (hop budget) exhausted.
    RbExhausted = "rb_exhausted",
    /// Arrived on a link the node does not have.
    UnknownLink = "unknown_link",
    /// The link is administratively down.
    LinkDown = "link_down",
    /// Larger than the outgoing link's MTU.
    TooBig = "too_big",
    /// The transmit queue was full.
    TxQueueFull = "tx_queue_full",
    /// The event queue was full (a delivery could not be queued).
    EventQueueFull = "event_queue_full",
    /// A routing update from a node that is not an up neighbor on that link.
    NotNeighbor = "not_neighbor",
    /// A control message of a kind no one here handles.
    UnhandledControl = "unhandled_control",
    /// Addressed to this node under a Type ID whose EE rejected or failed it.
    EeDropped = "ee_dropped",
    /// For an EE its operator stopped (`anode module stop capsule`).
    EeStopped = "ee_stopped",
    /// A packet that came back to the node that sent it (routing loop).
    Loop = "loop",
    /// A cut-through channel's bandwidth limit was exceeded.
    CutThroughPoliced = "cut_through_policed",
    /// A packet processor (service module) at a hook point dropped it.
    HookDropped = "hook_dropped",
    /// The link's queue discipline refused it (its queue was full).
    QdiscDropped = "qdisc_dropped",
    /// A routing message of the other protocol (a neighbor runs distance vector where this
    /// node runs link state, or the reverse: `[routing] protocol` differs).
    RoutingMismatch = "routing_mismatch",
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

const N_REASONS: usize = DropReason::ALL.len();

/// Per-node counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets handed to `handle_packet` (from links).
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Packets originated locally (`send_datagram`, `inject`).
    pub local_packets: u64,
    /// Packets queued for transmission.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Packets forwarded by the fast path.
    pub fast_path: u64,
    /// Unknown-Type-ID packets forwarded by their destination option.
    pub unknown_type_forwarded: u64,
    /// Packets handed to an execution environment.
    pub to_ee: u64,
    /// Packets forwarded by a cut-through channel (also counted in `fast_path`).
    pub cut_through: u64,
    /// Deliveries to local applications.
    pub delivered: u64,
    /// Control messages received.
    pub control_rx: u64,
    /// Control messages sent.
    pub control_tx: u64,
    /// Packets a packet processor (service module) consumed at a hook point.
    pub hook_consumed: u64,
    drops: [u64; N_REASONS],
    /// Drops an execution environment counted, by "ee/reason".
    pub ee_drops: BTreeMap<String, u64>,
}

impl Counters {
    /// Counts a drop.
    #[inline]
    pub fn drop(&mut self, r: DropReason) {
        if let Some(c) = self.drops.get_mut(r as usize) {
            *c += 1;
        }
    }

    /// Drops counted for one reason.
    pub fn drops(&self, r: DropReason) -> u64 {
        self.drops.get(r as usize).copied().unwrap_or(0)
    }

    /// All drops.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum::<u64>() + self.ee_drops.values().sum::<u64>()
    }

    /// The non-zero drop counters as `reason=n` joined by `sep`, or `none`.
    pub fn drop_summary(&self, sep: &str) -> String {
        let drops = self.drop_map();
        if drops.is_empty() {
            return "none".to_string();
        }
        drops
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(sep)
    }

    /// Non-zero drop counters by name, including EE-specific ones.
    pub fn drop_map(&self) -> BTreeMap<String, u64> {
        let mut m: BTreeMap<String, u64> = DropReason::ALL
            .iter()
            .filter(|r| self.drops(**r) > 0)
            .map(|r| (r.as_str().to_string(), self.drops(*r)))
            .collect();
        for (k, v) in &self.ee_drops {
            m.insert(k.clone(), *v);
        }
        m
    }

    /// Counts a drop an EE decided, under "ee/reason".
    pub fn drop_ee(&mut self, ee: &str, reason: &str) {
        // The key is only built the first time (drops under attack come in floods).
        let is_key = |k: &String| {
            k.len() == ee.len() + 1 + reason.len()
                && k.starts_with(ee)
                && k.ends_with(reason)
                && k.as_bytes().get(ee.len()) == Some(&b'/')
        };
        match self.ee_drops.iter_mut().find(|(k, _)| is_key(k)) {
            Some((_, n)) => *n += 1,
            None => {
                self.ee_drops.insert(format!("{ee}/{reason}"), 1);
            }
        }
    }
}

impl serde::Serialize for Counters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Counters", 14)?;
        st.serialize_field("rx_packets", &self.rx_packets)?;
        st.serialize_field("rx_bytes", &self.rx_bytes)?;
        st.serialize_field("local_packets", &self.local_packets)?;
        st.serialize_field("tx_packets", &self.tx_packets)?;
        st.serialize_field("tx_bytes", &self.tx_bytes)?;
        st.serialize_field("fast_path", &self.fast_path)?;
        st.serialize_field("unknown_type_forwarded", &self.unknown_type_forwarded)?;
        st.serialize_field("to_ee", &self.to_ee)?;
        st.serialize_field("cut_through", &self.cut_through)?;
        st.serialize_field("delivered", &self.delivered)?;
        st.serialize_field("control_rx", &self.control_rx)?;
        st.serialize_field("control_tx", &self.control_tx)?;
        st.serialize_field("hook_consumed", &self.hook_consumed)?;
        st.serialize_field("drops", &self.drop_map())?;
        st.end()
    }
}
