//! EE state kept across a cold restart (`[plan] state_file`): what each EE's
//! `ExecutionEnvironment::durable_state` gives, e.g. the PLAN EE's signers' replay windows,
//! so a signed packet accepted before a stop (or a crash) is still a replay after the start.
//!
//! File (JSON): `{"version": 1, "sha256": "<hex>", "ees": [{"type_id": N, "state": ...}]}`,
//! where `sha256` is over the compact JSON text of `ees` (its keys in order, as serde_json
//! writes them). It is written whole to a temporary file and renamed over the old one, so a
//! reader sees the old file or the new one, never half of one.
//!
//! Contract:
//! - [`load`] trusts nothing it has not checked: a missing file is a first start, anything
//!   else that is not a whole, well-formed file of this version whose digest matches is an
//!   error that names the file and the reason (the node then starts without it and says so);
//! - [`Keeper`] runs on the driver's side (the caller's thread, never the node thread): it
//!   asks the node for its states at most once per `interval` and writes only when they
//!   changed, so an idle node does not touch the disk;
//! - a crash loses at most what changed in the last `interval` (a signed packet accepted in
//!   that second could be replayed once after the restart); a clean stop loses nothing
//!   ([`Keeper::flush`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The file format's version.
const VERSION: u64 = 1;

/// Why the kept state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not one this node wrote (damaged, cut short, edited, another version).
    #[error("{path}: {why}; not trusted, the node starts without it")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The digest of the `ees` part, hex.
fn digest(ees: &Value) -> String {
    hex::encode(Sha256::digest(ees.to_string().as_bytes()))
}

/// The file's text for `states` (Type ID, state).
pub fn encode(states: &[(u16, Value)]) -> String {
    let ees: Value = states
        .iter()
        .map(|(t, s)| json!({ "type_id": t, "state": s }))
        .collect();
    json!({ "version": VERSION, "sha256": digest(&ees), "ees": ees }).to_string()
}

/// The states in `text` (the file at `path`, named in errors), checked.
pub fn decode(path: &Path, text: &str) -> Result<Vec<(u16, Value)>, DurableError> {
    let bad = |why: String| DurableError::Invalid {
        path: path.to_path_buf(),
        why,
    };
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON ({e})")))?;
    match v.get("version").and_then(Value::as_u64) {
        Some(VERSION) => {}
        other => return Err(bad(format!("version {other:?}, this node reads {VERSION}"))),
    }
    let ees = v.get("ees").ok_or_else(|| bad("no \"ees\"".into()))?;
    let want = v.get("sha256").and_then(Value::as_str).unwrap_or("");
    if want != digest(ees) {
        return Err(bad("its sha256 does not match its contents".into()));
    }
    let list = ees
        .as_array()
        .ok_or_else(|| bad("\"ees\" is not a list".into()))?;
    list.iter()
        .map(|e| {
            let t = e
                .get("type_id")
                .and_then(Value::as_u64)
                .and_then(|t| u16::try_from(t).ok())
                .ok_or_else(|| bad("an entry without a 16-bit type_id".into()))?;
            let s = e
                .get("state")
                .cloned()
                .ok_or_else(|| bad(format!("the entry of Type ID {t} has no state")))?;
            Ok((t, s))
        })
        .collect()
}

