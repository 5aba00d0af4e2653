//! The node interface (PAN's PNI) as host imports of module `"anode"` (see `ABI.md`).
//!
//! Contracts:
//! - Every guest pointer/length pair is checked against the guest's linear memory and every
//!   payload offset against the current payload (`anode_wasm::mem`); a bad range returns
//!   `err::BOUNDS`, never traps and never touches memory outside the range.
//! - No ambient authority: a code object reads and changes only the capsule it runs on, its
//!   own soft state (namespaced by its hash), and node facts (address, time, neighbors,
//!   routes, the routing functions the node registered for `forward_by`). It sends only
//!   capsules of its own code, delivers only to ports an application registered, and does at
//!   most `max_actions` sends/copies per capsule; a child capsule's resource bound is taken
//!   from the parent's.
//! - Host work proportional to a guest-chosen length (copies, hashes) is charged to fuel.
//!
//! The node is reached through a [`CallEnv`] that the EE sets up on its stack for exactly the
//! duration of one guest call; `HostState::env` points to it then and is null otherwise.

use std::ptr;
use std::time::Instant;

use anode_core::{Delivery, Dispatch, DropReason, NextHop, NodeContext};
use anode_wasm::Limits;
use anode_wasm::mem::{copy, copy_upto, slice, slice_mut};
use anode_wire::anep::{self, AnepPacket, TYPE_CAPSULE};
use anode_wire::capsule::CapsuleRepr;
use anode_wire::transit::{FLAG_EE_ROUTE, FLAG_EVAL_EVERY_HOP, Transit, TransitRepr};
use anode_wire::{NodeAddr, checksum};
use wasmtime::{Caller, Instance, Linker, Memory, Trap, Val};

use crate::abi::{self, err};
use crate::route::RouteTable;
use crate::runtime::code_hash;
use crate::softstate::{PutError, SoftState};
use crate::{CodeHash, PortTable};

/// The capsule a guest call runs on.
#[derive(Debug)]
pub(crate) struct CurCapsule {
    /// The whole ANEP packet (truncated to its packet length).
    pub buf: Vec<u8>,
    pub anep_len: usize,
    /// Where the payload starts in `buf`.
    pub payload_at: usize,
    pub why: Dispatch,
    /// The payload or header changed: fix the ANEP length and checksum before sending.
    pub dirty: bool,
}

impl CurCapsule {
    fn transit(&self) -> Option<Transit<&[u8]>> {
        Transit::new_checked(self.buf.get(self.anep_len..)?).ok()
    }

    fn payload_len(&self) -> usize {
        self.buf.len().saturating_sub(self.payload_at)
    }

    /// Makes the ANEP packet length and integrity checksum match the (changed) bytes.
    pub fn fix_up(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let len = u16::try_from(self.buf.len()).unwrap_or(u16::MAX);
        if let Some(b) = self.buf.get_mut(ANEP_PACKET_LEN_AT..ANEP_PACKET_LEN_AT + 2) {
            b.copy_from_slice(&len.to_be_bytes());
        }
        let off = AnepPacket::new_checked(&self.buf[..])
            .ok()
            .and_then(|p| p.checksum_offset());
        if let Some(off) = off {
            if let Some(b) = self.buf.get_mut(off..off + 2) {
                b.copy_from_slice(&[0, 0]);
            }
            let c = checksum::checksum(&self.buf);
            if let Some(b) = self.buf.get_mut(off..off + 2) {
                b.copy_from_slice(&c.to_be_bytes());
            }
        }
    }
}

/// What a guest call may reach of the node: set up by the EE around one call.
pub(crate) struct CallEnv<'a, 'b> {
    pub ctx: &'a mut NodeContext<'b>,
    pub soft: &'a mut SoftState,
    pub ports: &'a PortTable,
    pub epoch: Instant,
    pub max_actions: u32,
    /// The routing functions `forward_by` may name.
    pub routes: &'a mut RouteTable,
    /// `forward_by` calls naming no registered routing function.
    pub route_misses: u64,
}

