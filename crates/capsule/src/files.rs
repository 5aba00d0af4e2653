//! Files for code objects (ABI v2, the NodeOS interface's files): each code object (its NodeOS
//! domain `capsule/<hex>`) has a directory of its own, read and written whole by its guests
//! through `file_read`, `file_write` and `file_delete`.
//!
//! Contract:
//! - The store is in memory and answers at once: a guest call never waits for a disk. With a
//!   directory ([`FileStore::with_dir`]) the files persist: the store reads them when it is
//!   made (at the EE's start) and hands every change to a writer that runs off the node thread
//!   ([`Persist`]), latest content first, one pending write per file at most (a file
//!   rewritten a thousand times while the disk is busy costs one write).
//! - A path is relative and plain: components of `A-Z a-z 0-9 . _ -`, none empty, `.` or
//!   `..`, at most [`FileLimits::max_depth`] of them and [`FileLimits::max_path`] bytes in
//!   all; anything else is refused before the store is touched (no path can leave the code
//!   object's directory: there are no links, no absolute paths, no parents).
//! - Quotas per code object: bytes ([`FileLimits::max_bytes`]), files
//!   ([`FileLimits::max_files`]), bytes per file ([`FileLimits::max_file_bytes`]); a write
//!   over one is refused and leaves the store as it was. Every refusal is counted by reason.
//! - Bytes held are charged to the code object's NodeOS domain ([`FileStore::bytes_of`]);
//!   when the domain ends, its files go with it ([`FileStore::clear`]).
//!
//! The store is generic over its owners ([`FileOwner`]): the capsule EE keys it by code hash
//! (a directory named by the hash in hex), the module host by module name (`anode-modules`,
//! each module with the quotas its manifest asks for: [`FileStore::set_limits`]).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anode_wasm::mem::{copy_upto, slice};

use crate::CodeHash;

/// Who owns a directory of a [`FileStore`]: the key of its files in memory and the name of
/// its directory on disk.
pub trait FileOwner: Clone + Eq + Hash + Ord + std::fmt::Debug + Send + 'static {
    /// Its directory's name (one plain path component).
    fn dir_name(&self) -> String;
    /// The owner a directory named `name` belongs to, if it names one.
    fn from_dir_name(name: &str) -> Option<Self>;
}

impl FileOwner for CodeHash {
    fn dir_name(&self) -> String {
        hex::encode(self)
    }

    fn from_dir_name(name: &str) -> Option<Self> {
        let mut code = [0u8; 32];
        hex::decode_to_slice(name.as_bytes(), &mut code).ok()?;
        Some(code)
    }
}

/// Longest owner name a directory may have ([`FileOwner`] for `String`).
pub const MAX_OWNER_NAME: usize = 64;

/// Named owners (service modules): names of `A-Z a-z 0-9 . _ -`, not starting with `.`, at
/// most [`MAX_OWNER_NAME`] bytes; other names own no directory on disk.
impl FileOwner for String {
    fn dir_name(&self) -> String {
        self.clone()
    }

    fn from_dir_name(name: &str) -> Option<Self> {
        let plain = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        (plain && !name.is_empty() && !name.starts_with('.') && name.len() <= MAX_OWNER_NAME)
            .then(|| name.to_string())
    }
}

/// Bounds of one code object's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimits {
    /// Bytes over all of its files.
    pub max_bytes: usize,
    /// Number of files.
    pub max_files: usize,
    /// Bytes of one file.
    pub max_file_bytes: usize,
    /// Bytes of a path.
    pub max_path: usize,
    /// Components of a path.
    pub max_depth: usize,
}

impl Default for FileLimits {
    fn default() -> Self {
        FileLimits {
            max_bytes: 1 << 20,
            max_files: 64,
            max_file_bytes: 256 << 10,
            max_path: crate::abi::MAX_FILE_PATH,
            max_depth: 4,
        }
    }
}

/// Why a file operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FileRefusal {
    /// The path is not a plain relative path within the bounds.
    #[error("the path is not a plain relative path of allowed characters within the bounds")]
    BadPath,
    /// No such file.
    #[error("no such file")]
    NotFound,
    /// The file would be larger than one file may be.
    #[error("larger than one file may be")]
    TooBig,
    /// The code object's byte quota would be exceeded.
    #[error("over the code object's byte quota")]
    Quota,
    /// The code object has as many files as it may.
    #[error("over the code object's file count")]
    Count,
}

