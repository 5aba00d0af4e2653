//! The code cache: compiled code objects in memory (LRU by bytes, each with its live
//! instance) and, optionally, on disk as wasmtime serialized artifacts so a restarted node
//! runs cached protocols without recompiling.
//!
//! Disk layout, per code object `H` (64 hex digits) in the cache directory:
//! - `H.wasm`: the module bytes (served to neighbors; SHA-256 must equal `H`),
//! - `H.cwasm`: `Module::serialize` output of this engine,
//! - `H.meta`: `anode-cwasm 4`, the engine compatibility key, the BLAKE3 of `H.cwasm` and the
//!   BLAKE3 of `H.wasm`.
//!
//! Invariants:
//! - An artifact is deserialized only from bytes read and checked against the BLAKE3 its meta
//!   records, and only if the meta names this engine's compatibility key: a truncated,
//!   foreign or damaged file (also one changed in place with its inode, size and times kept)
//!   is never handed to wasmtime's deserializer, which trusts its input. A failed check is
//!   reported ([`DiskHit::Rejected`]): the module is recompiled from `H.wasm` (verified
//!   against its SHA-256 name) and the artifact rewritten. Hashing costs microseconds for a
//!   small module and milliseconds for a 20 MB one; a load happens only on a memory miss.
//! - The meta is written only after `H.wasm` was verified against `H` (at install or on
//!   receipt), so a valid artifact's module bytes are checked against the meta's BLAKE3
//!   (several GB/s) instead of recomputing SHA-256. Metas of earlier versions are treated as
//!   missing: the module is recompiled once and the artifact rewritten.
//! - Files are written to a temporary name and renamed, so a crash leaves no half file;
//!   temporary files a crash left behind are removed when the cache opens.
//! - The directory holds at most `max_bytes` (the `.wasm`, `.cwasm` and `.meta` files of all
//!   code objects): storing past the bound evicts the least recently used code objects,
//!   never the one being stored. Recency survives restarts as the `.wasm` file's
//!   modification time, which a load refreshes.

use std::collections::HashMap;
use std::fs;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::Module;

use crate::runtime::{CodeObject, CodeTier, Live, Runtime, code_hash};
use crate::{CapsuleError, CodeHash};

/// Hashes a code hash by its first 8 bytes (it is already uniformly distributed).
#[derive(Debug, Default, Clone, Copy)]
pub struct PrefixHasher(u64);

impl Hasher for PrefixHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // A code hash arrives as one 32-byte write: its first 8 bytes suffice.
        if let Some(b) = bytes.first_chunk::<8>() {
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(*b);
            return;
        }
        let mut b = [0u8; 8];
        b.get_mut(..bytes.len())
            .unwrap_or(&mut [])
            .copy_from_slice(bytes);
        self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(b);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        // The slice length prefix (always 32 for a code hash).
        self.0 = self.0.rotate_left(5) ^ n as u64;
    }
}

/// A map keyed by code hash.
pub type CodeMap<V> = HashMap<CodeHash, V, BuildHasherDefault<PrefixHasher>>;

/// One cached code object with its live instance (if instantiated and healthy).
#[derive(Debug)]
pub(crate) struct Cached {
    pub obj: Arc<CodeObject>,
    pub live: Option<Live>,
    pub used: u64,
    /// Fuel per `accept`, a moving average (0: not run yet; kept only with workers).
    pub fuel: u64,
}

/// Compiled code objects in memory, bounded by bytes, least recently used out first.
#[derive(Debug)]
pub(crate) struct MemCache {
    pub map: CodeMap<Cached>,
    bytes: usize,
    budget: usize,
    tick: u64,
}

