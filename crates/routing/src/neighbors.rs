//! Neighbor discovery: hellos on every link, a dead interval per neighbor.
//!
//! State per link: the neighbor heard on it (links are point to point), when it was last
//! heard, and whether the link works both ways (our address is in its hello's `seen` list).
//! Transitions produce [`NeighborEvent`]s that the node feeds to the distance-vector service.

use std::time::{Duration, Instant};

use anode_wire::NodeAddr;
use anode_wire::control::Hello;

use crate::LinkId;
use crate::handover::NeighborRecord;

/// A change of a neighbor's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighborEvent {
    /// Hellos flow both ways on `link` with `addr`.
    Up {
        /// The link.
        link: LinkId,
        /// The neighbor.
        addr: NodeAddr,
    },
    /// The neighbor went silent for its dead interval, or the link was taken down.
    Down {
        /// The link.
        link: LinkId,
        /// The neighbor.
        addr: NodeAddr,
    },
}

/// What we know of the node at the other end of one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbor {
    /// Its node address (from its hellos).
    pub addr: NodeAddr,
    /// When its last hello arrived.
    pub last_heard: Instant,
    /// Its dead interval for us (from its hello, or ours if it sent none).
    pub dead: Duration,
    /// True once it lists us as seen: the link works both ways.
    pub two_way: bool,
}

#[derive(Debug)]
struct LinkState {
    enabled: bool,
    /// A statically configured neighbor: up without hellos, never expires.
    pinned: Option<NodeAddr>,
    next_hello: Instant,
    neighbor: Option<Neighbor>,
}

/// Hello scheduling and neighbor liveness for all links of a node.
#[derive(Debug)]
pub struct NeighborTable {
    me: NodeAddr,
    hello: Duration,
    dead: Duration,
    seq: u32,
    links: Vec<LinkState>,
}

impl NeighborTable {
    /// A table for node `me` with the given intervals.
    pub fn new(me: NodeAddr, hello: Duration, dead: Duration) -> Self {
        NeighborTable {
            me,
            hello,
            dead,
            seq: 0,
            links: Vec::new(),
        }
    }

    /// Adds a link; its first hello is due at `now`.
    pub fn add_link(&mut self, now: Instant) -> LinkId {
        self.links.push(LinkState {
            enabled: true,
            pinned: None,
            next_hello: now,
            neighbor: None,
        });
        LinkId(self.links.len() as u32 - 1)
    }

    /// Pins `addr` as the neighbor on `link`: up at once, without hellos, never expiring
    /// while the link is enabled.
    pub fn pin(&mut self, link: LinkId, addr: NodeAddr, now: Instant) -> Option<NeighborEvent> {
        let st = self.links.get_mut(link.0 as usize)?;
        st.pinned = Some(addr);
        st.neighbor = Some(Neighbor {
            addr,
            last_heard: now,
            dead: Duration::MAX,
            two_way: true,
        });
        st.enabled.then_some(NeighborEvent::Up { link, addr })
    }

    /// Enables or disables a link (administrative or carrier state). Disabling drops its
    /// neighbor at once.
    pub fn set_enabled(
        &mut self,
        link: LinkId,
        enabled: bool,
        now: Instant,
    ) -> Option<NeighborEvent> {
        let st = self.links.get_mut(link.0 as usize)?;
        st.enabled = enabled;
        st.next_hello = now;
        if enabled && let Some(addr) = st.pinned {
            st.neighbor = Some(Neighbor {
                addr,
                last_heard: now,
                dead: Duration::MAX,
                two_way: true,
            });
            return Some(NeighborEvent::Up { link, addr });
        }
        if !enabled {
            let n = st.neighbor.take()?;
            return n
                .two_way
                .then_some(NeighborEvent::Down { link, addr: n.addr });
        }
        None
    }

    /// True if the link is enabled.
    pub fn is_enabled(&self, link: LinkId) -> bool {
        self.links.get(link.0 as usize).is_some_and(|l| l.enabled)
    }

    /// The up (two-way) neighbor on a link.
    pub fn neighbor(&self, link: LinkId) -> Option<&Neighbor> {
        self.links
            .get(link.0 as usize)
            .and_then(|l| l.neighbor.as_ref())
            .filter(|n| n.two_way)
    }

    /// All up neighbors.
    pub fn up(&self) -> impl Iterator<Item = (LinkId, &Neighbor)> {
        self.links.iter().enumerate().filter_map(|(i, l)| {
            l.neighbor
                .as_ref()
                .filter(|n| n.two_way && l.enabled)
                .map(|n| (LinkId(i as u32), n))
        })
    }

