//! The view's web server: the page at `/`, the latest state at `/state.json`, and every
//! update pushed over a WebSocket at `/ws` (tiny_http for HTTP, tungstenite for the
//! WebSocket framing).
//!
//! Contracts:
//! - Loopback only: a non-loopback listen address is refused ([`ViewError::NotLoopback`]).
//! - The publisher never waits for a browser: [`Hub::publish`] stores the latest state and
//!   wakes the socket threads; a slow browser skips states, it never queues them.
//! - At most [`MAX_SOCKETS`] WebSockets at once (one thread each); more get 503.
//! - Other paths answer 404, other methods 405.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tiny_http::{Header, Method, Request, Response, Server, StatusCode};
use tungstenite::protocol::Role;
use tungstenite::{Message, WebSocket};

use crate::model::ViewState;

/// The page (HTML, CSS and script in one file, no external resources).
const PAGE: &str = include_str!("page.html");
/// WebSockets open at once.
pub const MAX_SOCKETS: usize = 16;
/// How long a socket thread waits for a new state before it checks the connection.
const WAIT: Duration = Duration::from_secs(1);

/// Why the view cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The address is not a loopback one.
    #[error(
        "the view serves loopback only; {0} is not a loopback address (use 127.0.0.1:PORT or [::1]:PORT)"
    )]
    NotLoopback(SocketAddr),
    /// The listener could not be bound.
    #[error("cannot serve the view on {addr}: {reason}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        reason: String,
    },
    /// A server thread could not be started.
    #[error("cannot start the view's thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// The latest state, shared by the publisher and the socket threads.
#[derive(Debug, Default)]
pub struct Hub {
    latest: Mutex<(u64, Arc<String>)>,
    changed: Condvar,
}

impl Hub {
    /// Makes `s` the latest state.
    pub fn publish(&self, s: &ViewState) {
        let json = match serde_json::to_string(s) {
            Ok(j) => j,
            Err(e) => {
                tracing::warn!("view: cannot encode the state: {e}");
                return;
            }
        };
        let mut l = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        l.0 += 1;
        l.1 = Arc::new(json);
        self.changed.notify_all();
    }

    /// The latest state and its generation (0: none yet).
    pub fn latest(&self) -> (u64, Arc<String>) {
        let l = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        (l.0, Arc::clone(&l.1))
    }

    /// Waits (at most `wait`) for a state newer than generation `seen`.
    fn newer(&self, seen: u64, wait: Duration) -> Option<(u64, Arc<String>)> {
        let l = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let (l, _) = self
            .changed
            .wait_timeout_while(l, wait, |l| l.0 <= seen)
            .unwrap_or_else(PoisonError::into_inner);
        (l.0 > seen).then(|| (l.0, Arc::clone(&l.1)))
    }
}

/// A running view server; stops when dropped.
#[derive(Debug)]
pub struct ViewServer {
    addr: SocketAddr,
    hub: Arc<Hub>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ViewServer {
    /// Serves the view on `listen` (loopback; port 0 picks a free one).
    pub fn start(listen: SocketAddr) -> Result<ViewServer, ViewError> {
        if !listen.ip().is_loopback() {
            return Err(ViewError::NotLoopback(listen));
        }
        let server = Server::http(listen).map_err(|e| ViewError::Bind {
            addr: listen,
            reason: e.to_string(),
        })?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| ViewError::Bind {
                addr: listen,
                reason: "not an IP listener".into(),
            })?;
        let hub = Arc::new(Hub::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (Arc::clone(&hub), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("anode-view".into())
            .spawn(move || serve(&server, &h, &s))?;
        Ok(ViewServer {
            addr,
            hub,
            stop,
            thread: Some(thread),
        })
    }

    /// The page's address.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Where states are published.
    pub fn hub(&self) -> Arc<Hub> {
        Arc::clone(&self.hub)
    }
}

impl Drop for ViewServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.hub.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn header(k: &str, v: &str) -> Option<Header> {
    Header::from_bytes(k.as_bytes(), v.as_bytes()).ok()
}

fn with_type(r: Response<std::io::Cursor<Vec<u8>>>, t: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    match header("Content-Type", t) {
        Some(h) => r.with_header(h),
        None => r,
    }
}

fn serve(server: &Server, hub: &Arc<Hub>, stop: &Arc<AtomicBool>) {
    let sockets = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Acquire) {
        let req = match server.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!("view: {e}");
                continue;
            }
        };
        if *req.method() != Method::Get {
            let _ = req.respond(Response::from_string("GET only\n").with_status_code(405));
            continue;
        }
        let path = req.url().split('?').next().unwrap_or("").to_string();
        let r = match path.as_str() {
            "/" | "/index.html" => req.respond(with_type(
                Response::from_string(PAGE),
                "text/html; charset=utf-8",
            )),
            "/state.json" => {
                let (_, json) = hub.latest();
                let body = if json.is_empty() {
                    "{}".to_string()
                } else {
                    json.to_string()
                };
                req.respond(with_type(Response::from_string(body), "application/json"))
            }
            "/ws" => {
                websocket(req, hub, stop, &sockets);
                Ok(())
            }
            _ => req.respond(Response::from_string("not found\n").with_status_code(404)),
        };
        if let Err(e) = r {
            tracing::debug!("view: answering failed: {e}");
        }
    }
}

