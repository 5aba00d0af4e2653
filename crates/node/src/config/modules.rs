//! `[modules]` and `[[module]]`: the publisher keys a node trusts and the service modules it
//! installs at startup (see docs/modules.md).
//!
//! ```toml
//! [modules]
//! trusted_keys = ["3b6a27bc..."]     # hex ed25519 public keys (`anode keygen` writes BASE.pub)
//! # state_dir = "mods-state"         # modules installed at run time, kept across restarts
//! #                                  # (default: $XDG_STATE_HOME/anode/modules-PORT)
//!
//! [[module]]                         # installed and started in this order at startup
//! package = "mods/null-1.0.0.amod"   # a package file (relative to this config file), or:
//! # repo = "http://127.0.0.1:8700"   # a module repository (`anode repo serve`) and
//! # name = "null"                    #   the name and version to fetch from it
//! # version = "1.0.0"
//! # start = true                     # false: install only
//! [module.config]                    # values for the module's configuration schema
//! # limit = 5
//! ```
//!
//! Contract: [`check`] accepts the section only if every key parses as a public key, every
//! `[[module]]` names exactly one source (a package file, or a repository with name and
//! version) and its config values are integers or booleans, and modules come with trusted
//! keys; otherwise it says which key, where, and how to fix it. A node without trusted keys
//! hosts no modules at all (its hooks stay off the fast path). Verifying the packages
//! themselves happens when the node starts ([`ModuleSpec::pos`] places those errors).

use std::path::{Path, PathBuf};

use anode_ctl::{ModuleConfig, ModuleConfigValue};
use serde::Deserialize;
use toml::Spanned;

use super::check::{Problem, at, public_key};
use super::locate::Pos;

/// `[modules]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawModules {
    #[serde(default)]
    pub trusted_keys: Vec<Spanned<String>>,
    pub state_dir: Option<Spanned<String>>,
}

/// One `[[module]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawModule {
    pub package: Option<Spanned<String>>,
    pub repo: Option<Spanned<String>>,
    pub name: Option<Spanned<String>>,
    pub version: Option<Spanned<String>>,
    pub start: Option<bool>,
    #[serde(default)]
    pub config: Option<Spanned<toml::Table>>,
}

/// The modules part of a node config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModulesConfig {
    /// Trusted publisher keys (hex); empty: the node hosts no modules.
    pub trusted_keys: Vec<String>,
    /// Modules to install at startup, in order.
    pub startup: Vec<ModuleSpec>,
    /// Where modules installed at run time are kept across restarts (`[modules] state_dir`;
    /// default `modules-PORT` beside the default code cache).
    pub state_dir: PathBuf,
}

/// Where a startup module comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleSource {
    /// A package file.
    File(PathBuf),
    /// A module repository.
    Repo {
        /// Base URL (`http://HOST:PORT`).
        url: String,
        /// Module name.
        name: String,
        /// Module version.
        version: String,
    },
}

/// One `[[module]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleSpec {
    /// Its package.
    pub source: ModuleSource,
    /// Its configuration values.
    pub config: ModuleConfig,
    /// Start it once installed (default true).
    pub start: bool,
    /// Where the entry is in the file: (line, column), 1-based.
    pub pos: (usize, usize),
}

impl std::fmt::Display for ModuleSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModuleSource::File(p) => write!(f, "{}", p.display()),
            ModuleSource::Repo { url, name, version } => write!(f, "{name}@{version} from {url}"),
        }
    }
}

/// Configuration values as the module's schema check takes them.
pub fn config_table(c: &ModuleConfig) -> toml::Table {
    c.iter()
        .map(|(k, v)| {
            let v = match *v {
                ModuleConfigValue::Bool(b) => toml::Value::Boolean(b),
                ModuleConfigValue::Int(n) => toml::Value::Integer(n),
            };
            (k.clone(), v)
        })
        .collect()
}

/// The position of the `n`-th `[[module]]` header (0-based).
fn entry_pos(text: &str, n: usize) -> Pos {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            l.trim_start()
                .split('#')
                .next()
                .is_some_and(|h| h.trim() == "[[module]]")
        })
        .nth(n)
        .map_or(Pos { line: 1, col: 1 }, |(i, l)| Pos {
            line: i + 1,
            col: l.len() - l.trim_start().len() + 1,
        })
}

