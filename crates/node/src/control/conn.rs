//! The control server's I/O: one thread runs a mio event loop over the listener and every
//! connection (accepting, reading request lines, writing queued lines), and a small pool of
//! worker threads answers requests.
//!
//! Contracts:
//! - At most [`Limits::max_connections`] connections are open; one more is told so in one
//!   error line and closed (counted as `refused_connections`).
//! - A connection has at most one request being answered; its later lines wait in order (at
//!   most [`MAX_PENDING`], then the server stops reading from it until they are answered).
//! - A line longer than [`MAX_LINE`] is answered with an error and skipped.
//! - A connection that owns no port, is not subscribed, asked for no logs and sent nothing
//!   for [`Limits::idle`] is closed (counted as `idle_closed`).
//! - A connection's memory is its buffers, which grow only with what it sends and what is
//!   queued to it, and are freed when it closes; no thread is made per connection.
//! - [`Limits::workers`] threads answer requests; a slow request (a module compiling) holds
//!   one worker, not the I/O thread.
//! - With remote management on (`remote.rs`), a TCP listener is served by the same loop:
//!   its connections have their own bound (`[remote] max_connections`, so a flood of them
//!   cannot lock out the local socket), close after [`REMOTE_IDLE`] idle, and every line
//!   they send passes the remote gate before a handler sees it.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anode_ctl::{ErrorCode, ServerMessage, parse_request};
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Registry, Token};

use super::handlers::{self, ConnState};
use super::remote::RemotePeer;
use super::state::{ConnId, ConnOut, OutQueue, Shared};
use anode_ctl::remote::Refusal;

/// Longest request line accepted; a longer one is answered with an error and skipped.
pub(super) const MAX_LINE: usize = 1 << 20;
/// Request lines a connection may have waiting for an answer before reading pauses.
pub(super) const MAX_PENDING: usize = 64;

const LISTENER: Token = Token(0);
/// The waker's token (`Shared::waker`).
pub(super) const WAKER: Token = Token(1);
/// The remote-management listener's token.
const REMOTE_LISTENER: Token = Token(2);
const FIRST_CONN: u64 = 3;
/// Idle time after which a remote connection is closed.
pub(super) const REMOTE_IDLE: Duration = Duration::from_secs(60);

/// The bounds of the control server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Idle time after which a connection that waits for nothing is closed.
    pub idle: Duration,
    /// Threads answering requests.
    pub workers: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 256,
            idle: Duration::from_secs(300),
            workers: 2,
        }
    }
}

/// A request for a worker: the connection, its line and its state (lent for the request).
struct Job {
    id: ConnId,
    line: Vec<u8>,
    state: ConnState,
    /// A remote connection's ends: the line is a signed envelope.
    remote: Option<RemotePeer>,
}

/// A control connection: the local socket's, or a remote one's.
#[derive(Debug)]
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

impl mio::event::Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.register(r, t, i),
            Stream::Tcp(s) => s.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.reregister(r, t, i),
            Stream::Tcp(s) => s.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.deregister(r),
            Stream::Tcp(s) => s.deregister(r),
        }
    }
}

/// A worker's answer: the state back (the reply is already queued).
struct Done {
    id: ConnId,
    state: ConnState,
}

/// One connection, as the I/O thread holds it.
struct Conn {
    id: ConnId,
    stream: Stream,
    /// Set for a remote connection.
    remote: Option<RemotePeer>,
    out: Arc<OutQueue>,
    /// Bytes read that do not end a line yet.
    inbuf: Vec<u8>,
    /// Skipping the rest of an overlong line.
    skipping: bool,
    /// Complete lines waiting for a worker.
    pending: VecDeque<Vec<u8>>,
    /// `None` while a worker answers one of this connection's requests.
    state: Option<ConnState>,
    /// The line being written and how much of it is out.
    writing: Option<(Vec<u8>, usize)>,
    last_active: Instant,
    /// Registered for writable events.
    want_write: bool,
    /// Registered for readable events.
    reading: bool,
}

/// Starts the worker pool; returns where to send jobs and where answers come back.
fn start_workers(shared: &Arc<Shared>, n: usize) -> std::io::Result<(Sender<Job>, Receiver<Done>)> {
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    let job_rx = Arc::new(Mutex::new(job_rx));
    for i in 0..n.max(1) {
        let (rx, tx, sh) = (Arc::clone(&job_rx), done_tx.clone(), Arc::clone(shared));
        std::thread::Builder::new()
            .name(format!("anode-ctl-work{i}"))
            .spawn(move || worker(&sh, &rx, &tx))?;
    }
    Ok((job_tx, done_rx))
}

