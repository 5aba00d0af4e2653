//! The driver's integration tests use the test kit's UDP helpers.
#![allow(unused_imports)]

pub use anode_testkit::udp::{fast_routing, free_addr, next_delivery, run, udp_node, wait_route};