/// `MAJOR.MINOR.PATCH`, optionally with a `-pre` or `+build` suffix.
fn is_version(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Checks `[modules]` and the `[[module]]` list of the file at `path`.
pub(super) fn check(
    path: &Path,
    text: &str,
    raw: &RawModules,
    list: &[RawModule],
    port: u16,
) -> Result<ModulesConfig, Problem> {
    let state_dir = super::check::state_path(
        path,
        text,
        raw.state_dir.as_ref(),
        (
            "[modules] state_dir is empty",
            "give a directory, or leave state_dir out for the default",
        ),
        || super::check::default_state_dir(&format!("modules-{port}")),
    )?;
    let mut keys = Vec::new();
    for k in &raw.trusted_keys {
        public_key(
            text,
            k,
            "trusted key",
            "give the 64 hex digits of a publisher's public key (the BASE.pub file `anode keygen --out BASE` writes)",
        )?;
        keys.push(k.get_ref().trim().to_string());
    }
    if !list.is_empty() && keys.is_empty() {
        let pos = entry_pos(text, 0);
        return Err(Problem {
            pos,
            what: "[[module]] entries need trusted publisher keys, and [modules] trusted_keys is empty".into(),
            fix: "add [modules] trusted_keys = [\"HEX\"] with the key that signed the packages (`anode keygen` writes it to BASE.pub)".into(),
        });
    }
    let base = path.parent().unwrap_or_else(|| Path::new("."));
    let mut startup = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let pos = entry_pos(text, i);
        let source = match (&m.package, &m.repo) {
            (Some(p), None) => {
                if m.name.is_some() || m.version.is_some() {
                    return Err(at(
                        text,
                        p,
                        "name and version belong to repo entries, not package files".into(),
                        "remove name and version (the package says what it is), or use repo = URL instead of package",
                    ));
                }
                ModuleSource::File(base.join(p.get_ref()))
            }
            (None, Some(r)) => {
                let url = r.get_ref().trim_end_matches('/').to_string();
                if !url.starts_with("http://") {
                    return Err(at(
                        text,
                        r,
                        format!("repository '{url}' is not an http:// URL"),
                        "give the repository's base URL, e.g. \"http://127.0.0.1:8700\" (`anode repo serve DIR`)",
                    ));
                }
                let (Some(name), Some(version)) = (&m.name, &m.version) else {
                    return Err(at(
                        text,
                        r,
                        "a repo entry needs name and version".into(),
                        "add name = \"MODULE\" and version = \"X.Y.Z\" to this [[module]]",
                    ));
                };
                if !is_version(version.get_ref()) {
                    return Err(at(
                        text,
                        version,
                        format!("version '{}' is not a semantic version", version.get_ref()),
                        "write it as MAJOR.MINOR.PATCH, e.g. \"1.0.0\"",
                    ));
                }
                ModuleSource::Repo {
                    url,
                    name: name.get_ref().clone(),
                    version: version.get_ref().clone(),
                }
            }
            (Some(p), Some(_)) => {
                return Err(at(
                    text,
                    p,
                    "a [[module]] has both package and repo".into(),
                    "keep one: package = FILE, or repo = URL with name and version",
                ));
            }
            (None, None) => {
                return Err(Problem {
                    pos,
                    what: "a [[module]] names no package".into(),
                    fix: "add package = \"FILE.amod\", or repo = \"http://HOST:PORT\" with name and version".into(),
                });
            }
        };
        let mut config = ModuleConfig::new();
        if let Some(c) = &m.config {
            for (k, v) in c.get_ref() {
                let v = match v {
                    toml::Value::Integer(n) => ModuleConfigValue::Int(*n),
                    toml::Value::Boolean(b) => ModuleConfigValue::Bool(*b),
                    other => {
                        return Err(at(
                            text,
                            c,
                            format!(
                                "module config value {k} = {other} is a {}",
                                other.type_str()
                            ),
                            "module configuration values are integers or booleans (see `anode module show FILE` for the schema)",
                        ));
                    }
                };
                config.insert(k.clone(), v);
            }
        }
        startup.push(ModuleSpec {
            source,
            config,
            start: m.start.unwrap_or(true),
            pos: (pos.line, pos.col),
        });
    }
    Ok(ModulesConfig {
        trusted_keys: keys,
        startup,
        state_dir,
    })
}
