//! The execution environments every anode node runs: PLAN (`anode_plan::ee::PlanEe`, Type ID
//! `TYPE_PLAN`) and capsules (`anode_capsule::CapsuleEe`, Type ID `TYPE_CAPSULE`), each under
//! the NodeOS layer (`anode_nodeos::guard::DomainGuard`) unless `[nodeos] enabled = false`.
//!
//! Contract: [`register_with`] puts both on a node or says why it could not (the capsule EE's
//! runtime or disk cache failed to open, or the NodeOS refused an EE's own policy); real nodes
//! and emulated nodes use the same function, so they speak the same EEs. The emulator's
//! nodes share one wasmtime runtime ([`emu_hook`]), keep code in memory only (every run
//! starts with cold caches) and run under the NodeOS with the default settings, so
//! `anode domains`-style reports exist there too.
//!
//! Under the NodeOS the EEs share one NodeOS (`anode_nodeos::SharedNodeOs`): one domain tree
//! whose root (`node`) holds at most `[nodeos] memory_bytes` over every EE, and under it
//! each EE's domain (principal `capsule` / `plan`), whose policy's `memory_bytes` bounds
//! everything its subtree holds; each
//! capsule protocol (code hash) and each PLAN source node is a child domain
//! (`capsule/<hex>`, `plan/<address>`; a PLAN signer the policy names, `plan/key/<hex>`:
//! `anode_nodeos::plan`). CPU (exact per run: the fuel each capsule run used,
//! the steps each PLAN call took): capsule fuel at 1 ns per unit, PLAN steps at
//! 50 ns per step (rough calibrations: they weigh the two EEs' work against each other and
//! against `[nodeos] cpu_percent`); the run-time limit of one call is the EE's own per-run
//! budget (fuel, steps).

use std::path::PathBuf;
use std::sync::Arc;

use anode_capsule::{CapsuleConfig, CapsuleEe, Runtime, RuntimeConfig, Tiering};
use anode_core::{ExecutionEnvironment, Node};
use anode_nodeos::capsule::MeteredCapsule;
use anode_nodeos::guard::{DomainGuard, GuardConfig, MeteredEe};
use anode_nodeos::plan::MeteredPlan;
use anode_nodeos::{CpuMeter, CutTable, NodeOs, NodeOsConfig, SharedNodeOs};
use anode_plan::ee::PlanEe;

use crate::config::nodeos::{CAPSULE_DEFAULT, CAPSULE_EE, NodeOsFile, PLAN_DEFAULT, PLAN_EE};
use crate::config::plan::PlanFile;

/// Picoseconds per capsule fuel unit.
const CAPSULE_PS_PER_FUEL: u64 = 1_000;
/// Picoseconds per PLAN evaluation step.
const PLAN_PS_PER_STEP: u64 = 50_000;

/// Why the EEs could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EeSetupError {
    /// The wasmtime runtime or the capsule disk cache failed.
    #[error("cannot start the capsule execution environment: {0}")]
    Capsule(#[from] anode_capsule::CapsuleError),
    /// The NodeOS refused to create an EE's own domain.
    #[error("cannot put the {ee} EE under the NodeOS: {source}; check its [{ee}] policy")]
    NodeOs {
        /// The EE's principal.
        ee: &'static str,
        /// Why.
        source: anode_nodeos::NodeOsError,
    },
}

/// The execution environments a node runs.
#[derive(Debug, Clone)]
pub struct EeOptions {
    /// The capsule EE's disk code cache (`None`: memory only).
    pub cache_dir: Option<PathBuf>,
    /// The disk code cache's bound, bytes.
    pub cache_max_bytes: u64,
    /// The largest code object the capsule EE loads or installs, bytes.
    pub max_code_bytes: u32,
    /// Bounds of each code object's files (ABI v2; `[capsule] file_quota_bytes` ...).
    pub files: anode_capsule::files::FileLimits,
    /// Threads that run capsules, the node thread included (`[capsule] workers`).
    pub workers: usize,
    /// A wasmtime runtime to share with other nodes (the emulator's); `None`: the EE makes
    /// its own (tiered: Winch first, Cranelift in the background).
    pub runtime: Option<Arc<Runtime>>,
    /// The NodeOS settings (`[nodeos]`); `enabled = false` runs the EEs bare.
    pub nodeos: NodeOsFile,
    /// The PLAN EE's trusted keys and host names (`[plan]`).
    pub plan: PlanFile,
    /// The secret PLAN's `generateKey` derives keys from; real nodes take it from the
    /// operating system's randomness, the emulator leaves it zero (deterministic runs).
    pub plan_key_seed: [u8; 32],
}

