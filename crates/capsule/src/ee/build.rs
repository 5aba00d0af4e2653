//! The EE's half of building code away from the node thread (the worker is `worker.rs`).
//!
//! With [`RuntimeConfig::build_off_thread`](crate::RuntimeConfig::build_off_thread), code the
//! node does not hold in memory is built by the runtime's worker: fetched code (once the
//! loader has every byte: SHA-256 check, compile, ABI check, disk write) and code held in the
//! disk cache (read, artifact check, deserialize or compile). Capsules needing it wait in
//! [`Pending`] (at most `max_parked_per_code` each, at most `max_fetches` builds at once;
//! beyond, they are dropped as `capsule/park_full`) and go through dispatch again when it is
//! ready. Code installed by an operator is built by the caller's thread with a
//! [`CodeInstaller`] and handed over ready ([`CapsuleEe::install_built`]).
//!
//! Contracts:
//! - The node thread never compiles, hashes or reads fetched or cached code here; it wraps
//!   the worker's module ([`Runtime::code_object`]: ABI re-check and import resolution).
//! - Every build answers once (a panicking build answers as failed), so no capsule stays
//!   parked: a failed fetched build drops its capsules (`code_hash_mismatch`,
//!   `code_invalid`); a failed disk build forgets the disk entry and re-dispatches its
//!   capsules, which fetch the code from the network.
//! - Tier-ups share the worker and this reply channel; they never delay a build.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use anode_core::{DropReason, EePacket, NodeContext};
use wasmtime::Module;

use super::{CapsuleEe, WORKER_POLL, drop_all, hold};
use crate::cache::{DiskCache, DiskHit};
use crate::loader::Parked;
use crate::runtime::{CodeObject, CodeTier, Runtime, code_hash};
use crate::worker::{BOOST_AFTER, Priority};
use crate::{CapsuleError, CodeHash};

/// What a build started from.
#[derive(Debug, Clone, Copy)]
pub(super) enum Origin {
    /// Bytes the loader fetched (its fetch started at `started`).
    Fetched { started: Instant },
    /// The disk cache.
    Disk,
    /// A Cranelift recompile of baseline code in memory.
    TierUp,
}

/// Why a build failed.
#[derive(Debug)]
pub(super) enum Failed {
    /// The bytes' SHA-256 is not the name they were fetched for.
    HashMismatch,
    /// Compiling or the ABI check refused the module.
    Invalid(String),
    /// The disk cache no longer holds it.
    NotOnDisk,
    /// The build panicked (a bug; the worker goes on).
    Panicked,
}

impl Failed {
    /// The drop reason for capsules that waited for fetched code.
    fn reason(&self) -> DropReason {
        match self {
            Failed::HashMismatch => DropReason::CodeHashMismatch,
            Failed::Invalid(_) | Failed::NotOnDisk | Failed::Panicked => DropReason::CodeInvalid,
        }
    }

    /// What went wrong, for the log.
    fn detail(&self) -> String {
        match self {
            Failed::HashMismatch => "its SHA-256 is not its name".into(),
            Failed::Invalid(e) => e.clone(),
            Failed::NotOnDisk => "it is no longer in the disk cache".into(),
            Failed::Panicked => "the build panicked".into(),
        }
    }
}

/// How code came out of the disk cache (for the EE's counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// Compiled from module bytes.
    Compiled,
    /// A valid artifact, deserialized.
    Deserialized,
    /// An artifact that failed its check; compiled from the module bytes instead.
    Rejected,
}

/// A worker's answer.
pub(super) struct Done {
    pub hash: CodeHash,
    pub origin: Origin,
    /// The module bytes (verified against `hash`) and the module, or why not.
    pub result: Result<(Arc<[u8]>, Module, CodeTier), Failed>,
    pub source: Source,
    /// Why the disk cache could not store the result, if it could not.
    pub disk_error: Option<String>,
}

/// Capsules waiting for a build.
#[derive(Debug, Default)]
pub(super) struct Pending {
    parked: VecDeque<Parked>,
}

