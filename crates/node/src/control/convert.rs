//! The node's data as protocol types. These run on the node's thread (inside `call`), so they
//! only copy.

use anode_core::{Counters, Delivery, Node, Route, RouteKind};
use anode_ctl::{
    ChannelEntry, CountersInfo, DeliveryInfo, DomainEntry, DomainsInfo, LinkEntry, NeighborEntry,
    Payload, RouteInfo, RouteOrigin, TerminationEntry,
};

/// The links.
pub(crate) fn links(node: &Node) -> Vec<LinkEntry> {
    let up: Vec<u32> = node.neighbors().iter().map(|n| n.link.0).collect();
    // The node runs on real time; its load windows are in the same clock.
    let now = std::time::Instant::now();
    node.links()
        .map(|(id, cfg, enabled)| {
            let load = node.link_load(id, now).unwrap_or_default();
            LinkEntry {
                id: id.0,
                name: cfg.name.clone(),
                peer: cfg.peer,
                mtu: cfg.mtu,
                cost: cfg.cost,
                static_neighbor: cfg.static_neighbor,
                enabled,
                neighbor_up: up.contains(&id.0),
                tx_packets: load.tx_packets,
                tx_bytes: load.tx_bytes,
                tx_pps: load.tx_pps,
                queued: load.queued,
            }
        })
        .collect()
}

/// The name of link `id` ("" if none or unknown).
pub(super) fn link_name(node: &Node, id: u32) -> String {
    node.links()
        .find(|(l, _, _)| l.0 == id)
        .map(|(_, c, _)| c.name.clone())
        .unwrap_or_default()
}

/// The up neighbors.
pub(super) fn neighbors(node: &Node) -> Vec<NeighborEntry> {
    node.neighbors()
        .into_iter()
        .map(|n| NeighborEntry {
            link: n.link.0,
            link_name: link_name(node, n.link.0),
            addr: n.addr,
        })
        .collect()
}

/// The routing table.
pub(crate) fn routes(node: &Node) -> Vec<RouteInfo> {
    let inf = node.config().routing.infinity;
    node.routes().iter().map(|r| route(r, inf)).collect()
}

/// One route.
pub(super) fn route(r: &Route, infinity: u16) -> RouteInfo {
    RouteInfo {
        dest: r.dest,
        metric: r.metric,
        reachable: r.metric < infinity,
        next_hop: r.next_hop.map(|h| h.addr),
        link: r.next_hop.map(|h| h.link.0),
        origin: match r.kind {
            RouteKind::Local => RouteOrigin::Local,
            RouteKind::Static => RouteOrigin::Static,
            RouteKind::Learned => RouteOrigin::Learned,
        },
    }
}

/// The counters.
pub(super) fn counters(c: &Counters) -> CountersInfo {
    CountersInfo {
        rx_packets: c.rx_packets,
        rx_bytes: c.rx_bytes,
        local_packets: c.local_packets,
        tx_packets: c.tx_packets,
        tx_bytes: c.tx_bytes,
        fast_path: c.fast_path,
        unknown_type_forwarded: c.unknown_type_forwarded,
        to_ee: c.to_ee,
        cut_through: c.cut_through,
        delivered: c.delivered,
        control_rx: c.control_rx,
        control_tx: c.control_tx,
        drops: c.drop_map(),
        outcomes: anode_ctl::OutcomesInfo {
            forwarded: c.outcomes.forwarded,
            delivered: c.outcomes.delivered,
            consumed: c.outcomes.consumed,
            dropped: c.outcomes.dropped,
            held: c.outcomes.held,
        },
    }
}

/// A delivery.
pub(super) fn delivery(d: &Delivery) -> DeliveryInfo {
    DeliveryInfo {
        port: d.port,
        src: d.src,
        flow: d.flow,
        rb: d.rb,
        type_id: d.type_id,
        payload: Payload(d.payload().to_vec()),
    }
}

/// The node's open cut-through channels at `now`: (whether it has a table, the channels).
pub(super) fn channels(node: &mut Node, now: std::time::Instant) -> (bool, Vec<ChannelEntry>) {
    let Some(t) = node.cut_through_mut() else {
        return (false, Vec::new());
    };
    let list = t
        .channels(now)
        .into_iter()
        .map(|c| ChannelEntry {
            id: c.id.0,
            kind: "cut".into(),
            domain: c.owner,
            type_id: c.type_id,
            keys: c
                .keys
                .iter()
                .map(|k| {
                    if k.mask.iter().all(|m| *m == 0xff) {
                        format!("{}:{}", k.offset, hex::encode(&k.value))
                    } else {
                        format!(
                            "{}:{}/{}",
                            k.offset,
                            hex::encode(&k.value),
                            hex::encode(&k.mask)
                        )
                    }
                })
                .collect(),
            via: c.via.map(|h| h.addr),
            packets: c.packets,
            bytes: c.bytes,
            drops: c.policed,
            age_ms: ms(now.saturating_duration_since(c.created)),
            expires_in_ms: c.expires.map(|e| ms(e.saturating_duration_since(now))),
        })
        .collect();
    (true, list)
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The NodeOS domain reports of the node's EEs, capsule protocols' domains named after
/// their code where it names itself.
pub(super) fn domains(node: &mut Node) -> Vec<DomainsInfo> {
    let names = crate::ees::code_names(node);
    node.domain_reports()
        .into_iter()
        .map(|r| DomainsInfo {
            ee: r.ee,
            memory_used: r.memory_used,
            memory_limit: r.memory_limit,
            terminations: r.terminations,
            recent_terminations: r
                .recent_terminations
                .into_iter()
                .map(|(domain, principal, reason)| TerminationEntry {
                    domain,
                    principal,
                    reason,
                })
                .collect(),
            domains: r
                .domains
                .into_iter()
                .map(|d| DomainEntry {
                    id: d.id,
                    name: names.get(&d.principal).cloned().unwrap_or_default(),
                    parent: d.parent,
                    principal: d.principal,
                    packets: d.packets,
                    bytes: d.bytes,
                    cpu_ns: d.cpu_ns,
                    memory_bytes: d.memory_bytes,
                    memory_limit: d.memory_limit,
                    drops: d
                        .drops
                        .into_iter()
                        .map(|(r, n)| (r.as_str().to_string(), n))
                        .collect(),
                    child_terminations: d.child_terminations,
                    authenticated: d.authenticated,
                })
                .collect(),
        })
        .collect()
}

/// The link called `l`: its configured name or its index ("0").
pub(super) fn link_named(n: &Node, l: &str) -> Option<anode_core::LinkId> {
    n.links()
        .find(|(id, cfg, _)| cfg.name == l || id.0.to_string() == l)
        .map(|(id, _, _)| id)
}

/// The error for `l` naming no link: the links there are (name or index, and peer).
pub(super) fn no_such_link(n: &Node, l: &str) -> (anode_ctl::ErrorCode, String) {
    let names: Vec<String> = n
        .links()
        .map(|(id, c, _)| {
            let name = if c.name.is_empty() {
                id.0.to_string()
            } else {
                c.name.clone()
            };
            format!("{name} ({})", c.peer)
        })
        .collect();
    (
        anode_ctl::ErrorCode::NoSuchLink,
        format!("no link '{l}'; the links are: {}", names.join(", ")),
    )
}