    /// The up neighbors as [`NeighborRecord`]s, pinned ones left out (the configuration
    /// pins them again).
    pub fn export(&self, now: Instant) -> Vec<NeighborRecord> {
        self.links
            .iter()
            .enumerate()
            .filter(|(_, l)| l.enabled && l.pinned.is_none())
            .filter_map(|(i, l)| {
                let n = l.neighbor.filter(|n| n.two_way)?;
                Some(NeighborRecord {
                    link: i as u32,
                    addr: n.addr,
                    heard_ms_ago: u64::try_from(
                        now.saturating_duration_since(n.last_heard).as_millis(),
                    )
                    .unwrap_or(u64::MAX),
                    dead_ms: u64::try_from(n.dead.as_millis()).unwrap_or(u64::MAX),
                })
            })
            .collect()
    }

    /// Restores a neighbor another process exported: up at once on its link (an enabled
    /// link of this table with no pinned neighbor), heard as long ago as it was there.
    /// Returns the link, or `None` when the record does not fit.
    pub fn restore(&mut self, now: Instant, rec: &NeighborRecord) -> Option<LinkId> {
        let st = self.links.get_mut(rec.link as usize)?;
        if !st.enabled || st.pinned.is_some() || rec.dead_ms == 0 {
            return None;
        }
        let dead = Duration::from_millis(rec.dead_ms.min(86_400_000));
        let ago = Duration::from_millis(rec.heard_ms_ago).min(dead);
        st.neighbor = Some(Neighbor {
            addr: rec.addr,
            last_heard: now.checked_sub(ago).unwrap_or(now),
            dead,
            two_way: true,
        });
        Some(LinkId(rec.link))
    }

    /// Handles a hello that arrived on `link`.
    pub fn on_hello(&mut self, now: Instant, link: LinkId, h: &Hello) -> Option<NeighborEvent> {
        let own_dead = self.dead;
        let me = self.me;
        let st = self.links.get_mut(link.0 as usize)?;
        if !st.enabled || st.pinned.is_some() {
            return None;
        }
        let two_way = h.seen.contains(&me);
        let dead = if h.dead_ms == 0 {
            own_dead
        } else {
            Duration::from_millis(u64::from(h.dead_ms))
        };
        let prev = st.neighbor.replace(Neighbor {
            addr: h.sender,
            last_heard: now,
            dead,
            two_way,
        });
        let mut ev = None;
        match prev {
            Some(p) if p.addr != h.sender && p.two_way => {
                // A different node answers on this link: the old one is gone.
                ev = Some(NeighborEvent::Down { link, addr: p.addr });
                if two_way {
                    // The caller sees Down now and Up on the next hello.
                    if let Some(n) = st.neighbor.as_mut() {
                        n.two_way = false;
                    }
                }
            }
            Some(p) if p.two_way && !two_way => {
                ev = Some(NeighborEvent::Down { link, addr: p.addr });
            }
            Some(p) if p.two_way => {}
            _ if two_way => {
                ev = Some(NeighborEvent::Up {
                    link,
                    addr: h.sender,
                });
                // Answer at once so the neighbor sees two-way quickly too.
                st.next_hello = now;
            }
            _ => {
                // First hello from it: answer at once so it learns we hear it.
                st.next_hello = now;
            }
        }
        ev
    }

    /// Any packet that arrived on `link` from the neighbor there: it is alive, so its dead
    /// interval restarts (as BGP's hold timer restarts on any UPDATE, not only KEEPALIVE).
    /// Under a flood, hellos wait in the same receive queue as data or are dropped from it
    /// with data; a neighbor whose traffic keeps arriving must not be declared dead for it.
    /// Creates no neighbor and changes no two-way state: only hellos do that.
    pub fn heard(&mut self, now: Instant, link: LinkId) {
        if let Some(n) = self
            .links
            .get_mut(link.0 as usize)
            .and_then(|st| st.neighbor.as_mut())
            && n.last_heard < now
        {
            n.last_heard = now;
        }
    }

    /// Expires silent neighbors.
    pub fn handle_timeout(&mut self, now: Instant, events: &mut Vec<NeighborEvent>) {
        for (i, st) in self.links.iter_mut().enumerate() {
            if let Some(n) = st.neighbor
                && st.pinned.is_none()
                && now.saturating_duration_since(n.last_heard) >= n.dead
            {
                st.neighbor = None;
                if n.two_way {
                    events.push(NeighborEvent::Down {
                        link: LinkId(i as u32),
                        addr: n.addr,
                    });
                }
            }
        }
    }

    /// Hellos due now: (link, message). Reschedules them.
    pub fn poll_hellos(&mut self, now: Instant, out: &mut Vec<(LinkId, Hello)>) {
        for (i, st) in self.links.iter_mut().enumerate() {
            if !st.enabled || st.next_hello > now {
                continue;
            }
            st.next_hello = now + self.hello;
            self.seq = self.seq.wrapping_add(1);
            out.push((
                LinkId(i as u32),
                Hello {
                    sender: self.me,
                    hello_ms: self.hello.as_millis() as u32,
                    dead_ms: self.dead.as_millis() as u32,
                    seq: self.seq,
                    seen: st.neighbor.iter().map(|n| n.addr).collect(),
                },
            ));
        }
    }

