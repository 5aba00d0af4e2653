//! The module journal: what service modules a node has, kept on disk so that nothing
//! installed is lost across a restart.
//!
//! In `[modules] state_dir`: `modules.json` (the modules in install order: name, version,
//! package file, configuration, whether started, where it came from; and the built-in EEs
//! the operator stopped, `anode module stop capsule`) and `packages/`, the signed package
//! bytes as installed. Written after every successful install, upgrade,
//! start, stop and remove (to a temporary file renamed over the old one), read at startup.
//!
//! Contracts:
//! - State on disk is verified before it is trusted: a package is installed from the journal
//!   only if its bytes decode, its SHA-256 is the one recorded, and its signature verifies
//!   against the node's trusted keys now (the same checks as any install); an entry that
//!   fails is skipped with a warning naming it, never a crash and never a half install.
//! - `config_digest` records the `[[module]]` list the journal was written under: while the
//!   config says the same, the journal is the truth (a config module upgraded, stopped or
//!   removed at run time stays so); once the config changes, its list is installed as
//!   written and only the modules installed at run time are restored from the journal.

use std::path::{Path, PathBuf};

use anode_ctl::ModuleConfig;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::modules::ModulesConfig;

/// Where a module came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// The config file's `[[module]]` list.
    Config,
    /// Installed or upgraded at run time over the control socket.
    Runtime,
}

impl Origin {
    /// As `anode module list` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Config => "config",
            Origin::Runtime => "runtime",
        }
    }
}

/// One module in the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
    /// Package file in `packages/`.
    pub package: String,
    /// SHA-256 of the package bytes, hex.
    pub sha256: String,
    /// Configuration values.
    pub config: ModuleConfig,
    /// Started (active) when last recorded.
    pub started: bool,
    /// Where it came from.
    pub origin: Origin,
}

/// The journal as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// Format version (1).
    pub version: u32,
    /// SHA-256 of the `[[module]]` list it was written under, hex.
    pub config_digest: String,
    /// The modules, in install order.
    pub entries: Vec<Entry>,
    /// The built-in EEs stopped at run time, by service name (`capsule`, `plan`, `deploy`):
    /// they stay stopped across a restart until started again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stopped_ees: Vec<String>,
}

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A file could not be read or written.
    #[error("module journal {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `modules.json` does not parse.
    #[error("module journal {}: not a journal ({reason}); move it away to start afresh", .path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The digest of a config's `[[module]]` list: each entry's source, configuration and start
/// flag, and the package bytes it names (`packages`, in list order).
pub fn config_digest_with(
    m: &ModulesConfig,
    packages: &[(Vec<u8>, &crate::config::modules::ModuleSpec)],
) -> String {
    let mut h = Sha256::new();
    for s in &m.startup {
        h.update(format!("{}\u{0}{:?}\u{0}{}\n", s.source, s.config, s.start).as_bytes());
    }
    for (b, _) in packages {
        h.update(Sha256::digest(b));
    }
    hex::encode(h.finalize())
}

/// The journal in `dir`: `modules.json` and `packages/`.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The journal kept in `dir` (nothing is created until something is written).
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    fn file(&self) -> PathBuf {
        self.dir.join("modules.json")
    }

    /// The journal, or an empty one if none was written.
    pub fn load(&self) -> Result<Journal, JournalError> {
        let f = self.file();
        let text = match std::fs::read_to_string(&f) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Journal::default()),
            Err(e) => return Err(io(&f)(e)),
        };
        serde_json::from_str(&text).map_err(|e| JournalError::Format {
            path: f,
            reason: e.to_string(),
        })
    }

    /// Writes `j` (atomically).
    pub fn save(&self, j: &Journal) -> Result<(), JournalError> {
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let text = serde_json::to_string_pretty(j).map_err(|e| JournalError::Format {
            path: self.file(),
            reason: e.to_string(),
        })?;
        write_atomic(&self.file(), text.as_bytes())
    }

    /// Stores package bytes; returns the file name under `packages/` and the SHA-256.
    pub fn put_package(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<(String, String), JournalError> {
        let pk = self.dir.join("packages");
        std::fs::create_dir_all(&pk).map_err(io(&pk))?;
        let file = format!("{name}-{version}.amod");
        write_atomic(&pk.join(&file), bytes)?;
        Ok((file, hex::encode(Sha256::digest(bytes))))
    }

    /// The package bytes of `e`, if they are there and hash to what the journal recorded.
    pub fn package(&self, e: &Entry) -> Result<Vec<u8>, String> {
        if e.package.contains('/') || e.package.contains("..") {
            return Err(format!("package name '{}' is not a file name", e.package));
        }
        let p = self.dir.join("packages").join(&e.package);
        let b = std::fs::read(&p).map_err(|err| format!("{}: {err}", p.display()))?;
        if hex::encode(Sha256::digest(&b)) != e.sha256 {
            return Err(format!(
                "{}: its SHA-256 is not the one the journal recorded (damaged or replaced)",
                p.display()
            ));
        }
        Ok(b)
    }

    /// Applies `f` to the journal and writes it back.
    pub fn update(&self, f: impl FnOnce(&mut Journal)) -> Result<(), JournalError> {
        let mut j = self.load()?;
        j.version = 1;
        f(&mut j);
        self.save(&j)
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), JournalError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

impl Journal {
    /// The entry for `name`.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|e| e.name == name)
    }

    /// Records `e`, replacing an entry of the same name in place (an upgrade keeps its
    /// position), else appending it.
    pub fn put(&mut self, e: Entry) {
        match self.entries.iter_mut().find(|x| x.name == e.name) {
            Some(x) => *x = e,
            None => self.entries.push(e),
        }
    }

    /// Forgets `name`.
    pub fn remove(&mut self, name: &str) {
        self.entries.retain(|e| e.name != name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_damaged_packages_are_refused() {
        let dir = std::env::temp_dir().join(format!("anode-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = Store::new(&dir);
        assert_eq!(s.load().unwrap(), Journal::default());
        let (file, sha) = s.put_package("null", "1.0.0", b"package bytes").unwrap();
        let e = Entry {
            name: "null".into(),
            version: "1.0.0".into(),
            package: file,
            sha256: sha,
            config: ModuleConfig::new(),
            started: true,
            origin: Origin::Runtime,
        };
        s.update(|j| j.put(e.clone())).unwrap();
        let j = s.load().unwrap();
        assert_eq!(j.entries, vec![e.clone()]);
        assert_eq!(s.package(&e).unwrap(), b"package bytes");
        std::fs::write(dir.join("packages").join(&e.package), b"other").unwrap();
        assert!(s.package(&e).unwrap_err().contains("SHA-256"));
        std::fs::write(dir.join("modules.json"), b"{not json").unwrap();
        assert!(matches!(s.load(), Err(JournalError::Format { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
