//! The WebAssembly runtime: wasmtime [`Engine`]s (pooling instance allocator, fuel metering)
//! and their [`Linker`]s holding the host imports, shared by any number of EEs (e.g. every
//! node of an emulated network).
//!
//! Tiers ([`Tiering`]): the *optimized* engine compiles with Cranelift (fast code, slow to
//! compile: about a second for a 100 KB module); the *baseline* engine compiles with Winch,
//! wasmtime's single-pass compiler (tens of times faster to compile, slower code). With
//! [`Tiering::Tiered`] new code is compiled by Winch so its first capsules run within
//! milliseconds, and recompiled by Cranelift on the runtime's worker thread (`worker.rs`); the EE
//! swaps the code object when the result arrives. With [`RuntimeConfig::build_off_thread`] the
//! worker also builds new code (fetched or read from disk) so the node thread never compiles
//! it ([`Runtime::build_module`] is what it runs). Both engines have the same pooling limits,
//! fuel metering and host imports; fuel is counted per WebAssembly operator by both, but the
//! two compilers may place the checks differently, so one run's fuel may differ slightly
//! between tiers. The disk cache holds optimized artifacts only.
//!
//! A [`CodeObject`] is a compiled, ABI-checked module with its `InstancePre` (imports resolved
//! once). A [`Live`] is one instantiation of it in its own [`Store`], which persists across
//! capsules so a code object's globals and linear memory are its private, per-node state (PAN:
//! "static variables persist for the code object's lifetime in the node"). After a trap the
//! instance is discarded (its shadow stack and invariants are unknown) and re-created from the
//! `InstancePre` on next use.
//!
//! Invariants:
//! - A code object's name is the SHA-256 of its bytes; [`Runtime::compile`] computes it, it is
//!   never taken from the network.
//! - Every store has an [`anode_wasm::Limits`] resource limiter (memory and table growth
//!   beyond the bound trap with a recorded reason) and fuel metering is always on; the engine
//!   settings both tiers share with service modules are [`anode_wasm::engine::config`], to
//!   which each tier adds its compiler and whether it compiles in parallel.

use std::fmt;
use std::sync::Arc;

use anode_wasm::{Limits, Pool};
use sha2::{Digest, Sha256};
use wasmtime::{
    Engine, ExternType, InstancePre, Linker, Module, Store, Strategy, TypedFunc, ValType,
};

use crate::abi;
use crate::host::HostState;
use crate::report::{RunOutcome, RunReport, outcome_of_error};
use crate::{CapsuleError, CodeHash};

/// Which compilers a runtime uses for new code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tiering {
    /// Cranelift only: new code runs optimized from its first capsule, after a full compile.
    /// No threads; deterministic (the emulator's choice).
    #[default]
    Optimized,
    /// Winch only: new code compiles fast and never tiers up (for measuring baseline code).
    Baseline,
    /// Winch first, Cranelift in the background on the runtime's worker thread; the EE swaps
    /// in the optimized code when it is ready (real nodes).
    Tiered,
}

/// The tier a code object was compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeTier {
    /// Winch code, baseline engine.
    Baseline,
    /// Cranelift code, optimized engine.
    Optimized,
}

/// Bounds of the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Largest linear memory of one instance, bytes.
    pub max_memory_bytes: usize,
    /// Most table elements of one instance.
    pub max_table_elements: usize,
    /// Instances that may be live at once in this runtime (pooling allocator slots, per
    /// engine).
    pub max_instances: u32,
    /// Compilers for new code.
    pub tiering: Tiering,
    /// Whether code fetched from neighbors or read from the disk cache is built (hash
    /// checked, compiled, ABI checked, written to or read from the disk cache) on the
    /// runtime's worker thread, the capsules that need it parked meanwhile, rather than on
    /// the thread that calls the EE. Real nodes: a large module compiling does not stall
    /// forwarding. Off for the emulator: when code becomes ready must not depend on a thread.
    pub build_off_thread: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            max_memory_bytes: 4 << 20,
            max_table_elements: 10_000,
            max_instances: 256,
            tiering: Tiering::Optimized,
            build_off_thread: false,
        }
    }
}

/// One engine (one compiler) and its host-import linker.
pub(crate) struct Tier {
    pub engine: Engine,
    pub linker: Linker<HostState>,
}

