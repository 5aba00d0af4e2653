//! `anode new protocol NAME`: a capsule protocol crate that builds on its own: the protocol
//! (an echo in ~30 lines), a copy of the guest SDK, a three-node topology whose `capsule`
//! step runs the built code and checks its replies, and a README with the commands.
//!
//! Contract: nothing is overwritten: the directory must not exist or be empty. The SDK copy
//! is the one this anode was built with (the ABI the node speaks).

use std::path::{Path, PathBuf};

const CARGO: &str = include_str!("../templates/protocol/Cargo.toml.txt");
const LIB: &str = include_str!("../templates/protocol/lib.rs.txt");
const TOPOLOGY: &str = include_str!("../templates/protocol/topology.toml.txt");
const README: &str = include_str!("../templates/protocol/README.md.txt");
const CARGO_CONFIG: &str = include_str!("../templates/protocol/cargo-config.toml.txt");
const SDK_CARGO: &str = include_str!("../templates/protocol/sdk-Cargo.toml.txt");
const SDK_LIB: &str = include_str!("../../../guest/sdk/src/lib.rs");
const SDK_SYS: &str = include_str!("../../../guest/sdk/src/sys.rs");

/// Why a scaffold was not made.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name cannot be a crate name.
    #[error(
        "'{0}' cannot name a protocol crate: use lowercase letters, digits, '-' and '_', starting with a letter"
    )]
    BadName(String),
    /// The directory has files in it.
    #[error("{0} exists and is not empty; pick another name or --dir")]
    NotEmpty(PathBuf),
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

fn valid(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Writes the protocol crate `name` into `dir`; returns the files written.
pub fn protocol(dir: &Path, name: &str) -> Result<Vec<PathBuf>, ScaffoldError> {
    if !valid(name) {
        return Err(ScaffoldError::BadName(name.to_string()));
    }
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(ScaffoldError::NotEmpty(dir.to_path_buf()));
    }
    let file = name.replace('-', "_");
    let hello: String = b"hello".iter().map(|b| format!("{b:02x}")).collect();
    let fill = |t: &str| {
        t.replace("{{name}}", name)
            .replace("{{file}}", &file)
            .replace("{{hello_hex}}", &hello)
    };
    let files = [
        ("Cargo.toml", fill(CARGO)),
        ("src/lib.rs", fill(LIB)),
        ("topology.toml", fill(TOPOLOGY)),
        ("README.md", fill(README)),
        (".gitignore", "/target\n".to_string()),
        (".cargo/config.toml", CARGO_CONFIG.to_string()),
        ("sdk/Cargo.toml", SDK_CARGO.to_string()),
        ("sdk/src/lib.rs", SDK_LIB.to_string()),
        ("sdk/src/sys.rs", SDK_SYS.to_string()),
    ];
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = dir.join(rel);
        let write = || -> std::io::Result<()> {
            if let Some(p) = path.parent() {
                std::fs::create_dir_all(p)?;
            }
            std::fs::write(&path, text)
        };
        write().map_err(|source| ScaffoldError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_nothing_is_overwritten() {
        let d = std::env::temp_dir().join(format!("anode-scaffold-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        assert!(matches!(
            protocol(&d, "Bad Name"),
            Err(ScaffoldError::BadName(_))
        ));
        let files = protocol(&d, "my-proto").unwrap();
        assert_eq!(files.len(), 9);
        let topo = std::fs::read_to_string(d.join("topology.toml")).unwrap();
        assert!(topo.contains("release/my_proto.wasm"), "{topo}");
        assert!(topo.contains("\"0000096865"), "{topo}");
        assert!(matches!(
            protocol(&d, "my-proto"),
            Err(ScaffoldError::NotEmpty(_))
        ));
        let _ = std::fs::remove_dir_all(&d);
    }
}
