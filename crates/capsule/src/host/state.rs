//! Host imports on the code object's soft state: `state_get`, `state_put`, `state_del`
//! (namespaced by the running code's hash; times from the call's node view).

use anode_wasm::mem::{copy_upto, slice};
use wasmtime::Linker;

use super::{C, HostState, charge, with_env};
use crate::abi::{self, err};
use crate::softstate::PutError;

pub(super) fn define(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let m = abi::IMPORT_MODULE;

    l.func_wrap(
        m,
        "state_get",
        |mut c: C<'_>, kp: i32, kl: i32, vp: i32, vcap: i32| -> wasmtime::Result<i32> {
            charge(&mut c, vcap)?;
            Ok(with_env(&mut c, |mem, p| {
                let Some(key) = slice(mem, kp, kl) else {
                    return err::BOUNDS;
                };
                let now = p.env.view.now();
                let mut reach = p.env.reach.get();
                let Some(v) = reach.soft.get(&p.code, key, now) else {
                    return err::NOT_FOUND;
                };
                // Copies at most `vcap` bytes; returns the value's whole length.
                match copy_upto(v, 0, mem, vp, vcap) {
                    Ok(_) => v.len() as i32,
                    Err(_) => err::BOUNDS,
                }
            }))
        },
    )?;

    l.func_wrap(
        m,
        "state_put",
        |mut c: C<'_>, kp: i32, kl: i32, vp: i32, vl: i32, ttl: i32| -> wasmtime::Result<i32> {
            charge(&mut c, vl)?;
            Ok(with_env(&mut c, |mem, p| {
                let (Some(key), Some(val)) = (slice(mem, kp, kl), slice(mem, vp, vl)) else {
                    return err::BOUNDS;
                };
                let ttl = std::time::Duration::from_millis(u64::try_from(ttl).unwrap_or(0));
                let now = p.env.view.now();
                match p.env.reach.get().soft.put(p.code, key, val, now, ttl) {
                    Ok(()) => 0,
                    Err(PutError::TooBig) => err::TOO_BIG,
                    Err(PutError::Budget) => err::BUDGET,
                }
            }))
        },
    )?;

    l.func_wrap(m, "state_del", |mut c: C<'_>, kp: i32, kl: i32| -> i32 {
        with_env(&mut c, |mem, p| {
            let Some(key) = slice(mem, kp, kl) else {
                return err::BOUNDS;
            };
            if p.env.reach.get().soft.delete(&p.code, key) {
                0
            } else {
                err::NOT_FOUND
            }
        })
    })?;

    Ok(())
}
