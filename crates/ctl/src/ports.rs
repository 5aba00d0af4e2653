//! `anode ports`: the portmapper capsule protocol (`guest/protocols/portmap`, PAN's PAL) from
//! the command line. An application registers a *service number* at its node for its own
//! port (the registration is acknowledged to that port, which proves it holds it); capsules
//! sent to the service at that node are delivered to the port.
//!
//! Payload (big-endian): `op u8 | status u8 | service u16 | port u16 | pad u16 | ttl_ms u32 |
//! data` (12 header bytes); ops 1 register, 2 unregister, 3 send; status 1 registered, 2 taken.
//! Contract: a registration is refreshed every [`REFRESH`] while the holder listens (the
//! protocol's soft state lives 10 minutes); every wait is bounded.

use std::time::{Duration, Instant};

use anode_wire::NodeAddr;

use crate::CapsuleSession;

/// Header bytes before the data.
pub const HDR: usize = 12;
/// How often a listening holder refreshes its registration.
pub const REFRESH: Duration = Duration::from_secs(300);
const REGISTER: u8 = 1;
const UNREGISTER: u8 = 2;
const SEND: u8 = 3;

fn header(op: u8, service: u16, port: u16) -> Vec<u8> {
    let mut p = vec![op, 0];
    p.extend_from_slice(&service.to_be_bytes());
    p.extend_from_slice(&port.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    p
}

/// Why a registration did not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortsError {
    /// Another application holds the service.
    #[error("service {0} is held by another application at this node")]
    Taken(u16),
    /// No acknowledgement came.
    #[error("no acknowledgement for service {0} within {1:?}")]
    NoAck(u16, Duration),
    /// The node or the control connection failed.
    #[error("{0}")]
    Session(String),
}

/// Registers `service` for the session's port at its node and waits (at most `wait`) for
/// the acknowledgement.
pub fn register(s: &mut CapsuleSession, service: u16, wait: Duration) -> Result<(), PortsError> {
    let (node, port) = (s.node(), s.port());
    s.inject(node, 1, 0, &header(REGISTER, service, port))
        .map_err(PortsError::Session)?;
    let deadline = Instant::now() + wait;
    while let Some(p) = s.next(deadline).map_err(PortsError::Session)? {
        if p.first() == Some(&REGISTER) && p.get(2..4) == Some(&service.to_be_bytes()[..]) {
            return match p.get(1) {
                Some(1) => Ok(()),
                _ => Err(PortsError::Taken(service)),
            };
        }
    }
    Err(PortsError::NoAck(service, wait))
}

/// Gives `service` up (held by the session's port).
pub fn unregister(s: &mut CapsuleSession, service: u16) -> Result<(), String> {
    let (node, port) = (s.node(), s.port());
    s.inject(node, 1, 0, &header(UNREGISTER, service, port))
}

/// Sends `data` to `service` at `dest`.
pub fn send(
    s: &mut CapsuleSession,
    dest: NodeAddr,
    service: u16,
    rb: u16,
    data: &[u8],
) -> Result<(), String> {
    let mut p = header(SEND, service, 0);
    p.extend_from_slice(data);
    s.inject(dest, rb, 0, &p)
}

/// Receives what is sent to `service` (registered by this session) until `count` messages,
/// the `deadline` or `stop`; `on` gets each message's data. Returns how many came.
pub fn listen(
    s: &mut CapsuleSession,
    service: u16,
    (count, deadline): (Option<u64>, Option<Instant>),
    stop: &dyn Fn() -> bool,
    on: &mut dyn FnMut(&[u8]),
) -> Result<u64, String> {
    let accept =
        |p: &[u8]| p.first() == Some(&SEND) && p.get(2..4) == Some(&service.to_be_bytes()[..]);
    let mut refresh = |s: &mut CapsuleSession| {
        register(s, service, Duration::from_secs(5)).map_err(|e| e.to_string())
    };
    s.listen(
        (count, deadline),
        stop,
        (REFRESH, &mut refresh),
        (&accept, HDR),
        on,
    )
}
