//! Creating and removing the control socket file.
//!
//! The directory is created with mode 0700 when missing (an existing one is used as is: it
//! may be shared, like `/tmp`), the socket is chmod 0600 right after `bind`. An existing
//! socket file is probed: if a node answers, this one refuses to start; if nothing answers the
//! file is stale and replaced. A path that exists but is no socket is never removed.

use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Why the control socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Another node is live on the path.
    #[error(
        "another node is already running with control socket {} (stop it, or set a different [control] socket)",
        .path.display()
    )]
    InUse {
        /// The path.
        path: PathBuf,
    },
    /// The path exists and is not a socket.
    #[error(
        "{} exists and is not a socket; remove it or set a different [control] socket",
        .path.display()
    )]
    NotSocket {
        /// The path.
        path: PathBuf,
    },
    /// The directory could not be created.
    #[error("cannot create the control socket directory {} ({source}); set [control] socket to a writable place", .path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Binding or chmod failed.
    #[error("cannot create the control socket {} ({source}); set [control] socket to a writable place", .path.display())]
    Bind {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A server thread could not be started.
    #[error("cannot start a control-server thread ({source})")]
    Thread {
        /// Why.
        source: std::io::Error,
    },
}

/// Prepares the directory, clears a stale socket and binds a 0600 listener at `path`.
pub fn bind(path: &Path) -> Result<UnixListener, SocketError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        tracing::warn!(dir = %dir.display(), "creating the control socket's directory (mode 0700)");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| SocketError::Dir {
                path: dir.to_path_buf(),
                source,
            })?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => match UnixStream::connect(path) {
            Ok(_) => {
                return Err(SocketError::InUse {
                    path: path.to_path_buf(),
                });
            }
            Err(_) => {
                tracing::info!(path = %path.display(), "removing stale control socket");
                std::fs::remove_file(path).map_err(|source| SocketError::Bind {
                    path: path.to_path_buf(),
                    source,
                })?;
            }
        },
        Ok(_) => {
            return Err(SocketError::NotSocket {
                path: path.to_path_buf(),
            });
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(source) => {
            return Err(SocketError::Bind {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    let bind_err = |source| SocketError::Bind {
        path: path.to_path_buf(),
        source,
    };
    let l = UnixListener::bind(path).map_err(bind_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(bind_err)?;
    Ok(l)
}

/// Removes the socket file if it is still a socket.
pub fn remove(path: &Path) {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
}
