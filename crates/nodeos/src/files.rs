//! [`RootedDir`]: a per-EE directory namespace for persistent state (e.g. the code cache)
//! that no path can escape.
//!
//! Paths are resolved component by component from a directory descriptor with `openat(2)`
//! and `O_NOFOLLOW` (cap-std style): `..`, absolute paths and empty names are refused before
//! any system call, and a symbolic link anywhere in the path (inside pointing out, or swapped
//! in between calls) fails with `ELOOP`/`ENOTDIR` instead of being followed, because the
//! kernel never follows a link on these opens. Every intermediate component is opened with
//! `O_DIRECTORY`, so the check and the use are the same system call (no time-of-check race).
//! Files are created mode 0600, directories 0700.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

/// Why a file operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path would leave the root or is not a plain relative path.
    #[error("path {path:?} refused: {why}")]
    Refused {
        /// The path.
        path: String,
        /// Why.
        why: &'static str,
    },
    /// The system call failed (a symlink on the way shows as ELOOP or ENOTDIR).
    #[error("{op} {path:?}: {err}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path.
        path: String,
        /// The error.
        err: std::io::Error,
    },
}

/// A directory namespace rooted at one directory.
#[derive(Debug)]
pub struct RootedDir {
    root: OwnedFd,
}

fn io_err(op: &'static str, path: &Path) -> FileError {
    FileError::Io {
        op,
        path: path.display().to_string(),
        err: std::io::Error::last_os_error(),
    }
}

