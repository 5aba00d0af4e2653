//! `capture`: streams copies of the node's datagrams to a connection (`anode capture`).
//!
//! Contracts:
//! - The reply ([`Response::Capturing`]) is queued before the first packet: the capture's
//!   thread starts after the worker queued the reply (`ConnState::after_reply`).
//! - One thread per capture, at most [`MAX_CAPTURES`] at once in a node; a capture ends
//!   at its count, its time, when its connection closes or the server stops, or when the
//!   node's data path is gone; then one [`ServerMessage::CaptureEnd`] (a reply: never
//!   dropped) tells the client how many packets it got and how many it missed.
//! - A capture never slows the node down: packets the capture cannot take (its queue in
//!   the driver, or the connection's queue) are dropped from the capture and counted.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant, UNIX_EPOCH};

use anode_ctl::{CaptureEndInfo, ErrorCode, PacketInfo, Payload, Response, ServerMessage};
use anode_io::{CaptureSpec, Direction};
use anode_wire::NodeAddr;

use super::call;
use super::handlers::{ConnState, Failure};
use super::state::{ConnId, Shared};

/// Captures running at once in one node.
pub(super) const MAX_CAPTURES: usize = 4;
/// How often a capture with nothing to read looks at its connection and deadline.
const TICK: Duration = Duration::from_millis(100);

/// Starts a capture for connection `st.id`.
pub(super) fn start(
    shared: &Shared,
    st: &mut ConnState,
    link: Option<String>,
    count: Option<u64>,
    millis: Option<u64>,
) -> Result<Response, Failure> {
    let (node, peer) = match link {
        None => (call(&*shared.driver, |n, _| n.address())?, None),
        Some(l) => {
            let (node, peer) = call(&*shared.driver, move |n, _| (n.address(), find_link(n, &l)))?;
            (node, Some(peer?))
        }
    };
    let Some(me) = shared.me.upgrade() else {
        return Err((ErrorCode::NodeGone, "the control server is stopping".into()));
    };
    if !shared.begin_capture(st.id, MAX_CAPTURES) {
        return Err((
            ErrorCode::Busy,
            format!("{MAX_CAPTURES} captures are running on this node; stop one first"),
        ));
    }
    let spec = CaptureSpec {
        peer,
        ..CaptureSpec::default()
    };
    let cap = match shared.driver.capture(spec) {
        Ok(c) => c,
        Err(why) => {
            shared.end_capture(st.id);
            return Err((ErrorCode::Unsupported, why));
        }
    };
    let id = st.id;
    let limits = Limits {
        count,
        deadline: millis.map(|m| Instant::now() + Duration::from_millis(m)),
    };
    st.after_reply = Some(Box::new(move || {
        let spawned = std::thread::Builder::new()
            .name("anode-ctl-capture".into())
            .spawn({
                let me = Arc::clone(&me);
                move || run(&me, id, &cap, limits)
            });
        if spawned.is_err() {
            me.end_capture(id);
            let end = end_message(0, 0, "the node could not start a capture thread");
            me.reply(id, &end);
        }
    }));
    tracing::info!(conn = id, ?peer, ?count, ?millis, "packet capture started");
    Ok(Response::Capturing { node, peer })
}

/// The peer of the link named `l` (its name, index or peer address).
fn find_link(n: &anode_core::Node, l: &str) -> Result<NodeAddr, Failure> {
    let by_addr: Option<NodeAddr> = l.parse().ok();
    let id = super::convert::link_named(n, l);
    n.links()
        .find(|(i, cfg, _)| Some(*i) == id || by_addr == Some(cfg.peer))
        .map(|(_, cfg, _)| cfg.peer)
        .ok_or_else(|| super::convert::no_such_link(n, l))
}

#[derive(Debug, Clone, Copy)]
struct Limits {
    count: Option<u64>,
    deadline: Option<Instant>,
}

fn end_message(packets: u64, dropped: u64, reason: &str) -> ServerMessage {
    ServerMessage::CaptureEnd(CaptureEndInfo {
        packets,
        dropped,
        reason: reason.into(),
    })
}

/// The capture's thread: driver tap -> connection, until a limit or the end.
fn run(shared: &Shared, id: ConnId, cap: &anode_io::Capture, lim: Limits) {
    let (mut packets, mut behind) = (0u64, 0u64);
    let reason = loop {
        if shared.stopping.load(Ordering::Acquire) || !shared.has_conn(id) {
            break None;
        }
        if lim.count.is_some_and(|c| packets >= c) {
            break Some("count");
        }
        let wait = match lim.deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break Some("time");
                }
                left.min(TICK)
            }
            None => TICK,
        };
        match cap.next(wait) {
            Ok(p) => {
                let ts_ns =
                    p.at.duration_since(UNIX_EPOCH)
                        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
                let msg = ServerMessage::Packet(PacketInfo {
                    ts_ns,
                    out: p.dir == Direction::Out,
                    peer: NodeAddr::from(p.peer),
                    data: Payload(p.data),
                });
                if shared.stream_to(id, &msg) {
                    packets += 1;
                } else {
                    behind += 1;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break Some("node stopped"),
        }
    };
    shared.end_capture(id);
    let dropped = cap.dropped() + behind;
    tracing::info!(conn = id, packets, dropped, "packet capture ended");
    if let Some(r) = reason {
        shared.reply(id, &end_message(packets, dropped, r));
    }
}
