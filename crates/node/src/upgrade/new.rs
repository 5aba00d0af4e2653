//! The successor's side of an upgrade (`mod.rs`): adopt the descriptor the old process
//! passed, say hello, build the code it sends, take its state and sockets, report.

use std::net::TcpListener;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use anode_core::Node;
use anode_core::handover::{HandoverError, NodeHandover, TakeoverReport};

use super::frame::{self, Kind};
use super::{Failed, Hello, Prepared, StateMsg, TookOver};

/// How long the successor waits for the old process's next frame.
const WAIT: Duration = Duration::from_secs(120);

/// Why the successor could not take over.
#[derive(Debug, thiserror::Error)]
pub enum SuccessorError {
    /// The descriptor named by `--upgrade-fd` is not what the old process passes.
    #[error(
        "--upgrade-fd {fd}: {why} (the flag is for `anode upgrade`, which starts the new process itself)"
    )]
    Fd {
        /// The number given.
        fd: i32,
        /// What is wrong with it.
        why: String,
    },
    /// The conversation with the old process broke.
    #[error("the upgrade conversation with the old process failed: {0}")]
    Io(#[from] std::io::Error),
    /// The state is another node's or another format.
    #[error("the old process's state cannot be taken over: {0}")]
    Handover(#[from] HandoverError),
}

/// Sockets the old process handed over, used instead of binding new ones.
#[derive(Debug)]
pub struct Inherited {
    /// The node's UDP socket.
    pub udp: OwnedFd,
    /// The control socket's listener.
    pub control: Option<UnixListener>,
    /// The metrics endpoint's listener.
    pub metrics: Option<TcpListener>,
    /// The remote-management listener.
    pub remote: Option<TcpListener>,
}

/// The successor's end of the conversation.
#[derive(Debug)]
pub struct Successor {
    sock: UnixStream,
}

impl Successor {
    /// Adopts descriptor `fd` (it must be an open Unix stream socket) and arranges for this
    /// process to get SIGTERM if the old one dies.
    pub fn adopt(fd: i32) -> Result<Successor, SuccessorError> {
        let bad = |why: String| SuccessorError::Fd { fd, why };
        if fd < 3 {
            return Err(bad("not a descriptor an old process passes".into()));
        }
        // SAFETY: fcntl(F_GETFD) only reads the descriptor's flags; it fails with EBADF if
        // `fd` is not open, and touches no memory.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(bad("not an open descriptor".into()));
        }
        // SAFETY: `fd` is open (checked above) and was passed to this process by the old
        // one for this conversation alone: nothing else in this process owns that number.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let ty = rustix::net::sockopt::socket_type(owned.as_fd())
            .map_err(|e| bad(format!("not a socket ({e})")))?;
        let domain = rustix::net::sockopt::socket_domain(owned.as_fd())
            .map_err(|e| bad(format!("not a socket ({e})")))?;
        if ty != rustix::net::SocketType::STREAM || domain != rustix::net::AddressFamily::UNIX {
            return Err(bad("not a Unix stream socket".into()));
        }
        rustix::io::fcntl_setfd(&owned, rustix::io::FdFlags::CLOEXEC)
            .map_err(|e| bad(e.to_string()))?;
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))
            .map_err(|e| bad(format!("cannot follow the old process ({e})")))?;
        let sock = UnixStream::from(owned);
        sock.set_read_timeout(Some(WAIT))?;
        Ok(Successor { sock })
    }

    /// Tells the old process this one runs.
    pub fn hello(&self) -> Result<(), SuccessorError> {
        let h = Hello {
            pid: std::process::id(),
            version: super::version(),
        };
        Ok(frame::send_json(&self.sock, Kind::Hello, &h, &[])?)
    }

    /// Receives the code objects and builds them into `node`'s capsule EE (a code object
    /// that depends on another is retried once the others are in); answers [`Prepared`].
    pub fn build_code(&self, node: &mut Node) -> Result<usize, SuccessorError> {
        let mut code = Vec::new();
        loop {
            let f = frame::recv(&self.sock)?;
            match f.kind {
                Kind::Code => code.push(f.payload),
                Kind::CodeEnd => break,
                _ => {
                    frame::expect_json::<serde_json::Value>(f, Kind::Code)?;
                }
            }
        }
        let mut failed = Vec::new();
        let mut built = 0;
        if let Some(ee) = crate::ees::capsule_ee(node) {
            while !code.is_empty() {
                let before = code.len();
                failed.clear();
                code.retain(|w| match ee.install(w) {
                    Ok(_) => false,
                    Err(e) => {
                        failed.push(e.to_string());
                        true
                    }
                });
                built += before - code.len();
                if code.len() == before {
                    break;
                }
            }
        }
        let p = Prepared { built, failed };
        frame::send_json(&self.sock, Kind::Prepared, &p, &[])?;
        Ok(built)
    }

    /// Receives the paused node's state and its sockets.
    pub fn receive_state(&self) -> Result<(NodeHandover, Inherited), SuccessorError> {
        let (msg, fds): (StateMsg, Vec<OwnedFd>) = frame::recv_json(&self.sock, Kind::State)?;
        let s = msg.sockets;
        let want = 1 + usize::from(s.control) + usize::from(s.metrics) + usize::from(s.remote);
        if fds.len() != want {
            return Err(SuccessorError::Io(std::io::Error::other(format!(
                "the old process sent {} sockets, its message names {want}",
                fds.len()
            ))));
        }
        let mut fds = fds.into_iter();
        let mut next = |on: bool| if on { fds.next() } else { None };
        let udp = next(true).ok_or_else(|| std::io::Error::other("no UDP socket"))?;
        let inherited = Inherited {
            udp,
            control: next(s.control).map(UnixListener::from),
            metrics: next(s.metrics).map(TcpListener::from),
            remote: next(s.remote).map(TcpListener::from),
        };
        Ok((msg.node, inherited))
    }

    /// Tells the old process this one runs the node now.
    pub fn took_over(&self, report: TakeoverReport) -> Result<(), SuccessorError> {
        let t = TookOver {
            pid: std::process::id(),
            version: super::version(),
            report,
        };
        Ok(frame::send_json(&self.sock, Kind::TookOver, &t, &[])?)
    }

    /// Tells the old process this one gives up, and why (it then goes on itself).
    pub fn fail(&self, why: &str) {
        let _ = frame::send_json(&self.sock, Kind::Failed, &Failed::new(why), &[]);
    }
}
