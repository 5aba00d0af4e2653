//! Capsules run by a pool of worker threads ([`CapsuleConfig::workers`](super::CapsuleConfig)
//! above 1): the active path uses more than one core.
//!
//! With workers, a capsule whose code is in memory and heavy (its runs take at least
//! [`DEFER_MIN_FUEL`] on average), or any capsule while others are held, is not run at once:
//! the EE holds it (`NodeContext::hold`) and asks for a timeout now. Light code runs at once
//! as with one thread (handing it to another core costs more than it saves). The node runs that timeout after the
//! batch it is handling (`anode-io` after each receive batch; the emulator at the same
//! virtual time); an EE holding [`MAX_BATCH`] capsules runs them at once. Then:
//! 1. on the node thread, the capsules are grouped by code object in arrival order, and each
//!    group's instance is made ready as for a single run, and taken out of the cache;
//! 2. the groups run on the workers (the node thread is one of them): a group on one worker,
//!    its capsules in arrival order, each group with its own call environment and the EE's
//!    reach (soft state, files, ports, routing functions) shared behind a lock;
//! 3. back on the node thread, each capsule is resumed in the ledger and its effects and
//!    verdict applied, in arrival order (one outcome each, as for a single run).
//!
//! Invariants:
//! - A code object's capsules never run on two threads at once: its store (globals, linear
//!   memory) and its soft state are its own. So a protocol (one NodeOS domain) occupies at
//!   most one worker, however many capsules it sends: the per-domain thread limit is one.
//! - What leaves the node does not depend on thread timing: sends are applied in arrival
//!   order, and a group sees only its own code's state. What may differ from running the
//!   capsules one at a time: every capsule of a batch sees the node as it was when the batch
//!   began (the sends of earlier capsules are not queued yet), and, with the node's
//!   soft-state or file budget nearly full, which of two groups' concurrent writes fits.
//! - A group whose code traps stops there: its later capsules run one at a time in step 3,
//!   on a fresh instance (as after any trap). A capsule whose code cannot run in a group
//!   (evicted meanwhile, a dependency missing) takes the one-at-a-time path at its turn.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use anode_core::{DropReason, EePacket, NodeContext};
use anode_wire::capsule::CapsuleRepr;

use super::CapsuleEe;
use super::helpers::{BatchWork, Helpers};
use super::run::{Call, Called, call_accept, make_call};
use crate::host::{CallEnv, Effect, Reach, ReachSlot};
use crate::runtime::Live;
use crate::{CapsuleError, CodeHash};

/// Most capsules held for one batch; the next one runs the batch at once.
pub const MAX_BATCH: usize = 256;

/// Fuel per run (a code object's moving average) from which its capsules are held for the
/// workers: lighter code runs at once on the node thread, as with one thread (holding a
/// capsule costs about 65 ns; `benches/workers.rs`), unless capsules are held already.
pub const DEFER_MIN_FUEL: u64 = 4_000;

/// Guest work (fuel, about one unit per WebAssembly instruction) a batch is expected to take
/// before its groups go to the helpers: below it the node thread runs them itself, since
/// handing light capsules to another core (waking it, moving their stores' and buffers'
/// cache lines) costs more than it saves (`benches/workers.rs`: `forward_*`).
pub const PARALLEL_MIN_FUEL: u64 = 100_000;

/// The EE's worker threads and the capsules held for the end of the node's batch.
pub(crate) struct Workers {
    /// Worker threads besides the node thread (`threads - 1` of them).
    helpers: Helpers,
    threads: usize,
    deferred: Vec<Deferred>,
    /// When the oldest held capsule came (its deadline).
    since: Option<Instant>,
    /// The EE's reach while a batch runs; an empty one to swap with between batches.
    shared: SharedReach,
    /// Code objects whose domain ended while capsules of theirs were held: those are dropped
    /// for the reason when the batch runs.
    cancelled: Vec<(CodeHash, DropReason)>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("threads", &self.threads)
            .field("deferred", &self.deferred.len())
            .finish()
    }
}

impl Workers {
    /// `threads` workers in all (at least 2: one is the node thread).
    pub fn new(threads: usize) -> Result<Workers, CapsuleError> {
        let helpers = Helpers::start(threads.saturating_sub(1).max(1)).map_err(|e| {
            CapsuleError::Engine(format!("cannot start the capsule worker threads: {e}"))
        })?;
        Ok(Workers {
            helpers,
            threads,
            deferred: Vec::with_capacity(MAX_BATCH),
            since: None,
            shared: Arc::new(Mutex::new(Box::new(Reach::empty()))),
            cancelled: Vec::new(),
        })
    }

    /// `code`'s held capsules are dropped for `reason` when the batch runs.
    pub fn cancel(&mut self, code: CodeHash, reason: DropReason) {
        if self.deferred.iter().any(|d| d.hdr.code == code) {
            self.cancelled.push((code, reason));
        }
    }

    /// Capsules held.
    pub fn len(&self) -> usize {
        self.deferred.len()
    }