/// Upgrades `req` to a WebSocket and streams states to it on a thread of its own.
fn websocket(req: Request, hub: &Arc<Hub>, stop: &Arc<AtomicBool>, sockets: &Arc<AtomicUsize>) {
    let key = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Sec-WebSocket-Key"))
        .map(|h| h.value.as_str().to_string());
    let Some(key) = key else {
        let _ = req.respond(
            Response::from_string("a WebSocket upgrade was expected\n").with_status_code(400),
        );
        return;
    };
    if sockets.fetch_add(1, Ordering::AcqRel) >= MAX_SOCKETS {
        sockets.fetch_sub(1, Ordering::AcqRel);
        let _ = req.respond(Response::from_string("too many views open\n").with_status_code(503));
        return;
    }
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut resp = Response::empty(StatusCode(101));
    if let Some(h) = header("Sec-WebSocket-Accept", &accept) {
        resp = resp.with_header(h);
    }
    let stream = req.upgrade("websocket", resp);
    let (hub, stop, count) = (Arc::clone(hub), Arc::clone(stop), Arc::clone(sockets));
    let spawned = std::thread::Builder::new()
        .name("anode-view-ws".into())
        .spawn(move || {
            let mut ws = WebSocket::from_raw_socket(stream, Role::Server, None);
            push_states(&mut ws, &hub, &stop);
            let _ = ws.close(None);
            let _ = ws.flush();
            count.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        sockets.fetch_sub(1, Ordering::AcqRel);
    }
}

fn push_states<S: std::io::Read + std::io::Write>(
    ws: &mut WebSocket<S>,
    hub: &Hub,
    stop: &AtomicBool,
) {
    let mut seen = 0;
    while !stop.load(Ordering::Acquire) {
        let msg = match hub.newer(seen, WAIT) {
            Some((g, json)) => {
                seen = g;
                Message::text(json.as_str())
            }
            // Nothing new: a ping finds out whether the browser is still there.
            None => Message::Ping(Vec::new().into()),
        };
        if ws.send(msg).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, req: &str) -> String {
        anode_testkit::http::exchange(addr, req)
    }

    #[test]
    fn serves_loopback_only_and_answers_each_path() {
        let err = ViewServer::start("0.0.0.0:0".parse().unwrap()).unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
        let v = ViewServer::start("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = v.addr;
        let page = get(addr, "GET / HTTP/1.0\r\n\r\n");
        assert!(page.starts_with("HTTP/1.0 200") && page.contains("new WebSocket"));
        assert!(get(addr, "GET /state.json HTTP/1.0\r\n\r\n").ends_with("{}"));
        assert!(get(addr, "GET /x HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
        assert!(get(addr, "POST / HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 405"));
        assert!(get(addr, "GET /ws HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 400"));
    }

    #[test]
    fn a_waiting_socket_sees_only_newer_states() {
        let hub = Hub::default();
        assert!(hub.newer(0, Duration::from_millis(10)).is_none());
        let s = crate::RateTracker::new().from_emulation(
            "t",
            &anode_emu::NetSnapshot {
                now: Duration::ZERO,
                events: 0,
                done: false,
                nodes: vec![],
                links: vec![],
            },
        );
        hub.publish(&s);
        let (g, json) = hub.newer(0, Duration::from_millis(10)).unwrap();
        assert_eq!(g, 1);
        assert!(json.contains("\"source\":\"emulation\""));
        assert!(hub.newer(1, Duration::from_millis(10)).is_none());
    }
}