    /// The earliest deadline: next hello or a neighbor's expiry.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.links
            .iter()
            .filter(|l| l.enabled)
            .flat_map(|l| {
                let expiry = l.neighbor.and_then(|n| n.last_heard.checked_add(n.dead));
                std::iter::once(l.next_hello).chain(expiry)
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_wire::addr::v4;

    fn pair() -> (NeighborTable, NeighborTable, Instant) {
        let now = Instant::now();
        let mut a = NeighborTable::new(
            v4(198, 18, 0, 1, 1),
            Duration::from_secs(1),
            Duration::from_secs(3),
        );
        let mut b = NeighborTable::new(
            v4(198, 18, 0, 2, 1),
            Duration::from_secs(1),
            Duration::from_secs(3),
        );
        a.add_link(now);
        b.add_link(now);
        (a, b, now)
    }

    #[test]
    fn traffic_keeps_a_neighbor_alive_without_hellos() {
        let (mut a, mut b, now) = pair();
        let mut out = Vec::new();
        a.poll_hellos(now, &mut out);
        let (_, h) = out.pop().unwrap();
        b.on_hello(now, LinkId(0), &h);
        b.poll_hellos(now, &mut out);
        let (_, hb) = out.pop().unwrap();
        assert!(a.on_hello(now, LinkId(0), &hb).is_some());
        // Four seconds of data from b (dead interval 3 s), no hello: a keeps b up.
        for ms in (500..=4000).step_by(500) {
            a.heard(now + Duration::from_millis(ms), LinkId(0));
        }
        let mut ev = Vec::new();
        a.handle_timeout(now + Duration::from_millis(4500), &mut ev);
        assert!(ev.is_empty(), "{ev:?}");
        // Then silence for the dead interval: down.
        a.handle_timeout(now + Duration::from_millis(7000), &mut ev);
        assert_eq!(
            ev,
            vec![NeighborEvent::Down {
                link: LinkId(0),
                addr: b.me
            }]
        );
        // A packet on a link with no neighbor creates none.
        a.heard(now + Duration::from_secs(8), LinkId(0));
        assert!(a.neighbor(LinkId(0)).is_none());
    }

    #[test]
    fn two_way_then_dead() {
        let (mut a, mut b, now) = pair();
        let mut out = Vec::new();
        a.poll_hellos(now, &mut out);
        let (_, h) = out.pop().unwrap();
        assert!(h.seen.is_empty());
        // b hears a: one-way, no event, answers at once listing a.
        assert_eq!(b.on_hello(now, LinkId(0), &h), None);
        b.poll_hellos(now, &mut out);
        let (_, hb) = out.pop().unwrap();
        assert_eq!(hb.seen, vec![a.me]);
        // a hears b listing a: up.
        assert_eq!(
            a.on_hello(now, LinkId(0), &hb),
            Some(NeighborEvent::Up {
                link: LinkId(0),
                addr: b.me
            })
        );
        // a answers at once; b goes up too.
        a.poll_hellos(now, &mut out);
        let (_, ha) = out.pop().unwrap();
        assert!(matches!(
            b.on_hello(now, LinkId(0), &ha),
            Some(NeighborEvent::Up { .. })
        ));
        assert_eq!(a.up().count(), 1);
        // Silence for the dead interval: down.
        let mut ev = Vec::new();
        a.handle_timeout(now + Duration::from_millis(2999), &mut ev);
        assert!(ev.is_empty());
        a.handle_timeout(now + Duration::from_secs(3), &mut ev);
        assert_eq!(
            ev,
            vec![NeighborEvent::Down {
                link: LinkId(0),
                addr: b.me
            }]
        );
        assert_eq!(a.up().count(), 0);
    }

    #[test]
    fn disabling_a_link_drops_its_neighbor() {
        let (mut a, _b, now) = pair();
        let h = Hello {
            sender: v4(198, 18, 0, 2, 1),
            hello_ms: 1000,
            dead_ms: 3000,
            seq: 1,
            seen: vec![a.me],
        };
        assert!(a.on_hello(now, LinkId(0), &h).is_some());
        assert!(matches!(
            a.set_enabled(LinkId(0), false, now),
            Some(NeighborEvent::Down { .. })
        ));
        assert_eq!(a.on_hello(now, LinkId(0), &h), None);
        let mut out = Vec::new();
        a.poll_hellos(now, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn hello_on_unknown_link_is_ignored() {
        let (mut a, _b, now) = pair();
        let h = Hello {
            sender: v4(1, 1, 1, 1, 1),
            hello_ms: 1,
            dead_ms: 1,
            seq: 1,
            seen: vec![],
        };
        assert_eq!(a.on_hello(now, LinkId(7), &h), None);
    }
}
