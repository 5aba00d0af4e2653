//! [`CapsuleEe`]: the execution environment for ANEP Type ID `TYPE_CAPSULE`.
//!
//! Per capsule: parse the capsule header, find the code object in the memory cache (or load it
//! from the disk cache), run its `accept` with a fresh fuel budget on the code object's live
//! instance, and act on the verdict. A capsule whose code is missing is parked while the code
//! is demand-loaded (`loader.rs`).
//!
//! Contracts:
//! - Every capsule handed in ends in exactly one of: forwarded, delivered, consumed by its
//!   code (counted in [`CapsuleStats::consumed`]), parked (and later one of these), or a drop
//!   counted under `capsule/<reason>` in the node's counters. Reasons: `bad_header`,
//!   `fuel_exhausted`, `memory_limit`, `trap`, `guest_drop`, `bad_verdict`,
//!   `instantiate_failed`, `park_full`, `no_code_source`, `code_unavailable`, `load_timeout`,
//!   `code_too_big`, `code_hash_mismatch`, `code_invalid`, `deps_too_deep`.
//! - A code object's dependencies (`code:<hash>` imports) are demand-loaded like its own
//!   code and instantiated, dependencies first, in the same store.
//! - A failing capsule never stops the node: a trapped instance is discarded and re-created
//!   on next use; other capsules and the fast path go on.
//! - Code bytes from the network are used only if their SHA-256 equals the name asked for.
//! - Routing functions registered with [`CapsuleEe::set_route`] answer `forward_by` calls of
//!   every code object; removing one makes later calls naming it `NOT_FOUND` (the capsule
//!   stays with its code, which decides).
//! - Tier-up (with [`Tiering::Tiered`](crate::Tiering::Tiered)): code compiled by Winch is
//!   sent to the runtime's worker for Cranelift; the result is taken at the next
//!   `handle_packet` or `handle_timeout` (the EE asks for a timeout every
//!   [`WORKER_POLL`] while a recompile is pending) and swapped in: the code object is replaced,
//!   its live instance finalized and re-created from the optimized code at its next capsule
//!   (as after losing its instance slot), and its soft state is kept. Capsules never wait for
//!   a tier-up.
//! - Built off the node thread (with
//!   [`RuntimeConfig::build_off_thread`](crate::RuntimeConfig::build_off_thread), `ee/build.rs`):
//!   fetched and disk-cached code is built by the runtime's worker while its capsules wait;
//!   the node thread only wraps the result. Otherwise (the emulator) it is built inline, so
//!   when code becomes ready depends only on virtual time.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use anode_core::{DropReason, EeHeader, EePacket, ExecutionEnvironment, LinkId, NodeContext};
use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_CAPSULE;
use anode_wire::control::Control;

use crate::cache::{DiskCache, DiskHit, MemCache};
use crate::files::FileStore;
use crate::host::{CallEnv, Reach};
use crate::loader::{Loader, LoaderConfig, Park, Parked, Step};
use crate::report::RunReport;
use crate::route::{CapsuleRouteFn, RouteTable};
use crate::runtime::{CodeObject, CodeTier, Runtime, RuntimeConfig, code_hash};
use crate::softstate::SoftState;
use crate::{CapsuleError, CodeHash, PortTable};

mod batch;
mod build;
mod handover;
mod helpers;
mod run;

pub use batch::MAX_BATCH;
pub use build::{BuiltCode, CodeInstaller};

/// How often the EE looks for the code worker's answers while it owes one.
pub const WORKER_POLL: Duration = Duration::from_millis(1);

/// Deepest dependency chain below a capsule's code object.
pub const MAX_DEP_DEPTH: usize = 4;
/// Most code objects instantiated together for one capsule's code (its dependencies).
pub const MAX_GROUP: usize = 16;

/// Why a code object's group cannot be instantiated yet.
#[derive(Debug)]
enum Missing {
    /// This code object must be loaded first.
    Code(CodeHash),
    /// The dependency graph is deeper or larger than allowed.
    TooDeep,
}

/// Configuration of a capsule EE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapsuleConfig {
    /// Runtime bounds (used when the EE creates its own runtime).
    pub runtime: RuntimeConfig,
    /// Fuel for one `accept` call (about one unit per WebAssembly instruction).
    pub fuel: u64,
    /// Sends and copies one capsule may make.
    pub max_actions: u32,
    /// Memory cache budget, bytes (module bytes + compiled code).
    pub mem_cache_bytes: usize,
    /// Soft-state budget of the node, bytes.
    pub soft_state_bytes: usize,
    /// Soft-state budget of one code object, bytes.
    pub soft_state_per_code: usize,
    /// Data bytes per `CodeChunk` (must fit the links' MTU with 56 bytes of headers).
    pub chunk_size: usize,
    /// Most bytes answered to one `CodeRequest`.
    pub serve_max: u32,
    /// How much code neighbors may take (`serve.rs`: owed code at a rate, other code at most
    /// ten times the bytes asked with).
    pub serve: crate::ServeConfig,
    /// Demand loading.
    pub loader: LoaderConfig,
    /// Directory of the disk cache (`None`: memory only).
    pub cache_dir: Option<PathBuf>,
    /// The disk cache's bound in bytes (least recently used code objects are evicted).
    pub cache_max_bytes: u64,
    /// Record a [`RunReport`] per `accept`/`init` run, drained with
    /// [`CapsuleEe::drain_runs`] (default off: the per-capsule path then does no extra work).
    pub record_runs: bool,
    /// Bounds of each code object's files (ABI v2, `files.rs`); with a `cache_dir` they are
    /// kept in its `files/` directory (the cache's scan passes over subdirectories).
    pub files: crate::files::FileLimits,
    /// Threads that run capsules, the node thread included (`ee/batch.rs`). 1 (the
    /// default): each capsule runs when it comes, on the node thread; more: capsules are run
    /// in batches, a code object's on one thread at a time, different ones in parallel.
    pub workers: usize,
}

