//! The capsule EE's part of a node's handover to the process taking its place (`anode
//! upgrade`, `anode_core::handover`): the capsules waiting for code (copies: this EE keeps
//! them, in case the successor fails), every code object's soft state with the time each
//! entry had left, their files (ABI v2), and the guests' clock. Code objects themselves
//! travel apart, as module bytes the successor verifies and compiles before the hand-over
//! ([`CapsuleEe::memory_code`]): they can be megabytes, and the successor needs them before
//! it takes the first packet.
//!
//! The state comes from another process: every entry is checked (hash length, key and value
//! bounds, the soft-state budget, the file quotas) and one that does not fit is skipped,
//! never trusted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anode_core::handover::{EeHandover, HeldPacket, hex_bytes};

use super::CapsuleEe;
use crate::CodeHash;

/// One soft-state entry as handed over.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct SoftRecord {
    #[serde(with = "hex_bytes")]
    key: Vec<u8>,
    #[serde(with = "hex_bytes")]
    value: Vec<u8>,
    /// Milliseconds it had left.
    ttl_ms: u64,
}

/// One code object's soft state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct SoftCode {
    #[serde(with = "hex_bytes")]
    code: Vec<u8>,
    /// Least recently used first.
    entries: Vec<SoftRecord>,
}

/// One file of a code object (ABI v2 files).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct FileRecord {
    #[serde(with = "hex_bytes")]
    code: Vec<u8>,
    path: String,
    #[serde(with = "hex_bytes")]
    data: Vec<u8>,
}

/// The EE's state as handed over.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct State {
    soft: Vec<SoftCode>,
    /// The code objects' files (a successor with the same disk has them too; those in
    /// memory are the latest).
    #[serde(default)]
    files: Vec<FileRecord>,
    /// What the guests' clock (`now_ns`) read at the hand-over, so it goes on from there
    /// (soft state holds times of that clock).
    #[serde(default)]
    clock_ns: Option<u64>,
}

impl CapsuleEe {
    /// The module bytes of every code object in the memory cache, for a successor to build
    /// before it takes over (those only on disk it finds in the shared disk cache).
    pub fn memory_code(&self) -> Vec<(CodeHash, Arc<[u8]>)> {
        let mut v: Vec<(CodeHash, Arc<[u8]>)> = self
            .mem
            .map
            .iter()
            .map(|(h, c)| (*h, c.obj.wasm.clone()))
            .collect();
        v.sort_unstable_by_key(|e| e.0);
        v
    }

    /// See the module docs.
    pub(super) fn export(&self, now: Instant, out: &mut EeHandover) {
        let waiting = self
            .loader
            .parked_packets()
            .chain(self.builds.values().flat_map(|p| p.packets()))
            .chain(self.workers.iter().flat_map(|w| w.held()));
        out.held.extend(waiting.map(|p| HeldPacket {
            link: p.link.map(|l| l.0),
            buf: p.buf.clone(),
        }));
        let soft = self
            .reach
            .soft
            .export(now)
            .into_iter()
            .map(|(code, entries)| SoftCode {
                code: code.to_vec(),
                entries: entries
                    .into_iter()
                    .map(|e| SoftRecord {
                        key: e.key,
                        value: e.value,
                        ttl_ms: u64::try_from(e.ttl_left.as_millis()).unwrap_or(u64::MAX),
                    })
                    .collect(),
            })
            .collect();
        let clock_ns = self.epoch.map(|e| {
            u64::try_from(now.saturating_duration_since(e).as_nanos()).unwrap_or(u64::MAX)
        });
        let files = self
            .reach
            .files
            .export()
            .into_iter()
            .map(|(code, path, data)| FileRecord {
                code: code.to_vec(),
                path,
                data,
            })
            .collect();
        out.state = serde_json::to_value(State {
            soft,
            files,
            clock_ns,
        })
        .unwrap_or_default();
    }

    /// Restores soft state handed over by another process; entries that do not fit this
    /// EE's bounds are skipped and counted in the error, which names how many.
    pub(super) fn import(&mut self, now: Instant, state: &serde_json::Value) -> Result<(), String> {
        let st: State = serde_json::from_value(state.clone())
            .map_err(|e| format!("the capsule EE's handed-over state does not parse: {e}"))?;
        if let Some(ns) = st.clock_ns {
            self.epoch = now.checked_sub(Duration::from_nanos(ns)).or(self.epoch);
        }
        let mut skipped = 0usize;
        for c in st.soft {
            let Ok(code) = CodeHash::try_from(c.code.as_slice()) else {
                skipped += c.entries.len();
                continue;
            };
            for e in c.entries {
                let ttl = Duration::from_millis(e.ttl_ms.min(86_400_000));
                if ttl.is_zero()
                    || self
                        .reach
                        .soft
                        .put(code, &e.key, &e.value, now, ttl)
                        .is_err()
                {
                    skipped += 1;
                }
            }
        }
        let mut files = Vec::with_capacity(st.files.len());
        for f in st.files {
            match CodeHash::try_from(f.code.as_slice()) {
                Ok(code) => files.push((code, f.path, f.data)),
                Err(_) => skipped += 1,
            }
        }
        // Exactly the predecessor's files: one it deleted after this process read the disk
        // does not come back.
        skipped += self.reach.files.import(files);
        match skipped {
            0 => Ok(()),
            n => Err(format!(
                "{n} soft-state entries or files skipped (over this node's bounds)"
            )),
        }
    }
}
