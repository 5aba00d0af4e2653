//! Host imports on the code object's files (ABI v2, `files.rs`): `file_read`, `file_write`,
//! `file_delete`, namespaced by the running code's hash. Refusals come back as error codes
//! (`DENIED` for a path that is not plain, `NOT_FOUND`, `TOO_BIG`, `BUDGET` for a quota,
//! `BOUNDS` for a buffer outside the guest's memory); the store counts them by reason.

use wasmtime::Linker;

use super::{C, HostState, charge, with_env};
use crate::abi::{self, err};
use crate::files::{FileRefusal, GuestFileError};

fn code(e: GuestFileError) -> i32 {
    match e {
        GuestFileError::Bounds => err::BOUNDS,
        GuestFileError::Refused(FileRefusal::BadPath) => err::DENIED,
        GuestFileError::Refused(FileRefusal::NotFound) => err::NOT_FOUND,
        GuestFileError::Refused(FileRefusal::TooBig) => err::TOO_BIG,
        GuestFileError::Refused(FileRefusal::Quota | FileRefusal::Count) => err::BUDGET,
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
                p.env
                    .reach
                    .get()
                    .files
                    .guest_read(&p.code, mem, (pp, pl), off, (bp, bcap))
                    .unwrap_or_else(code)
            }))
        },
    )?;

    l.func_wrap(
        m,
        "file_write",
        |mut c: C<'_>, pp: i32, pl: i32, dp: i32, dl: i32| -> wasmtime::Result<i32> {
            charge(&mut c, dl)?;
            Ok(with_env(&mut c, |mem, p| {
                p.env
                    .reach
                    .get()
                    .files
                    .guest_write(p.code, mem, (pp, pl), (dp, dl))
                    .map_or_else(code, |()| 0)
            }))
        },
    )?;

    l.func_wrap(m, "file_delete", |mut c: C<'_>, pp: i32, pl: i32| -> i32 {
        with_env(&mut c, |mem, p| {
            p.env
                .reach
                .get()
                .files
                .guest_delete(&p.code, mem, (pp, pl))
                .map_or_else(code, |()| 0)
        })
    })?;

    Ok(())
}