impl Default for CapsuleConfig {
    fn default() -> Self {
        CapsuleConfig {
            runtime: RuntimeConfig::default(),
            fuel: 1_000_000,
            max_actions: 16,
            mem_cache_bytes: 64 << 20,
            soft_state_bytes: 4 << 20,
            soft_state_per_code: 1 << 20,
            chunk_size: 1200,
            serve_max: 64 * 1024,
            serve: crate::ServeConfig::default(),
            loader: LoaderConfig::default(),
            cache_dir: None,
            cache_max_bytes: 256 << 20,
            record_runs: false,
            files: crate::files::FileLimits::default(),
            workers: 1,
        }
    }
}

impl CapsuleStats {
    /// Records one demand load that took `took`.
    pub fn note_load(&mut self, took: Duration) {
        self.last_load = Some(took);
        let ms = took.as_secs_f64() * 1e3;
        let i = LOAD_BUCKETS_MS
            .iter()
            .position(|b| ms <= *b as f64)
            .unwrap_or(LOAD_BUCKETS_MS.len());
        if let Some(b) = self.load_buckets.get_mut(i) {
            *b += 1;
        }
        self.load_ns_sum = self
            .load_ns_sum
            .saturating_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
    }

    /// The demand-load histogram for Prometheus: (sum in seconds, count, (upper bound in
    /// seconds, count in that bucket) with `+Inf` (f64::MAX, as prometheus-client writes it) last).
    pub fn load_histogram(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let bounds = LOAD_BUCKETS_MS
            .iter()
            .map(|ms| *ms as f64 / 1e3)
            .chain([f64::MAX]);
        let buckets: Vec<(f64, u64)> = bounds.zip(self.load_buckets).collect();
        let count = self.load_buckets.iter().sum();
        (self.load_ns_sum as f64 / 1e9, count, buckets)
    }
}

/// Upper bounds of [`CapsuleStats::load_buckets`], milliseconds.
pub const LOAD_BUCKETS_MS: [u64; 9] = [1, 2, 5, 10, 20, 50, 100, 500, 2000];

/// What the EE did, for reports and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapsuleStats {
    /// Capsules handed to the EE.
    pub capsules: u64,
    /// `accept` calls.
    pub runs: u64,
    /// Capsules consumed by their code (verdict DONE with the capsule still held).
    pub consumed: u64,
    /// Traps (fuel, memory, other), each followed by a fresh instance.
    pub traps: u64,
    /// Modules compiled from bytes.
    pub compiled: u64,
    /// Modules deserialized from the disk cache.
    pub disk_loads: u64,
    /// Demand loads completed.
    pub loads_completed: u64,
    /// Demand loads failed.
    pub load_failures: u64,
    /// Code requests sent.
    pub requests_sent: u64,
    /// Code chunks received.
    pub chunks_received: u64,
    /// Code chunks sent to neighbors.
    pub chunks_served: u64,
    /// `CodeUnavailable` answers sent.
    pub unavailable_sent: u64,
    /// Time from the first parked capsule to running code, of the last demand load.
    pub last_load: Option<Duration>,
    /// Demand-load times by [`LOAD_BUCKETS_MS`] (not cumulative; the last counts the rest).
    pub load_buckets: [u64; LOAD_BUCKETS_MS.len() + 1],
    /// Sum of all demand-load times, ns.
    pub load_ns_sum: u64,
    /// Code objects swapped from baseline (Winch) to optimized (Cranelift) code.
    pub tier_ups: u64,
    /// Tier-up compiles that failed or could not be started (the code stays baseline).
    pub tier_up_failures: u64,
    /// `forward_by` calls naming no registered routing function.
    pub unknown_route_fn: u64,
    /// Disk artifacts that failed their integrity check (recompiled from the verified
    /// module bytes and written again).
    pub disk_rejected: u64,
    /// Code requests answered short or not at all by the serving budget (`serve.rs`).
    pub serve_limited: u64,
    /// Bytes of code asked for but withheld by the serving budget.
    pub serve_withheld_bytes: u64,
    /// Guest log lines passed on to the node.
    pub log_lines: u64,
    /// Guest log lines dropped by the per-code rate limit.
    pub log_dropped: u64,
    /// Cut-through channels opened (or refreshed) for the code's flows (`cut_through`).
    pub cuts_opened: u64,
    /// `cut_through` requests the node's cut-through table refused (limits, none installed).
    pub cuts_refused: u64,
    /// Batches of capsules run with workers (`CapsuleConfig::workers` > 1).
    pub batches: u64,
    /// Groups of a batch (one per code object) run on the worker threads in parallel.
    pub worker_groups: u64,
}

