//! Host imports that send: `forward`, `forward_via`, `forward_by` (the current capsule goes
//! on), `copy_via` (a copy goes to a neighbor), `send` (a new capsule of the same code) and
//! `deliver` (to a local application). Each records an [`Effect`] the EE applies after the
//! call; its return code is what the node's checks answer from the [`NodeView`].
//!
//! [`NodeView`]: anode_core::NodeView

use anode_core::{Delivery, DropReason, NextHop};
use anode_wasm::mem::slice;
use anode_wire::anep::{self, TYPE_CAPSULE};
use anode_wire::capsule::CapsuleRepr;
use anode_wire::transit::{FLAG_EVAL_EVERY_HOP, TransitRepr};
use wasmtime::Linker;

use super::{C, CallEnv, CurCapsule, Effect, HostState, Parts, charge, read_addr, with_env};
use crate::abi::{self, err};

fn drop_code(r: DropReason) -> i32 {
    match r {
        DropReason::RbExhausted => err::RB,
        DropReason::NoRoute => err::NO_ROUTE,
        DropReason::TooBig => err::TOO_BIG,
        _ => err::REFUSED,
    }
}

/// Records a send of `buf` and returns what the node's checks answer for it. The send is
/// applied even when they refuse it, so the node counts the drop as it always has.
fn record_send(
    env: &mut CallEnv,
    buf: Vec<u8>,
    (anep_len, via): (usize, Option<NextHop>),
    new: bool,
) -> i32 {
    let r = env.view.check_forward(&buf, anep_len, via);
    env.effects.push(Effect::Send {
        buf,
        anep_len,
        via,
        new,
    });
    match r {
        Ok(_) => 0,
        Err(r) => drop_code(r),
    }
}

/// Sends the current capsule on (it is gone afterwards): toward its destination by the
/// default route, or via `hop`. The one path of `forward`, `forward_via` and `forward_by`.
fn send_on(cap: &mut Option<CurCapsule>, env: &mut CallEnv, hop: Option<NextHop>) -> i32 {
    let Some(mut k) = cap.take() else {
        return err::NO_CAPSULE;
    };
    k.fix_up();
    record_send(env, k.buf, (k.anep_len, hop), false)
}

/// `forward_by(name, flow)`: the next hop the named routing function gives for the
/// capsule's destination, if it is an up neighbor.
fn forward_by(mem: &[u8], p: Parts<'_>, (np, nl): (i32, i32), flow: i64) -> i32 {
    let Some(name) = slice(mem, np, nl) else {
        return err::BOUNDS;
    };
    let Some(dst) = p.cap.as_ref().map(|k| k.transit().dst()) else {
        return err::NO_CAPSULE;
    };
    let env = p.env;
    let mut reach = env.reach.get();
    let Some(f) = reach.routes.get_mut(name) else {
        drop(reach);
        env.route_misses += 1;
        return err::NOT_FOUND;
    };
    // Only an up neighbor is a next hop, whatever the function answers.
    let hop = f
        .next_hop(&env.view, dst, flow as u64)
        .filter(|h| env.view.neighbor(&h.addr).is_some_and(|n| n.link == h.link));
    drop(reach);
    match hop {
        Some(h) => send_on(p.cap, env, Some(h)),
        None => err::NO_ROUTE,
    }
}

/// `copy_via(addr)`: a copy of the capsule to an up neighbor. The copy takes half of the
/// capsule's resource bound and the capsule keeps the rest (PLANet's rule: a packet's
/// children share its bound), so the copies one capsule can ever cause, network-wide, are
/// bounded by its resource bound: a capsule that copies itself to every neighbor cannot
/// grow into a storm.
fn copy_via(mem: &[u8], p: Parts<'_>, addr: i32) -> i32 {
    if *p.actions >= p.env.max_actions {
        return err::LIMIT;
    }
    let Some(a) = read_addr(mem, addr) else {
        return err::BOUNDS;
    };
    let Some(hop) = p.env.view.neighbor(&a) else {
        return err::DENIED;
    };
    let Some(k) = p.cap.as_mut() else {
        return err::NO_CAPSULE;
    };
    let have = k.transit().rb();
    if have < 2 {
        return err::RB;
    }
    let give = have / 2;
    k.transit_mut().set_rb(give);
    k.dirty = true;
    k.fix_up();
    let copy = k.buf.clone();
    k.transit_mut().set_rb(have - give);
    k.dirty = true;
    *p.actions += 1;
    record_send(p.env, copy, (k.anep_len, Some(hop)), true)
}