impl Pending {
    /// The capsules waiting, in arrival order.
    pub(super) fn packets(&self) -> impl Iterator<Item = &EePacket> {
        self.parked.iter().map(|p| &p.pkt)
    }
}

type Outcome = (
    Result<(Arc<[u8]>, Module, CodeTier), Failed>,
    Source,
    Option<String>,
);

/// Builds fetched bytes: hash check, compile, ABI check, disk write (worker thread).
fn build_fetched(rt: &Runtime, disk: Option<&DiskCache>, hash: CodeHash, wasm: Vec<u8>) -> Outcome {
    if code_hash(&wasm) != hash {
        return (Err(Failed::HashMismatch), Source::Compiled, None);
    }
    compile_and_store(rt, disk, hash, Arc::from(wasm), Source::Compiled, |w| {
        rt.build_module(w)
    })
}

/// Compiles `wasm` with `compile`, writes the result to the disk cache (if any) and makes
/// the worker's answer.
fn compile_and_store(
    rt: &Runtime,
    disk: Option<&DiskCache>,
    hash: CodeHash,
    wasm: Arc<[u8]>,
    source: Source,
    compile: impl FnOnce(&[u8]) -> Result<(Module, CodeTier), CapsuleError>,
) -> Outcome {
    match compile(&wasm) {
        Ok((module, tier)) => {
            let disk_error = disk
                .and_then(|d| {
                    d.store_module(rt.compat(), &hash, &wasm, &module, tier)
                        .err()
                })
                .map(|e| e.to_string());
            (Ok((wasm, module, tier)), source, disk_error)
        }
        Err(e) => (Err(Failed::Invalid(e.to_string())), source, None),
    }
}

/// Reads `hash` from the disk cache: deserializes a valid artifact, else compiles the module
/// bytes (and writes the artifact again) (worker thread).
fn load_from_disk(rt: &Runtime, disk: &DiskCache, hash: CodeHash) -> Outcome {
    match disk.load(rt, &hash) {
        None => (Err(Failed::NotOnDisk), Source::Compiled, None),
        Some(DiskHit::Deserialized(wasm, module)) => (
            Ok((wasm, module, CodeTier::Optimized)),
            Source::Deserialized,
            None,
        ),
        Some(DiskHit::WasmOnly(wasm)) => {
            compile_and_store(rt, Some(disk), hash, wasm, Source::Compiled, |w| {
                rt.build_module(w)
            })
        }
        Some(DiskHit::Rejected(wasm)) => {
            compile_and_store(rt, Some(disk), hash, wasm, Source::Rejected, |w| {
                rt.build_module(w)
            })
        }
    }
}

/// Recompiles baseline code with Cranelift and stores the artifact (worker thread).
fn tier_up(rt: &Runtime, disk: Option<&DiskCache>, hash: CodeHash, wasm: Arc<[u8]>) -> Outcome {
    compile_and_store(rt, disk, hash, wasm, Source::Compiled, |w| {
        let m = rt.module_for(w, CodeTier::Optimized)?;
        Ok((m, CodeTier::Optimized))
    })
}

impl Pending {
    /// Capsules waiting.
    pub(super) fn len(&self) -> usize {
        self.parked.len()
    }
}

impl CapsuleEe {
    /// Code objects the worker is building (fetched or read from disk) with capsules waiting
    /// for them.
    pub fn builds_pending(&self) -> usize {
        self.builds.len()
    }

    /// Whether new code is built on the runtime's worker.
    pub(super) fn builds_off_thread(&self) -> bool {
        self.rt.config().build_off_thread && self.rt.worker.is_some()
    }

    /// Whether the worker owes this EE an answer.
    pub(super) fn worker_busy(&self) -> bool {
        !self.tier_pending.is_empty() || !self.builds.is_empty()
    }