/// A code object as [`CapsuleEe::code_list`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeInfo {
    /// Its name.
    pub hash: CodeHash,
    /// The protocol's name from the module's `anode.name` section, if it has one.
    pub name: Option<String>,
    /// Module size, bytes.
    pub wasm_len: usize,
    /// Bytes it holds in the memory cache (0 if only on disk).
    pub cost: usize,
    /// In the memory cache.
    pub in_memory: bool,
    /// Has a live instance.
    pub live: bool,
    /// The compiler tier of its code in memory (`None` if only on disk).
    pub tier: Option<CodeTier>,
    /// In the disk cache.
    pub on_disk: bool,
}

/// The capsule execution environment.
pub struct CapsuleEe {
    rt: Arc<Runtime>,
    cfg: CapsuleConfig,
    mem: MemCache,
    disk: Option<DiskCache>,
    loader: Loader,
    /// Soft state, ports and routing functions (lent to each guest call).
    reach: Box<Reach>,
    epoch: Option<Instant>,
    stats: CapsuleStats,
    /// Run reports not yet drained (only filled when `cfg.record_runs`).
    runs: Vec<RunReport>,
    /// The code worker's answers come back here (the sender goes with each job).
    worker_tx: Sender<build::Done>,
    worker_rx: Receiver<build::Done>,
    /// Code objects being recompiled by the worker.
    tier_pending: HashSet<CodeHash>,
    /// Code objects being built by the worker, and the capsules waiting for them.
    builds: HashMap<CodeHash, build::Pending>,
    /// When to look for the worker's answers next (`None`: nothing pending).
    worker_poll_at: Option<Instant>,
    /// Since when capsules have waited for builds without a break, and the worker's CPU
    /// time then (`worker::BOOST_AFTER`).
    builds_since: Option<(Instant, Option<Duration>)>,
    /// The time of the latest call from the node (`None` before the first).
    last_now: Option<Instant>,
    /// The call environment lent to each guest call (`host/mod.rs`), kept between calls with
    /// an empty [`Reach`], its effects buffer, and the last node view (reused, its time
    /// refreshed, while the node's routes, neighbors and links stay the same).
    call_env: Option<Box<CallEnv>>,
    /// How much code each neighbor may take.
    serve: crate::serve::ServeBudget,
    /// Guest log lines per code object.
    logs: crate::serve::LogLimit,
    /// The worker threads and the capsules held for them (`None`: one thread).
    workers: Option<batch::Workers>,
}

impl fmt::Debug for CapsuleEe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CapsuleEe")
            .field("code", &self.mem.map.len())
            .field("parked", &self.loader.parked())
            .field("stats", &self.stats)
            .finish()
    }
}

impl CapsuleEe {
    /// An EE with its own runtime.
    pub fn new(cfg: CapsuleConfig) -> Result<Self, CapsuleError> {
        let rt = Runtime::new(cfg.runtime)?;
        Self::with_runtime(rt, cfg)
    }

    /// An EE sharing `rt` (e.g. all nodes of an emulated network share one engine).
    pub fn with_runtime(rt: Arc<Runtime>, cfg: CapsuleConfig) -> Result<Self, CapsuleError> {
        let disk = cfg
            .cache_dir
            .clone()
            .map(|d| DiskCache::open(d, cfg.cache_max_bytes))
            .transpose()?;
        let (worker_tx, worker_rx) = mpsc::channel();
        let workers = (cfg.workers > 1)
            .then(|| batch::Workers::new(cfg.workers))
            .transpose()?;
        Ok(CapsuleEe {
            workers,
            worker_tx,
            worker_rx,
            tier_pending: HashSet::new(),
            builds: HashMap::new(),
            worker_poll_at: None,
            builds_since: None,
            last_now: None,
            call_env: None,
            serve: crate::serve::ServeBudget::new(cfg.serve),
            logs: crate::serve::LogLimit::default(),
            mem: MemCache::new(cfg.mem_cache_bytes),
            loader: Loader::new(cfg.loader),
            reach: Box::new(Reach {
                soft: SoftState::new(cfg.soft_state_bytes, cfg.soft_state_per_code),
                ports: PortTable::default(),
                routes: RouteTable::default(),
                files: match &cfg.cache_dir {
                    Some(d) => FileStore::with_dir(cfg.files, d.join("files")),
                    None => FileStore::new(cfg.files),
                },
            }),
            epoch: None,
            stats: CapsuleStats::default(),
            runs: Vec::new(),
            disk,
            rt,
            cfg,
        })
    }