/// `deliver(port)`: the capsule to a local application that registered `port`.
fn deliver(p: Parts<'_>, port: i32) -> i32 {
    let Ok(port) = u16::try_from(port) else {
        return err::DENIED;
    };
    if !p.env.reach.get().ports.contains(&port) {
        return err::DENIED;
    }
    let Some(mut k) = p.cap.take() else {
        return err::NO_CAPSULE;
    };
    k.fix_up();
    let t = k.transit();
    let (src, flow, rb) = (t.src(), t.flow(), t.rb());
    p.env.effects.push(Effect::Deliver(Delivery {
        type_id: TYPE_CAPSULE,
        port,
        src,
        flow,
        rb,
        offset: k.payload_at,
        buf: k.buf,
    }));
    0
}

/// What `send` asks for: destination, own code (or 0), resource bound, flow, payload.
struct SendArgs {
    dst: i32,
    code: i32,
    rb: i32,
    flow: i64,
    payload: (i32, i32),
}

/// `send(...)`: a new capsule of this code object, its resource bound taken from the
/// current capsule's.
fn send(mem: &[u8], p: Parts<'_>, a: &SendArgs) -> i32 {
    if *p.actions >= p.env.max_actions {
        return err::LIMIT;
    }
    let Some(dst) = read_addr(mem, a.dst) else {
        return err::BOUNDS;
    };
    if a.code != 0 {
        match slice(mem, a.code, abi::HASH_LEN as i32) {
            Some(h) if h == p.code => {}
            Some(_) => return err::DENIED,
            None => return err::BOUNDS,
        }
    }
    let Some(payload) = slice(mem, a.payload.0, a.payload.1) else {
        return err::BOUNDS;
    };
    let Some(k) = p.cap.as_mut() else {
        return err::NO_CAPSULE;
    };
    let have = k.transit().rb();
    let Ok(want) = u16::try_from(a.rb) else {
        return err::RB;
    };
    if want == 0 || want > have {
        return err::RB;
    }
    let me = anode_core::NodeFacts::address(&p.env.view);
    let child = anode_wire::capsule::Capsule {
        transit: TransitRepr {
            flags: FLAG_EVAL_EVERY_HOP,
            rb: want,
            flow: a.flow as u64,
            src: me,
            dst,
            prev_hop: me,
        },
        header: CapsuleRepr {
            flags: 0,
            code: p.code,
            code_source: None,
        },
        payload: payload.to_vec(),
    };
    let Ok(buf) = child.to_packet() else {
        return err::TOO_BIG;
    };
    k.transit_mut().set_rb(have - want);
    k.dirty = true;
    *p.actions += 1;
    record_send(p.env, buf, (anep::BASIC_HEADER_LEN, None), true)
}

pub(super) fn define(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let m = abi::IMPORT_MODULE;

    l.func_wrap(m, "forward", |mut c: C<'_>| -> i32 {
        with_env(&mut c, |_, p| send_on(p.cap, p.env, None))
    })?;

    l.func_wrap(m, "forward_via", |mut c: C<'_>, a: i32| -> i32 {
        with_env(&mut c, |mem, p| {
            let Some(a) = read_addr(mem, a) else {
                return err::BOUNDS;
            };
            let Some(hop) = p.env.view.neighbor(&a) else {
                return err::DENIED;
            };
            send_on(p.cap, p.env, Some(hop))
        })
    })?;

    l.func_wrap(
        m,
        "forward_by",
        |mut c: C<'_>, np: i32, nl: i32, flow: i64| -> i32 {
            with_env(&mut c, |mem, p| forward_by(mem, p, (np, nl), flow))
        },
    )?;

    l.func_wrap(m, "copy_via", |mut c: C<'_>, a: i32| -> i32 {
        with_env(&mut c, |mem, p| copy_via(mem, p, a))
    })?;

    l.func_wrap(m, "deliver", |mut c: C<'_>, port: i32| -> i32 {
        with_env(&mut c, |_, p| deliver(p, port))
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
            charge(&mut c, len)?;
            let a = SendArgs {
                dst,
                code,
                rb,
                flow,
                payload: (p, len),
            };
            Ok(with_env(&mut c, |mem, parts| send(mem, parts, &a)))
        },
    )?;

    Ok(())
}
