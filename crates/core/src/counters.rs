//! Counters: what the node did with every packet, drops by reason.
//!
//! [`DropReason`] is the one drop-reason type of the node: the node core counts its own drops
//! under it ([`Counters::drop`]) and every execution environment (capsule, PLAN, deployment,
//! the NodeOS guard around them) counts its drops under it too, per EE
//! ([`Counters::drop_ee`], shown as `ee/reason`). Names are stable: they appear in
//! `anode stats`, JSON and the `anode_drops_total{reason}` metric.

use std::collections::BTreeMap;

macro_rules! drop_reasons {
    ($($(#[doc = $doc:literal])* $name:ident = $text:literal,)*) => {
        /// Why a packet was dropped. Every drop, by the node or by an EE, is counted under one
        /// of these.
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

            /// What the reason means (its documentation), for `anode stats` and docs.
            pub fn meaning(self) -> &'static str {
                match self {
                    $(DropReason::$name => concat!($($doc),*).trim_ascii(),)*
                }
            }

            /// The reason named `name` (as [`DropReason::as_str`] spells it).
            pub fn from_name(name: &str) -> Option<DropReason> {
                match name {
                    $($text => Some(DropReason::$name),)*
                    _ => None,
                }
            }
        }
    };
}

drop_reasons! {
    // ---- Counted by the node core.
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
    // ---- Counted by the capsule EE.
    /// The capsule header is missing or does not fit the packet.
    BadHeader = "bad_header",
    /// The code's dependencies nest deeper than the EE allows.
    DepsTooDeep = "deps_too_deep",
    /// The code could not be instantiated (imports, start function, memory).
    InstantiateFailed = "instantiate_failed",
    /// The code is not valid for this node (wasm, ABI version or exports).
    CodeInvalid = "code_invalid",
    /// Fetched code whose SHA-256 is not the hash the capsule names.
    CodeHashMismatch = "code_hash_mismatch",
    /// The previous hop (or every source asked) does not have the code.
    CodeUnavailable = "code_unavailable",
    /// The code is larger than `[capsule] max_code_bytes`.
    CodeTooBig = "code_too_big",
    /// The code did not arrive within the load timeout.
    LoadTimeout = "load_timeout",
    /// The code is missing and there is no node to fetch it from.
    NoCodeSource = "no_code_source",
    /// Too many capsules already wait for code (`max_parked_per_code`, `max_fetches`).
    ParkFull = "park_full",
    /// The guest trapped (a bad access, unreachable, a failed host call).
    Trap = "trap",
    /// The guest dropped the capsule itself.
    GuestDrop = "guest_drop",
    /// The guest returned a verdict the ABI does not define.
    BadVerdict = "bad_verdict",
    /// The guest ran out of fuel (its per-capsule CPU budget).
    FuelExhausted = "fuel_exhausted",
    /// The guest asked for more memory than its limit.
    MemoryLimit = "memory_limit",
    // ---- Counted by the PLAN EE.
    /// The PLAN packet body (code, entry point, arguments) could not be decoded.
    MalformedBody = "malformed_body",
    /// A chunk argument could not be decoded.
    MalformedChunk = "malformed_chunk",
    /// The packet names a routing function this node does not have.
    UnknownRouteFun = "unknown_route_fun",
    /// The program raised an exception no handler caught.
    UncaughtException = "uncaught_exception",
    /// The program called `abort`.
    Aborted = "aborted",
    /// The evaluation ran out of its step budget.
    BudgetExhausted = "budget_exhausted",
    /// The evaluation nested deeper than allowed.
    TooDeep = "too_deep",
    /// The program did not type-check or compile.
    CompileError = "compile_error",
    /// The program calls code the packet does not carry.
    MissingCode = "missing_code",
    /// The entry point the packet names does not exist.
    UnknownEntry = "unknown_entry",
    /// The arguments do not match the entry point's parameters.
    BadArguments = "bad_arguments",
    /// A value or packet grew larger than allowed.
    TooLarge = "too_large",
    /// An internal evaluator error (a bug).
    Internal = "internal",
    /// More packets a program sent to this node itself than one round may evaluate
    /// (`max_local`).
    LocalOverflow = "local_overflow",
    /// An error report could not be built (the handler's code is not in the packet).
    ReportImpossible = "report_impossible",
    /// An error report was over the per-second report limit.
    ReportSuppressed = "report_suppressed",
    /// A reliable send (`RetransOnRemote`) gave up: no acknowledgement after every
    /// transmission.
    RetransUnacked = "retrans_unacked",
    /// A reliable send the node could not track (too many outstanding).
    RetransUntracked = "retrans_untracked",
    // ---- Counted by the deployment EE.
    /// A deployment request claiming another origin than the node that injected it.
    WrongOrigin = "wrong_origin",
    /// A deployment result no request of this node is waiting for.
    StrayResult = "stray_result",
    /// A deployment message that could not be parsed.
    Malformed = "malformed",
    // ---- Counted by the NodeOS for a domain (and under its EE).
    /// The domain owes more than its share of CPU or bandwidth (its rate limit).
    Bandwidth = "bandwidth",
    /// No domain for the packet's principal: it was terminated, or the policy refuses a new
    /// one.
    DomainRefused = "domain_refused",
    /// The packet would take its domain over its memory limit.
    Memory = "memory",
    /// The domain's memory report was refused by its pool (it is told to free memory).
    MemoryRefused = "memory_refused",
    /// The domain's queue of packets waiting for its EE was full.
    QueueFull = "queue_full",
    /// The domain's in-channel queue was full.
    InChanFull = "in_chan_full",
    /// A signed packet whose signature does not verify under the named key it claims.
    BadSignature = "bad_signature",
    /// A signed packet whose sequence number its signer already used (a replay), or one
    /// below the replay window.
    Replayed = "replayed",
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for DropReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

const N_REASONS: usize = DropReason::ALL.len();

/// One count per [`DropReason`], indexed by the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ReasonCounts([u64; N_REASONS]);

impl Default for ReasonCounts {
    fn default() -> Self {
        ReasonCounts([0; N_REASONS])
    }
}

impl ReasonCounts {
    fn add(&mut self, r: DropReason) {
        if let Some(c) = self.0.get_mut(r as usize) {
            *c += 1;
        }
    }

    fn get(&self, r: DropReason) -> u64 {
        self.0.get(r as usize).copied().unwrap_or(0)
    }

    fn sum(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// The outcome ledger: every packet handed to the node (from a link or a local application)
/// ends in exactly one of these, so `rx_packets + local_packets` equals their sum at every
/// moment (equality, not >=: a packet an EE holds is `held` until it settles, then leaves
/// `held` for its outcome). The first outcome given while the node handles a packet is that
/// packet's outcome; packets an EE makes meanwhile (a capsule's `copy_via`, a PLAN program's
/// `OnRemote`) are sent through `NodeContext::originate` and are not outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Outcomes {
    /// Sent on toward a next hop (fast path, cut-through channel, forwarded by option or by
    /// an EE, redirected by a module).
    pub forwarded: u64,
    /// Delivered to a local application.
    pub delivered: u64,
    /// Taken by the node or an EE without being sent on (control messages, capsules whose
    /// code ended them, evaluated PLAN programs, packets a module consumed).
    pub consumed: u64,
    /// Dropped, under one reason (node's or an EE's).
    pub dropped: u64,
    /// Held by an EE right now (capsules waiting for code, packets queued for a NodeOS
    /// domain); a gauge.
    pub held: u64,
}

impl Outcomes {
    /// All packets accounted for: forwarded + delivered + consumed + dropped + held.
    pub fn total(&self) -> u64 {
        self.forwarded + self.delivered + self.consumed + self.dropped + self.held
    }
}

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
    /// The outcome of every packet handed to the node, exactly once each.
    pub outcomes: Outcomes,
    /// Times an EE resumed a packet it did not hold (a bug in the EE's accounting; zero).
    pub unheld_resumes: u64,
    drops: ReasonCounts,
    /// Drops execution environments counted, one row per EE name (a handful).
    ee_drops: Vec<EeDrops>,
}

/// One EE's drops by reason.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EeDrops {
    ee: String,
    counts: ReasonCounts,
}