/// The engines, their host-import linkers and the tier-up worker.
pub struct Runtime {
    /// Cranelift: the disk cache's engine, and every code object's with `Tiering::Optimized`.
    pub(crate) opt: Tier,
    /// Winch (`Tiering::Baseline` and `Tiering::Tiered`).
    base: Option<Tier>,
    cfg: RuntimeConfig,
    compat: String,
    /// Builds code in the background (`Tiering::Tiered` or `build_off_thread`).
    pub(crate) worker: Option<crate::worker::Worker>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime").field("cfg", &self.cfg).finish()
    }
}

/// A compiled, ABI-checked code object.
pub struct CodeObject {
    /// Its name: SHA-256 of `wasm`.
    pub hash: CodeHash,
    /// The module's bytes (served to neighbors that ask).
    pub wasm: Arc<[u8]>,
    pub(crate) module: Module,
    pub(crate) pre: InstancePre<HostState>,
    /// The engine `module` belongs to.
    pub tier: CodeTier,
    pub(crate) has_init: bool,
    pub(crate) has_finalize: bool,
    /// Code objects it imports from (`code:<hash>` import modules), in first-import order.
    pub deps: Vec<CodeHash>,
    /// Bytes it holds in memory (module bytes + compiled image), for the cache's budget.
    pub cost: usize,
    /// The protocol's name from its `anode.name` section ([`protocol_name`]), read once here.
    pub name: Option<String>,
}

impl fmt::Debug for CodeObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CodeObject")
            .field("hash", &hex::encode(self.hash))
            .field("wasm_len", &self.wasm.len())
            .field("tier", &self.tier)
            .field("cost", &self.cost)
            .finish()
    }
}

/// One live instance of a code object, in its own store.
pub(crate) struct Live {
    pub store: Store<HostState>,
    pub accept: TypedFunc<(i32, i32), i32>,
    pub finalize: Option<TypedFunc<(), ()>>,
}

impl Live {
    /// Runs the code object's `finalize` (if it exports one) with a budget of `fuel`, before
    /// the instance is discarded; whatever it does, the instance goes.
    pub fn finalize(mut self, fuel: u64) {
        if let Some(fin) = self.finalize {
            let _ = self.store.set_fuel(fuel);
            let _ = fin.call(&mut self.store, ());
        }
    }
}

impl fmt::Debug for Live {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Live").finish_non_exhaustive()
    }
}

/// SHA-256 of `bytes`.
pub fn code_hash(bytes: &[u8]) -> CodeHash {
    Sha256::digest(bytes).into()
}

impl Runtime {
    /// A runtime with the given bounds.
    pub fn new(cfg: RuntimeConfig) -> Result<Arc<Runtime>, CapsuleError> {
        let opt = Self::tier(&cfg, Strategy::Cranelift)?;
        let base = match cfg.tiering {
            Tiering::Optimized => None,
            Tiering::Baseline | Tiering::Tiered => Some(Self::tier(&cfg, Strategy::Winch)?),
        };
        let compat = {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            opt.engine.precompile_compatibility_hash().hash(&mut h);
            format!("{:016x}", h.finish())
        };
        let worker = (cfg.tiering == Tiering::Tiered || cfg.build_off_thread)
            .then(crate::worker::Worker::new);
        Ok(Arc::new(Runtime {
            opt,
            base,
            cfg,
            compat,
            worker,
        }))
    }

    fn tier(cfg: &RuntimeConfig, strategy: Strategy) -> Result<Tier, CapsuleError> {
        let mut c = anode_wasm::engine::config(&Pool {
            max_instances: cfg.max_instances,
            max_memory_bytes: cfg.max_memory_bytes,
            max_table_elements: cfg.max_table_elements,
        });
        // Winch compiles functions on every core: new code waits for it. Cranelift does so
        // only when nothing runs before it (`Tiering::Optimized`); as a background tier-up it
        // stays on its one worker thread, leaving the other cores to the node. Built off the
        // node thread, new code compiles on that one thread too: capsules wait for it, but
        // forwarding keeps its core.
        let parallel = !cfg.build_off_thread
            && (strategy == Strategy::Winch || cfg.tiering == Tiering::Optimized);
        c.strategy(strategy).parallel_compilation(parallel);
        let engine =
            Engine::new(&c).map_err(|e| CapsuleError::Engine(format!("{strategy:?}: {e:#}")))?;
        let mut linker = Linker::new(&engine);
        crate::host::define_imports(&mut linker)
            .map_err(|e| CapsuleError::Engine(e.to_string()))?;
        Ok(Tier { engine, linker })
    }