impl FileRefusal {
    /// Every reason, in counter order.
    pub const ALL: [FileRefusal; 5] = [
        FileRefusal::BadPath,
        FileRefusal::NotFound,
        FileRefusal::TooBig,
        FileRefusal::Quota,
        FileRefusal::Count,
    ];

    /// Its name in counters and metrics.
    pub fn name(self) -> &'static str {
        match self {
            FileRefusal::BadPath => "bad_path",
            FileRefusal::NotFound => "not_found",
            FileRefusal::TooBig => "too_big",
            FileRefusal::Quota => "quota",
            FileRefusal::Count => "count",
        }
    }

    fn index(self) -> usize {
        FileRefusal::ALL
            .iter()
            .position(|r| *r == self)
            .unwrap_or(0)
    }
}

/// One owner's files.
#[derive(Debug, Default)]
struct Dir {
    files: BTreeMap<String, Vec<u8>>,
    bytes: usize,
    /// Its own quotas ([`FileStore::set_limits`]), else the store's.
    limits: Option<FileLimits>,
}

/// Changes waiting to reach the disk: (owner, path) -> the content to write (`None`: delete;
/// a whole owner's directory is one entry with the path empty).
type Dirty<K> = HashMap<(K, String), Option<Vec<u8>>>;

/// The files of every code object of one EE (or of every module of a node). See the module
/// docs.
#[derive(Debug)]
pub struct FileStore<K: FileOwner = CodeHash> {
    dirs: HashMap<K, Dir>,
    limits: FileLimits,
    refused: [u64; 5],
    persist: Option<Persist<K>>,
    /// Something was noted for the disk since [`FileStore::take_changed`] last said so.
    changed: bool,
}

impl<K: FileOwner> FileStore<K> {
    /// An empty store in memory only.
    pub fn new(limits: FileLimits) -> FileStore<K> {
        FileStore {
            dirs: HashMap::new(),
            limits,
            refused: [0; 5],
            persist: None,
            changed: false,
        }
    }

    /// A store kept in `root` (`root/<code hex>/<path>`): what is there is read now (files
    /// that break a bound are left out and counted), changes go out through the returned
    /// [`Persist`]'s writer.
    pub fn with_dir(limits: FileLimits, root: PathBuf) -> FileStore<K> {
        let mut s = FileStore::new(limits);
        s.load(&root);
        s.persist = Some(Persist::start(root));
        s
    }

    /// The bounds.
    pub fn limits(&self) -> FileLimits {
        self.limits
    }

    /// Refusals by reason, in [`FileRefusal::ALL`] order.
    pub fn refused(&self) -> [u64; 5] {
        self.refused
    }

    /// Bytes held over all code objects.
    pub fn bytes(&self) -> usize {
        self.dirs.values().map(|d| d.bytes).sum()
    }

    /// Bytes `code` holds.
    pub fn bytes_of(&self, code: &K) -> usize {
        self.dirs.get(code).map_or(0, |d| d.bytes)
    }

    /// Files `code` holds.
    pub fn count_of(&self, code: &K) -> usize {
        self.dirs.get(code).map_or(0, |d| d.files.len())
    }

    /// Gives `owner` quotas of its own instead of the store's. Files it already holds are
    /// kept even over new, smaller quotas: its writes are refused until it is back under
    /// them.
    pub fn set_limits(&mut self, owner: &K, limits: FileLimits) {
        match self.dirs.get_mut(owner) {
            Some(d) => d.limits = Some(limits),
            None => {
                let d = Dir {
                    limits: Some(limits),
                    ..Dir::default()
                };
                self.dirs.insert(owner.clone(), d);
            }
        }
    }

    /// The quotas `owner`'s writes are held to.
    pub fn limits_of(&self, owner: &K) -> FileLimits {
        self.dirs
            .get(owner)
            .and_then(|d| d.limits)
            .unwrap_or(self.limits)
    }

    /// The disk writer, if the store persists.
    pub fn persist(&self) -> Option<&Persist<K>> {
        self.persist.as_ref()
    }