    /// Sends `job` to the worker; its answer comes back on the EE's channel. False if the
    /// worker cannot take it.
    fn submit(
        &mut self,
        priority: Priority,
        hash: CodeHash,
        origin: Origin,
        job: impl FnOnce(&Runtime) -> Outcome + Send + 'static,
    ) -> bool {
        let Some(w) = self.rt.worker.as_ref() else {
            return false;
        };
        let reply = self.worker_tx.clone();
        let rt = self.rt.clone();
        let task =
            Box::new(move || {
                let (result, source, disk_error) = std::panic::catch_unwind(AssertUnwindSafe(
                    || job(&rt),
                ))
                .unwrap_or((Err(Failed::Panicked), Source::Compiled, None));
                // The EE may be gone (node stopped): nothing to do then.
                let _ = reply.send(Done {
                    hash,
                    origin,
                    result,
                    source,
                    disk_error,
                });
            });
        if w.submit(priority, task).is_err() {
            return false;
        }
        // Before the EE has seen a clock (install before the first packet), the next
        // handle_packet looks for the result and sets the poll time.
        if let Some(n) = self.last_now {
            let at = n + WORKER_POLL;
            self.worker_poll_at = Some(self.worker_poll_at.map_or(at, |t| t.min(at)));
        }
        true
    }

    /// Sends baseline code object `hash` to the worker for Cranelift (no-op without a worker,
    /// i.e. with `Tiering::Baseline`, or if already pending).
    pub(super) fn start_tier_up(&mut self, hash: CodeHash) {
        if self.rt.config().tiering != crate::Tiering::Tiered || self.tier_pending.contains(&hash) {
            return;
        }
        let Some(wasm) = self.mem.map.get(&hash).map(|c| c.obj.wasm.clone()) else {
            return;
        };
        let disk = self.disk.clone();
        let job = move |rt: &Runtime| tier_up(rt, disk.as_ref(), hash, wasm);
        if self.submit(Priority::Background, hash, Origin::TierUp, job) {
            self.tier_pending.insert(hash);
        } else {
            self.stats.tier_up_failures += 1;
        }
    }

    /// Hands fetched bytes to the worker, `parked` waiting; gives the capsules back if it
    /// cannot (the worker thread could not be started: the bytes are gone with the job).
    pub(super) fn start_fetched_build(
        &mut self,
        hash: CodeHash,
        bytes: Vec<u8>,
        parked: VecDeque<Parked>,
        started: Instant,
    ) -> Result<(), VecDeque<Parked>> {
        let disk = self.disk.clone();
        // The bytes move to the worker as they are: not even a copy on the node thread.
        let job = move |rt: &Runtime| build_fetched(rt, disk.as_ref(), hash, bytes);
        if !self.submit(Priority::Urgent, hash, Origin::Fetched { started }, job) {
            return Err(parked);
        }
        self.builds.insert(hash, Pending { parked });
        Ok(())
    }

    /// Parks `pkt` behind a build of `want`: one under way, or one started now from the disk
    /// cache. Gives the packet back when neither applies (no worker builds, or the code is
    /// neither building nor on disk: the loader fetches it).
    pub(super) fn park_on_build(
        &mut self,
        ctx: &mut NodeContext<'_>,
        want: CodeHash,
        pkt: EePacket,
    ) -> Option<EePacket> {
        if !self.builds_off_thread() {
            return Some(pkt);
        }
        if let Some(p) = self.builds.get_mut(&want) {
            if p.parked.len() >= self.cfg.loader.max_parked_per_code {
                ctx.count_drop("capsule", DropReason::ParkFull);
            } else {
                p.parked.push_back(hold(ctx, pkt));
            }
            return None;
        }
        if self.loader.is_fetching(&want) {
            return Some(pkt);
        }
        let Some(disk) = self.disk.clone().filter(|d| d.contains(&want)) else {
            return Some(pkt);
        };
        if self.builds.len() >= self.cfg.loader.max_fetches {
            ctx.count_drop("capsule", DropReason::ParkFull);
            return None;
        }
        let job = move |rt: &Runtime| load_from_disk(rt, &disk, want);
        if !self.submit(Priority::Urgent, want, Origin::Disk, job) {
            return Some(pkt);
        }
        let mut parked = VecDeque::new();
        parked.push_back(hold(ctx, pkt));
        self.builds.insert(want, Pending { parked });
        None
    }