fn worker(shared: &Shared, jobs: &Mutex<Receiver<Job>>, done: &Sender<Done>) {
    loop {
        let job = {
            let Ok(rx) = jobs.lock() else { return };
            match rx.recv() {
                Ok(j) => j,
                Err(_) => return,
            }
        };
        let Job {
            id,
            line,
            mut state,
            remote,
        } = job;
        let text = String::from_utf8_lossy(&line);
        let reply = match (remote, &shared.remote) {
            (None, _) => match parse_request(&text) {
                Ok(f) => handlers::handle(shared, &mut state, f),
                Err((rid, msg)) => ServerMessage::error(rid, ErrorCode::BadRequest, msg),
            },
            (Some(from), Some(gate)) => match gate.admit(&text, from, unix_now()) {
                Ok(a) => {
                    if state.client.is_empty() {
                        state.client = format!("remote {} ({})", from.peer, a.grant.key);
                    }
                    state.remote = Some((from.peer, a.grant));
                    handlers::handle(shared, &mut state, a.frame)
                }
                Err(e) => {
                    // A throttled peer is sending bad signatures: hang up on it (it must
                    // reconnect, and its new connections are refused while it is throttled).
                    state.close_after_reply = matches!(e, Refusal::Throttled(_));
                    let rid = request_id(&text);
                    ServerMessage::error(rid, ErrorCode::Unauthorized, e.to_string())
                }
            },
            (Some(_), None) => ServerMessage::error(
                None,
                ErrorCode::Unauthorized,
                "remote management is off at this node",
            ),
        };
        shared.reply(id, &reply);
        if let Some(after) = state.after_reply.take() {
            after();
        }
        if done.send(Done { id, state }).is_err() {
            return;
        }
        let _ = shared.waker.wake();
    }
}

/// The seconds since the Unix epoch (remote requests' expiries are in those).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The `id` of the request inside an envelope, if it can be read (for the refusal's reply).
fn request_id(envelope: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(envelope).ok()?;
    let inner: serde_json::Value = serde_json::from_str(v.get("request")?.as_str()?).ok()?;
    inner.get("id")?.as_u64()
}