    /// Whether a change was noted for the disk since the last call (a flag: no lock, so the
    /// EE may ask after every capsule).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    fn refuse<T>(&mut self, r: FileRefusal) -> Result<T, FileRefusal> {
        if let Some(c) = self.refused.get_mut(r.index()) {
            *c += 1;
        }
        Err(r)
    }

    /// The path `raw` names, if it is a plain relative path within the bounds.
    pub fn check_path(&self, raw: &[u8]) -> Option<String> {
        self.plain_path(raw).map(str::to_string)
    }

    /// [`FileStore::check_path`] without a copy.
    fn plain_path<'a>(&self, raw: &'a [u8]) -> Option<&'a str> {
        let s = std::str::from_utf8(raw).ok()?;
        if s.is_empty() || s.len() > self.limits.max_path {
            return None;
        }
        let mut depth = 0;
        for c in s.split('/') {
            depth += 1;
            let plain = c
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if c.is_empty() || c == "." || c == ".." || !plain || depth > self.limits.max_depth {
                return None;
            }
        }
        Some(s)
    }

    /// The content of `code`'s file at `path`.
    pub fn read(&mut self, code: &K, path: &[u8]) -> Result<&[u8], FileRefusal> {
        let Some(p) = self.plain_path(path) else {
            return self.refuse(FileRefusal::BadPath);
        };
        if !self.dirs.get(code).is_some_and(|d| d.files.contains_key(p)) {
            return self.refuse(FileRefusal::NotFound);
        }
        match self.dirs.get(code).and_then(|d| d.files.get(p)) {
            Some(f) => Ok(f),
            None => Err(FileRefusal::NotFound),
        }
    }

    /// Writes `data` as `code`'s file at `path` (replacing it), within the quotas.
    pub fn write(&mut self, code: K, path: &[u8], data: &[u8]) -> Result<(), FileRefusal> {
        let Some(p) = self.plain_path(path) else {
            return self.refuse(FileRefusal::BadPath);
        };
        let l = self.limits_of(&code);
        if l.max_files == 0 {
            // An owner allowed no files (a module that asked for none).
            return self.refuse(FileRefusal::Count);
        }
        if data.len() > l.max_file_bytes {
            return self.refuse(FileRefusal::TooBig);
        }
        // The owner, for the disk's note (only a persistent store needs a copy).
        let owner = self.persist.is_some().then(|| code.clone());
        let d = self.dirs.entry(code).or_default();
        let old = d.files.get(p).map(Vec::len);
        if old.is_none() && d.files.len() >= l.max_files {
            return self.refuse(FileRefusal::Count);
        }
        let bytes = d.bytes - old.unwrap_or(0) + data.len();
        if bytes > l.max_bytes {
            return self.refuse(FileRefusal::Quota);
        }
        d.bytes = bytes;
        match d.files.get_mut(p) {
            // Rewritten in place: no new allocation when it does not grow.
            Some(f) => {
                f.clear();
                f.extend_from_slice(data);
            }
            None => {
                d.files.insert(p.to_string(), data.to_vec());
            }
        }
        if let (Some(w), Some(owner)) = (&self.persist, owner) {
            w.note(owner, p.to_string(), Some(data.to_vec()));
            self.changed = true;
        }
        Ok(())
    }

    /// Deletes `code`'s file at `path`.
    pub fn delete(&mut self, code: &K, path: &[u8]) -> Result<(), FileRefusal> {
        let Some(p) = self.plain_path(path) else {
            return self.refuse(FileRefusal::BadPath);
        };
        let Some(d) = self.dirs.get_mut(code) else {
            return self.refuse(FileRefusal::NotFound);
        };
        let Some(f) = d.files.remove(p) else {
            return self.refuse(FileRefusal::NotFound);
        };
        d.bytes -= f.len();
        if let Some(w) = &self.persist {
            w.note(code.clone(), p.to_string(), None);
            self.changed = true;
        }
        Ok(())
    }

    /// Removes every file of `code` (its domain ended).
    pub fn clear(&mut self, code: &K) {
        if self.dirs.remove(code).is_some()
            && let Some(w) = &self.persist
        {
            w.note(code.clone(), String::new(), None);
            self.changed = true;
        }
    }

    /// Every file, for a handover: (code, path, content).
    pub fn export(&self) -> Vec<(K, String, Vec<u8>)> {
        let mut codes: Vec<&K> = self.dirs.keys().collect();
        codes.sort_unstable();
        codes
            .into_iter()
            .flat_map(|c| {
                self.dirs.get(c).into_iter().flat_map(move |d| {
                    d.files
                        .iter()
                        .map(move |(p, f)| (c.clone(), p.clone(), f.clone()))
                })
            })
            .collect()
    }

    /// Makes the store hold exactly `files` (a handover's: the predecessor's store is the
    /// latest, while this one read the disk earlier), each owner keeping its quotas; returns
    /// how many of `files` were refused.
    pub fn import(&mut self, files: Vec<(K, String, Vec<u8>)>) -> usize {
        let keep: std::collections::HashSet<(&K, &str)> =
            files.iter().map(|(k, p, _)| (k, p.as_str())).collect();
        let stale: Vec<(K, String)> = self
            .dirs
            .iter()
            .flat_map(|(k, d)| d.files.keys().map(move |p| (k, p)))
            .filter(|(k, p)| !keep.contains(&(*k, p.as_str())))
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        drop(keep);
        for (k, p) in stale {
            let _ = self.delete(&k, p.as_bytes());
        }
        files
            .into_iter()
            .filter(|(k, p, d)| self.write(k.clone(), p.as_bytes(), d).is_err())
            .count()
    }

    fn load(&mut self, root: &std::path::Path) {
        let Ok(codes) = std::fs::read_dir(root) else {
            return;
        };
        for e in codes.flatten() {
            let name = e.file_name();
            let Some(code) = K::from_dir_name(&name.to_string_lossy()) else {
                continue;
            };
            let mut stack = vec![(e.path(), String::new())];
            while let Some((dir, prefix)) = stack.pop() {
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for f in entries.flatten() {
                    let rel = format!("{prefix}{}", f.file_name().to_string_lossy());
                    let Ok(ft) = f.file_type() else { continue };
                    if ft.is_dir() {
                        stack.push((f.path(), format!("{rel}/")));
                    } else if ft.is_file() && rel.ends_with(TMP_SUFFIX) {
                        // Half written when the node stopped: the rename never happened,
                        // the file's previous content (if any) is the one that counts.
                        let _ = std::fs::remove_file(f.path());
                    } else if ft.is_file() {
                        // Never read more than one file may hold (a file grown on disk is
                        // left there and refused, like a guest's oversized write).
                        let size = f.metadata().map_or(u64::MAX, |m| m.len());
                        if size > self.limits.max_file_bytes as u64 {
                            let _ = self.refuse::<()>(FileRefusal::TooBig);
                            continue;
                        }
                        let Ok(data) = std::fs::read(f.path()) else {
                            continue;
                        };
                        // Through the same checks as a guest's write (without persisting it
                        // again: the store's writer is not set yet).
                        let _ = self.write(code.clone(), rel.as_bytes(), &data);
                    }
                }
            }
        }
    }
}