    /// Takes every answer the worker has sent.
    pub(super) fn collect_worker(&mut self, ctx: &mut NodeContext<'_>) {
        while let Ok(done) = self.worker_rx.try_recv() {
            match done.origin {
                Origin::TierUp => self.finish_tier_up(ctx, done),
                Origin::Fetched { .. } | Origin::Disk => self.finish_build(ctx, done),
            }
        }
        self.worker_poll_at = self.worker_busy().then(|| ctx.now() + WORKER_POLL);
        self.boost_if_starved(ctx);
    }

    /// Capsules have waited for builds for [`BOOST_AFTER`] while the worker had less than a
    /// quarter of that in CPU time: the CPU is kept busy by others, so the worker leaves its
    /// idle class (see `Worker::boost`). A worker that is simply compiling a large module
    /// (it has the CPU) is left as it is.
    fn boost_if_starved(&mut self, ctx: &mut NodeContext<'_>) {
        let Some(w) = self.rt.worker.as_ref().filter(|_| !self.builds.is_empty()) else {
            self.builds_since = None;
            return;
        };
        let now = ctx.now();
        let (since, cpu0) = *self.builds_since.get_or_insert((now, w.cpu_time()));
        let waited = now.saturating_duration_since(since);
        if waited < BOOST_AFTER {
            return;
        }
        let cpu = w.cpu_time();
        let had = cpu.zip(cpu0).map(|(c, c0)| c.saturating_sub(c0));
        // Measured again over the next window either way.
        self.builds_since = Some((now, cpu));
        if had.is_some_and(|h| h * 4 >= waited) {
            return;
        }
        if let Some(nice) = w.boost() {
            ctx.log(
                "capsule",
                format!(
                    "{} builds waited {} ms with {} ms of CPU: the code worker is raised to nice {nice}",
                    self.builds.len(),
                    waited.as_millis(),
                    had.unwrap_or_default().as_millis()
                ),
            );
        }
    }

    fn finish_build(&mut self, ctx: &mut NodeContext<'_>, done: Done) {
        let hash = done.hash;
        let parked = self
            .builds
            .remove(&hash)
            .map(|p| p.parked)
            .unwrap_or_default();
        if let Some(e) = done.disk_error {
            ctx.log(
                "capsule",
                format!("disk cache: cannot store {}: {e}", hex::encode(hash)),
            );
        }
        match done.source {
            Source::Deserialized => self.stats.disk_loads += 1,
            Source::Rejected => self.stats.disk_rejected += 1,
            Source::Compiled => {}
        }
        let fetched = match done.origin {
            Origin::Fetched { started } => Some(started),
            _ => None,
        };
        let ready = done.result.and_then(|(wasm, module, tier)| {
            if done.source != Source::Deserialized {
                self.stats.compiled += 1;
            }
            if self.mem.map.contains_key(&hash) {
                // Installed meanwhile: keep that one (and its instance and soft state).
                return Ok(());
            }
            let obj = self
                .rt
                .code_object(hash, wasm, module, tier)
                .map_err(|e| Failed::Invalid(e.to_string()))?;
            self.admit_mem(obj);
            if tier == CodeTier::Baseline {
                self.start_tier_up(hash);
            }
            Ok(())
        });
        match (ready, fetched) {
            (Ok(()), started) => {
                if let Some(started) = started {
                    self.stats.loads_completed += 1;
                    let took = ctx.now().saturating_duration_since(started);
                    self.stats.note_load(took);
                }
                self.redispatch(ctx, parked);
            }
            (Err(f), Some(_)) => {
                self.stats.load_failures += 1;
                ctx.log(
                    "capsule",
                    format!("building {} failed: {}", hex::encode(hash), f.detail()),
                );
                drop_all(ctx, parked, f.reason());
            }
            (Err(_), None) => {
                // The disk copy is unusable: forget it; the capsules fetch the code instead.
                if let Some(d) = &self.disk {
                    d.remove(&hash);
                }
                self.redispatch(ctx, parked);
            }
        }
    }