/// A pointer to the current [`CallEnv`], or null between calls.
pub(crate) struct EnvPtr(*mut CallEnv<'static, 'static>);

// SAFETY: the pointer is non-null only while the EE's thread is inside a synchronous guest
// call that it started with the `CallEnv` on its own stack; the store (and this pointer) never
// crosses threads during that time, and between calls it is null.
unsafe impl Send for EnvPtr {}

impl EnvPtr {
    pub const NULL: EnvPtr = EnvPtr(ptr::null_mut());

    /// Points at `env` (the caller must reset to `NULL` before `env` goes away).
    pub fn to(env: &mut CallEnv<'_, '_>) -> EnvPtr {
        EnvPtr(ptr::from_mut(env).cast())
    }
}

/// A dependency's instance in a dependent's store.
pub(crate) struct DepInstance {
    pub hash: CodeHash,
    pub instance: Instance,
    pub mem: Memory,
}

/// The data of one code object's store.
pub(crate) struct HostState {
    pub limits: Limits,
    /// The code object this store runs (its soft-state namespace and `send`'s code).
    pub code: CodeHash,
    pub mem: Option<Memory>,
    pub cap: Option<CurCapsule>,
    pub env: EnvPtr,
    /// Sends and copies this capsule made.
    pub actions: u32,
    /// The dependencies instantiated in this store.
    pub deps: Vec<DepInstance>,
}

impl HostState {
    pub fn new(code: CodeHash, limits: Limits) -> Self {
        HostState {
            limits,
            code,
            mem: None,
            cap: None,
            env: EnvPtr::NULL,
            actions: 0,
            deps: Vec::new(),
        }
    }
}

type C<'a> = Caller<'a, HostState>;

/// Offset of the packet-length field in the ANEP basic header.
const ANEP_PACKET_LEN_AT: usize = 6;

/// Runs `f` with the guest memory, the host state, and the call environment (if any).
fn with<R>(
    caller: &mut C<'_>,
    f: impl FnOnce(&mut [u8], &mut HostState, Option<&mut CallEnv<'_, '_>>) -> R,
) -> Option<R> {
    let mem = caller.data().mem?;
    let envp = caller.data().env.0;
    let (data, st) = mem.data_and_store_mut(caller);
    // SAFETY: `envp` is either null or points to the `CallEnv` the EE placed on its stack for
    // the guest call we are inside of (see `EnvPtr`); nothing else accesses it during the
    // call, and the reference does not outlive this function.
    let env = unsafe { envp.as_mut() };
    Some(f(data, st, env))
}

fn read_addr(mem: &[u8], ptr: i32) -> Option<NodeAddr> {
    NodeAddr::read(slice(mem, ptr, abi::ADDR_LEN as i32)?, 0).ok()
}