    /// The runtime.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.rt
    }

    /// The disk cache's statistics (`None` without a disk cache).
    pub fn disk_stats(&self) -> Option<crate::cache::DiskStats> {
        self.disk.as_ref().map(DiskCache::stats)
    }

    /// Statistics.
    pub fn stats(&self) -> &CapsuleStats {
        &self.stats
    }

    /// Takes the run reports recorded since the last call (empty unless
    /// [`CapsuleConfig::record_runs`] is set), oldest first.
    pub fn drain_runs(&mut self) -> std::vec::Drain<'_, RunReport> {
        self.runs.drain(..)
    }

    /// Sets the fuel budget of each later `accept` and `init` run.
    pub fn set_fuel(&mut self, fuel: u64) {
        self.cfg.fuel = fuel;
    }

    /// The fuel budget of one run.
    pub fn fuel(&self) -> u64 {
        self.cfg.fuel
    }

    /// The soft state (for inspection).
    pub fn soft_state(&mut self) -> &mut SoftState {
        &mut self.reach.soft
    }

    /// The code objects of the capsules held for the workers' next batch (each once, in
    /// arrival order; none without workers).
    pub fn held_codes(&self) -> Vec<CodeHash> {
        self.workers
            .as_ref()
            .map_or_else(Vec::new, batch::Workers::codes)
    }

    /// Capsules held for the workers' next batch.
    pub fn held(&self) -> usize {
        self.workers.as_ref().map_or(0, batch::Workers::len)
    }

    /// Drops the held capsules of `code` (its NodeOS domain ended) for `reason` when the
    /// batch runs, instead of running them.
    pub fn cancel_held(&mut self, code: &CodeHash, reason: DropReason) {
        if let Some(w) = self.workers.as_mut() {
            w.cancel(*code, reason);
        }
    }

    /// Runs the capsules held for the workers now (the node runs them at the EE's timeout,
    /// after its batch; this is for a caller that must not let the next packet run them).
    pub fn run_held(&mut self, ctx: &mut NodeContext<'_>) {
        self.run_batch(ctx);
    }

    /// Capsules waiting for code (being fetched, or being built by the worker).
    pub fn parked(&self) -> usize {
        self.loader.parked() + self.builds.values().map(build::Pending::len).sum::<usize>()
    }

    /// Code objects being demand-loaded.
    pub fn fetching(&self) -> Vec<CodeHash> {
        self.loader.fetching()
    }

    /// Lets code objects deliver to application port `port`.
    pub fn register_port(&mut self, port: u16) {
        self.reach.ports.insert(port);
    }

    /// Revokes `port`.
    pub fn unregister_port(&mut self, port: u16) -> bool {
        self.reach.ports.remove(&port)
    }

    /// Registers routing function `f` under `name` for capsules asking for it with
    /// `forward_by` (replacing one of the same name). Fails if the name is empty or longer than
    /// [`abi::MAX_ROUTE_NAME`] bytes.
    pub fn set_route(
        &mut self,
        name: &str,
        f: Box<dyn CapsuleRouteFn>,
    ) -> Result<(), CapsuleError> {
        self.reach.routes.set(name, f)
    }

    /// Unregisters routing function `name`; `false` if there was none.
    pub fn remove_route(&mut self, name: &str) -> bool {
        self.reach.routes.remove(name)
    }

    /// The names of the registered routing functions, sorted.
    pub fn route_names(&self) -> Vec<String> {
        self.reach.routes.names()
    }

    /// Installs a code object locally (compiled, cached in memory and on disk, served to
    /// neighbors); returns its name. Installing code that is already in memory changes
    /// nothing: its instance and its soft state stay (a multicast tree built by joins is not
    /// wiped because the root's application put the same code again).
    /// This compiles on the calling thread; a control connection builds with
    /// [`CapsuleEe::installer`] on its own thread and hands the result to
    /// [`CapsuleEe::install_built`].
    pub fn install(&mut self, wasm: &[u8]) -> Result<CodeHash, CapsuleError> {
        let installer = self.installer();
        installer.check_size(wasm)?;
        let h = crate::runtime::code_hash(wasm);
        if self.mem.map.contains_key(&h) {
            return Ok(h);
        }
        let built = installer.build(wasm)?;
        Ok(self.install_built(built))
    }

    /// Whether `hash` is usable now (memory, or disk: loads it).
    pub fn has_code(&mut self, hash: &CodeHash) -> bool {
        self.mem.map.contains_key(hash) || self.load_local(hash)
    }

    /// The module bytes of `hash`.
    pub fn code_bytes(&self, hash: &CodeHash) -> Option<Arc<[u8]>> {
        match self.mem.map.get(hash) {
            Some(c) => Some(c.obj.wasm.clone()),
            None => self.disk.as_ref()?.wasm(hash),
        }
    }

    /// Memory the code object `hash` holds in the memory cache: module bytes plus its
    /// compiled cost (as [`CodeInfo`] gives them); 0 when it is not in memory. A map lookup,
    /// unlike [`CapsuleEe::code_list`], which also lists the disk cache.
    pub fn code_mem_bytes(&self, hash: &CodeHash) -> usize {
        self.mem
            .map
            .get(hash)
            .map_or(0, |c| c.obj.wasm.len() + c.obj.cost)
    }

    /// The protocol names of the code objects in memory that declare one (no disk access:
    /// what runs is in memory, and the names were read when the code was built).
    pub fn code_names(&self) -> Vec<(CodeHash, String)> {
        self.mem
            .map
            .values()
            .filter_map(|c| Some((c.obj.hash, c.obj.name.clone()?)))
            .collect()
    }

    /// The code object `hash` if it is in memory (no disk access).
    pub fn code_info(&self, hash: &CodeHash) -> Option<CodeInfo> {
        let c = self.mem.map.get(hash)?;
        Some(mem_info(
            c,
            self.disk.as_ref().is_some_and(|d| d.contains(hash)),
        ))
    }

    /// Code objects in memory and on disk. Reads the disk cache on the calling thread: a
    /// control connection takes a [`CapsuleEe::code_listing`] on the node thread instead and
    /// completes it on its own.
    pub fn code_list(&self) -> Vec<CodeInfo> {
        self.code_listing().complete()
    }

    /// The memory cache's code objects and a handle on the disk cache, taken without disk
    /// access; [`CodeListing::complete`] adds what is only on disk, on any thread.
    pub fn code_listing(&self) -> CodeListing {
        CodeListing {
            mem: self.mem.map.values().map(|c| mem_info(c, false)).collect(),
            disk: self.disk.clone(),
        }
    }

    /// Bytes of the memory cache.
    pub fn mem_cache_bytes(&self) -> usize {
        self.mem.bytes()
    }

    /// Removes `hash` from memory (finalizing its instance, dropping its soft state) and disk.
    pub fn evict(&mut self, hash: &CodeHash) -> bool {
        let m = self.mem.remove(hash).map(|c| self.retire(c)).is_some();
        let d = self.disk.as_ref().is_some_and(|d| d.remove(hash));
        m || d
    }

    fn retire(&mut self, mut c: crate::cache::Cached) {
        if let Some(live) = c.live.take() {
            live.finalize(self.cfg.fuel);
        }
        self.reach.soft.clear(&c.obj.hash);
    }

    fn admit(&mut self, obj: CodeObject) -> Result<(), CapsuleError> {
        if let Some(d) = &self.disk {
            d.store(&self.rt, &obj)?;
        }
        self.admit_mem(obj);
        Ok(())
    }

    /// Puts `obj` in the memory cache only (it came from a valid disk artifact).
    fn admit_mem(&mut self, obj: CodeObject) {
        for old in self.mem.insert(Arc::new(obj)) {
            self.retire(old);
        }
    }

    /// Loads `hash` from the disk cache into memory on this thread, unless the worker builds
    /// code (then the capsule parks and [`CapsuleEe::park_on_build`] reads the disk there).
    fn load_here(&mut self, hash: &CodeHash) -> bool {
        !self.builds_off_thread() && self.load_local(hash)
    }

    /// Loads `hash` from the disk cache into memory.
    fn load_local(&mut self, hash: &CodeHash) -> bool {
        let Some(d) = &self.disk else {
            return false;
        };
        let obj = match d.load(&self.rt, hash) {
            None => return false,
            Some(DiskHit::Deserialized(wasm, module)) => {
                return match self
                    .rt
                    .code_object(*hash, wasm, module, CodeTier::Optimized)
                {
                    Ok(o) => {
                        self.stats.disk_loads += 1;
                        // Nothing to write back: the artifact on disk is the one just loaded.
                        self.admit_mem(o);
                        true
                    }
                    Err(_) => false,
                };
            }
            Some(DiskHit::WasmOnly(wasm)) => match self.rt.compile(&wasm) {
                Ok(o) => {
                    self.stats.compiled += 1;
                    o
                }
                Err(_) => return false,
            },
            Some(DiskHit::Rejected(wasm)) => {
                self.stats.disk_rejected += 1;
                match self.rt.compile(&wasm) {
                    Ok(o) => {
                        self.stats.compiled += 1;
                        o
                    }
                    Err(_) => return false,
                }
            }
        };
        let baseline = obj.tier == CodeTier::Baseline;
        let ok = self.admit(obj).is_ok();
        if ok && baseline {
            self.start_tier_up(*hash);
        }
        ok
    }

    /// Compiles `obj` with Cranelift now and swaps it in (its live instance finalized).
    fn optimize_now(&mut self, obj: &CodeObject) -> Option<Arc<CodeObject>> {
        let o = Arc::new(self.rt.compile_tier(&obj.wasm, CodeTier::Optimized).ok()?);
        self.stats.compiled += 1;
        self.swap_in(o.clone());
        Some(o)
    }

    /// Replaces a code object in memory with `obj` (same name, other tier), finalizing the
    /// old one's live instance; the new one is instantiated at its next capsule.
    fn swap_in(&mut self, obj: Arc<CodeObject>) {
        if let Some(Some(live)) = self.mem.replace(obj) {
            live.finalize(self.cfg.fuel);
        }
    }

    /// Whether code objects are being recompiled for the optimized tier.
    pub fn tier_ups_pending(&self) -> usize {
        self.tier_pending.len()
    }

    /// Runs capsules that waited for code through dispatch again (each may park anew), each
    /// resumed in the node's outcome ledger.
    fn redispatch(&mut self, ctx: &mut NodeContext<'_>, parked: VecDeque<Parked>) {
        for p in parked {
            let mut pkt = p.pkt;
            let r = ctx.resume(&mut pkt);
            self.dispatch(ctx, pkt);
            ctx.finish(r);
        }
    }

    /// Parks `pkt` until code object `want` (its own code or a dependency) is loaded.
    fn park(
        &mut self,
        ctx: &mut NodeContext<'_>,
        want: CodeHash,
        code_source: Option<NodeAddr>,
        pkt: EePacket,
    ) {
        let mut sources: Vec<LinkId> = Vec::new();
        if let Some(cs) = code_source {
            let hop = ctx
                .neighbors()
                .into_iter()
                .find(|n| n.addr == cs)
                .or_else(|| ctx.lookup(&cs));
            if let Some(h) = hop {
                sources.push(h.link);
            }
        }
        if let Some(l) = pkt.link
            && !sources.contains(&l)
        {
            sources.push(l);
        }
        let Some(pkt) = self.park_on_build(ctx, want, pkt) else {
            return;
        };
        let p = hold(ctx, pkt);
        match self.loader.park(ctx.now(), want, p, sources) {
            Park::Waiting => {}
            Park::Started(step) => self.apply(ctx, step),
            Park::Refused(reason) => {
                ctx.unhold();
                ctx.count_drop("capsule", reason);
            }
        }
    }

    fn apply(&mut self, ctx: &mut NodeContext<'_>, step: Step) {
        match step {
            Step::None => {}
            Step::Request {
                link,
                hash,
                offset,
                max,
            } => {
                self.stats.requests_sent += 1;
                let _ = ctx.send_control(link, &Control::CodeRequest { hash, offset, max });
            }
            Step::Failed {
                hash,
                reason,
                parked,
            } => {
                self.stats.load_failures += 1;
                ctx.log(
                    "capsule",
                    format!("loading {} failed: {reason}", hex::encode(hash)),
                );
                drop_all(ctx, parked, reason);
            }
            Step::Complete {
                hash,
                bytes,
                parked,
                started,
            } => {
                if self.builds_off_thread() {
                    if let Err(parked) = self.start_fetched_build(hash, bytes, parked, started) {
                        self.stats.load_failures += 1;
                        ctx.log("capsule", "the code worker cannot be started".to_string());
                        drop_all(ctx, parked, DropReason::CodeUnavailable);
                    }
                    return;
                }
                if code_hash(&bytes) != hash {
                    self.stats.load_failures += 1;
                    return drop_all(ctx, parked, DropReason::CodeHashMismatch);
                }
                let obj = match self.rt.compile(&bytes) {
                    Ok(o) => o,
                    Err(_) => {
                        self.stats.load_failures += 1;
                        return drop_all(ctx, parked, DropReason::CodeInvalid);
                    }
                };
                self.stats.compiled += 1;
                let baseline = obj.tier == CodeTier::Baseline;
                if self.admit(obj).is_err() {
                    // The disk cache failed; the code still runs from memory.
                    ctx.log(
                        "capsule",
                        format!("disk cache: cannot store {}", hex::encode(hash)),
                    );
                }
                if baseline {
                    self.start_tier_up(hash);
                }
                self.stats.loads_completed += 1;
                let took = ctx.now().saturating_duration_since(started);
                self.stats.note_load(took);
                // Each capsule goes through dispatch again: its code may need more
                // dependencies, which parks it anew.
                self.redispatch(ctx, parked);
            }
        }
    }

    fn serve(
        &mut self,
        ctx: &mut NodeContext<'_>,
        link: LinkId,
        hash: CodeHash,
        off: u32,
        max: u32,
    ) {
        let Some(wasm) = self.code_bytes(&hash) else {
            self.stats.unavailable_sent += 1;
            let _ = ctx.send_control(link, &Control::CodeUnavailable { hash });
            return;
        };
        let total = wasm.len();
        let start = off as usize;
        let want = total
            .min(start.saturating_add(max.min(self.cfg.serve_max) as usize))
            .saturating_sub(start);
        let give = self.serve.allow(ctx.now(), link, &hash, want as u64) as usize;
        if give < want {
            self.stats.serve_limited += 1;
            self.stats.serve_withheld_bytes += (want - give) as u64;
        }
        let end = start + give;
        let mut o = start;
        while o < end {
            let n = self.cfg.chunk_size.max(1).min(end - o);
            let Some(data) = wasm.get(o..o + n) else {
                break;
            };
            let msg = Control::CodeChunk {
                hash,
                total: total as u32,
                offset: o as u32,
                data: data.to_vec(),
            };
            if ctx.send_control(link, &msg).is_err() {
                break;
            }
            self.stats.chunks_served += 1;
            o += n;
        }
    }

    /// Runs the capsule's code (its header parsed by the node), holds it for the workers, or
    /// parks it for missing code.
    fn dispatch(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        self.dispatch_with(ctx, pkt, self.workers.is_some());
    }

    /// [`CapsuleEe::dispatch`] on this thread, now.
    fn dispatch_now(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        self.dispatch_with(ctx, pkt, false);
    }

    fn dispatch_with(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket, defer: bool) {
        let (hdr, hl) = match pkt.header {
            EeHeader::Capsule(h, len) => (h, len),
            _ => return ctx.count_drop("capsule", DropReason::BadHeader),
        };
        let payload_at = pkt.anep_len + pkt.transit_len + hl;
        // One lookup on the hot path: whether the code is in memory and has a live instance
        // (and whether its runs are heavy enough to go to a worker).
        let (needs_instance, heavy) = match self.mem.map.get(&hdr.code) {
            Some(c) => (c.live.is_none(), c.fuel >= batch::DEFER_MIN_FUEL),
            None => {
                // While a fetch is in flight the disk was already asked: no lookup per capsule.
                if self.loader.is_fetching(&hdr.code) || !self.load_here(&hdr.code) {
                    return self.park(ctx, hdr.code, hdr.code_source, pkt);
                }
                (true, false)
            }
        };
        // Light code runs at once, unless capsules are held already (then it waits its turn:
        // the batch keeps arrival order).
        if defer && (heavy || self.held() > 0) {
            return self.defer(ctx, pkt, (hdr, payload_at));
        }
        self.run(ctx, hdr, pkt, payload_at, needs_instance);
    }

    /// The dependencies of `root`, transitively, each before its dependents (PAN: a code
    /// object's unresolved symbols are resolved by the code objects it depends on).
    fn resolve(&mut self, root: &CodeHash) -> Result<Vec<Arc<CodeObject>>, Missing> {
        let mut out = Vec::new();
        self.visit(*root, 0, &mut out)?;
        Ok(out)
    }

    fn visit(
        &mut self,
        h: CodeHash,
        depth: usize,
        out: &mut Vec<Arc<CodeObject>>,
    ) -> Result<(), Missing> {
        if out.iter().any(|o| o.hash == h) {
            return Ok(());
        }
        if depth > MAX_DEP_DEPTH || out.len() >= MAX_GROUP {
            return Err(Missing::TooDeep);
        }
        if !self.mem.map.contains_key(&h) && (self.loader.is_fetching(&h) || !self.load_here(&h)) {
            return Err(Missing::Code(h));
        }
        let Some(mut obj) = self.mem.map.get(&h).map(|c| c.obj.clone()) else {
            return Err(Missing::Code(h));
        };
        if depth > 0 && obj.tier != CodeTier::Optimized {
            // Code with dependencies is optimized, and a group shares one engine: tier this
            // dependency up now rather than wait for the worker.
            obj = self.optimize_now(&obj).ok_or(Missing::Code(h))?;
        }
        for d in &obj.deps {
            self.visit(*d, depth + 1, out)?;
        }
        if depth > 0 {
            out.push(obj);
        }
        Ok(())
    }

    /// Gives `hash` a live instance. When the runtime's instance slots are all taken, the
    /// least recently used other code objects give up theirs (finalized; they are
    /// re-instantiated when next used) until this one fits or none is left.
    fn instantiate(&mut self, hash: &CodeHash, deps: &[Arc<CodeObject>]) -> bool {
        let fuel = self.cfg.fuel;
        loop {
            let Some(c) = self.mem.map.get_mut(hash) else {
                return false;
            };
            let runs = self.cfg.record_runs.then_some(&mut self.runs);
            match self.rt.instantiate(&c.obj, deps, fuel, runs) {
                Ok(l) => {
                    c.live = Some(l);
                    return true;
                }
                Err(CapsuleError::NoInstanceSlot) => match self.mem.take_lru_live(hash) {
                    Some(old) => old.finalize(fuel),
                    None => return false,
                },
                Err(_) => return false,
            }
        }
    }
}