    /// Swaps in the optimized code of a finished tier-up.
    fn finish_tier_up(&mut self, ctx: &mut NodeContext<'_>, done: Done) {
        self.tier_pending.remove(&done.hash);
        if let Some(e) = done.disk_error {
            ctx.log(
                "capsule",
                format!("disk cache: cannot store {}: {e}", hex::encode(done.hash)),
            );
        }
        if self
            .mem
            .map
            .get(&done.hash)
            .is_none_or(|c| c.obj.tier == CodeTier::Optimized)
        {
            // Evicted meanwhile (the artifact is on disk for next time), or already
            // optimized (it became a dependency of optimized code).
            return;
        }
        let obj = match done.result {
            Ok((wasm, m, tier)) => self.rt.code_object(done.hash, wasm, m, tier),
            Err(f) => Err(CapsuleError::Compile(f.detail())),
        };
        let obj = match obj {
            Ok(o) => o,
            Err(e) => {
                self.stats.tier_up_failures += 1;
                ctx.log(
                    "capsule",
                    format!("tier-up of {} failed: {e}", hex::encode(done.hash)),
                );
                return;
            }
        };
        self.swap_in(Arc::new(obj));
        self.stats.tier_ups += 1;
    }
}

/// Builds code for [`CapsuleEe::install_built`] on the caller's thread (a control
/// connection's, say), so an operator installing a large module does not stall the node
/// thread. Holds the EE's runtime and disk cache; cheap to make with
/// [`CapsuleEe::installer`].
#[derive(Debug, Clone)]
pub struct CodeInstaller {
    rt: Arc<Runtime>,
    disk: Option<DiskCache>,
    max: usize,
}

/// A code object compiled, ABI-checked and written to the disk cache by a
/// [`CodeInstaller`], ready for [`CapsuleEe::install_built`].
#[derive(Debug)]
pub struct BuiltCode(CodeObject);

impl BuiltCode {
    /// Its name.
    pub fn hash(&self) -> CodeHash {
        self.0.hash
    }
}

impl CodeInstaller {
    /// Refuses modules larger than the EE's `max_code_bytes`.
    pub fn check_size(&self, wasm: &[u8]) -> Result<(), CapsuleError> {
        if wasm.len() > self.max {
            return Err(CapsuleError::TooBig {
                len: wasm.len(),
                max: self.max,
            });
        }
        Ok(())
    }

    /// Compiles `wasm`, checks it against the ABI and writes it to the disk cache.
    pub fn build(&self, wasm: &[u8]) -> Result<BuiltCode, CapsuleError> {
        self.check_size(wasm)?;
        let obj = self.rt.compile(wasm)?;
        if let Some(d) = &self.disk {
            d.store(&self.rt, &obj)?;
        }
        Ok(BuiltCode(obj))
    }
}

impl CapsuleEe {
    /// A [`CodeInstaller`] for this EE's runtime and disk cache.
    pub fn installer(&self) -> CodeInstaller {
        CodeInstaller {
            rt: self.rt.clone(),
            disk: self.disk.clone(),
            max: self.cfg.loader.max_code_bytes as usize,
        }
    }

    /// Installs code a [`CodeInstaller`] built; returns its name. As with
    /// [`CapsuleEe::install`], code already in memory stays as it is.
    pub fn install_built(&mut self, code: BuiltCode) -> CodeHash {
        let obj = code.0;
        let h = obj.hash;
        if self.mem.map.contains_key(&h) {
            return h;
        }
        self.stats.compiled += 1;
        let baseline = obj.tier == CodeTier::Baseline;
        self.admit_mem(obj);
        if baseline {
            self.start_tier_up(h);
        }
        h
    }
}
