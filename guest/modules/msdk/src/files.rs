//! The module's own files (`file_*` imports; `crates/modules/src/files.rs`): whole files by
//! plain relative path (components of `A-Z a-z 0-9 . _ -`, at most 4 and 128 bytes), within
//! the quotas its manifest asks for (`[resources] file_bytes`, `file_count`). They stay
//! across upgrades and node restarts; `anode module remove` deletes them.

#[link(wasm_import_module = "anode_mod")]
unsafe extern "C" {
    fn file_read(pp: *const u8, pl: i32, off: i32, bp: *mut u8, bcap: i32) -> i32;
    fn file_write(pp: *const u8, pl: i32, dp: *const u8, dl: i32) -> i32;
    fn file_delete(pp: *const u8, pl: i32) -> i32;
}

/// Why a file operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// A buffer outside the module's memory.
    Bounds,
    /// The path is not a plain relative path within the bounds.
    BadPath,
    /// No such file.
    NotFound,
    /// Larger than one file may be.
    TooBig,
    /// Over the module's byte quota or file count.
    Quota,
}

fn error(code: i32) -> Error {
    match code {
        -2 => Error::BadPath,
        -3 => Error::NotFound,
        -4 => Error::TooBig,
        -5 => Error::Quota,
        _ => Error::Bounds,
    }
}

/// Reads the file at `path` from `off` into `buf` (as much as fits); returns the file's
/// whole length.
pub fn read(path: &str, off: usize, buf: &mut [u8]) -> Result<usize, Error> {
    // SAFETY: the host writes at most `buf.len()` bytes into `buf` and checks bounds.
    let n = unsafe {
        file_read(
            path.as_ptr(),
            path.len() as i32,
            off as i32,
            buf.as_mut_ptr(),
            buf.len() as i32,
        )
    };
    usize::try_from(n).map_err(|_| error(n))
}

/// Replaces the file at `path` with `data`.
pub fn write(path: &str, data: &[u8]) -> Result<(), Error> {
    // SAFETY: the host reads `path.len()` and `data.len()` bytes and checks bounds.
    let r = unsafe {
        file_write(
            path.as_ptr(),
            path.len() as i32,
            data.as_ptr(),
            data.len() as i32,
        )
    };
    if r == 0 { Ok(()) } else { Err(error(r)) }
}

/// Deletes the file at `path`.
pub fn delete(path: &str) -> Result<(), Error> {
    // SAFETY: the host reads `path.len()` bytes and checks bounds.
    let r = unsafe { file_delete(path.as_ptr(), path.len() as i32) };
    if r == 0 { Ok(()) } else { Err(error(r)) }
}