    /// When the held capsules are due (`None`: none held).
    pub fn deadline(&self) -> Option<Instant> {
        self.since
    }

    /// The code objects of the held capsules, each once, in arrival order.
    pub fn codes(&self) -> Vec<CodeHash> {
        let mut v: Vec<CodeHash> = Vec::new();
        for d in &self.deferred {
            if !v.contains(&d.hdr.code) {
                v.push(d.hdr.code);
            }
        }
        v
    }

    /// The packets held for the batch (for a hand-over, which copies them).
    pub fn held(&self) -> impl Iterator<Item = &EePacket> {
        self.deferred.iter().map(|d| &d.pkt)
    }
}

/// The EE's reach, shared with the workers while a batch runs.
type SharedReach = Arc<Mutex<Box<Reach>>>;

/// A capsule held until the end of the batch.
struct Deferred {
    pkt: EePacket,
    hdr: CapsuleRepr,
    payload_at: usize,
}

/// Where a held capsule stands after step 1.
enum Plan {
    /// Runs in this group (its index) of its code object.
    Grouped(usize),
    /// Takes the one-at-a-time path at its turn.
    Alone,
    /// Dropped at its turn, for the reason.
    Drop(DropReason),
}

/// What happened to a grouped capsule in step 2.
enum Ran {
    /// Its code ran: the call's outcome, its effects and `forward_by` misses.
    Called(Called, Vec<Effect>, u64),
    /// An earlier capsule of its group trapped: it runs alone in step 3.
    NotRun(Call),
}

/// The capsules of one code object in a batch.
pub(super) struct Group {
    hash: CodeHash,
    live: Option<Live>,
    env: Option<Box<CallEnv>>,
    /// The calls, in arrival order.
    calls: Vec<Call>,
    /// What became of each, in the same order.
    done: Vec<Ran>,
}

impl Group {
    /// Step 2 for this group, on whichever thread takes it.
    pub(super) fn run(&mut self, fuel: u64) {
        for call in std::mem::take(&mut self.calls) {
            let (Some(live), Some(env)) = (self.live.as_mut(), self.env.take()) else {
                self.done.push(Ran::NotRun(call));
                continue;
            };
            let (called, env) = call_accept(live, call, env, fuel);
            if called.result.is_err() {
                // Its state is unknown after a trap: the rest of the group runs afresh.
                self.live = None;
            }
            let ran = match env {
                Some(mut env) => {
                    let effects = std::mem::take(&mut env.effects);
                    let misses = std::mem::take(&mut env.route_misses);
                    self.env = Some(env);
                    Ran::Called(called, effects, misses)
                }
                None => Ran::Called(called, Vec::new(), 0),
            };
            self.done.push(ran);
        }
    }
}

impl CapsuleEe {
    /// Holds a capsule whose code is in memory for the end of the batch (see the module
    /// docs); runs the batch at once when it is full.
    pub(super) fn defer(
        &mut self,
        ctx: &mut NodeContext<'_>,
        mut pkt: EePacket,
        (hdr, payload_at): (CapsuleRepr, usize),
    ) {
        let Some(w) = self.workers.as_mut() else {
            return self.run(ctx, hdr, pkt, payload_at, true);
        };
        ctx.hold(&mut pkt);
        w.since.get_or_insert(ctx.now());
        w.deferred.push(Deferred {
            pkt,
            hdr,
            payload_at,
        });
        if w.deferred.len() >= MAX_BATCH {
            self.run_batch(ctx);
        }
    }

