//! The old process's side of an upgrade (`mod.rs`): start the successor, send it the code,
//! pause, send the state and sockets, and either retire or resume.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anode_ctl::UpgradeInfo;

use super::frame::{self, Kind};
use super::{Failed, Hello, Prepared, Sockets, StateMsg, TookOver};
use crate::RunningNode;

/// An upgrade a client asked for.
#[derive(Debug, Clone)]
pub struct UpgradeRequest {
    /// The new executable (`None`: the one running).
    pub binary: Option<PathBuf>,
    /// How long the successor may take, from its start until it runs the node.
    pub timeout: Duration,
}

/// Why an upgrade did not happen (the node goes on in this process).
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The node was not started by a command that can start its successor.
    #[error(
        "this node cannot start a successor: it was not started by `anode node` (the library user did not say how)"
    )]
    NotUpgradable,
    /// The new executable is not there.
    #[error("the new executable {0} is not a file; give --binary the path of the new anode")]
    NoBinary(String),
    /// It could not be started.
    #[error("cannot start {binary}: {source}")]
    Spawn {
        /// The executable.
        binary: String,
        /// Why.
        source: std::io::Error,
    },
    /// The successor failed or gave up at some stage.
    #[error(
        "the new process ({binary}) failed while {stage}: {source}; the node goes on in this process"
    )]
    Successor {
        /// The executable.
        binary: String,
        /// What was going on.
        stage: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The node's data path is gone.
    #[error("the node's data path has stopped")]
    NodeGone,
}

/// The executable running now; if it was replaced on disk (`cargo build` writes a new file),
/// the new file at the same path.
pub(crate) fn running_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let s = exe.to_string_lossy();
    Some(match s.strip_suffix(" (deleted)") {
        Some(p) => PathBuf::from(p),
        None => exe,
    })
}

/// `args` without an earlier `--upgrade-fd N` (this process may be a successor itself), with
/// the new descriptor's.
fn successor_args(args: &[OsString], fd: i32) -> Vec<OsString> {
    let mut v = Vec::with_capacity(args.len() + 2);
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a == super::FD_FLAG {
            skip = true;
            continue;
        }
        if a.to_string_lossy()
            .starts_with(&format!("{}=", super::FD_FLAG))
        {
            continue;
        }
        v.push(a.clone());
    }
    v.push(super::FD_FLAG.into());
    v.push(fd.to_string().into());
    v
}

/// A started successor and the old side of the conversation; killed unless it took over.
struct Pending {
    child: Option<Child>,
    sock: UnixStream,
    binary: String,
    deadline: Instant,
}

