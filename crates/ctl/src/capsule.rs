//! [`CapsuleSession`]: an application's capsule protocol through a running node (PAN's
//! application library): the code object is put into the node's code cache (the node is the
//! code source for the first hop; every later node demand-loads it from its previous hop), an
//! application port is bound for the replies the code delivers, capsules are injected, and
//! deliveries to the port are read with a deadline.
//!
//! Contract: every wait is bounded by the caller's deadline; deliveries to other ports are
//! skipped; the session's port is freed when the connection closes.

use std::time::{Duration, Instant};

use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_CAPSULE;
use sha2::{Digest, Sha256};

use crate::app::parse_code_name;
use crate::{Client, ClientError, ErrorCode, StreamItem};

/// Application ports a session tries, from a base derived from the process id.
const PORT_TRIES: u16 = 64;

/// What [`CapsuleSession::listen`] calls to keep a registration alive.
pub type Refresh<'a> = &'a mut dyn FnMut(&mut CapsuleSession) -> Result<(), String>;
/// Which deliveries [`CapsuleSession::listen`] takes.
pub type Accept<'a> = &'a dyn Fn(&[u8]) -> bool;

/// A capsule protocol running from one node; see the module docs.
#[derive(Debug)]
pub struct CapsuleSession {
    client: Client,
    node: NodeAddr,
    code: [u8; 32],
    port: u16,
    code_was_cached: bool,
}

pub use anode_wire::capsule::capsule_packet;

impl Drop for CapsuleSession {
    /// Frees the session's port at once (closing the connection frees it too, but the node
    /// notices a moment later, and a session opened right after on the same port would find
    /// it taken). Bounded: at most a second.
    fn drop(&mut self) {
        let _ = self.client.set_timeout(Some(Duration::from_secs(1)));
        let _ = self.client.unbind(self.port);
    }
}

/// The code a session's capsules name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionCode<'a> {
    /// A WebAssembly module, put into the node's code cache when the session opens.
    Wasm(&'a [u8]),
    /// A code object the node already has (by its SHA-256).
    Cached([u8; 32]),
}

impl CapsuleSession {
    /// Puts `wasm` into the node's code cache and binds a free capsule application port.
    pub fn open(client: Client, wasm: &[u8]) -> Result<CapsuleSession, String> {
        Self::open_with(client, SessionCode::Wasm(wasm), None)
    }