    fn engine_of(&self, tier: CodeTier) -> &Tier {
        match (tier, &self.base) {
            (CodeTier::Baseline, Some(b)) => b,
            _ => &self.opt,
        }
    }

    /// The tier new code is compiled for first.
    pub fn first_tier(&self) -> CodeTier {
        match self.cfg.tiering {
            Tiering::Optimized => CodeTier::Optimized,
            Tiering::Baseline | Tiering::Tiered => CodeTier::Baseline,
        }
    }

    /// The runtime's bounds.
    pub fn config(&self) -> RuntimeConfig {
        self.cfg
    }

    /// A string naming everything that makes a serialized artifact usable by this engine.
    pub(crate) fn compat(&self) -> &str {
        &self.compat
    }

    /// Compiles `wasm` for its first tier ([`Runtime::first_tier`]; code objects with
    /// dependencies are always optimized: a group shares one store, so one engine) and checks
    /// it against the ABI.
    pub fn compile(&self, wasm: &[u8]) -> Result<CodeObject, CapsuleError> {
        let (module, tier) = self.build_module(wasm)?;
        self.code_object(code_hash(wasm), Arc::from(wasm), module, tier)
    }

    /// The thread-independent part of [`Runtime::compile`]: compiles `wasm` for its first tier
    /// (optimized if it has dependencies) and checks the module against the ABI. The code
    /// worker runs it; [`Runtime::code_object`] finishes the job on the EE's thread.
    pub(crate) fn build_module(&self, wasm: &[u8]) -> Result<(Module, CodeTier), CapsuleError> {
        let mut tier = self.first_tier();
        let mut module = self.module_for(wasm, tier)?;
        let (_, _, deps) = check_abi(&module)?;
        if tier == CodeTier::Baseline && !deps.is_empty() {
            tier = CodeTier::Optimized;
            module = self.module_for(wasm, tier)?;
        }
        Ok((module, tier))
    }

    /// Compiles `wasm` with `tier`'s engine (no ABI check).
    pub(crate) fn module_for(&self, wasm: &[u8], tier: CodeTier) -> Result<Module, CapsuleError> {
        Module::new(&self.engine_of(tier).engine, wasm)
            .map_err(|e| CapsuleError::Compile(format!("{e:#}")))
    }

    /// Compiles `wasm` for `tier` and checks it against the ABI.
    pub fn compile_tier(&self, wasm: &[u8], tier: CodeTier) -> Result<CodeObject, CapsuleError> {
        let module = self.module_for(wasm, tier)?;
        self.code_object(code_hash(wasm), Arc::from(wasm), module, tier)
    }

    /// Wraps an already compiled (or deserialized) module of `tier`'s engine.
    pub(crate) fn code_object(
        &self,
        hash: CodeHash,
        wasm: Arc<[u8]>,
        module: Module,
        tier: CodeTier,
    ) -> Result<CodeObject, CapsuleError> {
        let (has_init, has_finalize, deps) = check_abi(&module)?;
        let linker = &self.engine_of(tier).linker;
        let pre = if deps.is_empty() {
            linker.instantiate_pre(&module)
        } else {
            let mut l = linker.clone();
            for imp in module.imports() {
                let Some(dep) = dep_of(imp.module()) else {
                    continue;
                };
                let ExternType::Func(ty) = imp.ty() else {
                    return Err(CapsuleError::Abi {
                        reason: format!(
                            "import `{}` from a code object is not a function",
                            imp.name()
                        ),
                    });
                };
                let name: Arc<str> = Arc::from(imp.name());
                l.func_new(
                    imp.module(),
                    imp.name(),
                    ty,
                    move |mut c, params, results| {
                        crate::host::call_dep(&mut c, &dep, &name, params, results)
                    },
                )
                .map_err(|e| CapsuleError::Abi {
                    reason: format!("imports: {e:#}"),
                })?;
            }
            l.instantiate_pre(&module)
        }
        .map_err(|e| CapsuleError::Abi {
            reason: format!("imports: {e:#}"),
        })?;
        let image = module.image_range();
        let cost = wasm.len() + (image.end as usize).saturating_sub(image.start as usize);
        let name = protocol_name(&wasm);
        Ok(CodeObject {
            name,
            hash,
            wasm,
            module,
            pre,
            tier,
            has_init,
            has_finalize,
            deps,
            cost,
        })
    }