/// Why a guest's file call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestFileError {
    /// A pointer or length outside the guest's memory.
    Bounds,
    /// The store refused it (counted).
    Refused(FileRefusal),
}

impl From<FileRefusal> for GuestFileError {
    fn from(r: FileRefusal) -> Self {
        GuestFileError::Refused(r)
    }
}

/// A guest's (pointer, length) in its linear memory.
pub type GuestSpan = (i32, i32);

/// The file calls of a guest (`file_read`, `file_write`, `file_delete`) on its linear memory
/// `mem`, for the capsule EE's and the service modules' host imports, which map the errors
/// to their ABI's codes. Pointers and lengths are hostile: out of range is
/// [`GuestFileError::Bounds`], never a panic.
impl<K: FileOwner> FileStore<K> {
    /// Copies at most `buf.1` bytes of `owner`'s file at `path`, from `off`, to `buf.0`;
    /// returns the file's whole length.
    pub fn guest_read(
        &mut self,
        owner: &K,
        mem: &mut [u8],
        path: GuestSpan,
        off: i32,
        buf: GuestSpan,
    ) -> Result<i32, GuestFileError> {
        let raw = slice(mem, path.0, path.1).ok_or(GuestFileError::Bounds)?;
        let f = self.read(owner, raw)?;
        copy_upto(f, off, mem, buf.0, buf.1).map_err(|_| GuestFileError::Bounds)?;
        Ok(i32::try_from(f.len()).unwrap_or(i32::MAX))
    }

    /// Replaces `owner`'s file at `path` with the guest's bytes at `data`.
    pub fn guest_write(
        &mut self,
        owner: K,
        mem: &[u8],
        path: GuestSpan,
        data: GuestSpan,
    ) -> Result<(), GuestFileError> {
        let (Some(raw), Some(bytes)) = (slice(mem, path.0, path.1), slice(mem, data.0, data.1))
        else {
            return Err(GuestFileError::Bounds);
        };
        Ok(self.write(owner, raw, bytes)?)
    }