    /// A session for `code`, on application port `port` (`None`: a free one).
    pub fn open_with(
        mut client: Client,
        code: SessionCode<'_>,
        port: Option<u16>,
    ) -> Result<CapsuleSession, String> {
        let node = client.node_info().node;
        let (code, code_was_cached) = match code {
            SessionCode::Wasm(wasm) => {
                let name = crate::app::code_name(&Sha256::digest(wasm).into());
                let cached = client.code_show(&name).is_ok();
                let e = client.code_put(wasm.to_vec()).map_err(|e| e.to_string())?;
                (parse_code_name(&e.hash).map_err(|e| e.to_string())?, cached)
            }
            SessionCode::Cached(hash) => {
                let name = crate::app::code_name(&hash);
                client.code_show(&name).map_err(|e| match e {
                    ClientError::Refused { .. } => format!(
                        "node {node} does not have code {name}; give the .wasm file instead, or put it there with `anode code put FILE.wasm`"
                    ),
                    e => e.to_string(),
                })?;
                (hash, true)
            }
        };
        let base = 40_000 + (std::process::id() % 20_000) as u16;
        let tries = if port.is_some() { 1 } else { PORT_TRIES };
        for i in 0..tries {
            let p = port.unwrap_or_else(|| base.wrapping_add(i).max(1024));
            match client.bind_app(TYPE_CAPSULE, p) {
                Ok(()) => {
                    return Ok(CapsuleSession {
                        client,
                        node,
                        code,
                        port: p,
                        code_was_cached,
                    });
                }
                Err(ClientError::Refused {
                    code: ErrorCode::PortInUse,
                    ..
                }) if port.is_none() => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
        Err(format!(
            "no free application port found ({PORT_TRIES} tried)"
        ))
    }

    /// The node the session runs from.
    pub fn node(&self) -> NodeAddr {
        self.node
    }

    /// The code object's name.
    pub fn code(&self) -> [u8; 32] {
        self.code
    }

    /// Whether the node already had the code object when the session opened.
    pub fn code_was_cached(&self) -> bool {
        self.code_was_cached
    }

    /// The application port replies are delivered to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Injects a capsule of the session's code toward `dst`.
    pub fn inject(
        &mut self,
        dst: NodeAddr,
        rb: u16,
        flow: u64,
        payload: &[u8],
    ) -> Result<(), String> {
        let pkt = capsule_packet(self.code, self.node, dst, rb, flow, payload)
            .map_err(|e| e.to_string())?;
        self.client.inject(pkt, false).map_err(|e| e.to_string())
    }

    /// Injects `count` copies of one capsule toward `dst` in one control request.
    pub fn inject_many(
        &mut self,
        dst: NodeAddr,
        rb: u16,
        flow: u64,
        payload: &[u8],
        count: u32,
    ) -> Result<(), String> {
        let pkt = capsule_packet(self.code, self.node, dst, rb, flow, payload)
            .map_err(|e| e.to_string())?;
        self.client
            .inject_many(pkt, false, count)
            .map_err(|e| e.to_string())
    }

    /// Injects up to `count` copies of one capsule toward `dst`, stopping at the first the
    /// node drops: how many went, and the drop's short name and reason if one was dropped.
    pub fn inject_upto(
        &mut self,
        dst: NodeAddr,
        (rb, flow): (u16, u64),
        payload: &[u8],
        count: u32,
    ) -> Result<(u32, Option<(String, String)>), String> {
        let pkt = capsule_packet(self.code, self.node, dst, rb, flow, payload)
            .map_err(|e| e.to_string())?;
        self.client
            .inject_upto(pkt, count)
            .map_err(|e| e.to_string())
    }

    /// A long-lived listener's loop (multicast members, portmapper services): until `count`
    /// deliveries were taken, the `deadline` passed or `stop` says so, calls `refresh` every
    /// `every` (to keep soft state alive) and hands `on` the bytes after the first `skip` of
    /// each delivery `accept` takes. Returns how many were taken.
    pub fn listen(
        &mut self,
        (count, deadline): (Option<u64>, Option<Instant>),
        stop: &dyn Fn() -> bool,
        (every, refresh): (Duration, Refresh<'_>),
        (accept, skip): (Accept<'_>, usize),
        on: &mut dyn FnMut(&[u8]),
    ) -> Result<u64, String> {
        let mut got = 0;
        let mut next_refresh = Instant::now() + every;
        while !stop() && count.is_none_or(|c| got < c) {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            if now >= next_refresh {
                refresh(self)?;
                next_refresh = now + every;
            }
            let tick = now + Duration::from_millis(200);
            let until = deadline.map_or(tick, |d| d.min(tick));
            if let Some(p) = self.next(until)?
                && accept(&p)
            {
                got += 1;
                on(p.get(skip..).unwrap_or_default());
            }
        }
        Ok(got)
    }

    /// A delivery that is already here, if any.
    pub fn poll(&mut self) -> Result<Option<Vec<u8>>, String> {
        self.next(Instant::now() + Duration::from_millis(1))
    }

    /// The next delivery to the session's port before `deadline` (`None`: timed out).
    pub fn next(&mut self, deadline: Instant) -> Result<Option<Vec<u8>>, String> {
        loop {
            match self.client.next_item(Some(deadline)) {
                Ok(StreamItem::Delivery(d)) if d.port == self.port => {
                    return Ok(Some(d.payload.as_bytes().to_vec()));
                }
                Ok(_) => {}
                Err(ClientError::Timeout) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}
