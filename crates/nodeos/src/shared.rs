//! [`SharedNodeOs`]: one NodeOS for every EE of a node.
//!
//! A node runs several EEs, each under its own [`crate::guard::DomainGuard`]; they share one
//! NodeOS, so the node has one domain tree (root `node`, then one domain per EE, then the
//! EE's principals, groups and flows), one memory bound over all of them, one set of
//! channels and one termination record. Each EE takes only the events about domains under
//! its own ([`crate::NodeOs::poll_event_under`]).
//!
//! Contract: the guards of one node call in on the node's thread one at a time, so the lock
//! is never contended there; it is a `Mutex` only because EEs must be `Send`. No lock is
//! held across a call into an EE, a node context, or another lock.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::NodeOs;

/// See the module docs. Cloning gives another handle on the same NodeOS.
#[derive(Debug, Clone)]
pub struct SharedNodeOs(Arc<Mutex<NodeOs>>);

impl SharedNodeOs {
    /// Shares `os`.
    pub fn new(os: NodeOs) -> Self {
        SharedNodeOs(Arc::new(Mutex::new(os)))
    }

    /// The NodeOS, for one step. A guard that panicked mid-step left accounting that is at
    /// worst a step behind, never unsafe, so a poisoned lock is taken as it is.
    pub fn lock(&self) -> MutexGuard<'_, NodeOs> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
