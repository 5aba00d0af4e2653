//! `anode new protocol NAME` and `anode new module NAME`: a guest crate that builds on its
//! own. A protocol: an echo capsule protocol in ~30 lines, a copy of the guest SDK, a
//! three-node topology whose `capsule` step runs the built code and checks its replies. A
//! module: a packet processor that drops every `every`-th datagram (manifest with a typed
//! setting and a service), a copy of the module SDK, a three-node topology whose
//! `install-module` step installs the built module from the crate's directory and checks
//! what it dropped. Both with a README holding the commands.
//!
//! Contract: nothing is overwritten: the directory must not exist or be empty. The SDK copies
//! are the ones this anode was built with (the ABIs the node speaks).

use std::path::{Path, PathBuf};

const CARGO_CONFIG: &str = include_str!("../templates/protocol/cargo-config.toml.txt");

mod protocol_files {
    pub const CARGO: &str = include_str!("../templates/protocol/Cargo.toml.txt");
    pub const LIB: &str = include_str!("../templates/protocol/lib.rs.txt");
    pub const TOPOLOGY: &str = include_str!("../templates/protocol/topology.toml.txt");
    pub const README: &str = include_str!("../templates/protocol/README.md.txt");
    pub const SDK_CARGO: &str = include_str!("../templates/protocol/sdk-Cargo.toml.txt");
    pub const SDK_LIB: &str = include_str!("../../../guest/sdk/src/lib.rs");
    pub const SDK_SYS: &str = include_str!("../../../guest/sdk/src/sys.rs");
}

mod module_files {
    pub const CARGO: &str = include_str!("../templates/module/Cargo.toml.txt");
    pub const MANIFEST: &str = include_str!("../templates/module/manifest.toml.txt");
    pub const LIB: &str = include_str!("../templates/module/lib.rs.txt");
    pub const TOPOLOGY: &str = include_str!("../templates/module/topology.toml.txt");
    pub const README: &str = include_str!("../templates/module/README.md.txt");
    pub const SDK_CARGO: &str = include_str!("../templates/module/msdk-Cargo.toml.txt");
    pub const SDK_LIB: &str = include_str!("../../../guest/modules/msdk/src/lib.rs");
    pub const SDK_PLAN: &str = include_str!("../../../guest/modules/msdk/src/plan.rs");
    pub const SDK_FILES: &str = include_str!("../../../guest/modules/msdk/src/files.rs");
}

/// Why a scaffold was not made.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name cannot be a crate name.
    #[error(
        "'{0}' cannot name a crate: use lowercase letters, digits, '-' and '_', starting with a letter"
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
    use protocol_files::*;
    let fill = filler(name);
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
    write_all(dir, name, files)
}

/// Writes the service-module crate `name` into `dir`; returns the files written.
pub fn module(dir: &Path, name: &str) -> Result<Vec<PathBuf>, ScaffoldError> {
    use module_files::*;
    if name.contains('_') {
        // Module names (manifest `name`) are letters, digits and '-'.
        return Err(ScaffoldError::BadName(name.to_string()));
    }
    let fill = filler(name);
    let files = [
        ("Cargo.toml", fill(CARGO)),
        ("manifest.toml", fill(MANIFEST)),
        ("src/lib.rs", fill(LIB)),
        ("topology.toml", fill(TOPOLOGY)),
        ("README.md", fill(README)),
        (".gitignore", "/target\n*.amod\n".to_string()),
        (".cargo/config.toml", CARGO_CONFIG.to_string()),
        ("msdk/Cargo.toml", SDK_CARGO.to_string()),
        ("msdk/src/lib.rs", SDK_LIB.to_string()),
        ("msdk/src/plan.rs", SDK_PLAN.to_string()),
        ("msdk/src/files.rs", SDK_FILES.to_string()),
    ];
    write_all(dir, name, files)
}

/// The template filler for crate `name`: `{{name}}`, `{{file}}` (the name as a file stem)
/// and `{{hello_hex}}`.
fn filler(name: &str) -> impl Fn(&str) -> String {
    let file = name.replace('-', "_");
    let hello: String = b"hello".iter().map(|b| format!("{b:02x}")).collect();
    let name = name.to_string();
    move |t: &str| {
        t.replace("{{name}}", &name)
            .replace("{{file}}", &file)
            .replace("{{hello_hex}}", &hello)
    }
}

/// Checks the name and that `dir` is empty, then writes the files.
fn write_all<const N: usize>(
    dir: &Path,
    name: &str,
    files: [(&str, String); N],
) -> Result<Vec<PathBuf>, ScaffoldError> {
    if !valid(name) {
        return Err(ScaffoldError::BadName(name.to_string()));
    }
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(ScaffoldError::NotEmpty(dir.to_path_buf()));
    }
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

    #[test]
    fn a_module_crate_has_a_manifest_and_the_module_sdk() {
        let d = std::env::temp_dir().join(format!("anode-scaffold-mod-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let files = module(&d, "thin").unwrap();
        assert_eq!(files.len(), 11);
        let manifest = std::fs::read_to_string(d.join("manifest.toml")).unwrap();
        assert!(manifest.contains("name = \"thin\""), "{manifest}");
        let topo = std::fs::read_to_string(d.join("topology.toml")).unwrap();
        assert!(topo.contains("package = \".\""), "{topo}");
        assert!(matches!(
            module(&d, "thin"),
            Err(ScaffoldError::NotEmpty(_))
        ));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Every source file of the SDKs goes into a scaffolded crate (a file added to an SDK
    /// and not listed here would leave new crates that do not build).
    #[test]
    fn scaffolds_carry_every_sdk_source_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest");
        for (sdk, into, make) in [
            ("sdk/src", "sdk/src", protocol as fn(&Path, &str) -> _),
            ("modules/msdk/src", "msdk/src", module),
        ] {
            let d = std::env::temp_dir().join(format!(
                "anode-scaffold-sdk-{}-{}",
                into.replace('/', "-"),
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&d);
            make(&d, "whole").unwrap();
            for f in std::fs::read_dir(root.join(sdk)).unwrap() {
                let name = f.unwrap().file_name();
                assert!(
                    d.join(into).join(&name).is_file(),
                    "{sdk}/{} is missing from scaffolded crates",
                    name.to_string_lossy()
                );
            }
            let _ = std::fs::remove_dir_all(&d);
        }
    }
}