impl Default for EeOptions {
    fn default() -> EeOptions {
        EeOptions {
            cache_dir: None,
            cache_max_bytes: crate::config::DEFAULT_CACHE_MAX_BYTES,
            max_code_bytes: anode_capsule::LoaderConfig::default().max_code_bytes,
            files: anode_capsule::files::FileLimits::default(),
            workers: 1,
            runtime: None,
            nodeos: NodeOsFile::default(),
            plan: PlanFile::default(),
            plan_key_seed: [0; 32],
        }
    }
}

/// Registers the PLAN and capsule EEs on `node` under the NodeOS with default settings.
/// `cache_dir`: the capsule disk code cache (`None`: memory only); `rt`: a runtime to share
/// (`None`: a new one).
pub fn register(
    node: &mut Node,
    cache_dir: Option<PathBuf>,
    rt: Option<Arc<Runtime>>,
) -> Result<(), EeSetupError> {
    register_with(
        node,
        &EeOptions {
            cache_dir,
            runtime: rt,
            ..EeOptions::default()
        },
    )
}

/// Registers the PLAN and capsule EEs on `node` as `opts` says.
pub fn register_with(node: &mut Node, opts: &EeOptions) -> Result<(), EeSetupError> {
    let (rt, nodeos) = (opts.runtime.clone(), &opts.nodeos);
    let mut plan = PlanEe::with_defaults();
    plan.set_trusted_keys(opts.plan.trusted_keys.clone());
    plan.set_key_seed(opts.plan_key_seed);
    for (name, addr) in &opts.plan.hosts {
        plan.state_mut().names.insert(name.clone(), *addr);
    }
    let steps = plan.config().limits.steps;
    let cfg = CapsuleConfig {
        cache_dir: opts.cache_dir.clone(),
        cache_max_bytes: opts.cache_max_bytes,
        // Used when the EE makes its own runtime (a real node): new code is built on the
        // runtime's worker thread (the node thread never compiles fetched or cached code),
        // runs on Winch code at once and is recompiled by Cranelift in the background. A
        // shared runtime (the emulator's, deterministic) keeps its own setting.
        runtime: RuntimeConfig {
            tiering: Tiering::Tiered,
            build_off_thread: true,
            ..RuntimeConfig::default()
        },
        loader: anode_capsule::LoaderConfig {
            max_code_bytes: opts.max_code_bytes,
            ..anode_capsule::LoaderConfig::default()
        },
        files: opts.files,
        workers: opts.workers,
        ..CapsuleConfig::default()
    };
    let fuel = cfg.fuel;
    if !nodeos.enabled {
        let capsule = match rt {
            Some(rt) => CapsuleEe::with_runtime(rt, cfg)?,
            None => CapsuleEe::new(cfg)?,
        };
        node.register_ee(Box::new(plan));
        node.register_ee(Box::new(capsule));
        return Ok(());
    }
    // PLAN packets signed by a key the policy names (`["plan/key/<hex>"]`) belong to their
    // signer; the rest to their (unauthenticated) source.
    let keys = MeteredPlan::keys_named(nodeos.policies.iter().map(|(n, _)| n.as_str()));
    // One NodeOS for the node: one domain tree (node -> EE -> principals), one memory bound
    // over every EE, each EE's domain bounding its subtree by its policy.
    let os = SharedNodeOs::new(NodeOs::new(NodeOsConfig {
        node_memory_bytes: nodeos.memory_bytes,
        policies: nodeos.policies.clone(),
        ..NodeOsConfig::default()
    }));
    node.register_ee(guarded(
        MeteredPlan::with_keys(plan, keys),
        (nodeos, &os),
        (PLAN_EE, PLAN_DEFAULT),
        (CpuMeter::new(PLAN_PS_PER_STEP), 1),
        steps,
    )?);
    node.register_ee(guarded(
        MeteredCapsule::new(cfg, rt)?,
        (nodeos, &os),
        (CAPSULE_EE, CAPSULE_DEFAULT),
        // With workers the EE runs on that many cores: its CPU share is per core.
        (
            CpuMeter::new(CAPSULE_PS_PER_FUEL),
            u64::try_from(opts.workers.max(1)).unwrap_or(1),
        ),
        fuel,
    )?);
    // The NodeOS cutChan: EEs move flows onto the fast path (`anode channels` lists them).
    node.set_cut_through(Box::new(CutTable::with_owner_limit(
        nodeos.cut_channels,
        nodeos.cut_channels_per_domain,
        u64::MAX,
    )));
    Ok(())
}