/// The I/O thread: runs until the server stops.
pub(super) fn io_loop(
    shared: &Arc<Shared>,
    mut poll: Poll,
    listener: std::os::unix::net::UnixListener,
    remote: Option<std::net::TcpListener>,
    limits: Limits,
) {
    let mut io = match Io::new(shared, &poll, listener, remote, limits) {
        Ok(io) => io,
        Err(e) => {
            tracing::error!("control server cannot start: {e}");
            return;
        }
    };
    let mut events = Events::with_capacity(256);
    while !shared.stopping.load(Ordering::Acquire) {
        if let Err(e) = poll.poll(&mut events, Some(Duration::from_secs(1))) {
            if e.kind() != ErrorKind::Interrupted {
                tracing::warn!("control poll failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            continue;
        }
        for ev in &events {
            match ev.token() {
                LISTENER => io.accept(&poll),
                REMOTE_LISTENER => io.accept_remote(&poll),
                WAKER => {
                    // Accepting again after a pause: what waited in the backlog.
                    io.accept(&poll);
                    io.accept_remote(&poll);
                }
                Token(t) => {
                    let id = t as ConnId;
                    if ev.is_readable() || ev.is_read_closed() {
                        io.read(&poll, id);
                    }
                    if ev.is_writable() {
                        io.write(&poll, id);
                    }
                }
            }
        }
        io.answered(&poll);
        for id in shared.take_dirty() {
            io.write(&poll, id);
        }
        io.expire_idle(&poll);
    }
    // Answers already made (an upgrade's, before the process retires) still go out.
    io.answered(&poll);
    for id in shared.take_dirty() {
        io.write(&poll, id);
    }
    io.close_all(&poll);
}

/// What the I/O thread holds.
struct Io<'a> {
    shared: &'a Arc<Shared>,
    listener: UnixListener,
    remote: Option<TcpListener>,
    /// Remote connections open.
    remote_open: usize,
    conns: HashMap<ConnId, Conn>,
    jobs: Sender<Job>,
    done: Receiver<Done>,
    limits: Limits,
    next_id: ConnId,
}

impl<'a> Io<'a> {
    fn new(
        shared: &'a Arc<Shared>,
        poll: &Poll,
        listener: std::os::unix::net::UnixListener,
        remote: Option<std::net::TcpListener>,
        limits: Limits,
    ) -> std::io::Result<Io<'a>> {
        listener.set_nonblocking(true)?;
        let mut listener = UnixListener::from_std(listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let remote = match remote {
            Some(l) => {
                l.set_nonblocking(true)?;
                let mut l = TcpListener::from_std(l);
                poll.registry()
                    .register(&mut l, REMOTE_LISTENER, Interest::READABLE)?;
                Some(l)
            }
            None => None,
        };
        let (jobs, done) = start_workers(shared, limits.workers)?;
        Ok(Io {
            shared,
            listener,
            remote,
            remote_open: 0,
            conns: HashMap::new(),
            jobs,
            done,
            limits,
            next_id: FIRST_CONN,
        })
    }

    fn accept(&mut self, poll: &Poll) {
        while self.shared.accepting.load(Ordering::Acquire) {
            let (stream, _) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!("control accept failed: {e}");
                    return;
                }
            };
            let open = self.conns.len() - self.remote_open;
            if open >= self.limits.max_connections {
                self.refuse(Stream::Unix(stream), open);
                continue;
            }
            self.add(poll, Stream::Unix(stream), None);
        }
    }

    /// Accepts remote connections, within the remote bound.
    fn accept_remote(&mut self, poll: &Poll) {
        while self.shared.accepting.load(Ordering::Acquire) {
            let Some(listener) = &self.remote else {
                return;
            };
            let (stream, peer) = match listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!("remote control accept failed: {e}");
                    return;
                }
            };
            let Some(gate) = self.shared.remote.as_ref() else {
                return;
            };
            let max = gate.max_connections();
            if gate.throttled(peer.ip().to_canonical()) {
                // Hung up on for bad signatures and still over its budget: no new connection.
                self.shared
                    .refused_connections
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let here = match stream.local_addr() {
                Ok(h) if self.remote_open < max => h,
                _ => {
                    self.refuse(Stream::Tcp(stream), self.remote_open);
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            tracing::debug!(%peer, "remote control connection");
            self.add(poll, Stream::Tcp(stream), Some(RemotePeer { peer, here }));
        }
    }

    /// Tells a connection over the bound so in one line, and drops it.
    fn refuse(&self, mut stream: Stream, open: usize) {
        self.shared
            .refused_connections
            .fetch_add(1, Ordering::Relaxed);
        let msg = ServerMessage::error(
            None,
            ErrorCode::Other,
            format!("too many control connections ({open} open); try again later"),
        );
        let _ = stream.write(msg.to_line().as_bytes());
    }

    /// Registers a new connection.
    fn add(&mut self, poll: &Poll, mut stream: Stream, remote: Option<RemotePeer>) {
        let id = self.next_id;
        self.next_id += 1;
        if let Err(e) =
            poll.registry()
                .register(&mut stream, Token(id as usize), Interest::READABLE)
        {
            tracing::warn!("control connection not registered: {e}");
            return;
        }
        let out = Arc::new(OutQueue::default());
        self.shared.add_conn_with(
            id,
            ConnOut {
                out: Arc::clone(&out),
                subscribed: false,
            },
        );
        self.remote_open += usize::from(remote.is_some());
        self.conns.insert(
            id,
            Conn {
                id,
                stream,
                remote,
                out,
                inbuf: Vec::new(),
                skipping: false,
                pending: VecDeque::new(),
                state: Some(ConnState::new(id)),
                writing: None,
                last_active: Instant::now(),
                want_write: false,
                reading: true,
            },
        );
    }

    /// Reads what is there, splits lines, hands the next to a worker.
    fn read(&mut self, poll: &Poll, id: ConnId) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let mut chunk = [0u8; 16 * 1024];
        let closed = loop {
            if c.pending.len() >= MAX_PENDING {
                break false;
            }
            match c.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => {
                    c.last_active = Instant::now();
                    take_lines(c, chunk.get(..n).unwrap_or(&[]), self.shared);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break true,
            }
        };
        if closed && c.pending.is_empty() && c.state.is_some() {
            return self.close(poll, id);
        }
        self.dispatch(poll, id);
    }

    /// Gives the connection's next waiting line to a worker if none is working for it, and
    /// pauses or resumes reading by how many lines wait.
    fn dispatch(&mut self, poll: &Poll, id: ConnId) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.state.is_some()
            && let Some(line) = c.pending.pop_front()
            && let Some(state) = c.state.take()
            && self
                .jobs
                .send(Job {
                    id,
                    line,
                    state,
                    remote: c.remote,
                })
                .is_err()
        {
            tracing::warn!("control workers are gone");
        }
        let should_read = c.pending.len() < MAX_PENDING;
        if should_read != c.reading {
            c.reading = should_read;
            let want = interest(c);
            let _ = poll
                .registry()
                .reregister(&mut c.stream, Token(id as usize), want);
        }
    }

    /// Takes back the states of answered requests and starts the next ones.
    fn answered(&mut self, poll: &Poll) {
        while let Ok(Done { id, state }) = self.done.try_recv() {
            if state.close_after_reply {
                // Best effort: the refusal goes out if the socket takes it at once.
                self.write(poll, id);
                self.close(poll, id);
                continue;
            }
            if let Some(c) = self.conns.get_mut(&id) {
                c.state = Some(state);
                c.last_active = Instant::now();
                self.dispatch(poll, id);
            }
        }
    }

    /// Writes queued lines until the socket would block.
    fn write(&mut self, poll: &Poll, id: ConnId) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let broken = loop {
            if c.writing.is_none() {
                let next = c
                    .out
                    .lines
                    .lock()
                    .map(|mut q| q.pop_front())
                    .unwrap_or(None);
                match next {
                    Some(l) => c.writing = Some((l, 0)),
                    None => break false,
                }
            }
            let Some((line, at)) = c.writing.as_mut() else {
                break false;
            };
            match c.stream.write(line.get(*at..).unwrap_or(&[])) {
                Ok(0) => break true,
                Ok(n) => {
                    *at += n;
                    if *at >= line.len() {
                        c.writing = None;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break true,
            }
        };
        if broken {
            return self.close(poll, id);
        }
        let want = c.writing.is_some();
        if want != c.want_write {
            c.want_write = want;
            let want = interest(c);
            let _ = poll
                .registry()
                .reregister(&mut c.stream, Token(id as usize), want);
        }
    }

    /// Closes connections idle past the limit that wait for nothing.
    fn expire_idle(&mut self, poll: &Poll) {
        let now = Instant::now();
        let idle: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                let idle = match c.remote {
                    Some(_) => self.limits.idle.min(REMOTE_IDLE),
                    None => self.limits.idle,
                };
                now.duration_since(c.last_active) > idle
                    && c.state.is_some()
                    && c.pending.is_empty()
                    && c.writing.is_none()
            })
            .map(|(id, _)| *id)
            .filter(|id| !self.shared.is_listening(*id))
            .collect();
        for id in idle {
            self.shared.idle_closed.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(conn = id, "idle control connection closed");
            self.close(poll, id);
        }
    }

    fn close(&mut self, poll: &Poll, id: ConnId) {
        if let Some(mut c) = self.conns.remove(&id) {
            let _ = poll.registry().deregister(&mut c.stream);
            self.remote_open -= usize::from(c.remote.is_some());
            let client = c
                .state
                .as_ref()
                .map(|s| s.client.clone())
                .unwrap_or_default();
            tracing::debug!(conn = id, %client, "control connection closed");
        }
        self.shared.release_conn(id);
    }

    fn close_all(&mut self, poll: &Poll) {
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in ids {
            self.close(poll, id);
        }
    }
}

