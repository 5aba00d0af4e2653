//! The tier-up worker: one thread per [`Runtime`](crate::Runtime) (with
//! [`Tiering::Tiered`](crate::Tiering::Tiered)) that recompiles code objects with Cranelift
//! while their Winch code already runs, and writes the optimized artifact to the asking EE's
//! disk cache.
//!
//! Contract: the worker never touches an EE. Each job carries the asking EE's reply channel;
//! the EE takes results when it is next called (`handle_packet`, `handle_timeout`), so the EE
//! stays sans-IO and single-threaded, and only the time at which it swaps depends on the
//! worker. Jobs run one at a time, oldest first. The thread is started at the first job and
//! ends when the runtime is dropped (after the job it is on). If it cannot be started, code
//! stays on its baseline tier and the submit says so.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use wasmtime::{Engine, Module};

use crate::CodeHash;
use crate::cache::DiskCache;

/// One recompile.
pub(crate) struct Job {
    pub hash: CodeHash,
    pub wasm: Arc<[u8]>,
    /// Where to store the optimized artifact (the asking EE's disk cache).
    pub disk: Option<DiskCache>,
    pub reply: Sender<Done>,
}

/// A finished recompile.
pub(crate) struct Done {
    pub hash: CodeHash,
    pub wasm: Arc<[u8]>,
    /// The optimized module, or why compiling failed.
    pub module: Result<Module, String>,
    /// Why the artifact could not be stored, if it could not.
    pub disk_error: Option<String>,
}

/// The worker thread's handle.
pub(crate) struct Worker {
    engine: Engine,
    compat: String,
    tx: Mutex<Option<Sender<Job>>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker compiling for `engine` (the optimized one; `compat`: its compatibility key
    /// for the disk cache's meta). No thread runs until the first job.
    pub fn new(engine: Engine, compat: String) -> Self {
        Worker {
            engine,
            compat,
            tx: Mutex::new(None),
        }
    }

    /// Queues `job`; an error says why the worker cannot take it.
    pub fn submit(&self, job: Job) -> Result<(), String> {
        let mut tx = self
            .tx
            .lock()
            .map_err(|_| "tier-up worker lock poisoned".to_string())?;
        if tx.is_none() {
            let (t, r) = mpsc::channel::<Job>();
            let engine = self.engine.clone();
            let compat = self.compat.clone();
            std::thread::Builder::new()
                .name("anode-tier-up".into())
                .spawn(move || run(engine, compat, r))
                .map_err(|e| format!("cannot start the tier-up thread: {e}"))?;
            *tx = Some(t);
        }
        match tx.as_ref() {
            Some(t) => t
                .send(job)
                .map_err(|_| "tier-up thread has stopped".to_string()),
            None => Err("tier-up thread not running".into()),
        }
    }
}

fn run(engine: Engine, compat: String, jobs: Receiver<Job>) {
    while let Ok(job) = jobs.recv() {
        let module = Module::new(&engine, &job.wasm).map_err(|e| format!("{e:#}"));
        let disk_error = match (&module, &job.disk) {
            (Ok(m), Some(d)) => d.store_parts(&compat, &job.hash, &job.wasm, m).err(),
            _ => None,
        }
        .map(|e| e.to_string());
        // The EE may be gone (node stopped): nothing to do then.
        let _ = job.reply.send(Done {
            hash: job.hash,
            wasm: job.wasm,
            module,
            disk_error,
        });
    }
}
