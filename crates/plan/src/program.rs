//! Compiled programs and the program cache.
//!
//! A [`Program`] is PLAN source that has been parsed, type-checked and
//! lowered once; it is immutable and shared (`Arc`). The [`ProgramCache`]
//! maps the SHA-256 of the source text to the compiled program so that
//! packets carrying the same code are not re-parsed or re-checked.
//! Programs depend on the [`ServiceRegistry`] they were compiled against:
//! use one cache per registry (the registry is append-only, so cached
//! programs stay valid as services are added).

use crate::check::{Checked, check_program};
use crate::error::CompileError;
use crate::ir::FnCode;
use crate::parser::{Dialect, parse_program_in};
use crate::services::ServiceRegistry;
use crate::types::{Scheme, Ty};
use crate::value::{Chunk, Code, DepthError, Value};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// SHA-256 of a program text.
pub fn code_hash(text: &str) -> [u8; 32] {
    sha256(text.as_bytes())
}

/// SHA-256 of bytes.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(bytes);
    h.finalize().into()
}

/// A compiled PLAN program.
#[derive(Debug)]
pub struct Program {
    pub(crate) code: Code,
    pub(crate) fns: Vec<FnCode>,
    pub(crate) init: FnCode,
    pub(crate) nglobals: u32,
    pub(crate) exports: HashMap<Arc<str>, (u32, Scheme)>,
    /// Result types of the calls checked at run time ([`crate::ir::Ir::Check`]), with the
    /// service's name.
    pub(crate) checks: Vec<(Ty, Arc<str>)>,
}

impl Program {
    /// Parses, checks and compiles `text` against `registry`.
    pub fn compile(text: &str, registry: &ServiceRegistry) -> Result<Program, CompileError> {
        Self::compile_hashed(text, code_hash(text), registry)
    }

    /// Parses, checks and compiles `text` in `dialect` (tools compile entry calls in
    /// [`Dialect::Entry`]; programs that travel are always [`Dialect::Program`]).
    pub fn compile_in(
        text: &str,
        registry: &ServiceRegistry,
        dialect: Dialect,
    ) -> Result<Program, CompileError> {
        Self::compile_hashed_in(text, code_hash(text), registry, dialect)
    }

    fn compile_hashed(
        text: &str,
        hash: [u8; 32],
        registry: &ServiceRegistry,
    ) -> Result<Program, CompileError> {
        Self::compile_hashed_in(text, hash, registry, Dialect::Program)
    }

    fn compile_hashed_in(
        text: &str,
        hash: [u8; 32],
        registry: &ServiceRegistry,
        dialect: Dialect,
    ) -> Result<Program, CompileError> {
        let defs = parse_program_in(text, dialect)?;
        let Checked {
            fns,
            init,
            nglobals,
            exports,
            checks,
        } = check_program(&defs, registry)?;
        Ok(Program {
            code: Code::Text {
                hash,
                text: Arc::from(text),
            },
            fns,
            init,
            nglobals,
            exports,
            checks,
        })
    }

    /// The source text.
    pub fn source(&self) -> &str {
        match &self.code {
            Code::Text { text, .. } => text,
            Code::Hash(_) => "",
        }
    }

    /// SHA-256 of the source text (the cache key).
    pub fn hash(&self) -> &[u8; 32] {
        self.code.hash()
    }

    /// The code, for building chunks.
    pub fn code(&self) -> &Code {
        &self.code
    }

    /// Type of a top-level function, if defined.
    pub fn function_type(&self, name: &str) -> Option<&Scheme> {
        self.exports.get(name).map(|(_, s)| s)
    }

    /// Names of the top-level functions.
    pub fn function_names(&self) -> impl Iterator<Item = &str> {
        self.exports.keys().map(|k| &**k)
    }

    /// Builds the chunk `|func|(args)` carrying this program's code.
    pub fn chunk(&self, func: &str, args: Vec<Value>) -> Result<Chunk, DepthError> {
        Chunk::new(Some(self.code.clone()), func, args)
    }
}

#[derive(Debug, Default)]
struct CacheInner {
    map: HashMap<[u8; 32], Arc<Program>>,
    order: VecDeque<[u8; 32]>,
    hits: u64,
    misses: u64,
}

/// A bounded cache of compiled programs keyed by the SHA-256 of their text.
/// Eviction is first-in first-out. Thread-safe.
#[derive(Debug)]
pub struct ProgramCache {
    inner: Mutex<CacheInner>,
    capacity: usize,
}

impl Default for ProgramCache {
    fn default() -> Self {
        Self::new(256)
    }
}

impl ProgramCache {
    /// A cache holding at most `capacity` programs (at least one).
    pub fn new(capacity: usize) -> Self {
        ProgramCache {
            inner: Mutex::new(CacheInner::default()),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        // A poisoned lock only means another thread panicked while holding
        // it; the map itself is always consistent.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Looks a program up by hash.
    pub fn get(&self, hash: &[u8; 32]) -> Option<Arc<Program>> {
        let mut g = self.lock();
        let r = g.map.get(hash).cloned();
        if r.is_some() {
            g.hits += 1;
        }
        r
    }

    /// Returns the cached program for `text`, compiling it on a miss.
    pub fn get_or_compile(
        &self,
        text: &str,
        registry: &ServiceRegistry,
    ) -> Result<Arc<Program>, CompileError> {
        self.get_or_compile_hashed(text, code_hash(text), registry)
    }

    /// Like [`ProgramCache::get_or_compile`] when the hash is already known
    /// (it must be the SHA-256 of `text`).
    pub fn get_or_compile_hashed(
        &self,
        text: &str,
        hash: [u8; 32],
        registry: &ServiceRegistry,
    ) -> Result<Arc<Program>, CompileError> {
        if let Some(p) = self.get(&hash) {
            return Ok(p);
        }
        let prog = Arc::new(Program::compile_hashed(text, hash, registry)?);
        let mut g = self.lock();
        g.misses += 1;
        if !g.map.contains_key(&hash) {
            while g.map.len() >= self.capacity {
                match g.order.pop_front() {
                    Some(old) => {
                        g.map.remove(&old);
                    }
                    None => break,
                }
            }
            g.order.push_back(hash);
            g.map.insert(hash, prog.clone());
        }
        Ok(prog)
    }

    /// (hits, misses) counters.
    pub fn stats(&self) -> (u64, u64) {
        let g = self.lock();
        (g.hits, g.misses)
    }

    /// Number of cached programs.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_hits_and_evicts() {
        let reg = ServiceRegistry::with_core();
        let c = ProgramCache::new(2);
        let a = c.get_or_compile("fun a() = 1", &reg).unwrap();
        let a2 = c.get_or_compile("fun a() = 1", &reg).unwrap();
        assert!(Arc::ptr_eq(&a, &a2));
        assert_eq!(c.stats(), (1, 1));
        c.get_or_compile("fun b() = 1", &reg).unwrap();
        c.get_or_compile("fun c() = 1", &reg).unwrap();
        assert_eq!(c.len(), 2);
        assert!(c.get(a.hash()).is_none());
        assert!(c.get_or_compile("fun (", &reg).is_err());
    }
}
