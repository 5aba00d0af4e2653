//! Running a capsule's code: one `accept` call on its code object's live instance.
//!
//! A run has three steps, split so that the middle one can run on a worker thread
//! (`batch.rs`):
//! 1. on the node thread, the code object's instance is made ready (dependencies resolved,
//!    instantiated) and the capsule checked and moved into a [`Call`] ([`make_call`]);
//! 2. on any thread, [`call_accept`] runs the guest on the instance's store with a call
//!    environment lent to it; it touches nothing of the node and records what the guest did
//!    to the node as [`Effect`]s;
//! 3. on the node thread, [`CapsuleEe::conclude`] applies the effects in order, acts on the
//!    verdict, records the run and discards an instance that trapped.
//!
//! Every capsule that reaches step 1 ends in exactly one outcome: a drop counted under
//! `capsule/<reason>`, parked for code, or what step 3 gives it.

use std::time::Instant;

use anode_core::{DropReason, EePacket, LinkId, NodeContext};
use anode_wire::anep::{AnepPacket, TYPE_CAPSULE};
use anode_wire::capsule::CapsuleRepr;

use super::{CapsuleEe, Missing};
use crate::CodeHash;
use crate::abi::{self, verdict};
use crate::host::{CallEnv, CurCapsule, Effect, Reach, ReachSlot};
use crate::report::{RunOutcome, RunReport, outcome_of_error};
use crate::runtime::Live;

/// A capsule ready for its code's `accept`.
#[derive(Debug)]
pub(super) struct Call {
    pub cap: CurCapsule,
    /// `accept`'s arguments: the payload length and why the code runs.
    pub args: (i32, i32),
}

/// What one `accept` call did.
#[derive(Debug)]
pub(super) struct Called {
    pub result: wasmtime::Result<i32>,
    /// The capsule, unless the guest sent it on or delivered it.
    pub cap: Option<CurCapsule>,
    pub fuel_used: u64,
    /// A memory or table growth was refused during the call.
    pub limit_hit: bool,
}

/// Moves `pkt`'s bytes (its capsule header `hdr` parsed by the node, the payload at
/// `payload_at`) into a [`Call`]; `pkt` keeps its other fields, for the ledger. A packet
/// length the buffer does not hold, or one that ends before the payload, is refused.
pub(super) fn make_call(
    pkt: &mut EePacket,
    hdr: CapsuleRepr,
    payload_at: usize,
) -> Result<Call, DropReason> {
    let plen = AnepPacket::new_checked(&pkt.buf[..]).map_or(0, |p| p.packet_len());
    if plen < payload_at || plen > pkt.buf.len() {
        return Err(DropReason::BadHeader);
    }
    let mut buf = std::mem::take(&mut pkt.buf);
    buf.truncate(plen);
    let why = match pkt.why {
        anode_core::Dispatch::Destination => abi::why::DESTINATION,
        anode_core::Dispatch::EveryHop => abi::why::EVERY_HOP,
        anode_core::Dispatch::Route => abi::why::ROUTE,
        anode_core::Dispatch::Local => abi::why::LOCAL,
    };
    let len = i32::try_from(plen - payload_at).map_err(|_| DropReason::BadHeader)?;
    Ok(Call {
        cap: CurCapsule {
            buf,
            anep_len: pkt.anep_len,
            payload_at,
            why: pkt.why,
            transit_len: pkt.transit_len,
            header: hdr,
            dirty: false,
        },
        args: (len, why),
    })
}

/// Runs `accept` on `live` for `call` with a budget of `fuel`, `env` lent to the store for
/// the call and handed back (`None` only if a host function took it, which none does).
pub(super) fn call_accept(
    live: &mut Live,
    call: Call,
    env: Box<CallEnv>,
    fuel: u64,
) -> (Called, Option<Box<CallEnv>>) {
    let st = live.store.data_mut();
    st.cap = Some(call.cap);
    st.actions = 0;
    st.limits.clear_hit();
    st.env = Some(env);
    let result = match live.store.set_fuel(fuel) {
        Ok(()) => live.accept.call(&mut live.store, call.args),
        Err(e) => Err(e),
    };
    let fuel_used = fuel.saturating_sub(live.store.get_fuel().unwrap_or(0));
    let st = live.store.data_mut();
    let env = st.env.take();
    let called = Called {
        result,
        cap: st.cap.take(),
        fuel_used,
        limit_hit: st.limits.hit(),
    };
    (called, env)
}

