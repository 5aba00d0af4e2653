//! Build-script helper: builds crates of the guest workspace (`guest/`) for
//! `wasm32-unknown-unknown` so that a crate can embed the `.wasm` files. Used by the build
//! scripts of `anode-capsule` (capsule protocols) and `anode-modules` (service modules). It
//! has no wasmtime and no other heavy dependency, so build scripts stay quick to compile.
//!
//! Contract of [`GuestWorkspace::build`]:
//! - one nested `cargo build --release --locked --target wasm32-unknown-unknown -p ...` in the
//!   guest workspace, against its committed `guest/Cargo.lock`, with its own target directory
//!   under `OUT_DIR` (`OUT_DIR/guest-target`);
//! - the outer build's flags, wrappers, target directory and release-profile overrides are
//!   removed from the nested cargo's environment ([`SCRUBBED_ENV`]), so that only
//!   `guest/.cargo/config.toml` and the guest workspace's profile apply;
//! - it needs the `wasm32-unknown-unknown` target, which the repository's
//!   `rust-toolchain.toml` installs; a failure says so.
//!
//! What to build, which folders to watch and where the results go stay with each build
//! script. [`scaffold`] writes a new protocol crate for `anode new protocol`.

pub mod scaffold;

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::{env, fs};

/// The target the guest crates are built for.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// Environment variables of the outer build that the nested cargo must not see.
pub const SCRUBBED_ENV: &[&str] = &[
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_PROFILE_RELEASE_DEBUG",
    "CARGO_PROFILE_RELEASE_LTO",
    "CARGO_PROFILE_RELEASE_OPT_LEVEL",
    "CARGO_PROFILE_RELEASE_PANIC",
    "CARGO_PROFILE_RELEASE_CODEGEN_UNITS",
    "CARGO_LLVM_COV",
    "RUSTC_BOOTSTRAP",
];

/// Files of the guest workspace whose change rebuilds every guest crate: its manifest, lock
/// file and cargo configuration, and the SDK every guest crate uses.
const SHARED_INPUTS: &[&str] = &["Cargo.toml", "Cargo.lock", ".cargo/config.toml", "sdk"];

/// Why building or staging guest code failed.
#[derive(Debug, thiserror::Error)]
pub enum GuestBuildError {
    /// The nested cargo ran and failed.
    #[error(
        "building the guest {what} failed ({status}); is the wasm32-unknown-unknown target \
         installed? (`rustup target add wasm32-unknown-unknown`)"
    )]
    Failed {
        /// What was being built ("protocols", "modules").
        what: &'static str,
        /// Its exit status.
        status: ExitStatus,
    },
    /// The nested cargo could not be started.
    #[error("cannot run cargo for the guest {what}: {source}")]
    Spawn {
        /// What was being built.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
    /// A destination folder could not be created.
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A built or source file could not be copied to its destination.
    #[error("cannot copy {} to {}: {source}", from.display(), to.display())]
    Copy {
        /// The file.
        from: PathBuf,
        /// Where it should have gone.
        to: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The guest workspace as a build script of a crate under `crates/` sees it.
#[derive(Debug, Clone)]
pub struct GuestWorkspace {
    root: PathBuf,
    out_dir: PathBuf,
}

/// The `.wasm` files one [`GuestWorkspace::build`] produced.
#[derive(Debug, Clone)]
pub struct Built {
    dir: PathBuf,
}

impl Built {
    /// The `.wasm` file of guest package `package` (`anode-proto-ping` ->
    /// `anode_proto_ping.wasm`).
    pub fn wasm(&self, package: &str) -> PathBuf {
        self.dir.join(format!("{}.wasm", package.replace('-', "_")))
    }
}

impl GuestWorkspace {
    /// `CARGO_MANIFEST_DIR/../../guest`, building under `OUT_DIR` (both set by cargo for a
    /// build script).
    pub fn from_build_env() -> GuestWorkspace {
        let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
        GuestWorkspace {
            root: manifest.join("../../guest"),
            out_dir: PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default()),
        }
    }

    /// The guest workspace's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The build script's `OUT_DIR`.
    pub fn out_dir(&self) -> &Path {
        &self.out_dir
    }

    /// Tells cargo to rerun the build script when the guest workspace's shared inputs
    /// (manifest, lock file, cargo configuration, SDK) or one of `dirs` (relative to the
    /// guest workspace) change.
    pub fn rerun_if_changed(&self, dirs: &[&str]) {
        for p in SHARED_INPUTS.iter().chain(dirs) {
            println!("cargo:rerun-if-changed={}", self.root.join(p).display());
        }
    }

    /// Builds the guest `packages` (see the crate docs); `what` names them in errors.
    pub fn build(&self, what: &'static str, packages: &[String]) -> Result<Built, GuestBuildError> {
        let target_dir = self.out_dir.join("guest-target");
        let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&self.root)
            .args(["build", "--release", "--locked", "--target", TARGET])
            .arg("--target-dir")
            .arg(&target_dir);
        for p in packages {
            cmd.args(["-p", p]);
        }
        for var in SCRUBBED_ENV {
            cmd.env_remove(var);
        }
        match cmd.status() {
            Ok(s) if s.success() => Ok(Built {
                dir: target_dir.join(TARGET).join("release"),
            }),
            Ok(status) => Err(GuestBuildError::Failed { what, status }),
            Err(source) => Err(GuestBuildError::Spawn { what, source }),
        }
    }
}

/// Creates `dest` and copies each `(file, name)` to `dest/name`.
pub fn copy_into(
    dest: &Path,
    files: impl IntoIterator<Item = (PathBuf, String)>,
) -> Result<(), GuestBuildError> {
    fs::create_dir_all(dest).map_err(|source| GuestBuildError::CreateDir {
        path: dest.to_path_buf(),
        source,
    })?;
    for (from, name) in files {
        let to = dest.join(name);
        if let Err(source) = fs::copy(&from, &to) {
            return Err(GuestBuildError::Copy { from, to, source });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_names_follow_cargo() {
        let b = Built {
            dir: PathBuf::from("t/wasm32-unknown-unknown/release"),
        };
        assert_eq!(
            b.wasm("anode-mod-null"),
            PathBuf::from("t/wasm32-unknown-unknown/release/anode_mod_null.wasm")
        );
    }

    #[test]
    fn copy_into_creates_and_reports() {
        let tmp = env::temp_dir().join(format!("anode-guest-build-{}", std::process::id()));
        let src = tmp.join("a.wasm");
        fs::create_dir_all(&tmp).expect("tmp");
        fs::write(&src, b"\0asm").expect("write");
        let dest = tmp.join("out/guest");
        copy_into(&dest, [(src.clone(), "a.wasm".to_string())]).expect("copy");
        assert_eq!(fs::read(dest.join("a.wasm")).expect("read"), b"\0asm");
        let missing = tmp.join("missing.wasm");
        let e = copy_into(&dest, [(missing, "b.wasm".to_string())]).expect_err("missing");
        assert!(e.to_string().starts_with("cannot copy "), "{e}");
        let _ = fs::remove_dir_all(&tmp);
    }
}
