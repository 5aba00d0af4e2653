//! Host imports on node facts and helpers: `node_addr`, `now_ns`, `neighbors`, `route` (from
//! the call's node view), `log` (recorded as an effect), `sha256` and `checksum`.

use anode_core::NodeFacts as _;
use anode_wasm::mem::slice;
use anode_wire::checksum;
use wasmtime::Linker;

use super::{C, Effect, HostState, charge, read_addr, with, with_env, write_bytes};
use crate::abi::{self, err};
use crate::runtime::code_hash;

/// The extra cost of one log line, in bytes of host work (64 bytes to a fuel unit).
const LOG_COST: i32 = 64 * 1024;

pub(super) fn define(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let m = abi::IMPORT_MODULE;

    l.func_wrap(m, "node_addr", |mut c: C<'_>, out: i32| -> i32 {
        with_env(&mut c, |mem, p| {
            if write_bytes(mem, out, &p.env.view.address().to_bytes()) {
                abi::ADDR_LEN as i32
            } else {
                err::BOUNDS
            }
        })
    })?;

    l.func_wrap(m, "now_ns", |c: C<'_>| -> i64 {
        match &c.data().env {
            Some(env) => {
                let d = env.view.now().saturating_duration_since(env.epoch);
                i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
            }
            None => i64::from(err::NO_CAPSULE),
        }
    })?;

    l.func_wrap(m, "neighbors", |mut c: C<'_>, out: i32, max: i32| -> i32 {
        with_env(&mut c, |mem, p| {
            let ns = p.env.view.neighbors();
            let max = usize::try_from(max).unwrap_or(0).min(ns.len());
            for (i, n) in ns.iter().take(max).enumerate() {
                let at = out.saturating_add((i * abi::ADDR_LEN) as i32);
                if !write_bytes(mem, at, &n.addr.to_bytes()) {
                    return err::BOUNDS;
                }
            }
            ns.len() as i32
        })
    })?;

    l.func_wrap(m, "route", |mut c: C<'_>, dp: i32, out: i32| -> i32 {
        with_env(&mut c, |mem, p| {
            let Some(dst) = read_addr(mem, dp) else {
                return err::BOUNDS;
            };
            let Some(hop) = p.env.view.lookup(&dst) else {
                return err::NO_ROUTE;
            };
            if !write_bytes(mem, out, &hop.addr.to_bytes()) {
                return err::BOUNDS;
            }
            p.env.view.metric(&dst).map_or(1, i32::from)
        })
    })?;

    l.func_wrap(
        m,
        "log",
        |mut c: C<'_>, ptr: i32, len: i32| -> wasmtime::Result<i32> {
            // A log line costs the node more than its bytes (an event, a line written): charged
            // as if it were LOG_COST bytes longer, on top of the rate limit the EE applies.
            charge(&mut c, len.clamp(0, abi::MAX_LOG as i32) + LOG_COST)?;
            Ok(with_env(&mut c, |mem, p| {
                let len = len.clamp(0, abi::MAX_LOG as i32);
                let Some(b) = slice(mem, ptr, len) else {
                    return err::BOUNDS;
                };
                let msg = format!(
                    "{}: {}",
                    hex::encode(p.code.get(..4).unwrap_or(&[])),
                    String::from_utf8_lossy(b)
                );
                p.env.effects.push(Effect::Log(msg));
                0
            }))
        },
    )?;

    l.func_wrap(
        m,
        "sha256",
        |mut c: C<'_>, ptr: i32, len: i32, out: i32| -> wasmtime::Result<i32> {
            charge(&mut c, len)?;
            Ok(with(&mut c, |mem, _| {
                let Some(b) = slice(mem, ptr, len) else {
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
        |mut c: C<'_>, ptr: i32, len: i32| -> wasmtime::Result<i32> {
            charge(&mut c, len)?;
            Ok(with(&mut c, |mem, _| match slice(mem, ptr, len) {
                Some(b) => i32::from(checksum::checksum(b)),
                None => err::BOUNDS,
            })
            .unwrap_or(err::BOUNDS))
        },
    )?;

    Ok(())
}
