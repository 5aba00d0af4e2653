//! Named routing functions a capsule may ask for (`forward_by`, see `ABI.md`).
//!
//! The node (or its service-module host) registers routing functions with
//! [`CapsuleEe::set_route`](crate::CapsuleEe::set_route) under a name; a code object calls the
//! host import `forward_by(name, flow)` and the EE asks the named function for the next hop
//! toward the capsule's destination, then forwards the capsule there exactly as `forward_via`
//! does (resource bound −1, previous hop rewritten, integrity fixed).
//!
//! Contracts:
//! - A name is 1 to [`MAX_ROUTE_NAME`](crate::abi::MAX_ROUTE_NAME) bytes of UTF-8;
//!   `set_route` refuses others and replaces an existing function of the same name.
//! - A routing function answers only from what it is given (the node's facts, the
//!   destination, the flow); it must not panic. Its answer is used only if it names an up
//!   neighbor: any other hop is treated as "no route".
//! - A guest naming a function that is not registered gets `NOT_FOUND` and keeps the
//!   capsule; the miss is counted in
//!   [`CapsuleStats::unknown_route_fn`](crate::CapsuleStats::unknown_route_fn).

use std::collections::BTreeMap;

use anode_core::{NextHop, NodeFacts};
use anode_wire::NodeAddr;

use crate::CapsuleError;
use crate::abi::MAX_ROUTE_NAME;

/// A routing function capsules may ask for by name.
pub trait CapsuleRouteFn: Send {
    /// The next hop toward `dst` for a capsule of flow `flow`, or `None` for no route.
    fn next_hop(&mut self, node: &dyn NodeFacts, dst: NodeAddr, flow: u64) -> Option<NextHop>;
}

/// The registered routing functions, by name.
#[derive(Default)]
pub(crate) struct RouteTable {
    fns: BTreeMap<String, Box<dyn CapsuleRouteFn>>,
}

impl std::fmt::Debug for RouteTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.fns.keys()).finish()
    }
}

impl RouteTable {
    pub fn set(&mut self, name: &str, f: Box<dyn CapsuleRouteFn>) -> Result<(), CapsuleError> {
        if name.is_empty() || name.len() > MAX_ROUTE_NAME {
            return Err(CapsuleError::RouteName {
                name: name.chars().take(MAX_ROUTE_NAME).collect(),
                reason: format!("a name is 1 to {MAX_ROUTE_NAME} bytes"),
            });
        }
        self.fns.insert(name.to_string(), f);
        Ok(())
    }

    pub fn remove(&mut self, name: &str) -> bool {
        self.fns.remove(name).is_some()
    }

    pub fn names(&self) -> Vec<String> {
        self.fns.keys().cloned().collect()
    }

    /// The function registered under the name `name` (raw guest bytes), if any. Work is
    /// bounded by [`MAX_ROUTE_NAME`] whatever the guest's length.
    pub fn get_mut(&mut self, name: &[u8]) -> Option<&mut Box<dyn CapsuleRouteFn>> {
        if name.len() > MAX_ROUTE_NAME {
            return None;
        }
        let name = std::str::from_utf8(name).ok()?;
        self.fns.get_mut(name)
    }
}