fn write_bytes(mem: &mut [u8], ptr: i32, bytes: &[u8]) -> bool {
    match slice_mut(mem, ptr, bytes.len() as i32) {
        Some(d) => {
            d.copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

/// Charges `bytes / 64` fuel for host work proportional to a guest-chosen length.
fn charge(caller: &mut C<'_>, bytes: usize) -> wasmtime::Result<()> {
    let cost = (bytes / 64) as u64;
    if cost == 0 {
        return Ok(());
    }
    let f = caller.get_fuel()?;
    if f < cost {
        caller.set_fuel(0)?;
        return Err(Trap::OutOfFuel.into());
    }
    caller.set_fuel(f - cost)
}

fn drop_code(r: DropReason) -> i32 {
    match r {
        DropReason::RbExhausted => err::RB,
        DropReason::NoRoute => err::NO_ROUTE,
        DropReason::TooBig => err::TOO_BIG,
        _ => err::REFUSED,
    }
}

/// Sends the current capsule on (it is gone afterwards): toward its destination by the
/// default route, or via `hop`. The one path of `forward`, `forward_via` and `forward_by`.
fn send_on(st: &mut HostState, env: &mut CallEnv<'_, '_>, hop: Option<NextHop>) -> i32 {
    let Some(mut k) = st.cap.take() else {
        return err::NO_CAPSULE;
    };
    k.fix_up();
    let r = match hop {
        None => env.ctx.forward(k.buf, k.anep_len),
        Some(h) => env.ctx.forward_via(h, k.buf, k.anep_len),
    };
    match r {
        Ok(()) => 0,
        Err(r) => drop_code(r),
    }
}

fn neighbor(env: &CallEnv<'_, '_>, addr: NodeAddr) -> Option<NextHop> {
    env.ctx.neighbors().into_iter().find(|n| n.addr == addr)
}

fn why_code(w: Dispatch) -> u8 {
    match w {
        Dispatch::Destination => abi::why::DESTINATION as u8,
        Dispatch::EveryHop => abi::why::EVERY_HOP as u8,
        Dispatch::Route => abi::why::ROUTE as u8,
        Dispatch::Local => abi::why::LOCAL as u8,
    }
}

/// Calls export `name` of dependency `dep` (PAN's guardians). While it runs, host calls act for
/// the dependency: its memory, its soft-state namespace, its code for `send`. The current
/// capsule stays reachable (the dependency acts on the capsule it is called for).
pub(crate) fn call_dep(
    caller: &mut C<'_>,
    dep: &CodeHash,
    name: &str,
    params: &[Val],
    results: &mut [Val],
) -> wasmtime::Result<()> {
    let Some((inst, mem)) = caller
        .data()
        .deps
        .iter()
        .find(|d| d.hash == *dep)
        .map(|d| (d.instance, d.mem))
    else {
        return Err(wasmtime::format_err!(
            "dependency {} is not instantiated",
            hex::encode(dep)
        ));
    };
    let f = inst
        .get_func(&mut *caller, name)
        .ok_or_else(|| wasmtime::format_err!("dependency exports no function `{name}`"))?;
    let saved = (caller.data().code, caller.data().mem);
    caller.data_mut().code = *dep;
    caller.data_mut().mem = Some(mem);
    let r = f.call(&mut *caller, params, results);
    caller.data_mut().code = saved.0;
    caller.data_mut().mem = saved.1;
    r
}

/// Defines every host import on `linker`.
pub(crate) fn define_imports(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let m = abi::IMPORT_MODULE;

    l.func_wrap(m, "cap_len", |c: C<'_>| -> i32 {
        c.data()
            .cap
            .as_ref()
            .map_or(err::NO_CAPSULE, |k| k.payload_len() as i32)
    })?;

    l.func_wrap(m, "cap_info", |mut c: C<'_>, out: i32| -> i32 {
        with(&mut c, |mem, st, _| {
            let Some(k) = st.cap.as_ref() else {
                return err::NO_CAPSULE;
            };
            let Some(t) = k.transit() else {
                return err::NO_CAPSULE;
            };
            let mut rec = [0u8; abi::INFO_LEN];
            rec[0..2].copy_from_slice(&t.rb().to_le_bytes());
            rec[2] = t.flags();
            let hdr = k
                .buf
                .get(k.anep_len + t.header_len()..)
                .and_then(|b| CapsuleRepr::parse(b).ok())
                .map(|(h, _)| h)
                .unwrap_or_default();
            rec[3] = hdr.flags;
            rec[4] = why_code(k.why);
            rec[8..16].copy_from_slice(&t.flow().to_le_bytes());
            rec[16..34].copy_from_slice(&t.src().to_bytes());
            rec[34..52].copy_from_slice(&t.dst().to_bytes());
            rec[52..70].copy_from_slice(&t.prev_hop().to_bytes());
            rec[72..104].copy_from_slice(&hdr.code);
            if write_bytes(mem, out, &rec) {
                abi::INFO_LEN as i32
            } else {
                err::BOUNDS
            }
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(
        m,
        "cap_read",
        |mut c: C<'_>, off: i32, p: i32, len: i32| -> wasmtime::Result<i32> {
            charge(&mut c, usize::try_from(len).unwrap_or(0))?;
            Ok(with(&mut c, |mem, st, _| {
                let Some(k) = st.cap.as_ref() else {
                    return err::NO_CAPSULE;
                };
                // A short read: at most `len` bytes, fewer at the end of the payload.
                let Some(payload) = k.buf.get(k.payload_at..) else {
                    return err::BOUNDS;
                };
                match copy_upto(payload, off, mem, p, len) {
                    Ok(n) => n as i32,
                    Err(_) => err::BOUNDS,
                }
            })
            .unwrap_or(err::BOUNDS))
        },
    )?;

    l.func_wrap(
        m,
        "cap_write",
        |mut c: C<'_>, off: i32, p: i32, len: i32| -> wasmtime::Result<i32> {
            charge(&mut c, usize::try_from(len).unwrap_or(0))?;
            Ok(with(&mut c, |mem, st, _| {
                let Some(k) = st.cap.as_mut() else {
                    return err::NO_CAPSULE;
                };
                let Some(payload) = k.buf.get_mut(k.payload_at..) else {
                    return err::BOUNDS;
                };
                match copy(mem, p, payload, off, len) {
                    Ok(n) => {
                        k.dirty = true;
                        n as i32
                    }
                    Err(_) => err::BOUNDS,
                }
            })
            .unwrap_or(err::BOUNDS))
        },
    )?;

    l.func_wrap(
        m,
        "cap_resize",
        |mut c: C<'_>, len: i32| -> wasmtime::Result<i32> {
            charge(&mut c, usize::try_from(len).unwrap_or(0))?;
            let Some(k) = c.data_mut().cap.as_mut() else {
                return Ok(err::NO_CAPSULE);
            };
            let Ok(len) = usize::try_from(len) else {
                return Ok(err::BOUNDS);
            };
            let total = k.payload_at.saturating_add(len);
            if total > usize::from(u16::MAX) {
                return Ok(err::TOO_BIG);
            }
            k.buf.resize(total, 0);
            k.dirty = true;
            Ok(len as i32)
        },
    )?;

    l.func_wrap(m, "cap_set_dst", |mut c: C<'_>, p: i32| -> i32 {
        with(&mut c, |mem, st, _| {
            let Some(k) = st.cap.as_mut() else {
                return err::NO_CAPSULE;
            };
            let Some(a) = read_addr(mem, p) else {
                return err::BOUNDS;
            };
            let at = k.anep_len;
            match k
                .buf
                .get_mut(at..)
                .and_then(|b| Transit::new_checked(b).ok())
            {
                Some(mut t) => {
                    t.set_dst(a);
                    k.dirty = true;
                    0
                }
                None => err::NO_CAPSULE,
            }
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(m, "cap_set_transit_flags", |mut c: C<'_>, f: i32| -> i32 {
        let Some(k) = c.data_mut().cap.as_mut() else {
            return err::NO_CAPSULE;
        };
        let allowed = i32::from(FLAG_EVAL_EVERY_HOP | FLAG_EE_ROUTE);
        if f & !allowed != 0 {
            return err::DENIED;
        }
        let at = k.anep_len;
        match k
            .buf
            .get_mut(at..)
            .and_then(|b| Transit::new_checked(b).ok())
        {
            Some(mut t) => {
                t.set_flags(f as u8);
                k.dirty = true;
                0
            }
            None => err::NO_CAPSULE,
        }
    })?;

    l.func_wrap(m, "forward", |mut c: C<'_>| -> i32 {
        with(&mut c, |_, st, env| {
            let Some(env) = env else {
                return err::NO_CAPSULE;
            };
            send_on(st, env, None)
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(m, "forward_via", |mut c: C<'_>, p: i32| -> i32 {
        with(&mut c, |mem, st, env| {
            let Some(env) = env else {
                return err::NO_CAPSULE;
            };
            let Some(a) = read_addr(mem, p) else {
                return err::BOUNDS;
            };
            let Some(hop) = neighbor(env, a) else {
                return err::DENIED;
            };
            send_on(st, env, Some(hop))
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(
        m,
        "forward_by",
        |mut c: C<'_>, np: i32, nl: i32, flow: i64| -> i32 {
            with(&mut c, |mem, st, env| {
                let Some(env) = env else {
                    return err::NO_CAPSULE;
                };
                let Some(name) = slice(mem, np, nl) else {
                    return err::BOUNDS;
                };
                let Some(dst) = st.cap.as_ref().and_then(|k| k.transit()).map(|t| t.dst()) else {
                    return err::NO_CAPSULE;
                };
                let Some(f) = env.routes.get_mut(name) else {
                    env.route_misses += 1;
                    return err::NOT_FOUND;
                };
                // Only an up neighbor is a next hop, whatever the function answers.
                let hop = f
                    .next_hop(&*env.ctx, dst, flow as u64)
                    .filter(|h| neighbor(env, h.addr).is_some_and(|n| n.link == h.link));
                match hop {
                    Some(h) => send_on(st, env, Some(h)),
                    None => err::NO_ROUTE,
                }
            })
            .unwrap_or(err::BOUNDS)
        },
    )?;

    l.func_wrap(m, "copy_via", |mut c: C<'_>, p: i32| -> i32 {
        with(&mut c, |mem, st, env| {
            let Some(env) = env else {
                return err::NO_CAPSULE;
            };
            if st.actions >= env.max_actions {
                return err::LIMIT;
            }
            let Some(a) = read_addr(mem, p) else {
                return err::BOUNDS;
            };
            let Some(hop) = neighbor(env, a) else {
                return err::DENIED;
            };
            let Some(k) = st.cap.as_mut() else {
                return err::NO_CAPSULE;
            };
            k.fix_up();
            st.actions += 1;
            match env.ctx.forward_via(hop, k.buf.clone(), k.anep_len) {
                Ok(()) => 0,
                Err(r) => drop_code(r),
            }
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(m, "deliver", |mut c: C<'_>, port: i32| -> i32 {
        with(&mut c, |_, st, env| {
            let Some(env) = env else {
                return err::NO_CAPSULE;
            };
            let Ok(port) = u16::try_from(port) else {
                return err::DENIED;
            };
            if !env.ports.contains(&port) {
                return err::DENIED;
            }
            let Some(mut k) = st.cap.take() else {
                return err::NO_CAPSULE;
            };
            k.fix_up();
            let Some(t) = k.transit() else {
                return err::NO_CAPSULE;
            };
            let (src, flow, rb) = (t.src(), t.flow(), t.rb());
            env.ctx.deliver(Delivery {
                type_id: TYPE_CAPSULE,
                port,
                src,
                flow,
                rb,
                offset: k.payload_at,
                buf: k.buf,
            });
            0
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(
        m,
        "send",
        |mut c: C<'_>,
         dst: i32,
         code: i32,
         rb: i32,
         flow: i64,
         p: i32,
         len: i32|
         -> wasmtime::Result<i32> {
            charge(&mut c, usize::try_from(len).unwrap_or(0))?;
            Ok(with(&mut c, |mem, st, env| {
                let Some(env) = env else {
                    return err::NO_CAPSULE;
                };
                if st.actions >= env.max_actions {
                    return err::LIMIT;
                }
                let Some(dst) = read_addr(mem, dst) else {
                    return err::BOUNDS;
                };
                if code != 0 {
                    let own = slice(mem, code, abi::HASH_LEN as i32);
                    match own {
                        Some(h) if h == st.code => {}
                        Some(_) => return err::DENIED,
                        None => return err::BOUNDS,
                    }
                }
                let Some(payload) = slice(mem, p, len) else {
                    return err::BOUNDS;
                };
                let Some(k) = st.cap.as_mut() else {
                    return err::NO_CAPSULE;
                };
                let at = k.anep_len;
                let Some(mut t) = k
                    .buf
                    .get_mut(at..)
                    .and_then(|b| Transit::new_checked(b).ok())
                else {
                    return err::NO_CAPSULE;
                };
                let have = t.rb();
                let Ok(want) = u16::try_from(rb) else {
                    return err::RB;
                };
                if want == 0 || want > have {
                    return err::RB;
                }
                let me = env.ctx.address();
                let child = anode_wire::capsule::Capsule {
                    transit: TransitRepr {
                        flags: FLAG_EVAL_EVERY_HOP,
                        rb: want,
                        flow: flow as u64,
                        src: me,
                        dst,
                        prev_hop: me,
                    },
                    header: CapsuleRepr {
                        flags: 0,
                        code: st.code,
                        code_source: None,
                    },
                    payload: payload.to_vec(),
                };
                let Ok(buf) = child.to_packet() else {
                    return err::TOO_BIG;
                };
                t.set_rb(have - want);
                k.dirty = true;
                st.actions += 1;
                match env.ctx.forward(buf, anep::BASIC_HEADER_LEN) {
                    Ok(()) => 0,
                    Err(r) => drop_code(r),
                }
            })
            .unwrap_or(err::BOUNDS))
        },
    )?;

    l.func_wrap(
        m,
        "state_get",
        |mut c: C<'_>, kp: i32, kl: i32, vp: i32, vcap: i32| -> wasmtime::Result<i32> {
            charge(&mut c, usize::try_from(vcap).unwrap_or(0))?;
            Ok(with(&mut c, |mem, st, env| {
                let Some(env) = env else {
                    return err::NO_CAPSULE;
                };
                let Some(key) = slice(mem, kp, kl) else {
                    return err::BOUNDS;
                };
                let now = env.ctx.now();
                let Some(v) = env.soft.get(&st.code, key, now) else {
                    return err::NOT_FOUND;
                };
                // Copies at most `vcap` bytes; returns the value's whole length.
                match copy_upto(v, 0, mem, vp, vcap) {
                    Ok(_) => v.len() as i32,
                    Err(_) => err::BOUNDS,
                }
            })
            .unwrap_or(err::BOUNDS))
        },
    )?;

    l.func_wrap(
        m,
        "state_put",
        |mut c: C<'_>, kp: i32, kl: i32, vp: i32, vl: i32, ttl: i32| -> wasmtime::Result<i32> {
            charge(&mut c, usize::try_from(vl).unwrap_or(0))?;
            Ok(with(&mut c, |mem, st, env| {
                let Some(env) = env else {
                    return err::NO_CAPSULE;
                };
                let (Some(key), Some(val)) = (slice(mem, kp, kl), slice(mem, vp, vl)) else {
                    return err::BOUNDS;
                };
                let ttl = std::time::Duration::from_millis(u64::try_from(ttl).unwrap_or(0));
                let now = env.ctx.now();
                match env.soft.put(st.code, key, val, now, ttl) {
                    Ok(()) => 0,
                    Err(PutError::TooBig) => err::TOO_BIG,
                    Err(PutError::Budget) => err::BUDGET,
                }
            })
            .unwrap_or(err::BOUNDS))
        },
    )?;

    l.func_wrap(m, "state_del", |mut c: C<'_>, kp: i32, kl: i32| -> i32 {
        with(&mut c, |mem, st, env| {
            let Some(env) = env else {
                return err::NO_CAPSULE;
            };
            let Some(key) = slice(mem, kp, kl) else {
                return err::BOUNDS;
            };
            if env.soft.delete(&st.code, key) {
                0
            } else {
                err::NOT_FOUND
            }
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(m, "node_addr", |mut c: C<'_>, out: i32| -> i32 {
        with(&mut c, |mem, _, env| {
            let Some(env) = env else {
                return err::NO_CAPSULE;
            };
            if write_bytes(mem, out, &env.ctx.address().to_bytes()) {
                abi::ADDR_LEN as i32
            } else {
                err::BOUNDS
            }
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(m, "now_ns", |mut c: C<'_>| -> i64 {
        with(&mut c, |_, _, env| match env {
            Some(env) => {
                let d = env.ctx.now().saturating_duration_since(env.epoch);
                i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
            }
            None => i64::from(err::NO_CAPSULE),
        })
        .unwrap_or(i64::from(err::BOUNDS))
    })?;

    l.func_wrap(m, "neighbors", |mut c: C<'_>, out: i32, max: i32| -> i32 {
        with(&mut c, |mem, _, env| {
            let Some(env) = env else {
                return err::NO_CAPSULE;
            };
            let ns = env.ctx.neighbors();
            let max = usize::try_from(max).unwrap_or(0).min(ns.len());
            for (i, n) in ns.iter().take(max).enumerate() {
                let at = out.saturating_add((i * abi::ADDR_LEN) as i32);
                if !write_bytes(mem, at, &n.addr.to_bytes()) {
                    return err::BOUNDS;
                }
            }
            ns.len() as i32
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(m, "route", |mut c: C<'_>, dp: i32, out: i32| -> i32 {
        with(&mut c, |mem, _, env| {
            let Some(env) = env else {
                return err::NO_CAPSULE;
            };
            let Some(dst) = read_addr(mem, dp) else {
                return err::BOUNDS;
            };
            let Some(hop) = env.ctx.lookup(&dst) else {
                return err::NO_ROUTE;
            };
            if !write_bytes(mem, out, &hop.addr.to_bytes()) {
                return err::BOUNDS;
            }
            env.ctx
                .routes()
                .iter()
                .find(|r| r.0 == dst)
                .map_or(1, |r| i32::from(r.1))
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(m, "log", |mut c: C<'_>, p: i32, len: i32| -> i32 {
        with(&mut c, |mem, st, env| {
            let Some(env) = env else {
                return err::NO_CAPSULE;
            };
            let len = len.clamp(0, abi::MAX_LOG as i32);
            let Some(b) = slice(mem, p, len) else {
                return err::BOUNDS;
            };
            let msg = format!(
                "{}: {}",
                hex::encode(st.code.get(..4).unwrap_or(&[])),
                String::from_utf8_lossy(b)
            );
            env.ctx.log("capsule", msg);
            0
        })
        .unwrap_or(err::BOUNDS)
    })?;

    l.func_wrap(
        m,
        "sha256",
        |mut c: C<'_>, p: i32, len: i32, out: i32| -> wasmtime::Result<i32> {
            charge(&mut c, usize::try_from(len).unwrap_or(0))?;
            Ok(with(&mut c, |mem, _, _| {
                let Some(b) = slice(mem, p, len) else {
                    return err::BOUNDS;
                };
                let h = code_hash(b);
                if write_bytes(mem, out, &h) {
                    abi::HASH_LEN as i32
                } else {
                    err::BOUNDS
                }
            })
            .unwrap_or(err::BOUNDS))
        },
    )?;

    l.func_wrap(
        m,
        "checksum",
        |mut c: C<'_>, p: i32, len: i32| -> wasmtime::Result<i32> {
            charge(&mut c, usize::try_from(len).unwrap_or(0))?;
            Ok(with(&mut c, |mem, _, _| match slice(mem, p, len) {
                Some(b) => i32::from(checksum::checksum(b)),
                None => err::BOUNDS,
            })
            .unwrap_or(err::BOUNDS))
        },
    )?;

    Ok(())
}
