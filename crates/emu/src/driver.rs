//! What a runner outside this crate needs to drive a topology's scenario and build its
//! report: the runner implements [`Net`](crate::Net) over its nodes, runs each step's
//! action through [`StepCtx::new`](crate::StepCtx::new) at the step's time, samples
//! [`all_pairs_reachable`] for the reachability log, and hands everything to [`assemble`].
//! The virtual-time simulator (`sim.rs`) is the reference runner; `anode_node::realtime`
//! (real nodes over loopback UDP) is the other.

pub use crate::report::{Assembly, LinkChange, assemble, link_name, us};
pub use crate::scenario::{all_pairs_reachable, record_ee_event};
pub use crate::sim::node_report;