impl Counters {
    /// Counts a drop.
    #[inline]
    pub fn drop(&mut self, r: DropReason) {
        self.drops.add(r);
    }

    /// Drops counted for one reason.
    pub fn drops(&self, r: DropReason) -> u64 {
        self.drops.get(r)
    }

    /// All drops.
    pub fn total_drops(&self) -> u64 {
        self.drops.sum() + self.ee_drops.iter().map(|e| e.counts.sum()).sum::<u64>()
    }

    /// Drops EE `ee` counted for one reason.
    pub fn ee_drops(&self, ee: &str, r: DropReason) -> u64 {
        self.ee_drops
            .iter()
            .find(|e| e.ee == ee)
            .map_or(0, |e| e.counts.get(r))
    }

    /// The non-zero EE drop counters by "ee/reason".
    pub fn ee_drop_map(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for e in &self.ee_drops {
            for r in DropReason::ALL {
                let n = e.counts.get(*r);
                if n > 0 {
                    m.insert(format!("{}/{}", e.ee, r.as_str()), n);
                }
            }
        }
        m
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
        m.extend(self.ee_drop_map());
        m
    }

    /// Counts a drop EE `ee` decided, shown as "ee/reason".
    pub fn drop_ee(&mut self, ee: &str, reason: DropReason) {
        // The EE's row is only made the first time (drops under attack come in floods).
        match self.ee_drops.iter_mut().find(|e| e.ee == ee) {
            Some(e) => e.counts.add(reason),
            None => {
                let mut counts = ReasonCounts::default();
                counts.add(reason);
                self.ee_drops.push(EeDrops {
                    ee: ee.to_string(),
                    counts,
                });
            }
        }
    }
}