/// The code objects of a [`CapsuleEe`]: those in memory, taken on the node thread, and its
/// disk cache, read by [`CodeListing::complete`] or [`CodeListing::find`] wherever they run.
#[derive(Debug)]
pub struct CodeListing {
    mem: Vec<CodeInfo>,
    disk: Option<DiskCache>,
}

impl CodeListing {
    /// Everything, in memory and on disk, by name.
    pub fn complete(self) -> Vec<CodeInfo> {
        let on_disk: HashSet<CodeHash> = self
            .disk
            .as_ref()
            .map(|d| d.list().into_iter().collect())
            .unwrap_or_default();
        let mut v = self.mem;
        for c in &mut v {
            c.on_disk = on_disk.contains(&c.hash);
        }
        let in_mem: HashSet<CodeHash> = v.iter().map(|c| c.hash).collect();
        if let Some(d) = &self.disk {
            for h in on_disk.iter().filter(|h| !in_mem.contains(*h)) {
                v.push(disk_info(d, h));
            }
        }
        v.sort_by_key(|c| c.hash);
        v
    }

    /// The code object `hash`, in memory or on disk.
    pub fn find(self, hash: &CodeHash) -> Option<CodeInfo> {
        let on_disk = self.disk.as_ref().is_some_and(|d| d.contains(hash));
        match self.mem.into_iter().find(|c| c.hash == *hash) {
            Some(mut c) => {
                c.on_disk = on_disk;
                Some(c)
            }
            None => Some(disk_info(self.disk.as_ref().filter(|_| on_disk)?, hash)),
        }
    }
}