    /// Runs the capsules held for the batch (see the module docs).
    pub(super) fn run_batch(&mut self, ctx: &mut NodeContext<'_>) {
        let Some(w) = self.workers.as_mut() else {
            return;
        };
        w.since = None;
        if w.deferred.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut w.deferred);
        let cancelled = std::mem::take(&mut w.cancelled);
        let shared = w.shared.clone();
        let (mut groups, plans) = self.group(ctx, &mut batch, (&shared, &cancelled));
        if !groups.is_empty() {
            self.run_groups(&mut groups, &shared);
        }
        for g in &mut groups {
            if let Some(live) = g.live.take() {
                match self.mem.get_mut(&g.hash) {
                    Some(c) => c.live = Some(live),
                    None => live.finalize(self.cfg.fuel),
                }
            }
        }
        self.stats.batches += 1;
        let mut outs: Vec<std::vec::IntoIter<Ran>> = groups
            .iter_mut()
            .map(|g| std::mem::take(&mut g.done).into_iter())
            .collect();
        for (d, plan) in batch.drain(..).zip(plans) {
            let ran = match plan {
                Plan::Grouped(g) => outs.get_mut(g).and_then(Iterator::next),
                _ => None,
            };
            self.conclude_held(ctx, d, plan, ran);
        }
        // The buffer goes back for the next batch (its capacity kept).
        if let Some(w) = self.workers.as_mut()
            && w.deferred.is_empty()
        {
            w.deferred = batch;
        }
    }

    /// Step 1: the groups, their instances ready, and what becomes of each capsule.
    fn group(
        &mut self,
        ctx: &mut NodeContext<'_>,
        batch: &mut [Deferred],
        (shared, cancelled): (&SharedReach, &[(CodeHash, DropReason)]),
    ) -> (Vec<Group>, Vec<Plan>) {
        let epoch = *self.epoch.get_or_insert(ctx.now());
        let view = ctx.view();
        let view_gen = ctx.view_generation();
        let mut groups: Vec<Group> = Vec::new();
        // Each code object's group (`None`: its capsules go alone).
        let mut index: rustc_hash::FxHashMap<CodeHash, Option<usize>> = Default::default();
        let mut plans = Vec::with_capacity(batch.len());
        for d in batch.iter_mut() {
            let hash = d.hdr.code;
            if let Some((_, reason)) = cancelled.iter().find(|(c, _)| *c == hash) {
                plans.push(Plan::Drop(*reason));
                continue;
            }
            let g = match index.get(&hash) {
                Some(g) => *g,
                None => {
                    let live = self.take_ready(&hash);
                    let g = live.map(|live| {
                        groups.push(Group {
                            hash,
                            live: Some(live),
                            env: Some(Box::new(CallEnv {
                                view: view.clone(),
                                view_gen,
                                reach: ReachSlot::Shared(shared.clone()),
                                epoch,
                                max_actions: self.cfg.max_actions,
                                route_misses: 0,
                                effects: Vec::new(),
                            })),
                            calls: Vec::new(),
                            done: Vec::new(),
                        });
                        groups.len() - 1
                    });
                    index.insert(hash, g);
                    g
                }
            };
            let plan = match g.and_then(|g| Some((g, groups.get_mut(g)?))) {
                None => Plan::Alone,
                Some((g, group)) => match make_call(&mut d.pkt, d.hdr, d.payload_at) {
                    Ok(call) => {
                        group.calls.push(call);
                        Plan::Grouped(g)
                    }
                    Err(reason) => Plan::Drop(reason),
                },
            };
            plans.push(plan);
        }
        (groups, plans)
    }

    /// `hash`'s live instance, made ready and taken out of the cache for a group (`None`:
    /// its capsules take the one-at-a-time path, which parks or drops them).
    fn take_ready(&mut self, hash: &CodeHash) -> Option<Live> {
        let needs_instance = self.mem.map.get(hash)?.live.is_none();
        self.ready(hash, needs_instance).ok()?;
        self.mem.get_mut(hash)?.live.take()
    }

    /// Step 2: the groups on the workers, the EE's reach shared with them meanwhile.
    fn run_groups(&mut self, groups: &mut Vec<Group>, shared: &SharedReach) {
        let fuel = self.cfg.fuel;
        {
            let mut r = shared.lock().unwrap_or_else(PoisonError::into_inner);
            std::mem::swap(&mut self.reach, &mut *r);
        }
        let expected: u64 = groups
            .iter()
            .map(|g| {
                let fuel = self.mem.map.get(&g.hash).map_or(0, |c| c.fuel);
                fuel.saturating_mul(g.calls.len() as u64)
            })
            .fold(0, u64::saturating_add);
        match self.workers.as_ref() {
            Some(w) if groups.len() > 1 && expected >= PARALLEL_MIN_FUEL => {
                self.stats.worker_groups += groups.len() as u64;
                let work = BatchWork::new(std::mem::take(groups), fuel);
                *groups = w.helpers.run(work);
            }
            _ => {
                for g in groups.iter_mut() {
                    g.run(fuel);
                }
            }
        }
        // The groups' environments go (their handles on the shared reach with them) and the
        // EE takes its reach back.
        for g in groups.iter_mut() {
            g.env = None;
        }
        let mut r = shared.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::swap(&mut self.reach, &mut *r);
    }

    /// Step 3 for one held capsule: resumed in the ledger, given its outcome, finished.
    fn conclude_held(
        &mut self,
        ctx: &mut NodeContext<'_>,
        mut d: Deferred,
        plan: Plan,
        ran: Option<Ran>,
    ) {
        let resumed = ctx.resume(&mut d.pkt);
        let hash = d.hdr.code;
        match (plan, ran) {
            (Plan::Drop(reason), _) => ctx.count_drop("capsule", reason),
            (Plan::Grouped(_), Some(Ran::Called(called, mut effects, misses))) => {
                self.conclude(ctx, hash, called, (&mut effects, misses));
            }
            (Plan::Grouped(_), Some(Ran::NotRun(call))) => {
                d.pkt.buf = call.cap.buf;
                let needs_instance = self.mem.map.get(&hash).is_none_or(|c| c.live.is_none());
                self.run(ctx, d.hdr, d.pkt, d.payload_at, needs_instance);
            }
            (Plan::Alone | Plan::Grouped(_), _) => self.dispatch_now(ctx, d.pkt),
        }
        ctx.finish(resumed);
    }
}