    /// Deletes `owner`'s file at `path`.
    pub fn guest_delete(
        &mut self,
        owner: &K,
        mem: &[u8],
        path: GuestSpan,
    ) -> Result<(), GuestFileError> {
        let raw = slice(mem, path.0, path.1).ok_or(GuestFileError::Bounds)?;
        Ok(self.delete(owner, raw)?)
    }
}

impl<K: FileOwner> Drop for FileStore<K> {
    /// The store is ending (its EE or module host, with the node): its last changes are
    /// written before it goes.
    fn drop(&mut self) {
        if let Some(p) = &self.persist {
            p.flush();
        }
    }
}

/// The disk side of a persistent [`FileStore`]: changes are noted here (the latest content
/// per file) and written by a thread of its own ([`Persist::schedule`] wakes it), at normal
/// priority: not the code worker, whose idle class a busy node can starve for as long as
/// it is busy. The thread ends when the store does.
#[derive(Debug, Clone)]
pub struct Persist<K: FileOwner = CodeHash> {
    shared: Arc<Shared<K>>,
    /// Wakes the writer (a bound of one: a wake already pending takes every change).
    wake: std::sync::mpsc::SyncSender<()>,
}

#[derive(Debug)]
struct Shared<K: FileOwner> {
    root: PathBuf,
    dirty: Mutex<Dirty<K>>,
    /// Held while a flush writes: flushes never overlap, so an older content can never land
    /// after a newer one (the writer's, and one at a hand-over or at the end).
    writing: Mutex<()>,
    /// Writes or deletes the disk refused (counted, the store in memory is unaffected).
    failures: std::sync::atomic::AtomicU64,
}

