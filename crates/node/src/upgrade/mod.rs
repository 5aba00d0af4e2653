//! `anode upgrade`: a running node's process replaced by a new one (a new `anode` binary:
//! the built-in EEs are native code, so a new version of them is a new executable) without
//! losing a packet the node accepted and without relearning its routes.
//!
//! ## The hand-over, step by step
//! 1. The old process (`old.rs`, on the thread that waits in [`RunningNode::wait`]) starts
//!    the new binary with its own command line plus `--upgrade-fd N`: descriptor `N` is one
//!    end of a Unix socket pair, the only thing the child inherits. The child builds the node
//!    from the same config (EEs, modules from the journal, NodeOS) but binds nothing
//!    (`new.rs`), and says [`Hello`].
//! 2. The old process sends the module bytes of every code object in its capsule memory
//!    cache; the new one verifies and compiles them ([`Prepared`]). The node runs on
//!    meanwhile: this is the slow part, and it happens before the pause.
//! 3. The old process pauses its data path (`anode_io::NodeHandle::pause`: it sends what is
//!    queued and reads nothing more; what arrives waits in the socket buffer), stops
//!    accepting control connections, takes the node's state
//!    (`anode_core::handover::NodeHandover`) and sends it with its sockets (UDP, control,
//!    metrics, remote management) as `SCM_RIGHTS` ([`StateMsg`]).
//! 4. The new process takes the state over (`Node::take_over`: routes first, then the
//!    packets the EEs held re-enter), starts its data path on the inherited UDP socket and
//!    its servers on the inherited listeners, and says [`TookOver`]. The old process
//!    answers the client and retires: it closes its connections, keeps the socket file
//!    (the new process serves it) and waits for its successor, passing SIGINT and SIGTERM
//!    on, so whoever started it (a shell, a supervisor, a test) still holds the right pid.
//!    The new process dies with it if it is killed (`PR_SET_PDEATHSIG`).
//! 5. Any failure before [`TookOver`] (the binary does not start, refuses the config or the
//!    state, times out) kills the child and resumes the old process where it paused: the
//!    upgrade fails, the node goes on.
//!
//! What does not carry over: connections of local applications (`anode listen`, port
//! holders: they reconnect), the NodeOS domains (they end with the old process; the new one
//! creates them afresh, but a banned principal stays banned), cut-through channels (flows
//! open them again), counters (they start at zero, like after a restart).

pub mod frame;
pub(crate) mod new;
pub(crate) mod old;

use anode_core::handover::{NodeHandover, TakeoverReport};

pub use new::Inherited;
pub use new::{Successor, SuccessorError};
pub use old::{UpgradeError, UpgradeRequest, follow_successor};

/// The `anode node` flag that names the inherited descriptor.
pub const FD_FLAG: &str = "--upgrade-fd";

/// Successor -> old: it runs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Hello {
    pub pid: u32,
    pub version: String,
}

/// Successor -> old: the code objects are built.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Prepared {
    pub built: usize,
    /// Code objects it could not build, and why (their capsules fetch them again).
    pub failed: Vec<String>,
}

/// Which listeners follow the UDP socket in a [`StateMsg`]'s descriptors, in this order.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Sockets {
    pub control: bool,
    pub metrics: bool,
    pub remote: bool,
}

/// Old -> successor: the node's state; its descriptors are the UDP socket and then the
/// listeners [`Sockets`] names.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct StateMsg {
    pub node: NodeHandover,
    pub sockets: Sockets,
}

/// Successor -> old: it runs the node.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct TookOver {
    pub pid: u32,
    pub version: String,
    pub report: TakeoverReport,
}

/// Either way: giving up.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Failed {
    /// Why.
    pub message: String,
}

impl Failed {
    /// A reason.
    pub fn new(m: impl Into<String>) -> Failed {
        Failed { message: m.into() }
    }
}

/// This program's version as a node reports it.
pub(crate) fn version() -> String {
    format!("anode {}", env!("CARGO_PKG_VERSION"))
}
