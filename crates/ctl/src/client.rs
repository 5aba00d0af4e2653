//! [`Client`]: a blocking connection to a node's control socket.
//!
//! ## Contract
//! - [`Client::connect`] says hello and fails unless the node speaks [`PROTOCOL_VERSION`].
//! - Requests are answered in order; a request helper returns the reply to its own id.
//!   Stream messages (deliveries, events) that arrive while it waits are queued, not lost,
//!   and come out of [`Client::next_item`] / [`Subscription`] in arrival order.
//! - Stream messages of kinds this version does not know are skipped.
//! - Nothing here panics on what the node sends: a bad line is a [`ClientError::BadMessage`].

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anode_wire::NodeAddr;

use crate::{
    CaptureEndInfo, ChannelEntry, CodeEntry, DeliveryInfo, DomainsInfo, ErrorCode, HelloInfo,
    LinkEntry, NeighborEntry, NodeEvent, PROTOCOL_VERSION, PacketInfo, Payload, Request,
    RequestFrame, Response, RouteInfo, ServerMessage, StatsInfo, StatusInfo, UpgradeInfo,
};

/// A client-side failure.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing accepts connections at a remote node's address.
    #[error(
        "cannot reach a remote node at {addr} ({source}); is `[remote] listen` set in its config, and the address right?"
    )]
    NoRemote {
        /// The address tried.
        addr: SocketAddr,
        /// Why connecting failed.
        source: std::io::Error,
    },
    /// Nothing listens at the socket path.
    #[error(
        "no node is running at {} ({source}); start one with `anode node --config FILE` (see examples/node-a.toml), or pass --socket PATH / --node-port PORT",
        .path.display()
    )]
    NoNode {
        /// The path tried.
        path: PathBuf,
        /// Why connecting failed.
        source: std::io::Error,
    },
    /// Reading or writing the socket failed.
    #[error("control connection failed: {0}")]
    Io(#[from] std::io::Error),
    /// The node closed the connection.
    #[error("the node closed the control connection (did it stop?)")]
    Closed,
    /// Nothing arrived within the timeout.
    #[error("timed out waiting for the node")]
    Timeout,
    /// The node sent a line that is not a protocol message.
    #[error("the node sent a line that is not a protocol message ({source}): {line}")]
    BadMessage {
        /// The line.
        line: String,
        /// Why it did not parse.
        source: serde_json::Error,
    },
    /// The node refused the request.
    #[error("the node refused: {message} [{code}]")]
    Refused {
        /// Machine-readable reason.
        code: ErrorCode,
        /// What went wrong, for a person.
        message: String,
    },
    /// The node speaks another protocol version.
    #[error(
        "the node speaks control protocol {node}, this client speaks {PROTOCOL_VERSION}; use matching anode versions"
    )]
    Version {
        /// The node's version.
        node: u32,
    },
    /// The reply does not fit the request.
    #[error("unexpected reply to '{request}': {got}")]
    Unexpected {
        /// The request's op.
        request: &'static str,
        /// The reply, as JSON.
        got: String,
    },
}

/// Something streamed to a connection: a delivery or an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamItem {
    /// A datagram for a bound port.
    Delivery(DeliveryInfo),
    /// A node event (after [`Client::subscribe`]).
    Event(NodeEvent),
    /// A captured datagram (after [`Client::capture`]).
    Packet(PacketInfo),
    /// The end of a capture.
    CaptureEnd(CaptureEndInfo),
}

/// Options of [`Client::send`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendOptions {
    /// Resource bound; the node's default when `None`.
    pub rb: Option<u16>,
    /// Flow id.
    pub flow: u64,
    /// Send under this ANEP Type ID (an EE module's) instead of as a plain datagram.
    pub ee_type: Option<u16>,
    /// With `ee_type`: ask for evaluation at every hop.
    pub every_hop: bool,
}

/// A connection to a node.
#[derive(Debug)]
pub struct Client {
    reader: BufReader<Stream>,
    writer: Stream,
    /// Signs every request line (a remote node, over TCP).
    signer: Option<crate::remote::RemoteSigner>,
    line: Vec<u8>,
    next_id: u64,
    queued: VecDeque<StreamItem>,
    hello: HelloInfo,
    path: PathBuf,
    /// The read timeout of reads without a deadline ([`Client::set_timeout`]).
    read_timeout: Option<Duration>,
}