impl<K: FileOwner> Persist<K> {
    fn start(root: PathBuf) -> Persist<K> {
        let shared = Arc::new(Shared {
            root,
            dirty: Mutex::new(Dirty::new()),
            writing: Mutex::new(()),
            failures: std::sync::atomic::AtomicU64::new(0),
        });
        let (wake, woken) = std::sync::mpsc::sync_channel::<()>(1);
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("anode-files".into())
            .spawn(move || {
                while woken.recv().is_ok() {
                    s.flush();
                }
            });
        if spawned.is_err() {
            // No thread: changes are written at the next hand-over or when the store ends
            // (and a write failure is counted meanwhile, so metrics show it).
            shared
                .failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Persist { shared, wake }
    }

    fn note(&self, code: K, path: String, data: Option<Vec<u8>>) {
        let mut d = lock(&self.shared.dirty);
        if path.is_empty() {
            d.retain(|(c, _), _| *c != code);
        }
        d.insert((code, path), data);
    }

    /// Has the writer thread write what changed (at once if it is idle; otherwise the wake
    /// it has pending covers these changes too).
    pub fn schedule(&self) {
        let _ = self.wake.try_send(());
    }

    /// Writes or deletes the disk refused so far.
    pub fn failures(&self) -> u64 {
        self.shared
            .failures
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether changes wait to be written.
    pub fn pending(&self) -> bool {
        !lock(&self.shared.dirty).is_empty()
    }

    /// Writes what changed, on the calling thread (a hand-over, the end of the store, tests).
    pub fn flush(&self) {
        self.shared.flush();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<K: FileOwner> Shared<K> {
    /// Writes what changed since the last flush (each file's latest content, written to a
    /// temporary name and renamed, so a crash leaves the old or the new file, never half).
    fn flush(&self) {
        let _writing = lock(&self.writing);
        let mut work: Vec<_> = std::mem::take(&mut *lock(&self.dirty))
            .into_iter()
            .collect();
        // A whole directory's removal (path empty) goes first: a file written after the
        // owner's files were cleared must not be removed with them.
        work.sort_by_key(|((_, path), _)| !path.is_empty());
        for ((code, path), data) in work {
            let name = code.dir_name();
            if K::from_dir_name(&name).is_none() {
                // An owner whose name is no plain directory name keeps its files in memory
                // only (counted: it would not come back after a restart).
                self.failures
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                continue;
            }
            let dir = self.root.join(name);
            let r = match (path.is_empty(), data) {
                (true, _) => std::fs::remove_dir_all(&dir),
                (false, None) => std::fs::remove_file(dir.join(&path)),
                (false, Some(bytes)) => write_atomic(&dir.join(&path), &bytes),
            };
            if r.is_err_and(|e| e.kind() != std::io::ErrorKind::NotFound) {
                self.failures
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

/// The suffix of a file being written.
const TMP_SUFFIX: &str = "~tmp";

fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // `~` is no path character a guest may use: a temporary file left by a crash is never
    // taken for a guest's file (and is removed when the store is read back).
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: CodeHash = [1; 32];
    const B: CodeHash = [2; 32];

    fn store() -> FileStore {
        FileStore::new(FileLimits {
            max_bytes: 100,
            max_files: 3,
            max_file_bytes: 60,
            max_path: 20,
            max_depth: 2,
        })
    }

    #[test]
    fn paths_that_could_escape_or_break_a_bound_are_refused() {
        let s = store();
        for ok in ["a", "a.b", "dir/f_1-x", "A9"] {
            assert!(s.check_path(ok.as_bytes()).is_some(), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "..",
            "../x",
            "a/../b",
            "a//b",
            "./a",
            "a/",
            "a/b/c",
            "a b",
            "a\\b",
            "é",
            "aaaaaaaaaaaaaaaaaaaaa",
        ] {
            assert!(s.check_path(bad.as_bytes()).is_none(), "{bad:?}");
        }
        assert!(s.check_path(&[0x61, 0xff]).is_none(), "not UTF-8");
    }

    #[test]
    fn quotas_are_kept_per_code_object_and_a_refusal_changes_nothing() {
        let mut s = store();
        s.write(A, b"x", &[1; 50]).unwrap();
        assert_eq!(s.write(A, b"big", &[0; 61]), Err(FileRefusal::TooBig));
        s.write(A, b"y", &[2; 40]).unwrap();
        assert_eq!(s.write(A, b"z", &[3; 20]), Err(FileRefusal::Quota));
        s.write(A, b"z", &[3; 10]).unwrap();
        assert_eq!(s.write(A, b"w", &[4; 1]), Err(FileRefusal::Count));
        // Rewriting a file counts its new size, not both.
        s.write(A, b"x", &[5; 45]).unwrap();
        assert_eq!(s.bytes_of(&A), 95);
        assert_eq!(s.read(&A, b"x").unwrap(), &[5; 45][..]);
        // Another code object has its own quota and sees none of A's files.
        assert_eq!(s.read(&B, b"x"), Err(FileRefusal::NotFound));
        s.write(B, b"x", &[6; 60]).unwrap();
        s.delete(&A, b"y").unwrap();
        assert_eq!(s.bytes_of(&A), 55);
        assert_eq!(s.delete(&A, b"y"), Err(FileRefusal::NotFound));
        assert_eq!(s.write(A, b"../B", b"x"), Err(FileRefusal::BadPath));
        let refused = s.refused();
        for (r, n) in [
            (FileRefusal::BadPath, 1),
            (FileRefusal::NotFound, 2),
            (FileRefusal::TooBig, 1),
            (FileRefusal::Quota, 1),
            (FileRefusal::Count, 1),
        ] {
            assert_eq!(refused[r.index()], n, "{}", r.name());
        }
        s.clear(&A);
        assert_eq!(s.bytes(), 60);
    }

    #[test]
    fn files_persist_and_come_back() {
        let root = std::env::temp_dir().join(format!("anode-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut s = FileStore::with_dir(store().limits(), root.clone());
        s.write(A, b"dir/f", b"hello").unwrap();
        s.write(A, b"g", b"x").unwrap();
        s.write(A, b"g", b"world").unwrap();
        s.write(B, b"gone", b"soon").unwrap();
        s.clear(&B);
        let p = s.persist().unwrap().clone();
        assert!(p.pending());
        p.flush();
        assert!(!p.pending());
        let mut again = FileStore::with_dir(store().limits(), root.clone());
        assert_eq!(again.read(&A, b"dir/f").unwrap(), b"hello");
        assert_eq!(again.read(&A, b"g").unwrap(), b"world");
        assert_eq!(again.bytes_of(&B), 0);
        // A file put there by hand that breaks a bound is left out.
        std::fs::write(root.join(hex::encode(A)).join("huge"), vec![0; 61]).unwrap();
        // So is a file half written when the node stopped (and it is removed).
        let tmp = root.join(hex::encode(A)).join(format!("g{TMP_SUFFIX}"));
        std::fs::write(&tmp, b"half").unwrap();
        let mut third = FileStore::with_dir(store().limits(), root.clone());
        assert_eq!(third.bytes_of(&A), 10);
        assert_eq!(third.read(&A, b"g").unwrap(), b"world");
        assert!(!tmp.exists());
        assert_eq!(
            third.refused()[FileRefusal::TooBig.index()],
            1,
            "huge, counted"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
