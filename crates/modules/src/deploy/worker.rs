//! Verifying and compiling deployed packages off the node's thread.
//!
//! A real node's driver starts one preparer thread ([`spawn_preparer`]) and gives its sender
//! to the node's deployment service ([`set_preparer`]). The service sends a [`PrepareJob`]
//! for each package to install; the thread verifies and compiles it (the slow part, tens of
//! milliseconds for a large module) and hands the result back to the service on the node's
//! thread through the driver's `call`, so forwarding never waits for a compiler. Without a
//! preparer (the emulator, whose virtual time does not pass while it compiles) the service
//! prepares inline. The thread ends when the node (and with it the sender) is gone.

use std::sync::Arc;
use std::sync::mpsc::{Sender, channel};
use std::time::Instant;

use anode_core::Node;
use anode_wire::anep::TYPE_DEPLOY;

use super::DeployEe;
use crate::{ModRuntime, Package, Prepared, Trust};

/// A package to verify and compile.
pub struct PrepareJob {
    /// The service's job number.
    pub id: u64,
    /// The runtime to compile with.
    pub rt: Arc<ModRuntime>,
    /// The publisher keys to verify against.
    pub trust: Trust,
    /// The package.
    pub pkg: Package,
}

impl std::fmt::Debug for PrepareJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrepareJob")
            .field("id", &self.id)
            .field("pkg", &self.pkg.id())
            .finish_non_exhaustive()
    }
}

/// Runs a job on the node's thread; false once the node is gone.
pub type NodeCall = Box<dyn Fn(Box<dyn FnOnce(&mut Node, Instant) + Send>) -> bool + Send>;

/// Starts the preparer thread; `call` runs a closure on the node's thread.
pub fn spawn_preparer(call: NodeCall) -> std::io::Result<Sender<PrepareJob>> {
    let (tx, rx) = channel::<PrepareJob>();
    std::thread::Builder::new()
        .name("anode-deploy-prep".into())
        .spawn(move || {
            for job in rx {
                let id = job.id;
                let r = Prepared::new(&job.rt, &job.trust, job.pkg, &toml::Table::new());
                let back = Box::new(move |node: &mut Node, now: Instant| {
                    node.with_ee(now, TYPE_DEPLOY, |ee, ctx| {
                        if let Some(d) = ee.as_any_mut().downcast_mut::<DeployEe>() {
                            d.prepared(ctx, id, r);
                        }
                    });
                });
                if !call(back) {
                    break;
                }
            }
        })?;
    Ok(tx)
}

/// Gives `node`'s deployment service the preparer `tx`; false if it has none.
pub fn set_preparer(node: &mut Node, tx: Sender<PrepareJob>) -> bool {
    node.ee_mut(TYPE_DEPLOY)
        .and_then(|ee| ee.as_any_mut().downcast_mut::<DeployEe>())
        .map(|d| d.set_preparer(tx))
        .is_some()
}
