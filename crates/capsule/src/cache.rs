//! The code cache: compiled code objects in memory (LRU by bytes, each with its live
//! instance) and, optionally, on disk as wasmtime serialized artifacts so a restarted node
//! runs cached protocols without recompiling.
//!
//! Disk layout, per code object `H` (64 hex digits) in the cache directory:
//! - `H.wasm`: the module bytes (served to neighbors; SHA-256 must equal `H`),
//! - `H.cwasm`: `Module::serialize` output of this engine,
//! - `H.meta`: `anode-cwasm 3`, the engine compatibility key, the BLAKE3 of `H.cwasm`, the
//!   BLAKE3 of `H.wasm`, and the *stamp* of `H.cwasm`: its inode, length and modification time,
//!   which the writer sets to a time whose nanoseconds come from the artifact's BLAKE3.
//!
//! Invariant: an artifact is deserialized only if its meta names this engine's compatibility
//! key and the file is the one whose BLAKE3 the meta records (so a truncated, foreign or
//! damaged file is never handed to wasmtime's deserializer, which trusts its input). "The
//! one" is established either by the stamp (same inode, length and stamped modification
//! time: the file was not written since it was hashed; any write resets the modification
//! time to the clock, which does not produce the stamped nanoseconds; only someone setting
//! times on purpose with write access to the cache could fake it, and they could equally
//! replace the node's binary), and then the file is mapped (`Module::deserialize_file`, no
//! read, no hash: the fast restart path), or by reading and hashing it (stamp lost, e.g.
//! after a copy), and then those bytes are deserialized. Otherwise the module is recompiled
//! from `H.wasm` (verified against its SHA-256 name `H`) and the artifact rewritten. The meta
//! is written only after `H.wasm` was verified against `H` (at install or on receipt), so when
//! loading a valid artifact the module bytes are checked against the meta's BLAKE3 (several
//! GB/s) instead of recomputing SHA-256; bytes that do not match are never used. Metas of
//! earlier versions are treated as missing: the module is recompiled once and the artifact
//! rewritten. A mapped artifact is never modified in place: every write goes to a new file
//! that is renamed over the old name.
//! Files are written to a temporary name and renamed, so a crash leaves no half file; a disk
//! load does not rewrite anything.

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

/// The on-disk artifact cache.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
}

const META_MAGIC: &str = "anode-cwasm 3";

/// Identity of an artifact file as written: inode, length, modification time (s, ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    secs: i64,
    nanos: u32,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let m = fs::metadata(path).ok()?;
        Some(Stamp {
            ino: m.ino(),
            len: m.len(),
            secs: m.mtime(),
            nanos: u32::try_from(m.mtime_nsec()).ok()?,
        })
    }

    fn line(&self) -> String {
        format!("{} {} {} {}", self.ino, self.len, self.secs, self.nanos)
    }

    fn parse(line: &str) -> Option<Stamp> {
        let mut f = line.split(' ');
        let st = Stamp {
            ino: f.next()?.parse().ok()?,
            len: f.next()?.parse().ok()?,
            secs: f.next()?.parse().ok()?,
            nanos: f.next()?.parse().ok()?,
        };
        f.next().is_none().then_some(st)
    }
}

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

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CapsuleError> {
    write_stamped(path, bytes, None).map(|_| ())
}

/// Writes `bytes` to a new file renamed to `path`; with `nanos`, sets its modification time
/// to now with those nanoseconds first and returns its stamp.
fn write_stamped(
    path: &Path,
    bytes: &[u8],
    nanos: Option<u32>,
) -> Result<Option<Stamp>, CapsuleError> {
    // Unique per process and per write: the tier-up worker and EEs may write at once.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    fs::write(&tmp, bytes).map_err(|e| disk_err(&tmp, e))?;
    let stamp = match nanos {
        None => None,
        Some(ns) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_err(|e| disk_err(&tmp, e))?;
            let t =
                std::time::UNIX_EPOCH + std::time::Duration::new(now.as_secs(), ns % 1_000_000_000);
            fs::File::options()
                .write(true)
                .open(&tmp)
                .and_then(|f| f.set_modified(t))
                .map_err(|e| disk_err(&tmp, e))?;
            Some(Stamp::of(&tmp).ok_or_else(|| disk_err(&tmp, "cannot stat"))?)
        }
    };
    fs::rename(&tmp, path).map_err(|e| disk_err(path, e))?;
    Ok(stamp)
}

/// A checked artifact.
enum Artifact {
    /// The file is the one written and hashed (its stamp matches): map it.
    Stamped(PathBuf),
    /// Its bytes, read and checked against the meta's BLAKE3.
    Read(Vec<u8>),
}

