//! Capsule nodes on the test kit's virtual-time network, with a fixed one-way delay per
//! link so latencies mean something.

#![allow(dead_code)]

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use anode_capsule::{CapsuleConfig, CapsuleEe, Runtime, RuntimeConfig};
use anode_core::Delivery;
use anode_core::wire::anep::TYPE_CAPSULE;
use anode_testkit::NetOptions;
pub use anode_testkit::addr;

/// A network of capsule nodes in virtual time ([`anode_testkit::Net`] with a 1 ms one-way
/// delay per wire), settled for 3 s so neighbors and routes are up.
pub struct Net(pub anode_testkit::Net);

impl Deref for Net {
    type Target = anode_testkit::Net;
    fn deref(&self) -> &anode_testkit::Net {
        &self.0
    }
}

impl DerefMut for Net {
    fn deref_mut(&mut self) -> &mut anode_testkit::Net {
        &mut self.0
    }
}

pub fn runtime() -> Arc<Runtime> {
    Runtime::new(RuntimeConfig {
        max_instances: 64,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

impl Net {
    /// `n` nodes with the given edges; every node gets a capsule EE made by `cfg(i)`.
    pub fn new(
        n: usize,
        edges: &[(usize, usize)],
        rt: &Arc<Runtime>,
        mut cfg: impl FnMut(usize) -> CapsuleConfig,
    ) -> Net {
        let opts = NetOptions {
            delay: Duration::from_millis(1),
            settle: Duration::from_secs(3),
            ..NetOptions::default()
        };
        Net(anode_testkit::Net::new(n, edges, opts, |i, node| {
            let ee = CapsuleEe::with_runtime(rt.clone(), cfg(i)).unwrap();
            node.register_ee(Box::new(ee));
        }))
    }

    pub fn line(n: usize, rt: &Arc<Runtime>) -> Net {
        let edges: Vec<(usize, usize)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        Net::new(n, &edges, rt, |_| CapsuleConfig::default())
    }

    pub fn ee(&mut self, i: usize) -> &mut CapsuleEe {
        self.nodes[i]
            .ee_mut(TYPE_CAPSULE)
            .unwrap()
            .as_any_mut()
            .downcast_mut::<CapsuleEe>()
            .unwrap()
    }

    /// Node `i`'s capsule drops for the reason named `reason` (which must be one).
    pub fn drops(&self, i: usize, reason: &str) -> u64 {
        let r = anode_core::DropReason::from_name(reason)
            .unwrap_or_else(|| panic!("{reason} is not a drop reason"));
        self.nodes[i].counters().ee_drops("capsule", r)
    }
}

/// A ping request payload (see guest/protocols/ping).
pub fn ping_payload(port: u16) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[2..4].copy_from_slice(&port.to_be_bytes());
    p
}

/// The round-trip time a ping reply carries.
pub fn ping_rtt(d: &Delivery) -> Duration {
    let p = d.payload();
    Duration::from_nanos(u64::from_be_bytes(p[12..20].try_into().unwrap()))
}
