//! The execution environments every anode node runs: PLAN (`anode_plan::ee::PlanEe`, Type ID
//! `TYPE_PLAN`) and capsules (`anode_capsule::CapsuleEe`, Type ID `TYPE_CAPSULE`).
//!
//! Contract: [`register`] puts both on a node or says why it could not (the capsule EE's
//! runtime or disk cache failed to open); real nodes and emulated nodes use the same
//! function, so they speak the same EEs. The emulator's nodes share one wasmtime runtime
//! ([`emu_hook`]) and keep code in memory only, so every run starts with cold caches.

use std::path::PathBuf;
use std::sync::Arc;

use anode_capsule::{CapsuleConfig, CapsuleEe, Runtime, RuntimeConfig};
use anode_core::Node;
use anode_plan::ee::PlanEe;

/// Why the EEs could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EeSetupError {
    /// The wasmtime runtime or the capsule disk cache failed.
    #[error("cannot start the capsule execution environment: {0}")]
    Capsule(#[from] anode_capsule::CapsuleError),
}

/// Registers the PLAN and capsule EEs on `node`. `cache_dir`: the capsule disk code cache
/// (`None`: memory only); `rt`: a runtime to share (`None`: a new one).
pub fn register(
    node: &mut Node,
    cache_dir: Option<PathBuf>,
    rt: Option<Arc<Runtime>>,
) -> Result<(), EeSetupError> {
    node.register_ee(Box::new(PlanEe::with_defaults()));
    let cfg = CapsuleConfig {
        cache_dir,
        ..CapsuleConfig::default()
    };
    let ee = match rt {
        Some(rt) => CapsuleEe::with_runtime(rt, cfg)?,
        None => CapsuleEe::new(cfg)?,
    };
    node.register_ee(Box::new(ee));
    Ok(())
}

/// The capsule EE of `node`, if it has one.
pub fn capsule_ee(node: &mut Node) -> Option<&mut CapsuleEe> {
    node.ee_mut(anode_wire::anep::TYPE_CAPSULE)?
        .as_any_mut()
        .downcast_mut::<CapsuleEe>()
}

/// Adds a node hook to `registry` that registers both EEs on every emulated node (sharing
/// one runtime). Fails if the runtime cannot be created.
pub fn emu_hook(registry: &mut anode_emu::Registry) -> Result<(), EeSetupError> {
    let rt = Runtime::new(RuntimeConfig {
        max_instances: 64,
        ..RuntimeConfig::default()
    })?;
    registry.on_node(Arc::new(move |i, node| {
        if let Err(e) = register(node, None, Some(rt.clone())) {
            tracing::error!(node = i, "{e}");
        }
    }));
    Ok(())
}