/// `inner` under a guard on the node's NodeOS `os`: the EE's domain gets its policy share of
/// the node's memory and `[nodeos] cpu_percent` of each of the `cores` it runs on; `budget`
/// units (fuel, steps) are its run-time limit per call.
fn guarded<E: MeteredEe + 'static>(
    inner: E,
    (s, os): (&NodeOsFile, &SharedNodeOs),
    (ee, protocols): (&'static str, &str),
    (meter, cores): (CpuMeter, u64),
    budget: u64,
) -> Result<Box<dyn ExecutionEnvironment>, EeSetupError> {
    let slice = meter.to_ns(budget);
    let gc = GuardConfig {
        ee_principal: ee.into(),
        protocol_policy: s.policy(protocols),
        cpu_ns_per_sec: s.cpu_ns_per_sec.saturating_mul(cores),
        max_burst_ns: slice.saturating_mul(2).max(5_000_000),
        max_slice_ns: slice,
        meter,
        terminate: s.terminate,
        ..GuardConfig::default()
    };
    let g = DomainGuard::shared(inner, os.clone(), gc)
        .map_err(|source| EeSetupError::NodeOs { ee, source })?;
    Ok(Box::new(g))
}

/// Capsule principals ("capsule/<sha256 hex>") -> the protocol names their code declares.
pub fn code_names(node: &mut Node) -> std::collections::HashMap<String, String> {
    capsule_ee(node)
        .map(|ee| {
            ee.code_names()
                .into_iter()
                .map(|(hash, name)| (format!("capsule/{}", hex::encode(hash)), name))
                .collect()
        })
        .unwrap_or_default()
}

/// The capsule EE of `node`, if it has one (bare or under the NodeOS).
pub fn capsule_ee(node: &mut Node) -> Option<&mut CapsuleEe> {
    let any = node.ee_mut(anode_wire::anep::TYPE_CAPSULE)?.as_any_mut();
    if any.is::<CapsuleEe>() {
        return any.downcast_mut::<CapsuleEe>();
    }
    any.downcast_mut::<DomainGuard<MeteredCapsule>>()
        .map(|g| g.inner_mut().inner_mut())
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use anode_core::NodeConfig;

    use super::*;

    fn node() -> Node {
        Node::new(
            NodeConfig::new("198.18.0.1:3322".parse().unwrap()),
            Instant::now(),
        )
        .unwrap()
    }

    #[test]
    fn guarded_by_default_and_the_capsule_ee_is_still_found() {
        let mut n = node();
        register(&mut n, None, None).unwrap();
        let reports = n.domain_reports();
        let names: Vec<&str> = reports.iter().map(|r| r.ee.as_str()).collect();
        assert_eq!(names, ["plan+nodeos", "capsule+nodeos"]);
        // Each EE's own domain, under the root, with its share of the default 256 MiB.
        let total: u64 = reports.iter().map(|r| r.memory_limit).sum();
        assert_eq!(total, 256 << 20);
        assert!(reports.iter().all(|r| {
            r.domains
                .iter()
                .any(|d| d.principal == "capsule" || d.principal == "plan")
        }));
        assert!(capsule_ee(&mut n).is_some());
    }

    #[test]
    fn disabled_runs_bare() {
        let mut n = node();
        let off = EeOptions {
            nodeos: NodeOsFile {
                enabled: false,
                ..NodeOsFile::default()
            },
            ..EeOptions::default()
        };
        register_with(&mut n, &off).unwrap();
        assert!(n.domain_reports().is_empty());
        assert!(capsule_ee(&mut n).is_some());
    }
}
