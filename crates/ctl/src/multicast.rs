//! `anode multicast`: the multicast capsule protocol (`guest/protocols/multicast`, ANTS-style)
//! from the command line. A member joins a group toward the group's root: the join capsule
//! records the member's port at its node and builds the tree hop by hop in soft state (5
//! minutes); data sent at the root is copied down the tree and delivered to every member.
//!
//! Payload (big-endian): `kind u8 (0 join, 1 data) | pad u8 | port u16 | group u32 | data`.
//! Contract: a member re-joins every [`REJOIN`] so the soft state never expires while it
//! listens; every wait is bounded by the caller's deadline and `stop`.

use std::time::{Duration, Instant};

use anode_wire::NodeAddr;

use crate::CapsuleSession;

/// Header bytes before the data.
pub const HDR: usize = 8;
/// How often a listening member refreshes its join (the protocol's soft state lives 5 min).
pub const REJOIN: Duration = Duration::from_secs(60);

fn header(kind: u8, port: u16, group: u32) -> Vec<u8> {
    let mut p = vec![kind, 0];
    p.extend_from_slice(&port.to_be_bytes());
    p.extend_from_slice(&group.to_be_bytes());
    p
}

/// Sends a join for `group` toward `root` from the session's node, for its port.
pub fn join(s: &mut CapsuleSession, root: NodeAddr, group: u32, rb: u16) -> Result<(), String> {
    let p = header(0, s.port(), group);
    s.inject(root, rb, 0, &p)
}

/// Sends `data` to `group` from the session's node, which must be the group's root.
pub fn send(s: &mut CapsuleSession, group: u32, rb: u16, data: &[u8]) -> Result<(), String> {
    let mut p = header(1, 0, group);
    p.extend_from_slice(data);
    s.inject(s.node(), rb, 0, &p)
}

/// Listens as a member of `group` (joined toward `root`) until `count` messages came, the
/// `deadline` passed or `stop` says so; `on` gets each message's data. Returns how many came.
pub fn listen(
    s: &mut CapsuleSession,
    (root, group, rb): (NodeAddr, u32, u16),
    count: Option<u64>,
    deadline: Option<Instant>,
    stop: &dyn Fn() -> bool,
    on: &mut dyn FnMut(&[u8]),
) -> Result<u64, String> {
    let accept = |p: &[u8]| p.len() >= HDR && p.get(4..8) == Some(&group.to_be_bytes()[..]);
    s.listen(
        (count, deadline),
        stop,
        (REJOIN, &mut |s| join(s, root, group, rb)),
        (&accept, HDR),
        on,
    )
}