/// The states kept at `path`: none if there is no file yet.
pub fn load(path: &Path) -> Result<Vec<(u16, Value)>, DurableError> {
    match std::fs::read_to_string(path) {
        Ok(text) => decode(path, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(DurableError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `states` to `path` whole (temporary file, then rename), making its directory.
pub fn store(path: &Path, states: &[(u16, Value)]) -> Result<(), DurableError> {
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| DurableError::Io { path: p, source }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, encode(states)).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// Keeps a running node's EE states at a path (see the module docs).
#[derive(Debug)]
pub struct Keeper {
    path: PathBuf,
    interval: Duration,
    last_check: Option<Instant>,
    written: Vec<(u16, Value)>,
}

impl Keeper {
    /// A keeper for `path` that checks at most once per `interval`; `written` is what the
    /// file holds now (what [`load`] gave), so an unchanged state is not written again.
    pub fn new(path: PathBuf, interval: Duration, written: Vec<(u16, Value)>) -> Self {
        Keeper {
            path,
            interval,
            last_check: None,
            written,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Called often (the driver's wait loop): once `interval` has passed since the last
    /// check, gets the states from `states` and writes them if they changed.
    pub fn tick(
        &mut self,
        now: Instant,
        states: impl FnOnce() -> Option<Vec<(u16, Value)>>,
    ) -> Result<bool, DurableError> {
        if self
            .last_check
            .is_some_and(|t| now.saturating_duration_since(t) < self.interval)
        {
            return Ok(false);
        }
        self.last_check = Some(now);
        self.flush(states)
    }

    /// Gets the states and writes them now if they changed (a clean stop); whether it wrote.
    pub fn flush(
        &mut self,
        states: impl FnOnce() -> Option<Vec<(u16, Value)>>,
    ) -> Result<bool, DurableError> {
        let Some(now) = states() else {
            return Ok(false);
        };
        if now == self.written {
            return Ok(false);
        }
        store(&self.path, &now)?;
        self.written = now;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states() -> Vec<(u16, Value)> {
        vec![(
            2,
            json!({ "replay_windows": [{ "key": "ab", "top": 7, "seen": 3 }] }),
        )]
    }

    #[test]
    fn a_kept_state_reads_back_and_a_damaged_one_is_refused_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("anode-durable-{}", std::process::id()));
        let path = dir.join("sub/plan.json");
        assert!(
            load(&path).unwrap().is_empty(),
            "no file yet: a first start"
        );
        store(&path, &states()).unwrap();
        assert_eq!(load(&path).unwrap(), states());
        // Edited (a window moved back, to replay a packet): the digest no longer matches.
        let text = std::fs::read_to_string(&path).unwrap();
        let edited = text.replace("\"top\":7", "\"top\":1");
        assert_ne!(edited, text);
        let e = decode(&path, &edited).unwrap_err().to_string();
        assert!(e.contains("sha256 does not match"), "{e}");
        assert!(e.contains("plan.json"), "{e}");
        // Cut short, another version, not JSON: each refused with its reason.
        let cut = text.get(..text.len() / 2).unwrap();
        assert!(
            decode(&path, cut)
                .unwrap_err()
                .to_string()
                .contains("not JSON")
        );
        let v2 = text.replace("\"version\":1", "\"version\":2");
        assert!(
            decode(&path, &v2)
                .unwrap_err()
                .to_string()
                .contains("version")
        );
        assert!(decode(&path, "").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file as this version writes it (also the fuzz target's seed,
    /// `crates/node/fuzz/corpus/durable/seed-plan`; its digest computed independently, with
    /// Python's hashlib over the same compact JSON): the format stays readable.
    #[test]
    fn a_file_of_this_version_reads_byte_for_byte() {
        let text = r#"{"ees":[{"state":{"replay_windows":[{"key":"abababababababababababababababababababababababababababababababab","seen":3,"top":1001}]},"type_id":2564}],"sha256":"41142d95ad5757dea8dde265294c12551b91c1aeaae56af08e94d39de648580a","version":1}"#;
        let states = decode(Path::new("plan.json"), text).unwrap();
        assert_eq!(states.len(), 1);
        assert_eq!(states[0].0, anode_core::wire::anep::TYPE_PLAN);
        assert_eq!(states[0].1["replay_windows"][0]["top"], 1001);
        assert_eq!(encode(&states), text, "written exactly as read");
    }

    #[test]
    fn the_keeper_writes_at_most_once_an_interval_and_only_changes() {
        let dir = std::env::temp_dir().join(format!("anode-keeper-{}", std::process::id()));
        let path = dir.join("plan.json");
        let t0 = Instant::now();
        let mut k = Keeper::new(path.clone(), Duration::from_secs(1), Vec::new());
        assert!(k.tick(t0, || Some(states())).unwrap(), "first check writes");
        let mut asked = false;
        let wrote = k
            .tick(t0 + Duration::from_millis(500), || {
                asked = true;
                Some(Vec::new())
            })
            .unwrap();
        assert!(
            !wrote && !asked,
            "within the interval the node is not even asked"
        );
        assert!(
            !k.tick(t0 + Duration::from_secs(1), || Some(states()))
                .unwrap()
        );
        let mut later = states();
        later.push((3, json!({})));
        assert!(
            k.flush(|| Some(later.clone())).unwrap(),
            "a change is written"
        );
        assert_eq!(load(&path).unwrap(), later);
        assert!(
            !k.flush(|| None).unwrap(),
            "the node is gone: nothing to write"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