/// How a code object came out of the disk cache.
#[derive(Debug)]
pub(crate) enum DiskHit {
    /// The artifact was valid and deserialized.
    Deserialized(Arc<[u8]>, Module),
    /// Only the module bytes were usable: they must be compiled.
    WasmOnly(Arc<[u8]>),
}

impl DiskCache {
    /// A cache in `dir` (created if missing).
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, CapsuleError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| disk_err(&dir, e))?;
        Ok(DiskCache { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, h: &CodeHash, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", hex::encode(h)))
    }

    /// Writes the module bytes and, for optimized code, the serialized artifact and its meta
    /// (baseline code is not stored: a restarted node recompiles it and tiers up again).
    pub(crate) fn store(&self, rt: &Runtime, obj: &CodeObject) -> Result<(), CapsuleError> {
        match obj.tier {
            CodeTier::Optimized => self.store_parts(rt.compat(), &obj.hash, &obj.wasm, &obj.module),
            CodeTier::Baseline => self.store_wasm(&obj.hash, &obj.wasm),
        }
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
        let digest = blake3::hash(&art);
        let d = digest.as_bytes();
        let nanos = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
        let stamp = write_stamped(&self.path(h, "cwasm"), &art, Some(nanos))?
            .ok_or_else(|| disk_err(&self.dir, "no stamp"))?;
        let meta = format!(
            "{META_MAGIC}\n{compat}\n{}\n{}\n{}\n",
            digest.to_hex(),
            fast_digest(wasm),
            stamp.line()
        );
        write_atomic(&self.path(h, "meta"), meta.as_bytes())
    }

    /// The module bytes of `h`, if held and intact.
    pub fn wasm(&self, h: &CodeHash) -> Option<Arc<[u8]>> {
        let b = fs::read(self.path(h, "wasm")).ok()?;
        (code_hash(&b) == *h).then(|| Arc::from(b))
    }

    /// Loads `h`: the artifact if it is valid for this engine, else just the module bytes.
    pub(crate) fn load(&self, rt: &Runtime, h: &CodeHash) -> Option<DiskHit> {
        let Some((art, wasm)) = self.artifact(rt, h) else {
            return Some(DiskHit::WasmOnly(self.wasm(h)?));
        };
        let m = match art {
            // SAFETY: `Module::deserialize_file` requires a file produced by
            // `Module::serialize` of a compatible engine that is not modified while mapped.
            // This file was written by `store_parts` above (its stamp, set there, matches the
            // meta written with it and its BLAKE3; see the module docs for why a stamp match
            // means it is unchanged), the meta names this engine's compatibility key
            // (wasmtime additionally checks its own version and configuration header), and
            // this cache never writes into an existing file: it renames new files over old
            // names, so a mapping keeps the old, unchanged inode.
            Artifact::Stamped(path) => unsafe { Module::deserialize_file(&rt.opt.engine, path) },
            // SAFETY: `Module::deserialize` requires bytes produced by `Module::serialize` of
            // a compatible engine. These bytes' BLAKE3 matches the meta written with them by
            // `store_parts`, and the meta names this engine's compatibility key.
            Artifact::Read(bytes) => unsafe { Module::deserialize(&rt.opt.engine, &bytes) },
        };
        match m {
            Ok(m) => Some(DiskHit::Deserialized(wasm, m)),
            Err(_) => Some(DiskHit::WasmOnly(self.wasm(h)?)),
        }
    }

    /// The artifact of `h` and its module bytes, if the meta is of this engine and both
    /// files match the digests it records (written only for module bytes verified against
    /// `h`): the artifact by its stamp or, failing that, by reading and hashing it.
    fn artifact(&self, rt: &Runtime, h: &CodeHash) -> Option<(Artifact, Arc<[u8]>)> {
        let meta = fs::read_to_string(self.path(h, "meta")).ok()?;
        let mut lines = meta.lines();
        if lines.next()? != META_MAGIC || lines.next()? != rt.compat() {
            return None;
        }
        let (want_art, want_wasm) = (lines.next()?, lines.next()?);
        let stamp = Stamp::parse(lines.next()?)?;
        let art_path = self.path(h, "cwasm");
        let art = if Stamp::of(&art_path) == Some(stamp) {
            Artifact::Stamped(art_path)
        } else {
            let bytes = fs::read(&art_path).ok()?;
            if fast_digest(&bytes) != want_art {
                return None;
            }
            Artifact::Read(bytes)
        };
        let wasm = fs::read(self.path(h, "wasm")).ok()?;
        (fast_digest(&wasm) == want_wasm).then(|| (art, Arc::from(wasm)))
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
        ["wasm", "cwasm", "meta"]
            .iter()
            .filter(|ext| fs::remove_file(self.path(h, ext)).is_ok())
            .count()
            > 0
    }
}