impl Client {
    /// Connects to the socket at `path` and says hello as `name`.
    pub fn connect(path: impl AsRef<Path>, name: &str) -> Result<Client, ClientError> {
        let path = path.as_ref().to_path_buf();
        let stream = UnixStream::connect(&path).map_err(|source| ClientError::NoNode {
            path: path.clone(),
            source,
        })?;
        Client::start(Stream::Unix(stream), None, path, name)
    }

    /// Connects to a node's remote-management listener at `signer.to` over TCP and says
    /// hello as `name`; every request is signed by `signer` (see [`crate::remote`]).
    pub fn connect_remote(
        signer: crate::remote::RemoteSigner,
        name: &str,
    ) -> Result<Client, ClientError> {
        let addr = signer.to;
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
            .map_err(|source| ClientError::NoRemote { addr, source })?;
        let _ = stream.set_nodelay(true);
        let path = PathBuf::from(format!("tcp://{addr}"));
        Client::start(Stream::Tcp(stream), Some(signer), path, name)
    }

    fn start(
        stream: Stream,
        signer: Option<crate::remote::RemoteSigner>,
        path: PathBuf,
        name: &str,
    ) -> Result<Client, ClientError> {
        let writer = stream.try_clone()?;
        let mut c = Client {
            reader: BufReader::new(stream),
            writer,
            signer,
            line: Vec::new(),
            next_id: 1,
            queued: VecDeque::new(),
            hello: HelloInfo {
                protocol: 0,
                node: NodeAddr::UNSPECIFIED,
                software: String::new(),
            },
            path,
            read_timeout: None,
        };
        c.set_timeout(Some(Duration::from_secs(10)))?;
        let r = c.request(Request::Hello {
            protocol: PROTOCOL_VERSION,
            client: name.to_string(),
        });
        match r {
            Ok(Response::Hello(h)) if h.protocol == PROTOCOL_VERSION => c.hello = h,
            Ok(Response::Hello(h)) => return Err(ClientError::Version { node: h.protocol }),
            Ok(other) => return Err(unexpected("hello", &other)),
            Err(e) => return Err(e),
        }
        Ok(c)
    }

    /// The node's hello.
    pub fn node_info(&self) -> &HelloInfo {
        &self.hello
    }

    /// The socket path (`tcp://ADDR` for a remote node).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long a read may block (`None`: forever). Default 10 s.
    pub fn set_timeout(&mut self, t: Option<Duration>) -> Result<(), ClientError> {
        self.reader.get_ref().set_read_timeout(t)?;
        self.read_timeout = t;
        Ok(())
    }