    /// Instantiates a code object in a fresh store, after its dependencies (`deps`: every
    /// code object it needs, transitively, dependencies before their dependents), and runs
    /// each one's `init` (each with a budget of `fuel`), appending a [`RunReport`] per `init`
    /// to `runs` if given.
    pub(crate) fn instantiate(
        &self,
        obj: &CodeObject,
        deps: &[Arc<CodeObject>],
        fuel: u64,
        mut runs: Option<&mut Vec<RunReport>>,
    ) -> Result<Live, CapsuleError> {
        let ierr = |e: wasmtime::Error| {
            if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
                .is_some()
            {
                CapsuleError::NoInstanceSlot
            } else {
                CapsuleError::Instantiate(format!("{e:#}"))
            }
        };
        let limits = Limits::new(
            self.cfg.max_memory_bytes,
            self.cfg.max_table_elements,
            deps.len() + 1,
        );
        if deps.iter().any(|d| d.tier != obj.tier) {
            return Err(CapsuleError::Instantiate(
                "a dependency is compiled for another tier".into(),
            ));
        }
        let engine = &self.engine_of(obj.tier).engine;
        let mut store = Store::new(engine, HostState::new(obj.hash, limits));
        store.limiter(|s| &mut s.limits);
        store.set_fuel(fuel).map_err(ierr)?;
        for d in deps {
            let inst = d.pre.instantiate(&mut store).map_err(ierr)?;
            let mem = inst
                .get_memory(&mut store, abi::EXPORT_MEMORY)
                .ok_or_else(|| CapsuleError::Instantiate("no memory export".into()))?;
            store.data_mut().deps.push(crate::host::DepInstance {
                hash: d.hash,
                instance: inst,
                mem,
            });
            if d.has_init {
                store.data_mut().code = d.hash;
                store.data_mut().mem = Some(mem);
                let f = inst
                    .get_typed_func::<(), i32>(&mut store, abi::EXPORT_INIT)
                    .map_err(ierr)?;
                run_init(&mut store, f, d.hash, fuel, runs.as_deref_mut())?;
            }
        }
        store.data_mut().code = obj.hash;
        let inst = obj.pre.instantiate(&mut store).map_err(ierr)?;
        let mem = inst
            .get_memory(&mut store, abi::EXPORT_MEMORY)
            .ok_or_else(|| CapsuleError::Instantiate("no memory export".into()))?;
        store.data_mut().mem = Some(mem);
        let accept = inst
            .get_typed_func::<(i32, i32), i32>(&mut store, abi::EXPORT_ACCEPT)
            .map_err(ierr)?;
        if obj.has_init {
            let init = inst
                .get_typed_func::<(), i32>(&mut store, abi::EXPORT_INIT)
                .map_err(ierr)?;
            run_init(&mut store, init, obj.hash, fuel, runs)?;
        }
        let finalize = if obj.has_finalize {
            inst.get_typed_func::<(), ()>(&mut store, abi::EXPORT_FINALIZE)
                .ok()
        } else {
            None
        };
        Ok(Live {
            store,
            accept,
            finalize,
        })
    }
}

/// Runs one `init` export with a fresh budget of `fuel`, records it in `runs` (if given), and
/// turns a non-zero result or a trap into an instantiation error.
fn run_init(
    store: &mut Store<HostState>,
    init: TypedFunc<(), i32>,
    code: CodeHash,
    fuel: u64,
    runs: Option<&mut Vec<RunReport>>,
) -> Result<(), CapsuleError> {
    store.data_mut().limits.clear_hit();
    store
        .set_fuel(fuel)
        .map_err(|e| CapsuleError::Instantiate(format!("{e:#}")))?;
    let r = init.call(&mut *store, ());
    if let Some(runs) = runs {
        let outcome = match &r {
            Ok(0) => RunOutcome::Completed,
            Ok(_) => RunOutcome::InitFailed,
            Err(e) => outcome_of_error(e, store.data().limits.hit()),
        };
        runs.push(RunReport {
            code,
            fuel_used: fuel.saturating_sub(store.get_fuel().unwrap_or(0)),
            outcome,
            tx_bytes: 0,
        });
    }
    match r {
        Ok(0) => Ok(()),
        Ok(r) => Err(CapsuleError::Instantiate(format!("init returned {r}"))),
        Err(e) => Err(CapsuleError::Instantiate(format!("init: {e:#}"))),
    }
}

/// Prefix of import modules that name a dependency: `code:<64 hex digits>`.
pub const DEP_PREFIX: &str = "code:";

