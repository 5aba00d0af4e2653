//! What the page shows: one [`ViewState`] per update, as JSON. Built from an emulator
//! snapshot ([`RateTracker::from_emulation`]) or from a running node's control answers
//! ([`RateTracker::from_node`]); rates come from the difference with the previous update.

use std::collections::HashMap;
use std::time::Duration;

use anode_ctl::{CodeEntry, DomainsInfo, RouteInfo, StatusInfo};
use anode_emu::NetSnapshot;
use serde::Serialize;

/// One update of the page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ViewState {
    /// What is shown (the topology file, or the node's address).
    pub title: String,
    /// "emulation" or "node".
    pub source: &'static str,
    /// "virtual" (emulation time) or "wall".
    pub clock: &'static str,
    /// Seconds on that clock since the start.
    pub time_s: f64,
    /// Events processed (emulation).
    pub events: Option<u64>,
    /// The emulation is over (the page keeps its last state).
    pub done: bool,
    /// Update number, from 1.
    pub seq: u64,
    /// Graph nodes.
    pub nodes: Vec<ViewNode>,
    /// Graph edges.
    pub links: Vec<ViewLink>,
    /// Routing tables: (node, destination, next hop, metric).
    pub routes: Vec<(String, String, String, u16)>,
    /// NodeOS domains (a running node).
    pub domains: Vec<DomainsInfo>,
    /// The capsule code cache (a running node).
    pub code: Vec<CodeEntry>,
    /// What the view cannot show in this mode.
    pub note: String,
}

/// A node of the graph.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ViewNode {
    /// Its name (topology name, link name, or address).
    pub name: String,
    /// Its address.
    pub address: String,
    /// "node" (full state known), "neighbor" or "remote" (seen from a running node).
    pub role: &'static str,
    /// Up (a neighbor heard from, a remote with a route).
    pub up: bool,
    /// Neighbors up.
    pub neighbors: Option<usize>,
    /// Reachable destinations.
    pub routes: Option<usize>,
    /// Packets received / sent / dropped / delivered (cumulative).
    pub rx_packets: Option<u64>,
    /// Packets sent.
    pub tx_packets: Option<u64>,
    /// Packets dropped.
    pub drops: Option<u64>,
    /// Packets delivered to local applications.
    pub delivered: Option<u64>,
    /// Packets received per second since the last update.
    pub rx_pps: Option<f64>,
}

/// An edge of the graph.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ViewLink {
    /// Index of one end in [`ViewState::nodes`].
    pub a: usize,
    /// Index of the other end.
    pub b: usize,
    /// Up.
    pub up: bool,
    /// Packets per second a -> b since the last update (`None`: not known).
    pub ab_pps: Option<f64>,
    /// Packets per second b -> a.
    pub ba_pps: Option<f64>,
    /// Bits per second a -> b.
    pub ab_bps: Option<f64>,
    /// Bits per second b -> a.
    pub ba_bps: Option<f64>,
    /// Packets carried a -> b (cumulative).
    pub ab_packets: Option<u64>,
    /// Packets carried b -> a.
    pub ba_packets: Option<u64>,
    /// Packets lost on the link (loss, queue, MTU, down), both ways.
    pub lost: Option<u64>,
}

/// Keeps the previous update's counters to turn them into rates.
#[derive(Debug, Default)]
pub struct RateTracker {
    seq: u64,
    last_t: Option<f64>,
    /// Counter name -> (value at the last update).
    last: HashMap<String, u64>,
    /// Counter name -> its last rate (shown again when no time passed, as at the end).
    rates: HashMap<String, f64>,
}

impl RateTracker {
    /// A tracker with no history (the first update has no rates).
    pub fn new() -> RateTracker {
        RateTracker::default()
    }

    /// The rate of counter `key` now at `value`, `dt` seconds after the last update (None
    /// on the first update; the last rate again if no time passed).
    fn rate(&mut self, key: String, value: u64, dt: Option<f64>) -> Option<f64> {
        let before = self.last.insert(key.clone(), value);
        match (before, dt) {
            (Some(b), Some(dt)) if dt > 0.0 => {
                let r = value.saturating_sub(b) as f64 / dt;
                self.rates.insert(key, r);
                Some(r)
            }
            _ => self.rates.get(&key).copied(),
        }
    }