    /// Sends `req` and waits for its answer.
    pub fn request(&mut self, req: Request) -> Result<Response, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let frame = RequestFrame { id, request: req };
        let mut line = frame.to_line();
        if let Some(signer) = &self.signer {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            line = signer.seal(line.trim_end(), now);
            line.push('\n');
        }
        self.writer.write_all(line.as_bytes())?;
        loop {
            match self.read_message(None)? {
                ServerMessage::Reply { id: rid, result } if rid == id => return Ok(result),
                ServerMessage::Error { id: rid, error } if rid == Some(id) || rid.is_none() => {
                    return Err(ClientError::Refused {
                        code: error.code,
                        message: error.message,
                    });
                }
                ServerMessage::Delivery(d) => self.queued.push_back(StreamItem::Delivery(d)),
                ServerMessage::Event(e) => self.queued.push_back(StreamItem::Event(e)),
                ServerMessage::Packet(p) => self.queued.push_back(StreamItem::Packet(p)),
                ServerMessage::CaptureEnd(e) => self.queued.push_back(StreamItem::CaptureEnd(e)),
                // A reply to an id we are not waiting for: an older request's, skip it.
                ServerMessage::Reply { .. } | ServerMessage::Error { .. } => {}
            }
        }
    }

    /// The node's status.
    pub fn status(&mut self) -> Result<StatusInfo, ClientError> {
        match self.request(Request::Status)? {
            Response::Status(s) => Ok(s),
            r => Err(unexpected("status", &r)),
        }
    }

    /// The routing table.
    pub fn routes(&mut self) -> Result<Vec<RouteInfo>, ClientError> {
        match self.request(Request::Routes)? {
            Response::Routes { routes } => Ok(routes),
            r => Err(unexpected("routes", &r)),
        }
    }

    /// The up neighbors.
    pub fn neighbors(&mut self) -> Result<Vec<NeighborEntry>, ClientError> {
        match self.request(Request::Neighbors)? {
            Response::Neighbors { neighbors } => Ok(neighbors),
            r => Err(unexpected("neighbors", &r)),
        }
    }

    /// The links.
    pub fn links(&mut self) -> Result<Vec<LinkEntry>, ClientError> {
        match self.request(Request::Links)? {
            Response::Links { links } => Ok(links),
            r => Err(unexpected("links", &r)),
        }
    }

    /// Counters and statistics.
    pub fn stats(&mut self) -> Result<StatsInfo, ClientError> {
        match self.request(Request::Stats)? {
            Response::Stats(s) => Ok(s),
            r => Err(unexpected("stats", &r)),
        }
    }

    /// The NodeOS domains of the node's EEs.
    pub fn domains(&mut self) -> Result<Vec<DomainsInfo>, ClientError> {
        match self.request(Request::Domains)? {
            Response::Domains { ees } => Ok(ees),
            r => Err(unexpected("domains", &r)),
        }
    }

    /// The node's open NodeOS channels: (whether it has a cut-through table, the channels).
    pub fn channels(&mut self) -> Result<(bool, Vec<ChannelEntry>), ClientError> {
        match self.request(Request::Channels)? {
            Response::Channels {
                cut_through,
                channels,
            } => Ok((cut_through, channels)),
            r => Err(unexpected("channels", &r)),
        }
    }

    /// Sends a datagram to `port` at `dst`.
    pub fn send(
        &mut self,
        dst: NodeAddr,
        port: u16,
        payload: impl Into<Payload>,
        opts: SendOptions,
    ) -> Result<(), ClientError> {
        let req = Request::Send {
            dst,
            port,
            payload: payload.into(),
            rb: opts.rb,
            flow: opts.flow,
            ee_type: opts.ee_type,
            every_hop: opts.every_hop,
        };
        self.expect_kind("send", req, |r| matches!(r, Response::Sent))
    }

    /// Claims `port`: its deliveries stream to this connection.
    pub fn bind(&mut self, port: u16) -> Result<(), ClientError> {
        self.expect_kind("bind", Request::Bind { port }, |r| {
            matches!(r, Response::Bound { .. })
        })
    }

    /// Gives `port` back.
    pub fn unbind(&mut self, port: u16) -> Result<(), ClientError> {
        self.expect_kind("unbind", Request::Unbind { port }, |r| {
            matches!(r, Response::Unbound { .. })
        })
    }

    /// Asks for node events on this connection.
    pub fn subscribe(&mut self) -> Result<(), ClientError> {
        self.expect_kind("subscribe", Request::Subscribe, |r| {
            matches!(r, Response::Subscribed)
        })
    }

    /// Starts a capture (see [`Request::Capture`]); packets then come as
    /// [`StreamItem::Packet`], and a [`StreamItem::CaptureEnd`] closes it. Returns the node's
    /// address and the peer the capture is limited to.
    pub fn capture(
        &mut self,
        link: Option<String>,
        count: Option<u64>,
        millis: Option<u64>,
    ) -> Result<(NodeAddr, Option<NodeAddr>), ClientError> {
        match self.request(Request::Capture {
            link,
            count,
            millis,
        })? {
            Response::Capturing { node, peer } => Ok((node, peer)),
            r => Err(unexpected("capture", &r)),
        }
    }

    /// Adds a static route.
    pub fn add_route(
        &mut self,
        dest: NodeAddr,
        via: NodeAddr,
        metric: u16,
    ) -> Result<(), ClientError> {
        let req = Request::AddRoute { dest, via, metric };
        self.expect_kind("add_route", req, |r| matches!(r, Response::Done))
    }

    /// Takes the link named `link` (or with that index) up or down.
    pub fn set_link(&mut self, link: &str, up: bool) -> Result<(), ClientError> {
        let req = Request::SetLink {
            link: link.to_string(),
            up,
        };
        self.expect_kind("set_link", req, |r| matches!(r, Response::Done))
    }

    /// Injects a whole ANEP packet at the node; with `logs`, EE log events (PLAN `print`
    /// output and errors) stream to this connection from now on.
    pub fn inject(&mut self, packet: Vec<u8>, logs: bool) -> Result<(), ClientError> {
        self.inject_many(packet, logs, 1)
    }

    /// Injects `count` copies of an ANEP packet in one request.
    pub fn inject_many(
        &mut self,
        packet: Vec<u8>,
        logs: bool,
        count: u32,
    ) -> Result<(), ClientError> {
        let req = Request::Inject {
            packet: packet.into(),
            logs,
            count,
            partial: false,
        };
        self.expect_kind("inject", req, |r| matches!(r, Response::Injected))
    }

    /// Injects up to `count` copies of `packet`; stops at the first the node drops and says
    /// how many went and why the next did not: `(injected, Some((drop, reason)))`, where
    /// `drop` is the short name ("capsule+nodeos/bandwidth").
    pub fn inject_upto(
        &mut self,
        packet: Vec<u8>,
        count: u32,
    ) -> Result<(u32, Option<(String, String)>), ClientError> {
        let req = Request::Inject {
            packet: packet.into(),
            logs: false,
            count,
            partial: true,
        };
        match self.request(req)? {
            Response::Injected => Ok((count, None)),
            Response::InjectedPart {
                injected,
                reason,
                drop,
            } => Ok((injected, Some((drop, reason)))),
            r => Err(unexpected("inject", &r)),
        }
    }

    /// Claims application `port` under ANEP Type ID `type_id` (for capsules: registers the
    /// port with the capsule EE so code objects may deliver to it).
    pub fn bind_app(&mut self, type_id: u16, port: u16) -> Result<(), ClientError> {
        self.expect_kind("bind_app", Request::BindApp { type_id, port }, |r| {
            matches!(r, Response::Bound { .. })
        })
    }

    /// The node's capsule code cache.
    pub fn code_list(&mut self) -> Result<Vec<CodeEntry>, ClientError> {
        match self.request(Request::CodeList)? {
            Response::CodeList { code } => Ok(code),
            r => Err(unexpected("code_list", &r)),
        }
    }

    /// One code object.
    pub fn code_show(&mut self, hash: &str) -> Result<CodeEntry, ClientError> {
        let req = Request::CodeShow {
            hash: hash.to_string(),
        };
        match self.request(req)? {
            Response::Code(c) => Ok(c),
            r => Err(unexpected("code_show", &r)),
        }
    }

    /// The soft state code object `hash` keeps at the node.
    pub fn code_state(&mut self, hash: &str) -> Result<Vec<crate::StateEntry>, ClientError> {
        let req = Request::CodeState {
            hash: hash.to_string(),
        };
        match self.request(req)? {
            Response::CodeState { entries, .. } => Ok(entries),
            r => Err(unexpected("code_state", &r)),
        }
    }

    /// Installs a WebAssembly module; returns its entry (with its name).
    pub fn code_put(&mut self, wasm: Vec<u8>) -> Result<CodeEntry, ClientError> {
        match self.request(Request::CodePut { wasm: wasm.into() })? {
            Response::Code(c) => Ok(c),
            r => Err(unexpected("code_put", &r)),
        }
    }

    /// Removes a code object; whether it was there.
    pub fn code_evict(&mut self, hash: &str) -> Result<bool, ClientError> {
        let req = Request::CodeEvict {
            hash: hash.to_string(),
        };
        match self.request(req)? {
            Response::Evicted { removed, .. } => Ok(removed),
            r => Err(unexpected("code_evict", &r)),
        }
    }

    /// Asks the node to replace its process by a new one of `binary` (see
    /// [`Request::Upgrade`]); waits up to `timeout` plus a margin for the answer.
    pub fn upgrade(
        &mut self,
        binary: Option<String>,
        timeout: Duration,
    ) -> Result<UpgradeInfo, ClientError> {
        let before = self.read_timeout;
        self.set_timeout(Some(timeout + Duration::from_secs(5)))?;
        let timeout_s = u32::try_from(timeout.as_secs().max(1)).unwrap_or(u32::MAX);
        let r = self.request(Request::Upgrade {
            binary,
            timeout_s: Some(timeout_s),
        });
        self.set_timeout(before)?;
        match r? {
            Response::Upgraded(u) => Ok(u),
            r => Err(unexpected("upgrade", &r)),
        }
    }

    /// Asks the node to stop.
    pub fn shutdown(&mut self) -> Result<(), ClientError> {
        self.expect_kind("shutdown", Request::Shutdown, |r| {
            matches!(r, Response::Done)
        })
    }

    /// The next delivery or event, waiting at most until `deadline` (`None`: the read
    /// timeout set with [`Client::set_timeout`]).
    pub fn next_item(&mut self, deadline: Option<Instant>) -> Result<StreamItem, ClientError> {
        if let Some(i) = self.queued.pop_front() {
            return Ok(i);
        }
        loop {
            match self.read_message(deadline)? {
                ServerMessage::Delivery(d) => return Ok(StreamItem::Delivery(d)),
                ServerMessage::Event(e) => return Ok(StreamItem::Event(e)),
                ServerMessage::Packet(p) => return Ok(StreamItem::Packet(p)),
                ServerMessage::CaptureEnd(e) => return Ok(StreamItem::CaptureEnd(e)),
                ServerMessage::Reply { .. } | ServerMessage::Error { .. } => {}
            }
        }
    }

    /// An iterator over deliveries and events, ending at `deadline` (or never, if `None`
    /// and no read timeout is set) or when the node closes the connection.
    pub fn subscription(&mut self, deadline: Option<Instant>) -> Subscription<'_> {
        Subscription {
            client: self,
            deadline,
            done: false,
        }
    }

    fn expect_kind(
        &mut self,
        op: &'static str,
        req: Request,
        ok: impl Fn(&Response) -> bool,
    ) -> Result<(), ClientError> {
        let r = self.request(req)?;
        if ok(&r) {
            Ok(())
        } else {
            Err(unexpected(op, &r))
        }
    }

    /// Reads lines until one is a message this version knows.
    fn read_message(&mut self, deadline: Option<Instant>) -> Result<ServerMessage, ClientError> {
        loop {
            let line = self.read_line(deadline)?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<ServerMessage>(&line) {
                Ok(m) => return Ok(m),
                Err(source) => {
                    // A stream message of a newer kind: skip. Anything else is an error.
                    let v: Option<serde_json::Value> = serde_json::from_str(&line).ok();
                    let t = v.as_ref().and_then(|v| v.get("type")?.as_str());
                    if matches!(t, Some("delivery" | "event" | "packet" | "capture_end"))
                        || t.is_some_and(is_unknown_type)
                    {
                        continue;
                    }
                    return Err(ClientError::BadMessage { line, source });
                }
            }
        }
    }

    fn read_line(&mut self, deadline: Option<Instant>) -> Result<String, ClientError> {
        loop {
            if let Some(d) = deadline {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(ClientError::Timeout);
                }
                self.reader.get_ref().set_read_timeout(Some(left))?;
            } else {
                // A deadline read before may have left a short timeout on the socket.
                self.reader.get_ref().set_read_timeout(self.read_timeout)?;
            }
            // On a timeout the bytes read so far stay in `self.line` for the next call.
            match self.reader.read_until(b'\n', &mut self.line) {
                Ok(0) => return Err(ClientError::Closed),
                Ok(_) if self.line.last() == Some(&b'\n') => {
                    let line = String::from_utf8_lossy(&self.line).into_owned();
                    self.line.clear();
                    return Ok(line);
                }
                Ok(_) => return Err(ClientError::Closed),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(ClientError::Timeout);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// A control connection: the node's Unix socket, or TCP to a remote node.
#[derive(Debug)]
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }
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

fn is_unknown_type(t: &str) -> bool {
    !matches!(t, "reply" | "error")
}

fn unexpected(request: &'static str, r: &Response) -> ClientError {
    ClientError::Unexpected {
        request,
        got: serde_json::to_string(r).unwrap_or_else(|_| format!("{r:?}")),
    }
}

/// Deliveries and events as an iterator; see [`Client::subscription`].
///
/// Yields `Err(ClientError::Timeout)` once when the deadline passes, then ends; ends after
/// [`ClientError::Closed`] too.
#[derive(Debug)]
pub struct Subscription<'a> {
    client: &'a mut Client,
    deadline: Option<Instant>,
    done: bool,
}

impl Iterator for Subscription<'_> {
    type Item = Result<StreamItem, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.client.next_item(self.deadline);
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }
}