impl Pending {
    fn start(binary: &Path, args: &[OsString], timeout: Duration) -> Result<Pending, UpgradeError> {
        let name = binary.display().to_string();
        let spawn = |source| UpgradeError::Spawn {
            binary: name.clone(),
            source,
        };
        let (ours, theirs) = UnixStream::pair().map_err(spawn)?;
        // The child's end must survive exec: the only descriptor it inherits on purpose.
        rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty())
            .map_err(|e| spawn(e.into()))?;
        let child = Command::new(binary)
            .args(successor_args(args, theirs.as_raw_fd()))
            .stdin(Stdio::null())
            .spawn()
            .map_err(spawn)?;
        drop(theirs);
        Ok(Pending {
            child: Some(child),
            sock: ours,
            binary: name,
            deadline: Instant::now() + timeout,
        })
    }

    /// Receives the next JSON frame of `kind`, within the deadline.
    fn recv<T: serde::de::DeserializeOwned>(
        &self,
        kind: Kind,
        stage: &'static str,
    ) -> Result<T, UpgradeError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let r = self
            .sock
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .and_then(|()| frame::recv_json::<T>(&self.sock, kind));
        r.map(|(v, _)| v).map_err(|e| self.failed(stage, e))
    }

    fn failed(&self, stage: &'static str, source: std::io::Error) -> UpgradeError {
        let source = if matches!(
            source.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            std::io::Error::other("it did not answer in time")
        } else {
            source
        };
        UpgradeError::Successor {
            binary: self.binary.clone(),
            stage,
            source,
        }
    }

    fn send(
        &self,
        kind: Kind,
        payload: &[u8],
        fds: &[BorrowedFd<'_>],
        stage: &'static str,
    ) -> Result<(), UpgradeError> {
        frame::send(&self.sock, kind, payload, fds).map_err(|e| self.failed(stage, e))
    }

    /// It took over: the caller keeps the child.
    fn keep(mut self) -> Option<Child> {
        self.child.take()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = frame::send_json(
                &self.sock,
                Kind::Failed,
                &Failed::new("upgrade abandoned"),
                &[],
            );
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl RunningNode {
    /// Replaces this process by a successor running `req.binary` (see `mod.rs`). On
    /// success the node runs there and this process must retire
    /// ([`RunningNode::retire`]); on failure it goes on here as before.
    pub fn upgrade(&mut self, req: &UpgradeRequest) -> Result<UpgradeInfo, UpgradeError> {
        let t0 = Instant::now();
        let args = self
            .upgrade_args
            .clone()
            .ok_or(UpgradeError::NotUpgradable)?;
        let binary = req
            .binary
            .clone()
            .or_else(running_binary)
            .ok_or_else(|| UpgradeError::NoBinary("(the running one)".into()))?;
        if !binary.is_file() {
            return Err(UpgradeError::NoBinary(binary.display().to_string()));
        }
        tracing::info!(binary = %binary.display(), "upgrade: starting the new process");
        let p = Pending::start(&binary, &args, req.timeout)?;
        let hello: Hello = p.recv(Kind::Hello, "starting")?;
        let code = self
            .call(|n, _| {
                crate::ees::capsule_ee(n)
                    .map(|e| e.memory_code())
                    .unwrap_or_default()
            })
            .map_err(|_| UpgradeError::NodeGone)?;
        for (_, w) in &code {
            p.send(Kind::Code, w, &[], "receiving code")?;
        }
        p.send(Kind::CodeEnd, &[], &[], "receiving code")?;
        let prepared: Prepared = p.recv(Kind::Prepared, "building code")?;
        if !prepared.failed.is_empty() {
            tracing::warn!(failed = ?prepared.failed, "upgrade: the new process could not build some code objects; their capsules fetch them again");
        }
        let paused = Instant::now();
        let took = self.send_state(&p);
        let took = match took {
            Ok(t) => t,
            Err(e) => {
                drop(p);
                self.resume_after_failed_upgrade();
                return Err(e);
            }
        };
        let paused_ms = millis(paused.elapsed());
        self.successor = p.keep();
        let r = took.report;
        tracing::info!(
            pid = took.pid,
            paused_ms,
            held = r.held,
            "upgrade: the new process runs the node"
        );
        Ok(UpgradeInfo {
            old_pid: std::process::id(),
            new_pid: took.pid,
            binary: binary.display().to_string(),
            old_version: super::version(),
            new_version: hello.version,
            total_ms: millis(t0.elapsed()),
            paused_ms,
            code_objects: prepared.built,
            neighbors: r.routing.neighbors,
            routes: r.routing.routes,
            lsas: r.routing.lsas,
            held: r.held,
            queued: r.queued,
            skipped: r.skipped + r.routing.skipped,
            refused: r.refused,
        })
    }

    /// Pauses the data path and the control server, sends the state and the sockets, waits
    /// for the successor to take over.
    fn send_state(&mut self, p: &Pending) -> Result<TookOver, UpgradeError> {
        self.udp.0.pause().map_err(|_| UpgradeError::NodeGone)?;
        if let Some(s) = &self.server {
            s.set_accepting(false);
        }
        let node = self
            .call(|n, now| n.hand_over(now))
            .map_err(|_| UpgradeError::NodeGone)?;
        let udp: OwnedFd = self
            .udp
            .0
            .socket_fd()
            .map_err(|e| p.failed("receiving the sockets", e))?;
        let l = &self.listeners;
        let sockets = Sockets {
            control: l.control.is_some(),
            metrics: l.metrics.is_some(),
            remote: l.remote.is_some(),
        };
        let mut fds: Vec<BorrowedFd<'_>> = vec![udp.as_fd()];
        fds.extend(l.control.as_ref().map(AsFd::as_fd));
        fds.extend(l.metrics.as_ref().map(AsFd::as_fd));
        fds.extend(l.remote.as_ref().map(AsFd::as_fd));
        let msg = serde_json::to_vec(&StateMsg { node, sockets })
            .map_err(|e| p.failed("receiving the state", e.into()))?;
        p.send(Kind::State, &msg, &fds, "receiving the state")?;
        p.recv(Kind::TookOver, "taking over")
    }

    /// After a failed upgrade: reads, timers and control connections go on.
    fn resume_after_failed_upgrade(&self) {
        self.udp.0.resume();
        if let Some(s) = &self.server {
            s.set_accepting(true);
        }
    }
}

/// After a retirement: waits for the successor to exit, sending it SIGTERM once `stop`
/// says this process was asked to stop (so whoever holds this pid can still stop the
/// node), and returns its exit status.
pub fn follow_successor(
    mut child: Child,
    mut stop: impl FnMut() -> bool,
) -> std::io::Result<std::process::ExitStatus> {
    let mut told = false;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(st);
        }
        if !told && stop() {
            told = true;
            let pid = rustix::process::Pid::from_child(&child);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_successor_gets_the_command_line_with_its_own_descriptor() {
        let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            successor_args(&a(&["node", "--config", "x.toml"]), 7),
            a(&["node", "--config", "x.toml", "--upgrade-fd", "7"])
        );
        assert_eq!(
            successor_args(&a(&["node", "--upgrade-fd", "5", "--config", "x.toml"]), 7),
            a(&["node", "--config", "x.toml", "--upgrade-fd", "7"])
        );
        assert_eq!(
            successor_args(&a(&["node", "--upgrade-fd=5", "-c", "x.toml"]), 9),
            a(&["node", "-c", "x.toml", "--upgrade-fd", "9"])
        );
    }
}