impl MemCache {
    pub fn new(budget: usize) -> Self {
        MemCache {
            map: CodeMap::default(),
            bytes: 0,
            budget,
            tick: 0,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The entry for `h`, marked used.
    #[inline]
    pub fn get_mut(&mut self, h: &CodeHash) -> Option<&mut Cached> {
        let e = self.map.get_mut(h)?;
        self.tick += 1;
        e.used = self.tick;
        Some(e)
    }

    /// Inserts `obj`; returns the entries evicted to make room (never `obj` itself).
    pub fn insert(&mut self, obj: Arc<CodeObject>) -> Vec<Cached> {
        let mut out = Vec::new();
        if let Some(old) = self.map.remove(&obj.hash) {
            self.bytes -= old.obj.cost;
            out.push(old);
        }
        while self.bytes + obj.cost > self.budget {
            let Some(victim) = self.map.iter().min_by_key(|(_, c)| c.used).map(|(h, _)| *h) else {
                break;
            };
            if let Some(c) = self.remove(&victim) {
                out.push(c);
            }
        }
        self.tick += 1;
        self.bytes += obj.cost;
        self.map.insert(
            obj.hash,
            Cached {
                obj,
                live: None,
                used: self.tick,
                fuel: 0,
            },
        );
        out
    }

    /// Takes the live instance of the least recently used code object other than `keep`
    /// (to free an instance slot); `None` if no other code object has one.
    pub fn take_lru_live(&mut self, keep: &CodeHash) -> Option<Live> {
        let victim = self
            .map
            .iter()
            .filter(|(h, c)| *h != keep && c.live.is_some())
            .min_by_key(|(_, c)| c.used)
            .map(|(h, _)| *h)?;
        self.map.get_mut(&victim)?.live.take()
    }

    /// Replaces the code of an entry already held by `obj` (same hash; e.g. its optimized
    /// tier), keeping its recency; returns the old live instance (`Some(None)` if it had
    /// none), or `None` if no entry for `obj.hash` is held (then nothing changes).
    pub fn replace(&mut self, obj: Arc<CodeObject>) -> Option<Option<Live>> {
        let e = self.map.get_mut(&obj.hash)?;
        self.bytes = self.bytes - e.obj.cost + obj.cost;
        e.obj = obj;
        Some(e.live.take())
    }

    pub fn remove(&mut self, h: &CodeHash) -> Option<Cached> {
        let c = self.map.remove(h)?;
        self.bytes -= c.obj.cost;
        Some(c)
    }
}

/// The on-disk artifact cache, bounded in bytes (see the module docs).
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
    index: Arc<std::sync::Mutex<DiskIndex>>,
}

/// What the cache holds, for its byte bound: bytes and recency per code object.
#[derive(Debug, Default)]
struct DiskIndex {
    max_bytes: u64,
    bytes: u64,
    entries: CodeMap<(u64, u64)>,
    tick: u64,
    evictions: u64,
    orphans_removed: u64,
}

impl DiskIndex {
    /// Records `h` holding `bytes` now, as most recently used.
    fn put(&mut self, h: CodeHash, bytes: u64) {
        self.tick += 1;
        let old = self.entries.insert(h, (bytes, self.tick));
        self.bytes = self.bytes - old.map_or(0, |o| o.0) + bytes;
    }

    /// Marks `h` used now.
    fn touch(&mut self, h: &CodeHash) {
        self.tick += 1;
        if let Some(e) = self.entries.get_mut(h) {
            e.1 = self.tick;
        }
    }

    fn forget(&mut self, h: &CodeHash) {
        if let Some((b, _)) = self.entries.remove(h) {
            self.bytes -= b;
        }
    }