fn openat(dir: &OwnedFd, name: &CString, flags: i32, mode: u32) -> Option<OwnedFd> {
    // SAFETY: `dir` is an open descriptor we own for the duration of the call, `name` is a
    // NUL-terminated string that outlives the call; openat has no other memory effects.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode) };
    if fd < 0 {
        return None;
    }
    // SAFETY: openat returned a fresh descriptor that nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

const DIR_FLAGS: i32 = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

impl RootedDir {
    /// Opens `root` (which must be a real directory, not a symlink).
    pub fn open(root: &Path) -> Result<Self, FileError> {
        let c = CString::new(root.as_os_str().as_bytes()).map_err(|_| FileError::Refused {
            path: root.display().to_string(),
            why: "contains a NUL byte",
        })?;
        // SAFETY: `c` is NUL-terminated and lives across the call.
        let fd = unsafe { libc::open(c.as_ptr(), DIR_FLAGS) };
        if fd < 0 {
            return Err(io_err("open root", root));
        }
        // SAFETY: a fresh descriptor nothing else owns.
        Ok(RootedDir {
            root: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Splits `path` into checked names: only normal components (and `.`) are allowed.
    fn names(path: &Path) -> Result<Vec<CString>, FileError> {
        let refuse = |why| FileError::Refused {
            path: path.display().to_string(),
            why,
        };
        let mut out = Vec::new();
        for c in path.components() {
            match c {
                Component::Normal(n) => {
                    out.push(CString::new(n.as_bytes()).map_err(|_| refuse("contains a NUL byte"))?)
                }
                Component::CurDir => {}
                Component::ParentDir => return Err(refuse("`..` is not allowed")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(refuse("absolute paths are not allowed"));
                }
            }
        }
        if out.is_empty() {
            return Err(refuse("empty path"));
        }
        Ok(out)
    }

    /// Walks to the directory holding the last name, creating directories if `create`.
    fn parent_of(&self, path: &Path, create: bool) -> Result<(OwnedFd, CString), FileError> {
        let mut names = Self::names(path)?;
        let last = names.pop().ok_or(FileError::Refused {
            path: path.display().to_string(),
            why: "empty path",
        })?;
        let mut dir = self.root.try_clone().map_err(|err| FileError::Io {
            op: "dup root",
            path: path.display().to_string(),
            err,
        })?;
        for n in names {
            if create {
                // SAFETY: valid descriptor and NUL-terminated name for the call's duration.
                let r = unsafe { libc::mkdirat(dir.as_raw_fd(), n.as_ptr(), 0o700) };
                if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
                    return Err(io_err("mkdir", path));
                }
            }
            dir = openat(&dir, &n, DIR_FLAGS, 0).ok_or_else(|| io_err("open dir", path))?;
        }
        Ok((dir, last))
    }

    /// Reads a whole file.
    pub fn read(&self, path: &Path) -> Result<Vec<u8>, FileError> {
        let (dir, name) = self.parent_of(path, false)?;
        let fd = openat(
            &dir,
            &name,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
        .ok_or_else(|| io_err("open", path))?;
        let mut f = File::from(fd);
        let mut v = Vec::new();
        f.read_to_end(&mut v).map_err(|err| FileError::Io {
            op: "read",
            path: path.display().to_string(),
            err,
        })?;
        Ok(v)
    }

    /// Writes a whole file (created 0600, or truncated), creating parent directories.
    pub fn write(&self, path: &Path, data: &[u8]) -> Result<(), FileError> {
        let (dir, name) = self.parent_of(path, true)?;
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let fd = openat(&dir, &name, flags, 0o600).ok_or_else(|| io_err("create", path))?;
        let mut f = File::from(fd);
        f.write_all(data).map_err(|err| FileError::Io {
            op: "write",
            path: path.display().to_string(),
            err,
        })
    }

    /// Removes a file (not a directory).
    pub fn remove(&self, path: &Path) -> Result<(), FileError> {
        let (dir, name) = self.parent_of(path, false)?;
        // SAFETY: valid descriptor and NUL-terminated name for the call's duration.
        let r = unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
        if r < 0 {
            return Err(io_err("remove", path));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("anode-nodeos-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_and_writes_inside_the_root() {
        let d = tmp("rw");
        let r = RootedDir::open(&d).unwrap();
        r.write(Path::new("cache/ab/cd.wasm"), b"code").unwrap();
        assert_eq!(r.read(Path::new("./cache/ab/cd.wasm")).unwrap(), b"code");
        assert_eq!(std::fs::read(d.join("cache/ab/cd.wasm")).unwrap(), b"code");
        r.remove(Path::new("cache/ab/cd.wasm")).unwrap();
        assert!(r.read(Path::new("cache/ab/cd.wasm")).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn no_escape_by_dotdot_absolute_or_symlinks() {
        let base = tmp("escape");
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), b"s").unwrap();
        let r = RootedDir::open(&root).unwrap();
        for p in [
            "../outside/secret",
            "a/../../outside/secret",
            "/etc/passwd",
            "",
            ".",
        ] {
            assert!(
                matches!(r.read(Path::new(p)), Err(FileError::Refused { .. })),
                "{p}"
            );
            assert!(r.write(Path::new(p), b"x").is_err(), "{p}");
        }
        // A symlink inside pointing out: neither as a directory nor as the file.
        symlink(&outside, root.join("link")).unwrap();
        symlink(outside.join("secret"), root.join("filelink")).unwrap();
        assert!(r.read(Path::new("link/secret")).is_err());
        assert!(r.read(Path::new("filelink")).is_err());
        assert!(r.write(Path::new("link/new"), b"x").is_err());
        assert!(r.write(Path::new("filelink"), b"x").is_err());
        assert!(!outside.join("new").exists());
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"s");
        // Swap: a directory used once, then replaced by a symlink out.
        r.write(Path::new("sub/f"), b"1").unwrap();
        std::fs::remove_dir_all(root.join("sub")).unwrap();
        symlink(&outside, root.join("sub")).unwrap();
        assert!(r.read(Path::new("sub/secret")).is_err());
        assert!(r.write(Path::new("sub/f"), b"2").is_err());
        assert!(!outside.join("f").exists());
        // The root itself may not be a symlink.
        symlink(&outside, base.join("rootlink")).unwrap();
        assert!(RootedDir::open(&base.join("rootlink")).is_err());
        let _ = std::fs::remove_dir_all(&base);
    }
}