/// What the listing says of a code object only on disk (its bytes read for name and size).
fn disk_info(d: &DiskCache, h: &CodeHash) -> CodeInfo {
    let wasm = d.wasm(h);
    CodeInfo {
        hash: *h,
        name: wasm.as_deref().and_then(crate::runtime::protocol_name),
        wasm_len: wasm.as_ref().map_or(0, |w| w.len()),
        cost: 0,
        in_memory: false,
        live: false,
        tier: None,
        on_disk: true,
    }
}

/// What [`CapsuleEe::code_list`] says of a code object in memory.
fn mem_info(c: &crate::cache::Cached, on_disk: bool) -> CodeInfo {
    CodeInfo {
        hash: c.obj.hash,
        name: c.obj.name.clone(),
        wasm_len: c.obj.wasm.len(),
        cost: c.obj.cost,
        in_memory: true,
        live: c.live.is_some(),
        tier: Some(c.obj.tier),
        on_disk,
    }
}

fn drop_all(ctx: &mut NodeContext<'_>, parked: VecDeque<Parked>, reason: DropReason) {
    for p in parked {
        ctx.drop_held("capsule", p.pkt, reason);
    }
}

/// Parks `pkt`: the node counts it as held until it is resumed (`anode_core`'s ledger).
fn hold(ctx: &mut NodeContext<'_>, mut pkt: EePacket) -> Parked {
    ctx.hold(&mut pkt);
    Parked { pkt }
}