impl CapsuleEe {
    /// Makes `hash`'s instance ready for a capsule: its dependencies resolved and the group
    /// instantiated if it has no live instance (`needs_instance`). `Err(None)`: the capsule
    /// must wait for code object `want` (`Err(Some(want))`) or be dropped for the reason.
    pub(super) fn ready(
        &mut self,
        hash: &CodeHash,
        needs_instance: bool,
    ) -> Result<(), Result<CodeHash, DropReason>> {
        if !needs_instance {
            return Ok(());
        }
        let deps = match self.resolve(hash) {
            Ok(d) => d,
            Err(Missing::Code(want)) => return Err(Ok(want)),
            Err(Missing::TooDeep) => return Err(Err(DropReason::DepsTooDeep)),
        };
        if self.instantiate(hash, &deps) {
            Ok(())
        } else {
            Err(Err(DropReason::InstantiateFailed))
        }
    }

    /// Runs the capsule's code (`hdr.code`) on it, on this thread.
    pub(super) fn run(
        &mut self,
        ctx: &mut NodeContext<'_>,
        hdr: CapsuleRepr,
        mut pkt: EePacket,
        payload_at: usize,
        needs_instance: bool,
    ) {
        let hash = hdr.code;
        match self.ready(&hash, needs_instance) {
            Ok(()) => {}
            Err(Ok(want)) => return self.park(ctx, want, hdr.code_source, pkt),
            Err(Err(reason)) => return ctx.count_drop("capsule", reason),
        }
        let call = match make_call(&mut pkt, hdr, payload_at) {
            Ok(c) => c,
            Err(reason) => return ctx.count_drop("capsule", reason),
        };
        let Some(live) = self.mem.get_mut(&hash).and_then(|c| c.live.as_mut()) else {
            return ctx.count_drop("capsule", DropReason::InstantiateFailed);
        };
        let epoch = *self.epoch.get_or_insert(ctx.now());
        // The call's environment moves into the store and back (host/mod.rs), the EE's reach
        // with it; what the guest did to the node is applied after it returns, in order.
        let mut env = lend_env(&mut self.call_env, ctx, epoch, self.cfg.max_actions);
        if let ReachSlot::Own(r) = &mut env.reach {
            std::mem::swap(&mut self.reach, r);
        }
        let (called, env) = call_accept(live, call, env, self.cfg.fuel);
        let Some(mut env) = env else {
            return self.conclude(ctx, hash, called, (&mut Vec::new(), 0));
        };
        if let ReachSlot::Own(r) = &mut env.reach {
            std::mem::swap(&mut self.reach, r);
        }
        let misses = std::mem::take(&mut env.route_misses);
        self.conclude(ctx, hash, called, (&mut env.effects, misses));
        self.call_env = Some(env);
    }

    /// Step 3 of a run of `hash`'s code: the guest's `effects` (left empty) applied in
    /// order, its `route_misses` counted, the verdict acted on, the run recorded. After a
    /// trap the code object's instance is discarded (it is made afresh at its next capsule).
    pub(super) fn conclude(
        &mut self,
        ctx: &mut NodeContext<'_>,
        hash: CodeHash,
        called: Called,
        (effects, route_misses): (&mut Vec<Effect>, u64),
    ) {
        let tx0 = ctx.tx_totals().1;
        self.stats.runs += 1;
        self.stats.unknown_route_fn += route_misses;
        self.apply_effects(ctx, hash, effects);
        let outcome = match &called.result {
            Ok(verdict::FORWARD | verdict::DONE | verdict::DROP) => RunOutcome::Completed,
            Ok(_) => RunOutcome::BadVerdict,
            Err(e) => outcome_of_error(e, called.limit_hit),
        };
        let fuel_used = called.fuel_used;
        if self.workers.is_some()
            && let Some(c) = self.mem.map.get_mut(&hash)
        {
            // What the code's runs take: whether its capsules go to the workers.
            c.fuel = match c.fuel {
                0 => fuel_used,
                avg => (avg.saturating_mul(3) / 4).saturating_add(fuel_used / 4),
            };
        }
        self.act_on(ctx, hash, called);
        if self.cfg.record_runs {
            self.runs.push(RunReport {
                code: hash,
                fuel_used,
                outcome,
                tx_bytes: ctx.tx_totals().1.saturating_sub(tx0),
            });
        }
    }

