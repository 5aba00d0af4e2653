//! Files of service modules: the NodeOS file store (`anode_capsule::files`, the one capsule
//! code objects use) keyed by module name, with the quotas each module's manifest asks for
//! (`[resources] file_bytes`, `file_count`; none asked: no files).
//!
//! Guest imports (module `anode_mod`), whole files addressed by a plain relative path
//! (components of `A-Z a-z 0-9 . _ -`, at most 4 and 128 bytes: `..`, absolute paths and
//! empty components are refused before the store is touched; there are no links):
//! - `file_read(path_ptr, path_len, off, buf_ptr, buf_cap) -> i32`: copies at most `buf_cap`
//!   bytes of the file from `off` to `buf_ptr`; returns the file's length;
//! - `file_write(path_ptr, path_len, data_ptr, data_len) -> i32`: replaces the file; 0;
//! - `file_delete(path_ptr, path_len) -> i32`: 0.
//!
//! Errors are negative: [`err::BOUNDS`] (a pointer outside the guest's memory),
//! [`err::BAD_PATH`], [`err::NOT_FOUND`], [`err::TOO_BIG`], [`err::QUOTA`] (the byte quota
//! or the file count). Every refusal is counted by reason; a refused write changes nothing.
//! Copies cost fuel (one unit per 64 bytes) as in the capsule EE.
//!
//! Contract: the store answers from memory on the calling (node) thread; with a directory
//! (`[modules] state_dir`/files) changes reach the disk on the store's own writer thread.
//! A module keeps its files when it is stopped, upgraded or handed over to a new process
//! (`anode upgrade`); `anode module remove` deletes them.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use anode_capsule::files::{FileLimits, FileRefusal, FileStore, GuestFileError};
use anode_wasm::fuel::charge_bytes;
use wasmtime::{Caller, Linker};

use crate::runtime::ModState;

/// The files of every module of one node, shared by the host and the module instances.
pub type ModFiles = Arc<Mutex<FileStore<String>>>;

/// A store in memory.
pub fn memory_store() -> ModFiles {
    Arc::new(Mutex::new(FileStore::new(read_back())))
}

/// A store kept in `dir` (read now; see the module docs).
pub fn disk_store(dir: std::path::PathBuf) -> ModFiles {
    Arc::new(Mutex::new(FileStore::with_dir(read_back(), dir)))
}

/// The store's own bounds, which files read back from the disk are held to (the most any
/// manifest may ask for); each module gets its manifest's when it is installed
/// ([`limits_of`]), before it runs.
fn read_back() -> FileLimits {
    FileLimits {
        max_bytes: crate::manifest::MAX_FILE_BYTES,
        max_files: crate::manifest::MAX_FILE_COUNT,
        max_file_bytes: crate::manifest::MAX_FILE_BYTES,
        ..FileLimits::default()
    }
}

/// The quotas of a module with manifest `m` (none if it asks for no files).
pub(crate) fn limits_of(m: &crate::Manifest) -> FileLimits {
    m.resources.file_limits().unwrap_or_else(no_files)
}

/// The quotas of a module that asked for no files.
fn no_files() -> FileLimits {
    FileLimits {
        max_bytes: 0,
        max_files: 0,
        max_file_bytes: 0,
        ..FileLimits::default()
    }
}

/// The store, whatever a panicking holder left (it holds plain data).
pub fn lock(f: &ModFiles) -> MutexGuard<'_, FileStore<String>> {
    f.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Error codes of the `file_*` imports.
pub mod err {
    /// A pointer or length outside the guest's memory.
    pub const BOUNDS: i32 = -1;
    /// The path is not a plain relative path within the bounds.
    pub const BAD_PATH: i32 = -2;
    /// No such file.
    pub const NOT_FOUND: i32 = -3;
    /// Larger than one file may be.
    pub const TOO_BIG: i32 = -4;
    /// Over the module's byte quota or file count.
    pub const QUOTA: i32 = -5;
}

fn code(e: GuestFileError) -> i32 {
    match e {
        GuestFileError::Bounds => err::BOUNDS,
        GuestFileError::Refused(FileRefusal::BadPath) => err::BAD_PATH,
        GuestFileError::Refused(FileRefusal::NotFound) => err::NOT_FOUND,
        GuestFileError::Refused(FileRefusal::TooBig) => err::TOO_BIG,
        GuestFileError::Refused(FileRefusal::Quota | FileRefusal::Count) => err::QUOTA,
    }
}

type C<'a> = Caller<'a, ModState>;

/// Runs `f` on the guest's memory, its name and the node's module files.
fn with_files(
    c: &mut C<'_>,
    f: impl FnOnce(&mut [u8], &String, &mut FileStore<String>) -> i32,
) -> i32 {
    // The memory export, kept at instantiation (no lookup by name per call).
    let Some(mem) = c.data().memory().or_else(|| crate::runtime::mem_of(c)) else {
        return err::BOUNDS;
    };
    let (data, st) = mem.data_and_store_mut(c);
    let mut store = lock(&st.files);
    f(data, &st.name, &mut store)
}

/// Has the store's writer write what changed (off this thread).
fn written(files: &FileStore<String>) -> i32 {
    if let Some(p) = files.persist() {
        p.schedule();
    }
    0
}

pub(crate) fn define(l: &mut Linker<ModState>) -> wasmtime::Result<()> {
    let m = crate::IMPORT_MODULE;
    l.func_wrap(
        m,
        "file_read",
        |mut c: C<'_>, pp: i32, pl: i32, off: i32, bp: i32, bcap: i32| -> wasmtime::Result<i32> {
            charge_bytes(&mut c, bcap)?;
            Ok(with_files(&mut c, |mem, name, files| {
                files
                    .guest_read(name, mem, (pp, pl), off, (bp, bcap))
                    .unwrap_or_else(code)
            }))
        },
    )?;
    l.func_wrap(
        m,
        "file_write",
        |mut c: C<'_>, pp: i32, pl: i32, dp: i32, dl: i32| -> wasmtime::Result<i32> {
            charge_bytes(&mut c, dl)?;
            Ok(with_files(&mut c, |mem, name, files| {
                match files.guest_write(name.clone(), mem, (pp, pl), (dp, dl)) {
                    Ok(()) => written(files),
                    Err(e) => code(e),
                }
            }))
        },
    )?;
    l.func_wrap(m, "file_delete", |mut c: C<'_>, pp: i32, pl: i32| -> i32 {
        with_files(&mut c, |mem, name, files| {
            match files.guest_delete(name, mem, (pp, pl)) {
                Ok(()) => written(files),
                Err(e) => code(e),
            }
        })
    })?;
    Ok(())
}