impl CapsuleEe {
    /// The code objects' files (ABI v2).
    pub fn files(&self) -> &FileStore {
        &self.reach.files
    }

    /// The code objects' files, to change them (tools, tests, the NodeOS on termination).
    pub fn files_mut(&mut self) -> &mut FileStore {
        &mut self.reach.files
    }

    /// Has what the guests changed in their files written to disk (`files.rs`), by the
    /// store's writer thread: the node thread only wakes it.
    fn flush_files(&mut self) {
        if self.reach.files.take_changed()
            && let Some(p) = self.reach.files.persist()
        {
            p.schedule();
        }
    }
}

impl ExecutionEnvironment for CapsuleEe {
    fn type_id(&self) -> u16 {
        TYPE_CAPSULE
    }

    fn name(&self) -> &str {
        "capsule"
    }

    fn handle_packet(&mut self, ctx: &mut NodeContext<'_>, pkt: EePacket) {
        self.stats.capsules += 1;
        self.last_now = Some(ctx.now());
        if self.worker_busy() {
            self.collect_worker(ctx);
        }
        self.dispatch(ctx, pkt);
        self.flush_files();
    }

    fn handle_control(&mut self, ctx: &mut NodeContext<'_>, link: LinkId, msg: &Control) {
        self.last_now = Some(ctx.now());
        match msg {
            Control::CodeRequest { hash, offset, max } => {
                self.serve(ctx, link, *hash, *offset, *max);
            }
            Control::CodeChunk {
                hash,
                total,
                offset,
                data,
            } => {
                self.stats.chunks_received += 1;
                let step = self
                    .loader
                    .on_chunk(ctx.now(), link, *hash, *total, *offset, data);
                self.apply(ctx, step);
            }
            Control::CodeUnavailable { hash } => {
                let step = self.loader.on_unavailable(ctx.now(), link, *hash);
                self.apply(ctx, step);
            }
            _ => {}
        }
        self.flush_files();
    }

