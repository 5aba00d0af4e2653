//! Host imports that read and change the current capsule: `cap_len`, `cap_info`,
//! `cap_read`, `cap_write`, `cap_resize`, `cap_set_dst`, `cap_set_transit_flags`.

use anode_core::Dispatch;
use anode_wasm::mem::{copy, copy_upto};
use anode_wire::transit::{FLAG_EE_ROUTE, FLAG_EVAL_EVERY_HOP};
use wasmtime::Linker;

use super::{C, CurCapsule, HostState, charge, read_addr, with, write_bytes};
use crate::abi::{self, err};

fn why_code(w: Dispatch) -> u8 {
    match w {
        Dispatch::Destination => abi::why::DESTINATION as u8,
        Dispatch::EveryHop => abi::why::EVERY_HOP as u8,
        Dispatch::Route => abi::why::ROUTE as u8,
        Dispatch::Local => abi::why::LOCAL as u8,
    }
}

/// The `cap_info` record (see `ABI.md`) of `k`, from its parsed headers.
fn info_record(k: &CurCapsule) -> [u8; abi::INFO_LEN] {
    let t = k.transit();
    let mut rec = [0u8; abi::INFO_LEN];
    let mut put = |at: usize, bytes: &[u8]| {
        if let Some(d) = rec.get_mut(at..at + bytes.len()) {
            d.copy_from_slice(bytes);
        }
    };
    put(0, &t.rb().to_le_bytes());
    put(2, &[t.flags(), k.header.flags, why_code(k.why)]);
    put(8, &t.flow().to_le_bytes());
    put(16, &t.src().to_bytes());
    put(34, &t.dst().to_bytes());
    put(52, &t.prev_hop().to_bytes());
    put(72, &k.header.code);
    rec
}

/// Runs `f` on the current capsule (`NO_CAPSULE` if there is none).
fn on_capsule(c: &mut C<'_>, f: impl FnOnce(&mut [u8], &mut CurCapsule) -> i32) -> i32 {
    with(c, |mem, st| match st.cap.as_mut() {
        Some(k) => f(mem, k),
        None => err::NO_CAPSULE,
    })
    .unwrap_or(err::BOUNDS)
}

pub(super) fn define(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let m = abi::IMPORT_MODULE;

    l.func_wrap(m, "cap_len", |c: C<'_>| -> i32 {
        c.data()
            .cap
            .as_ref()
            .map_or(err::NO_CAPSULE, |k| k.payload_len() as i32)
    })?;

    l.func_wrap(m, "cap_info", |mut c: C<'_>, out: i32| -> i32 {
        on_capsule(&mut c, |mem, k| {
            if write_bytes(mem, out, &info_record(k)) {
                abi::INFO_LEN as i32
            } else {
                err::BOUNDS
            }
        })
    })?;

    l.func_wrap(
        m,
        "cap_read",
        |mut c: C<'_>, off: i32, p: i32, len: i32| -> wasmtime::Result<i32> {
            charge(&mut c, len)?;
            Ok(on_capsule(&mut c, |mem, k| {
                // A short read: at most `len` bytes, fewer at the end of the payload.
                let Some(payload) = k.buf.get(k.payload_at..) else {
                    return err::BOUNDS;
                };
                copy_upto(payload, off, mem, p, len).map_or(err::BOUNDS, |n| n as i32)
            }))
        },
    )?;

    l.func_wrap(
        m,
        "cap_write",
        |mut c: C<'_>, off: i32, p: i32, len: i32| -> wasmtime::Result<i32> {
            charge(&mut c, len)?;
            Ok(on_capsule(&mut c, |mem, k| {
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
            }))
        },
    )?;

    l.func_wrap(
        m,
        "cap_resize",
        |mut c: C<'_>, len: i32| -> wasmtime::Result<i32> {
            charge(&mut c, len)?;
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
        on_capsule(&mut c, |mem, k| {
            let Some(a) = read_addr(mem, p) else {
                return err::BOUNDS;
            };
            k.transit_mut().set_dst(a);
            k.dirty = true;
            0
        })
    })?;

    l.func_wrap(m, "cap_set_transit_flags", |mut c: C<'_>, f: i32| -> i32 {
        let allowed = i32::from(FLAG_EVAL_EVERY_HOP | FLAG_EE_ROUTE);
        if f & !allowed != 0 {
            return if c.data().cap.is_some() {
                err::DENIED
            } else {
                err::NO_CAPSULE
            };
        }
        let Some(k) = c.data_mut().cap.as_mut() else {
            return err::NO_CAPSULE;
        };
        k.transit_mut().set_flags(f as u8);
        k.dirty = true;
        0
    })?;

    Ok(())
}