    /// Acts on a run's verdict (the capsule forwarded, consumed or dropped), or on its trap.
    fn act_on(&mut self, ctx: &mut NodeContext<'_>, hash: CodeHash, called: Called) {
        let ctx_now = ctx.now();
        match called.result {
            Ok(v) => match (v, called.cap) {
                (_, None) => {}
                (verdict::FORWARD, Some(mut k)) => {
                    k.fix_up();
                    if let Ok(link) = ctx.forward(k.buf, k.anep_len) {
                        self.serve.sent(ctx_now, link, hash);
                    }
                }
                (verdict::DONE, Some(_)) => self.stats.consumed += 1,
                (verdict::DROP, Some(_)) => ctx.count_drop("capsule", DropReason::GuestDrop),
                (_, Some(_)) => ctx.count_drop("capsule", DropReason::BadVerdict),
            },
            Err(e) => {
                let reason = outcome_of_error(&e, called.limit_hit)
                    .drop_reason()
                    .unwrap_or(DropReason::Trap);
                self.stats.traps += 1;
                // The instance's state is unknown after a trap: start afresh next time.
                if let Some(c) = self.mem.get_mut(&hash) {
                    c.live = None;
                }
                if called.cap.is_some() {
                    ctx.count_drop("capsule", reason);
                } else {
                    ctx.log("capsule", format!("{reason} after the capsule was sent on"));
                }
            }
        }
    }

    /// Applies what a guest call of `code` did to the node, in order (`host/mod.rs`);
    /// leaves `effects` empty with its capacity, for the next call.
    fn apply_effects(
        &mut self,
        ctx: &mut NodeContext<'_>,
        code: CodeHash,
        effects: &mut Vec<Effect>,
    ) {
        let now = ctx.now();
        for e in effects.drain(..) {
            match e {
                Effect::Send {
                    buf,
                    anep_len,
                    via,
                    new,
                } => {
                    let send = |ctx: &mut NodeContext<'_>| match via {
                        None => ctx.forward(buf, anep_len),
                        Some(hop) => ctx.forward_via(hop, buf, anep_len),
                    };
                    // A packet the guest made is not the capsule's outcome (the ledger).
                    let r: Result<LinkId, DropReason> =
                        if new { ctx.originate(send) } else { send(ctx) };
                    if let Ok(link) = r {
                        self.serve.sent(now, link, code);
                    }
                }
                Effect::Deliver(d) => ctx.deliver(d),
                Effect::Log(m) => {
                    if let Some(line) = self.log_line(now, &code, m) {
                        ctx.log("capsule", line);
                    }
                }
                Effect::OpenCut { keys, lifetime } => {
                    let spec = anode_core::CutSpec {
                        via: None,
                        rate_bytes_per_sec: None,
                        burst_bytes: 0,
                        expires: Some(now + lifetime),
                        owner: crate::principal_of_code(&code),
                    };
                    if ctx.open_cut_through(TYPE_CAPSULE, keys, spec).is_ok() {
                        self.stats.cuts_opened += 1;
                    } else {
                        self.stats.cuts_refused += 1;
                    }
                }
            }
        }
    }

    /// The line to log for a guest's log line `m` (`None`: rate-limited; a notice of the
    /// lines dropped comes with the next line allowed).
    fn log_line(&mut self, now: Instant, code: &CodeHash, m: String) -> Option<String> {
        match self.logs.allow(now, code) {
            Ok(()) => {
                self.stats.log_lines += 1;
                Some(m)
            }
            Err(notice) => {
                self.stats.log_dropped += 1;
                notice.map(|n| {
                    format!(
                        "{}: {n} log lines dropped (rate limit: {} lines/s per code object)",
                        hex::encode(code.get(..4).unwrap_or(&[])),
                        crate::serve::LogLimit::RATE
                    )
                })
            }
        }
    }
}

/// The call environment for the next guest call (holding an empty [`Reach`] to swap with
/// the EE's), its view current: the kept one refreshed if the node's view generation is
/// unchanged, else taken anew.
pub(super) fn lend_env(
    kept: &mut Option<Box<CallEnv>>,
    ctx: &mut NodeContext<'_>,
    epoch: Instant,
    max_actions: u32,
) -> Box<CallEnv> {
    let generation = ctx.view_generation();
    match kept.take() {
        Some(mut env) => {
            if env.view_gen == generation {
                env.view.set_now(ctx.now());
            } else {
                env.view = ctx.view();
                env.view_gen = generation;
            }
            env.epoch = epoch;
            env.max_actions = max_actions;
            env
        }
        None => Box::new(CallEnv {
            view: ctx.view(),
            view_gen: generation,
            reach: ReachSlot::Own(Box::new(Reach::empty())),
            epoch,
            max_actions,
            route_misses: 0,
            effects: Vec::new(),
        }),
    }
}
