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

/// A group as one node holds it (from the protocol's soft state there, `anode code state`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupState {
    /// The group.
    pub group: u32,
    /// The neighbors data is copied to (the tree below this node).
    pub downstream: Vec<NodeAddr>,
    /// The application port of a member at this node, if one joined here.
    pub member_port: Option<u16>,
    /// Milliseconds until the longer-lived of the two entries expires, unless refreshed.
    pub expires_in_ms: u64,
}

/// The groups in the multicast protocol's soft state at one node (keys `d` or `m` + the
/// group, big-endian; values: downstream addresses of 18 bytes each, or a member's port),
/// sorted by group. Entries that do not parse are skipped.
pub fn groups(entries: &[crate::StateEntry]) -> Vec<GroupState> {
    let mut out: std::collections::BTreeMap<u32, GroupState> = Default::default();
    for e in entries {
        let (k, v) = (e.key.as_bytes(), e.value.as_bytes());
        let (Some((&tag, g)), true) = (k.split_first(), k.len() == 5) else {
            continue;
        };
        let Ok(g) = <[u8; 4]>::try_from(g).map(u32::from_be_bytes) else {
            continue;
        };
        let st = out.entry(g).or_insert(GroupState {
            group: g,
            downstream: Vec::new(),
            member_port: None,
            expires_in_ms: 0,
        });
        match tag {
            b'd' => {
                st.downstream = v
                    .chunks_exact(18)
                    .filter_map(|a| NodeAddr::read(a, 0).ok())
                    .collect()
            }
            b'm' if v.len() == 2 => st.member_port = Some(u16::from_be_bytes([v[0], v[1]])),
            _ => continue,
        }
        st.expires_in_ms = st.expires_in_ms.max(e.expires_in_ms);
    }
    out.into_values().collect()
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Payload, StateEntry};

    fn entry(key: &[u8], value: Vec<u8>, ms: u64) -> StateEntry {
        StateEntry {
            key: Payload(key.to_vec()),
            value: Payload(value),
            expires_in_ms: ms,
        }
    }

    #[test]
    fn groups_from_soft_state() {
        let a: NodeAddr = "198.18.0.1:4001".parse().unwrap();
        let b: NodeAddr = "198.18.0.2:4001".parse().unwrap();
        let mut down = a.to_bytes().to_vec();
        down.extend_from_slice(&b.to_bytes());
        down.push(7); // a torn tail is ignored
        let got = groups(&[
            entry(b"d\0\0\0\x07", down, 1000),
            entry(b"m\0\0\0\x07", vec![0, 9], 2000),
            entry(b"m\0\0\0\x08", vec![1, 0], 500),
            entry(b"junk", vec![1], 1),
            entry(b"x\0\0\0\x07", vec![1], 1),
        ]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].group, 7);
        assert_eq!(got[0].downstream, vec![a, b]);
        assert_eq!(got[0].member_port, Some(9));
        assert_eq!(got[0].expires_in_ms, 2000);
        assert_eq!(got[1].member_port, Some(256));
        assert!(got[1].downstream.is_empty());
    }
}
