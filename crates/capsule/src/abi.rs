//! The guest ABI, version 1: export names, status and error codes, record layouts. The
//! normative description is `ABI.md` at the crate root; this module and `guest/sdk` must agree
//! with it.

/// ABI version this host implements (v2: v1 and the `file_*` imports; v1 code runs as before).
pub const ABI_VERSION: u32 = 2;

/// Import module of every host function.
pub const IMPORT_MODULE: &str = "anode";

/// Export marking a code object as built for ABI v1 (a function `() -> ()`).
pub const EXPORT_ABI_MARKER: &str = "anode_abi_v1";
/// Export marking a code object as built for ABI v2 (it may import the `file_*` functions; a
/// node speaking only v1 refuses it by this marker instead of failing to link it).
pub const EXPORT_ABI_MARKER_V2: &str = "anode_abi_v2";
/// Per-capsule entry point: `accept(payload_len: i32, why: i32) -> i32`.
pub const EXPORT_ACCEPT: &str = "accept";
/// Optional, once after instantiation: `init() -> i32` (non-zero fails the load).
pub const EXPORT_INIT: &str = "init";
/// Optional, once before the instance is discarded: `finalize() -> ()`.
pub const EXPORT_FINALIZE: &str = "finalize";
/// The guest's linear memory.
pub const EXPORT_MEMORY: &str = "memory";

/// `accept` verdicts.
pub mod verdict {
    /// Nothing more to do (the guest forwarded, delivered or consumed the capsule).
    pub const DONE: i32 = 0;
    /// Forward the capsule toward its destination.
    pub const FORWARD: i32 = 1;
    /// Drop the capsule (counted as `capsule/guest_drop`).
    pub const DROP: i32 = 2;
}

/// Why the node runs the capsule (`accept`'s second argument).
pub mod why {
    /// This node is the destination.
    pub const DESTINATION: i32 = 0;
    /// Evaluation at every hop, passing through.
    pub const EVERY_HOP: i32 = 1;
    /// The EE routes it.
    pub const ROUTE: i32 = 2;
    /// Injected by a local application.
    pub const LOCAL: i32 = 3;
}

/// Negative results of host functions.
pub mod err {
    /// No such entry.
    pub const NOT_FOUND: i32 = -1;
    /// A range outside the payload or the guest memory.
    pub const BOUNDS: i32 = -2;
    /// No current capsule (already forwarded/delivered, or called from init/finalize).
    pub const NO_CAPSULE: i32 = -3;
    /// Not enough resource bound.
    pub const RB: i32 = -4;
    /// No route.
    pub const NO_ROUTE: i32 = -5;
    /// Not allowed (unregistered port, foreign code, not a neighbor, bad flags).
    pub const DENIED: i32 = -6;
    /// Too big.
    pub const TOO_BIG: i32 = -7;
    /// Soft-state budget exhausted.
    pub const BUDGET: i32 = -8;
    /// The node refused the packet (queue full, link down, loop).
    pub const REFUSED: i32 = -9;
    /// The per-capsule action limit is reached.
    pub const LIMIT: i32 = -10;
}

/// Length of the record `cap_info` writes.
pub const INFO_LEN: usize = 104;
/// Length of a node address in guest memory (wire format).
pub const ADDR_LEN: usize = 18;
/// Length of a code hash.
pub const HASH_LEN: usize = 32;
/// Longest soft-state key.
pub const MAX_KEY: usize = 256;
/// Longest soft-state value.
pub const MAX_VALUE: usize = 16 * 1024;
/// Longest log message (longer ones are cut).
pub const MAX_LOG: usize = 256;
/// Longest file path (`file_*`, ABI v2) by default (`crate::files::FileLimits`).
pub const MAX_FILE_PATH: usize = 128;
/// Longest routing-function name `forward_by` accepts.
pub const MAX_ROUTE_NAME: usize = 64;