    fn handle_timeout(&mut self, ctx: &mut NodeContext<'_>) {
        self.last_now = Some(ctx.now());
        self.run_batch(ctx);
        if self.worker_busy() {
            self.collect_worker(ctx);
        }
        for step in self.loader.handle_timeout(ctx.now()) {
            self.apply(ctx, step);
        }
        self.flush_files();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let batch = self.workers.as_ref().and_then(batch::Workers::deadline);
        [self.loader.poll_timeout(), self.worker_poll_at, batch]
            .into_iter()
            .flatten()
            .min()
    }

    fn hand_over(&mut self, now: Instant, out: &mut anode_core::handover::EeHandover) {
        // The successor reads the same disk: what waits to be written is written now, in
        // the pause, so no write of this process can land after one of the successor's.
        if let Some(p) = self.reach.files.persist() {
            p.flush();
        }
        self.export(now, out);
    }

    fn take_over(
        &mut self,
        ctx: &mut NodeContext<'_>,
        state: &serde_json::Value,
    ) -> Result<(), String> {
        self.import(ctx.now(), state)
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

impl Drop for CapsuleEe {
    fn drop(&mut self) {
        // The node is ending: the files' last changes are written before it goes.
        if let Some(p) = self.reach.files.persist() {
            p.flush();
        }
        let all: Vec<CodeHash> = self.mem.map.keys().copied().collect();
        for h in all {
            if let Some(c) = self.mem.remove(&h) {
                self.retire(c);
            }
        }
    }
}