impl serde::Serialize for Counters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Counters", 15)?;
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
        st.serialize_field("outcomes", &self.outcomes)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_a_unique_name_that_maps_back_and_a_meaning() {
        let mut names = std::collections::BTreeSet::new();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "ALL is in declaration order");
            assert!(names.insert(r.as_str()), "{} named twice", r.as_str());
            assert_eq!(DropReason::from_name(r.as_str()), Some(*r));
            assert!(
                r.as_str()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{} is not a metric-safe name",
                r.as_str()
            );
            assert!(!r.meaning().is_empty() && r.meaning().ends_with(['.', ')']));
        }
        assert_eq!(DropReason::from_name("no_such_reason"), None);
        assert_eq!(
            DropReason::Memory.meaning(),
            "The packet would take its domain over its memory limit."
        );
    }

    #[test]
    fn ee_drops_are_counted_per_ee_and_reason() {
        let mut c = Counters::default();
        c.drop(DropReason::NoRoute);
        c.drop_ee("capsule", DropReason::Trap);
        c.drop_ee("capsule", DropReason::Trap);
        c.drop_ee("plan", DropReason::NoRoute);
        c.drop_ee("capsule+nodeos", DropReason::Bandwidth);
        assert_eq!(c.ee_drops("capsule", DropReason::Trap), 2);
        assert_eq!(c.ee_drops("plan", DropReason::Trap), 0);
        assert_eq!(c.ee_drops("deploy", DropReason::Trap), 0);
        assert_eq!(
            c.drops(DropReason::NoRoute),
            1,
            "the node's own count is apart"
        );
        assert_eq!(c.total_drops(), 5);
        let m = c.drop_map();
        assert_eq!(m.get("capsule/trap"), Some(&2));
        assert_eq!(m.get("plan/no_route"), Some(&1));
        assert_eq!(m.get("no_route"), Some(&1));
        assert_eq!(m.get("capsule+nodeos/bandwidth"), Some(&1));
        assert_eq!(m.len(), 4);
        assert_eq!(
            c.drop_summary(","),
            "capsule+nodeos/bandwidth=1,capsule/trap=2,no_route=1,plan/no_route=1"
        );
    }
}