    fn tick(&mut self, t: f64) -> Option<f64> {
        self.seq += 1;
        let dt = self.last_t.map(|l| t - l);
        self.last_t = Some(t);
        dt
    }

    /// The page's state for an emulation snapshot.
    pub fn from_emulation(&mut self, title: &str, s: &NetSnapshot) -> ViewState {
        let t = s.now.as_secs_f64();
        let dt = self.tick(t);
        let nodes: Vec<ViewNode> = s
            .nodes
            .iter()
            .map(|n| ViewNode {
                name: n.name.clone(),
                address: n.address.to_string(),
                role: "node",
                up: true,
                neighbors: Some(n.neighbors),
                routes: Some(n.routes),
                rx_packets: Some(n.rx_packets),
                tx_packets: Some(n.tx_packets),
                drops: Some(n.drops),
                delivered: Some(n.delivered),
                rx_pps: self.rate(format!("n{}", n.name), n.rx_packets, dt),
            })
            .collect();
        let links = s
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let lost =
                    |d: &anode_emu::DirStats| d.lost + d.queue_drops + d.mtu_drops + d.down_drops;
                ViewLink {
                    a: l.a,
                    b: l.b,
                    up: l.up,
                    ab_pps: self.rate(format!("l{i}ab"), l.a_to_b.delivered, dt),
                    ba_pps: self.rate(format!("l{i}ba"), l.b_to_a.delivered, dt),
                    ab_bps: self
                        .rate(format!("l{i}abB"), l.a_to_b.delivered_bytes, dt)
                        .map(|r| r * 8.0),
                    ba_bps: self
                        .rate(format!("l{i}baB"), l.b_to_a.delivered_bytes, dt)
                        .map(|r| r * 8.0),
                    ab_packets: Some(l.a_to_b.delivered),
                    ba_packets: Some(l.b_to_a.delivered),
                    lost: Some(lost(&l.a_to_b) + lost(&l.b_to_a)),
                }
            })
            .collect();
        let routes = s
            .nodes
            .iter()
            .flat_map(|n| {
                n.route_table
                    .iter()
                    .map(|(d, h, m)| (n.name.clone(), d.clone(), h.clone(), *m))
            })
            .collect();
        ViewState {
            title: title.to_string(),
            source: "emulation",
            clock: "virtual",
            time_s: t,
            events: Some(s.events),
            done: s.done,
            seq: self.seq,
            nodes,
            links,
            routes,
            domains: Vec::new(),
            code: Vec::new(),
            note: "Emulation: rates are per second of virtual time. NodeOS domains and the code cache are shown for a running node (anode view --node-port N).".into(),
        }
    }

    /// The page's state for a running node: the node, its link peers and the destinations
    /// it has routes to (hung off their next hop).
    pub fn from_node(
        &mut self,
        at: Duration,
        st: &StatusInfo,
        routes: &[RouteInfo],
        domains: Vec<DomainsInfo>,
        code: Vec<CodeEntry>,
    ) -> ViewState {
        let t = at.as_secs_f64();
        let dt = self.tick(t);
        let me = st.address.to_string();
        let mut nodes = vec![ViewNode {
            name: me.clone(),
            address: me.clone(),
            role: "node",
            up: true,
            neighbors: Some(st.neighbors.len()),
            routes: Some(st.routes),
            rx_packets: Some(st.counters.rx_packets),
            tx_packets: Some(st.counters.tx_packets),
            drops: Some(st.counters.drops.values().sum()),
            delivered: Some(st.counters.delivered),
            rx_pps: self.rate("rx".into(), st.counters.rx_packets, dt),
        }];
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut links = Vec::new();
        for l in &st.links {
            let peer = l.peer.to_string();
            let i = *index.entry(peer.clone()).or_insert_with(|| {
                nodes.push(peer_node(&peer, l.neighbor_up, "neighbor"));
                nodes.len() - 1
            });
            links.push(ViewLink {
                a: 0,
                b: i,
                up: l.enabled && l.neighbor_up,
                ab_pps: self.rate(format!("l{}", l.id), l.tx_packets, dt),
                ba_pps: None,
                ab_bps: self
                    .rate(format!("l{}B", l.id), l.tx_bytes, dt)
                    .map(|r| r * 8.0),
                ba_bps: None,
                ab_packets: Some(l.tx_packets),
                ba_packets: None,
                lost: None,
            });
        }
        let mut table = Vec::new();
        for r in routes.iter().filter(|r| r.reachable) {
            let (dest, hop) = (r.dest.to_string(), r.next_hop.map(|h| h.to_string()));
            if dest == me {
                continue;
            }
            table.push((
                me.clone(),
                dest.clone(),
                hop.clone().unwrap_or_else(|| "-".into()),
                r.metric,
            ));
            let Some(hop) = hop else { continue };
            if index.contains_key(&dest) {
                continue;
            }
            let Some(&via) = index.get(&hop) else {
                continue;
            };
            nodes.push(peer_node(&dest, true, "remote"));
            index.insert(dest, nodes.len() - 1);
            links.push(ViewLink {
                a: via,
                b: nodes.len() - 1,
                up: true,
                ab_pps: None,
                ba_pps: None,
                ab_bps: None,
                ba_bps: None,
                ab_packets: None,
                ba_packets: None,
                lost: None,
            });
        }
        ViewState {
            title: format!("node {me}"),
            source: "node",
            clock: "wall",
            time_s: t,
            events: None,
            done: false,
            seq: self.seq,
            nodes,
            links,
            routes: table,
            domains,
            code,
            note: "A running node: its links carry the rates it sends; nodes beyond its neighbors are placed by their routes' next hop (the path beyond is not known here).".into(),
        }
    }
}