/// The events a connection is registered for.
fn interest(c: &Conn) -> Interest {
    match (c.reading, c.want_write) {
        (_, false) => Interest::READABLE,
        (true, true) => Interest::READABLE | Interest::WRITABLE,
        (false, true) => Interest::WRITABLE,
    }
}

/// Adds `bytes` to the connection's input, moving complete lines to `pending`; an overlong
/// line is answered with an error and skipped to its end.
fn take_lines(c: &mut Conn, mut bytes: &[u8], shared: &Shared) {
    while !bytes.is_empty() {
        let nl = bytes.iter().position(|b| *b == b'\n');
        let (part, rest, ends) = match nl {
            Some(i) => (
                bytes.get(..i).unwrap_or(&[]),
                bytes.get(i + 1..).unwrap_or(&[]),
                true,
            ),
            None => (bytes, &[][..], false),
        };
        bytes = rest;
        if c.skipping {
            c.skipping = !ends;
            continue;
        }
        if c.inbuf.len() + part.len() > MAX_LINE {
            c.inbuf = Vec::new();
            c.skipping = !ends;
            let msg = ServerMessage::error(
                None,
                ErrorCode::BadRequest,
                format!("request line longer than {MAX_LINE} bytes"),
            );
            shared.queue(c.id, &c.out, &msg, false);
            continue;
        }
        c.inbuf.extend_from_slice(part);
        if ends {
            let line = std::mem::take(&mut c.inbuf);
            if !line.iter().all(u8::is_ascii_whitespace) {
                c.pending.push_back(line);
            }
        }
    }
    if c.inbuf.capacity() > 64 * 1024 && c.inbuf.is_empty() {
        c.inbuf = Vec::new();
    }
}
