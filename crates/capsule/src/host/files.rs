//! Host imports on the code object's files (ABI v2, `files.rs`): `file_read`, `file_write`,
//! `file_delete`, namespaced by the running code's hash. Refusals come back as error codes
//! (`DENIED` for a path that is not plain, `NOT_FOUND`, `TOO_BIG`, `BUDGET` for a quota);
//! the store counts them by reason.

use anode_wasm::mem::{copy_upto, slice};
use wasmtime::Linker;

use super::{C, HostState, charge, with_env};
use crate::abi::{self, err};
use crate::files::FileRefusal;

fn code(r: FileRefusal) -> i32 {
    match r {
        FileRefusal::BadPath => err::DENIED,
        FileRefusal::NotFound => err::NOT_FOUND,
        FileRefusal::TooBig => err::TOO_BIG,
        FileRefusal::Quota | FileRefusal::Count => err::BUDGET,
    }
}

pub(super) fn define(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let m = abi::IMPORT_MODULE;

    l.func_wrap(
        m,
        "file_read",
        |mut c: C<'_>, pp: i32, pl: i32, off: i32, bp: i32, bcap: i32| -> wasmtime::Result<i32> {
            charge(&mut c, bcap)?;
            Ok(with_env(&mut c, |mem, p| {
                let Some(path) = slice(mem, pp, pl) else {
                    return err::BOUNDS;
                };
                match p.env.reach.files.read(&p.code, path) {
                    // Copies at most `bcap` bytes from `off`; returns the file's length.
                    Ok(f) => match copy_upto(f, off, mem, bp, bcap) {
                        Ok(_) => i32::try_from(f.len()).unwrap_or(i32::MAX),
                        Err(_) => err::BOUNDS,
                    },
                    Err(r) => code(r),
                }
            }))
        },
    )?;

    l.func_wrap(
        m,
        "file_write",
        |mut c: C<'_>, pp: i32, pl: i32, dp: i32, dl: i32| -> wasmtime::Result<i32> {
            charge(&mut c, dl)?;
            Ok(with_env(&mut c, |mem, p| {
                let (Some(path), Some(data)) = (slice(mem, pp, pl), slice(mem, dp, dl)) else {
                    return err::BOUNDS;
                };
                match p.env.reach.files.write(p.code, path, data) {
                    Ok(()) => 0,
                    Err(r) => code(r),
                }
            }))
        },
    )?;

    l.func_wrap(m, "file_delete", |mut c: C<'_>, pp: i32, pl: i32| -> i32 {
        with_env(&mut c, |mem, p| {
            let Some(path) = slice(mem, pp, pl) else {
                return err::BOUNDS;
            };
            match p.env.reach.files.delete(&p.code, path) {
                Ok(()) => 0,
                Err(r) => code(r),
            }
        })
    })?;

    Ok(())
}