fn peer_node(addr: &str, up: bool, role: &'static str) -> ViewNode {
    ViewNode {
        name: addr.to_string(),
        address: addr.to_string(),
        role,
        up,
        neighbors: None,
        routes: None,
        rx_packets: None,
        tx_packets: None,
        drops: None,
        delivered: None,
        rx_pps: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_emu::{DirStats, LinkSnap, NodeSnap};

    fn snap(t_ms: u64, delivered: u64, done: bool) -> NetSnapshot {
        let node = |name: &str, a: &str| NodeSnap {
            name: name.into(),
            address: a.parse().unwrap(),
            neighbors: 1,
            routes: 1,
            rx_packets: delivered,
            tx_packets: delivered,
            to_ee: 0,
            delivered: 0,
            drops: 0,
            route_table: vec![("b".into(), "b".into(), 1)],
        };
        NetSnapshot {
            now: Duration::from_millis(t_ms),
            events: t_ms,
            done,
            nodes: vec![node("a", "198.18.0.1:3322"), node("b", "198.18.0.2:3322")],
            links: vec![LinkSnap {
                a: 0,
                b: 1,
                up: true,
                a_to_b: DirStats {
                    delivered,
                    delivered_bytes: delivered * 100,
                    lost: 2,
                    ..DirStats::default()
                },
                b_to_a: DirStats::default(),
            }],
        }
    }

    #[test]
    fn rates_come_from_the_previous_update_and_stay_at_the_end() {
        let mut r = RateTracker::new();
        let first = r.from_emulation("t", &snap(1000, 10, false));
        assert_eq!(
            first.links[0].ab_pps, None,
            "no rate before a second update"
        );
        let second = r.from_emulation("t", &snap(1500, 60, false));
        assert_eq!(second.links[0].ab_pps, Some(100.0));
        assert_eq!(second.links[0].ab_bps, Some(80_000.0));
        assert_eq!(second.links[0].lost, Some(2));
        assert_eq!(second.seq, 2);
        assert_eq!(second.routes[0], ("a".into(), "b".into(), "b".into(), 1));
        // The final snapshot at the same virtual time keeps the last rates.
        let end = r.from_emulation("t", &snap(1500, 60, true));
        assert_eq!(end.links[0].ab_pps, Some(100.0));
        assert!(end.done);
    }
}