    /// The least recently used code objects to remove, other than `keep`, until the bound
    /// holds.
    fn over_bound(&self, keep: &CodeHash) -> Vec<CodeHash> {
        let mut by_age: Vec<(&CodeHash, &(u64, u64))> =
            self.entries.iter().filter(|(h, _)| *h != keep).collect();
        by_age.sort_by_key(|(_, e)| e.1);
        let mut left = self.bytes;
        let mut out = Vec::new();
        for (h, (b, _)) in by_age {
            if left <= self.max_bytes {
                break;
            }
            left -= b;
            out.push(*h);
        }
        out
    }
}

const META_MAGIC: &str = "anode-cwasm 4";

/// BLAKE3 of `b`, hex: the artifact cache's integrity check (not a name).
fn fast_digest(b: &[u8]) -> String {
    blake3::hash(b).to_hex().to_string()
}

fn disk_err(path: &Path, e: impl std::fmt::Display) -> CapsuleError {
    CapsuleError::Disk {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// The marker in the names of files being written (`NAME.tmpPID-N`).
const TMP_MARK: &str = ".tmp";

/// Writes `bytes` to a new file renamed to `path`.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CapsuleError> {
    // Unique per process and per write: the tier-up worker and EEs may write at once.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    fs::write(&tmp, bytes).map_err(|e| disk_err(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| disk_err(path, e))
}

/// How a code object came out of the disk cache.
#[derive(Debug)]
pub(crate) enum DiskHit {
    /// The artifact was valid and deserialized.
    Deserialized(Arc<[u8]>, Module),
    /// Only the module bytes were usable (no artifact for this engine): compile them.
    WasmOnly(Arc<[u8]>),
    /// The artifact failed its check (damaged or changed): compile the module bytes and
    /// write the artifact again.
    Rejected(Arc<[u8]>),
}

/// Disk cache statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Bytes held.
    pub bytes: u64,
    /// The bound.
    pub max_bytes: u64,
    /// Code objects held.
    pub entries: u64,
    /// Code objects evicted to keep the bound.
    pub evictions: u64,
    /// Temporary files of interrupted writes removed at open.
    pub orphans_removed: u64,
}

impl DiskCache {
    /// A cache in `dir` (created if missing) holding at most `max_bytes`: removes temporary
    /// files left by interrupted writes, indexes what is there, and evicts down to the bound.
    pub fn open(dir: impl Into<PathBuf>, max_bytes: u64) -> Result<Self, CapsuleError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| disk_err(&dir, e))?;
        let c = DiskCache {
            dir,
            index: Arc::new(std::sync::Mutex::new(DiskIndex {
                max_bytes,
                ..DiskIndex::default()
            })),
        };
        c.scan()?;
        c.enforce(&[0; 32]);
        Ok(c)
    }

    /// Indexes the directory: sizes per code object, recency by the `.wasm` file's
    /// modification time; removes temporary files.
    fn scan(&self) -> Result<(), CapsuleError> {
        let rd = fs::read_dir(&self.dir).map_err(|e| disk_err(&self.dir, e))?;
        let mut found: CodeMap<(u64, std::time::SystemTime)> = CodeMap::default();
        let mut orphans = 0;
        for e in rd.filter_map(Result::ok) {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let Ok(meta) = e.metadata() else { continue };
            if name.contains(TMP_MARK) {
                if fs::remove_file(e.path()).is_ok() {
                    orphans += 1;
                }
                continue;
            }
            let Some((stem, ext)) = name.rsplit_once('.') else {
                continue;
            };
            let mut h = [0u8; 32];
            if hex::decode_to_slice(stem, &mut h).is_err() {
                continue;
            }
            let entry = found.entry(h).or_insert((0, std::time::UNIX_EPOCH));
            entry.0 += meta.len();
            if ext == "wasm" {
                entry.1 = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
            }
        }
        let mut by_age: Vec<(CodeHash, (u64, std::time::SystemTime))> = found.into_iter().collect();
        by_age.sort_by_key(|(_, (_, t))| *t);
        let mut idx = self.lock();
        for (h, (bytes, _)) in by_age {
            idx.put(h, bytes);
        }
        idx.orphans_removed += orphans;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DiskIndex> {
        self.index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Evicts least recently used code objects (never `keep`) until the bound holds.
    fn enforce(&self, keep: &CodeHash) {
        let victims = self.lock().over_bound(keep);
        for h in victims {
            self.remove(&h);
            self.lock().evictions += 1;
        }
    }

    /// Re-reads the bytes `h` holds on disk into the index, and keeps the bound.
    fn account(&self, h: &CodeHash) {
        let bytes: u64 = ["wasm", "cwasm", "meta"]
            .iter()
            .filter_map(|ext| fs::metadata(self.path(h, ext)).ok())
            .map(|m| m.len())
            .sum();
        self.lock().put(*h, bytes);
        self.enforce(h);
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes held, the bound, entries, evictions, orphans removed.
    pub fn stats(&self) -> DiskStats {
        let i = self.lock();
        DiskStats {
            bytes: i.bytes,
            max_bytes: i.max_bytes,
            entries: i.entries.len() as u64,
            evictions: i.evictions,
            orphans_removed: i.orphans_removed,
        }
    }

    fn path(&self, h: &CodeHash, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", hex::encode(h)))
    }

    /// Writes the module bytes and, for optimized code, the serialized artifact and its meta
    /// (baseline code is not stored: a restarted node recompiles it and tiers up again).
    pub(crate) fn store(&self, rt: &Runtime, obj: &CodeObject) -> Result<(), CapsuleError> {
        self.store_module(rt.compat(), &obj.hash, &obj.wasm, &obj.module, obj.tier)
    }

    /// [`DiskCache::store`] of a module not yet wrapped in a code object (the code worker's
    /// way): `wasm` verified against `h` by the caller, `module` compiled for `tier`.
    pub(crate) fn store_module(
        &self,
        compat: &str,
        h: &CodeHash,
        wasm: &[u8],
        module: &Module,
        tier: CodeTier,
    ) -> Result<(), CapsuleError> {
        match tier {
            CodeTier::Optimized => self.store_parts(compat, h, wasm, module),
            CodeTier::Baseline => {
                self.store_wasm(h, wasm)?;
                self.account(h);
                Ok(())
            }
        }
    }

    /// Whether `h` is held, by the index (no disk access; the files are checked when read).
    pub(crate) fn contains(&self, h: &CodeHash) -> bool {
        self.lock().entries.contains_key(h)
    }

    /// Writes the module bytes `wasm` (verified against `h` by the caller) if missing.
    fn store_wasm(&self, h: &CodeHash, wasm: &[u8]) -> Result<(), CapsuleError> {
        let wasm_path = self.path(h, "wasm");
        if !wasm_path.exists() {
            write_atomic(&wasm_path, wasm)?;
        }
        Ok(())
    }

    /// Writes the module bytes (verified against `h` by the caller), the serialized
    /// optimized `module` and its meta naming engine compatibility key `compat`.
    pub(crate) fn store_parts(
        &self,
        compat: &str,
        h: &CodeHash,
        wasm: &[u8],
        module: &Module,
    ) -> Result<(), CapsuleError> {
        let art = module.serialize().map_err(|e| disk_err(&self.dir, e))?;
        self.store_wasm(h, wasm)?;
        write_atomic(&self.path(h, "cwasm"), &art)?;
        let meta = format!(
            "{META_MAGIC}\n{compat}\n{}\n{}\n",
            fast_digest(&art),
            fast_digest(wasm),
        );
        write_atomic(&self.path(h, "meta"), meta.as_bytes())?;
        self.account(h);
        Ok(())
    }

    /// The module bytes of `h`, if held and intact.
    pub fn wasm(&self, h: &CodeHash) -> Option<Arc<[u8]>> {
        let b = fs::read(self.path(h, "wasm")).ok()?;
        (code_hash(&b) == *h).then(|| Arc::from(b))
    }

    /// Loads `h`: the artifact if it is valid for this engine, else just the module bytes
    /// (saying whether an artifact was there and failed its check). Marks `h` used.
    pub(crate) fn load(&self, rt: &Runtime, h: &CodeHash) -> Option<DiskHit> {
        let hit = self.load_unmarked(rt, h)?;
        self.lock().touch(h);
        if let Ok(f) = fs::File::options().write(true).open(self.path(h, "wasm")) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
        Some(hit)
    }

    fn load_unmarked(&self, rt: &Runtime, h: &CodeHash) -> Option<DiskHit> {
        let (art, wasm) = match self.artifact(rt, h) {
            Checked::Valid(art, wasm) => (art, wasm),
            Checked::Missing => return Some(DiskHit::WasmOnly(self.wasm(h)?)),
            Checked::Bad => return Some(DiskHit::Rejected(self.wasm(h)?)),
        };
        // SAFETY: `Module::deserialize` requires bytes produced by `Module::serialize` of a
        // compatible engine. These bytes' BLAKE3 matches the meta written with them by
        // `store_parts` (checked just now, on these very bytes), and the meta names this
        // engine's compatibility key (wasmtime checks its own version and configuration
        // header too).
        match unsafe { Module::deserialize(&rt.opt.engine, &art) } {
            Ok(m) => Some(DiskHit::Deserialized(wasm, m)),
            Err(_) => Some(DiskHit::Rejected(self.wasm(h)?)),
        }
    }

    /// The artifact of `h` and its module bytes, checked against the digests the meta
    /// records (written only for module bytes verified against `h`).
    fn artifact(&self, rt: &Runtime, h: &CodeHash) -> Checked {
        let Ok(meta) = fs::read_to_string(self.path(h, "meta")) else {
            return Checked::Missing;
        };
        let mut lines = meta.lines();
        if lines.next() != Some(META_MAGIC) || lines.next() != Some(rt.compat()) {
            return Checked::Missing;
        }
        let (Some(want_art), Some(want_wasm)) = (lines.next(), lines.next()) else {
            return Checked::Bad;
        };
        let (Ok(art), Ok(wasm)) = (
            fs::read(self.path(h, "cwasm")),
            fs::read(self.path(h, "wasm")),
        ) else {
            return Checked::Bad;
        };
        if fast_digest(&art) != want_art || fast_digest(&wasm) != want_wasm {
            return Checked::Bad;
        }
        Checked::Valid(art, Arc::from(wasm))
    }

    /// The code objects held (by their `.wasm` files).
    pub fn list(&self) -> Vec<CodeHash> {
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut v: Vec<CodeHash> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let stem = name.strip_suffix(".wasm")?;
                let mut h = [0u8; 32];
                hex::decode_to_slice(stem, &mut h).ok()?;
                Some(h)
            })
            .collect();
        v.sort();
        v
    }

    /// Removes `h`'s files; true if any existed.
    pub fn remove(&self, h: &CodeHash) -> bool {
        self.lock().forget(h);
        ["wasm", "cwasm", "meta"]
            .iter()
            .filter(|ext| fs::remove_file(self.path(h, ext)).is_ok())
            .count()
            > 0
    }
}

/// An artifact checked against its meta.
enum Checked {
    /// Both digests match: the artifact's bytes and the module bytes.
    Valid(Vec<u8>, Arc<[u8]>),
    /// No meta for this engine (never written, or by another engine or version).
    Missing,
    /// A meta of this engine whose files do not match it.
    Bad,
}