/// The code object an import module names, if it is a dependency.
pub(crate) fn dep_of(module: &str) -> Option<CodeHash> {
    let hex = module.strip_prefix(DEP_PREFIX)?;
    let mut h = [0u8; 32];
    hex::decode_to_slice(hex, &mut h).ok()?;
    Some(h)
}

/// Most direct dependencies of one code object.
pub const MAX_DEPS: usize = 8;

/// Checks the exports ABI v1 requires; returns whether `init` and `finalize` are present, and
/// the dependencies.
fn check_abi(module: &Module) -> Result<(bool, bool, Vec<CodeHash>), CapsuleError> {
    let bad = |reason: String| Err(CapsuleError::Abi { reason });
    let func_sig = |name: &str| -> Option<(Vec<ValType>, Vec<ValType>)> {
        match module.get_export(name)? {
            ExternType::Func(f) => Some((f.params().collect(), f.results().collect())),
            _ => None,
        }
    };
    let is_i32 = |v: &[ValType]| v.iter().all(|t| matches!(t, ValType::I32));
    let marker = |name| matches!(func_sig(name), Some((p, r)) if p.is_empty() && r.is_empty());
    if !marker(abi::EXPORT_ABI_MARKER) && !marker(abi::EXPORT_ABI_MARKER_V2) {
        return bad(format!(
            "no `{}` or `{}` marker function",
            abi::EXPORT_ABI_MARKER,
            abi::EXPORT_ABI_MARKER_V2
        ));
    }
    match func_sig(abi::EXPORT_ACCEPT) {
        Some((p, r)) if p.len() == 2 && r.len() == 1 && is_i32(&p) && is_i32(&r) => {}
        _ => return bad("no `accept(i32, i32) -> i32` export".into()),
    }
    if !matches!(
        module.get_export(abi::EXPORT_MEMORY),
        Some(ExternType::Memory(_))
    ) {
        return bad("no exported `memory`".into());
    }
    let has_init = match func_sig(abi::EXPORT_INIT) {
        None => false,
        Some((p, r)) if p.is_empty() && r.len() == 1 && is_i32(&r) => true,
        Some(_) => return bad("`init` must be `() -> i32`".into()),
    };
    let has_finalize = match func_sig(abi::EXPORT_FINALIZE) {
        None => false,
        Some((p, r)) if p.is_empty() && r.is_empty() => true,
        Some(_) => return bad("`finalize` must be `() -> ()`".into()),
    };
    let mut deps = Vec::new();
    for imp in module.imports() {
        if imp.module() == abi::IMPORT_MODULE {
            continue;
        }
        let Some(d) = dep_of(imp.module()) else {
            return bad(format!(
                "import from module `{}` (only `{}` and `{DEP_PREFIX}<hash>` exist)",
                imp.module(),
                abi::IMPORT_MODULE
            ));
        };
        if !deps.contains(&d) {
            deps.push(d);
        }
    }
    if deps.len() > MAX_DEPS {
        return bad(format!("{} dependencies, at most {MAX_DEPS}", deps.len()));
    }
    Ok((has_init, has_finalize, deps))
}

/// The protocol's name a module declares in its `anode.name` custom section
/// (`anode_sdk::protocol_name!`), if it has one that is printable UTF-8 of at most 64
/// bytes. Never fails: a module without one, or bytes that are not a module, have no name.
pub fn protocol_name(wasm: &[u8]) -> Option<String> {
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload {
            Ok(wasmparser::Payload::CustomSection(c)) if c.name() == "anode.name" => {
                let name = std::str::from_utf8(c.data()).ok()?;
                let ok = !name.is_empty()
                    && name.len() <= 64
                    && name.chars().all(|ch| ch.is_ascii_graphic() || ch == ' ');
                return ok.then(|| name.to_string());
            }
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

#[cfg(test)]
mod name_tests {
    use super::protocol_name;
    use crate::protocols;

    #[test]
    fn shipped_protocols_carry_their_names() {
        for (wasm, name) in [
            (protocols::PING, "ping"),
            (protocols::TRACEROUTE, "traceroute"),
            (protocols::FLOOD, "flood"),
            (protocols::FORWARD, "forward"),
        ] {
            assert_eq!(protocol_name(wasm).as_deref(), Some(name));
        }
        assert_eq!(protocol_name(b"not wasm"), None);
        let unnamed = wat::parse_str("(module)").unwrap();
        assert_eq!(protocol_name(&unnamed), None);
    }
}
