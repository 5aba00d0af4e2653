//! Where control sockets live by default.
//!
//! A node whose UDP port is `P` listens on `$XDG_RUNTIME_DIR/anode/P.sock` when
//! `XDG_RUNTIME_DIR` is set (a per-user 0700 directory on systemd systems), else on
//! `/tmp/anode-<uid>/P.sock`. The node creates the directory with mode 0700; the socket
//! itself is 0600. A client that is told neither a path nor a port picks the only socket in
//! that directory, so `anode status` works with one node running and no flags.

use std::path::{Path, PathBuf};

/// The directory default sockets live in.
pub fn default_socket_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() && Path::new(&d).is_absolute() => Path::new(&d).join("anode"),
        _ => {
            // SAFETY: getuid has no preconditions and cannot fail.
            let uid = unsafe { libc::getuid() };
            PathBuf::from(format!("/tmp/anode-{uid}"))
        }
    }
}

/// Where `anode emulate --realtime` runs put their nodes' control sockets: one directory per
/// run (`emu/<pid>/NAME.sock`), so two runs with the same node names do not meet.
pub fn emulation_socket_dir() -> PathBuf {
    default_socket_dir().join("emu")
}

/// The socket file name of node `name` (characters other than letters, digits, `-` and `_`
/// become `_`).
pub fn emulation_socket_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.sock")
}

/// The control socket of node `name` of the running `anode emulate --realtime`: the one
/// run directory that has it. Error if no run or several runs have a node of that name.
pub fn emulation_socket_path(name: &str) -> Result<PathBuf, FindSocketError> {
    let base = emulation_socket_dir();
    let file = emulation_socket_name(name);
    let mut found: Vec<PathBuf> = std::fs::read_dir(&base)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path().join(&file))
                .filter(|p| p.exists())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(FindSocketError::NoEmulationNode {
            name: name.to_string(),
            dir: base,
        }),
        _ => Err(FindSocketError::Several { found }),
    }
}

/// The default socket of the node whose UDP port is `port`.
pub fn default_socket_path(port: u16) -> PathBuf {
    default_socket_dir().join(format!("{port}.sock"))
}

/// No control socket could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FindSocketError {
    /// The default directory has no sockets.
    #[error(
        "no running node found (no control socket in {dir}); start one with `anode node --config FILE` (see examples/node-a.toml), or pass --socket PATH"
    )]
    NoneRunning {
        /// The directory looked in.
        dir: PathBuf,
    },
    /// The default directory has several sockets.
    #[error(
        "several nodes are running ({}); pick one with --node-port PORT or --socket PATH",
        .found.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    Several {
        /// The sockets found.
        found: Vec<PathBuf>,
    },
    /// No running real-time emulation has a node of that name.
    #[error(
        "no running emulation has a node '{name}' (no {name}.sock under {dir}); start one with `anode emulate FILE --realtime`"
    )]
    NoEmulationNode {
        /// The node name asked for.
        name: String,
        /// The directory looked in.
        dir: PathBuf,
    },
}

/// The socket a client should use: `explicit` if given, else the default for `port`, else
/// the only socket in [`default_socket_dir`].
pub fn find_socket(explicit: Option<&Path>, port: Option<u16>) -> Result<PathBuf, FindSocketError> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(port) = port {
        return Ok(default_socket_path(port));
    }
    let dir = default_socket_dir();
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    match found.len() {
        0 => Err(FindSocketError::NoneRunning { dir }),
        1 => Ok(found.remove(0)),
        _ => Err(FindSocketError::Several { found }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_and_port_win() {
        let p = Path::new("/x/y.sock");
        assert_eq!(find_socket(Some(p), Some(9)).unwrap(), p);
        let d = find_socket(None, Some(4001)).unwrap();
        assert!(d.ends_with("4001.sock"));
        assert!(d.starts_with(default_socket_dir()));
    }
}
