//! Readable renderings of replies (the `--json` output is the protocol's own JSON).

use anode_ctl::{
    ChannelEntry, DeliveryInfo, DomainsInfo, LinkEntry, NeighborEntry, RouteInfo, RouteOrigin,
    StatsInfo, StatusInfo,
};

use super::table::Table;

fn ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{}.{:01}s", s, (ms % 1000) / 100),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn link_label(id: Option<u32>, name: &str) -> String {
    match (id, name.is_empty()) {
        (None, _) => "-".into(),
        (Some(i), true) => i.to_string(),
        (Some(i), false) => format!("{i} ({name})"),
    }
}

/// `anode status`.
pub fn status(s: &StatusInfo) -> String {
    let mut out = format!(
        "node      {}  ({}, UDP {}, up {})\nrouting   {} reachable routes, {} changes\ntraffic   {} in, {} out, {} forwarded, {} delivered, {} dropped\n\n",
        s.address,
        s.software,
        s.bind,
        ms(s.uptime_ms),
        s.routes,
        s.route_changes,
        s.counters.rx_packets,
        s.counters.tx_packets,
        s.counters.fast_path,
        s.counters.delivered,
        s.counters.drops.values().sum::<u64>(),
    );
    out.push_str(&links(&s.links));
    out
}

/// The links table.
pub fn links(links: &[LinkEntry]) -> String {
    if links.is_empty() {
        return "no links (add [[link]] tables to the node's config)\n".into();
    }
    let mut t = Table::new(&[
        "LINK", "PEER", "STATE", "NEIGHBOR", "MTU", "COST", "TX PKTS", "TX PPS", "QUEUED",
    ]);
    for l in links {
        t.row(vec![
            link_label(Some(l.id), &l.name),
            l.peer.to_string(),
            if l.enabled { "up" } else { "down (admin)" }.into(),
            match (l.neighbor_up, l.static_neighbor) {
                (true, true) => "up (static)".into(),
                (true, false) => "up".into(),
                (false, _) => "-".into(),
            },
            l.mtu.to_string(),
            l.cost.to_string(),
            l.tx_packets.to_string(),
            l.tx_pps.to_string(),
            l.queued.to_string(),
        ]);
    }
    t.render()
}

/// `anode routes`.
pub fn routes(routes: &[RouteInfo]) -> String {
    let mut t = Table::new(&["DEST", "NEXT HOP", "LINK", "METRIC", "ORIGIN"]);
    for r in routes {
        t.row(vec![
            r.dest.to_string(),
            r.next_hop.map_or("-".into(), |h| h.to_string()),
            r.link.map_or("-".into(), |l| l.to_string()),
            if r.reachable {
                r.metric.to_string()
            } else {
                format!("{} (unreachable)", r.metric)
            },
            match r.origin {
                RouteOrigin::Local => "local",
                RouteOrigin::Static => "static",
                RouteOrigin::Learned => "learned",
                RouteOrigin::Other => "?",
            }
            .into(),
        ]);
    }
    t.render()
}

/// `anode neighbors`.
pub fn neighbors(ns: &[NeighborEntry]) -> String {
    if ns.is_empty() {
        return "no neighbors up (are the peers running, with a [[link]] back to this node?)\n"
            .into();
    }
    let mut t = Table::new(&["NEIGHBOR", "LINK"]);
    for n in ns {
        t.row(vec![
            n.addr.to_string(),
            link_label(Some(n.link), &n.link_name),
        ]);
    }
    t.render()
}

/// `anode stats`.
pub fn stats(s: &StatsInfo) -> String {
    let c = &s.counters;
    let mut t = Table::new(&["COUNTER", "VALUE"]);
    let node = [
        ("rx_packets", c.rx_packets),
        ("rx_bytes", c.rx_bytes),
        ("local_packets", c.local_packets),
        ("tx_packets", c.tx_packets),
        ("tx_bytes", c.tx_bytes),
        ("fast_path", c.fast_path),
        ("unknown_type_forwarded", c.unknown_type_forwarded),
        ("to_ee", c.to_ee),
        ("cut_through", c.cut_through),
        ("delivered", c.delivered),
        ("control_rx", c.control_rx),
        ("control_tx", c.control_tx),
    ];
    for (k, v) in node {
        t.row(vec![k.into(), v.to_string()]);
    }
    let o = &c.outcomes;
    let outcomes = [
        ("forwarded", o.forwarded),
        ("delivered", o.delivered),
        ("consumed", o.consumed),
        ("dropped", o.dropped),
        ("held", o.held),
    ];
    for (k, v) in outcomes {
        t.row(vec![format!("outcome/{k}"), v.to_string()]);
    }
    for (k, v) in &c.drops {
        t.row(vec![format!("drop/{k}"), v.to_string()]);
    }
    for (k, v) in &s.driver {
        t.row(vec![format!("udp/{k}"), v.to_string()]);
    }
    for (k, v) in &s.routing {
        t.row(vec![format!("routing/{k}"), v.to_string()]);
    }
    let ctl = [
        ("connections", s.control.connections),
        ("bound_ports", s.control.bound_ports),
        ("unbound_port_drops", s.control.unbound_port_drops),
        ("slow_client_drops", s.control.slow_client_drops),
        ("refused_connections", s.control.refused_connections),
        ("idle_closed", s.control.idle_closed),
    ];
    for (k, v) in ctl {
        t.row(vec![format!("control/{k}"), v.to_string()]);
    }
    if let Some(r) = &s.control.remote {
        t.row(vec!["remote/accepted".into(), r.accepted.to_string()]);
        for (k, v) in &r.refused {
            t.row(vec![format!("remote/refused/{k}"), v.to_string()]);
        }
    }
    for e in &s.domains {
        let rows = [
            ("domains", e.domains.len() as u64),
            ("memory_used", e.memory_used),
            ("memory_limit", e.memory_limit),
            ("terminations", e.terminations),
        ];
        for (k, v) in rows {
            t.row(vec![format!("nodeos/{}/{k}", e.ee), v.to_string()]);
        }
    }
    t.render()
}

/// One row of `anode drops`.
#[derive(Debug, serde::Serialize)]
pub struct DropRow {
    /// `node`, or the EE that counted it (e.g. `capsule`, `capsule+nodeos`, `plan`).
    pub by: String,
    /// The reason's stable name.
    pub reason: String,
    /// Drops counted.
    pub count: u64,
    /// What the reason means.
    pub meaning: String,
}

/// The rows of `anode drops` from the counters' `reason` / `ee/reason` map: non-zero ones,
/// or with `all`, also every reason with no drop at the node (under `node`).
pub fn drop_rows(drops: &std::collections::BTreeMap<String, u64>, all: bool) -> Vec<DropRow> {
    use anode_core::DropReason;
    let mut rows: Vec<DropRow> = drops
        .iter()
        .map(|(k, n)| {
            let (by, reason) = k.rsplit_once('/').unwrap_or(("node", k.as_str()));
            let meaning = DropReason::from_name(reason).map_or("", DropReason::meaning);
            DropRow {
                by: by.to_string(),
                reason: reason.to_string(),
                count: *n,
                meaning: meaning.to_string(),
            }
        })
        .collect();
    if all {
        for r in DropReason::ALL {
            if !rows.iter().any(|row| row.reason == r.as_str()) {
                rows.push(DropRow {
                    by: "-".into(),
                    reason: r.as_str().into(),
                    count: 0,
                    meaning: r.meaning().into(),
                });
            }
        }
    }
    rows
}

/// `anode drops`.
pub fn drops(rows: &[DropRow]) -> String {
    if rows.is_empty() {
        return "no drops (`anode drops --all` lists every reason)\n".into();
    }
    let mut t = Table::new(&["BY", "REASON", "COUNT", "MEANING"]);
    for r in rows {
        t.row(vec![
            r.by.clone(),
            r.reason.clone(),
            r.count.to_string(),
            r.meaning.clone(),
        ]);
    }
    t.render()
}

/// `anode channels`.
pub fn channels(cut_through: bool, chans: &[ChannelEntry]) -> String {
    if !cut_through {
        return "this node has no cut-through table ([nodeos] enabled = false)\n".into();
    }
    if chans.is_empty() {
        return "no channel is open\n".into();
    }
    let mut t = Table::new(&[
        "ID", "KIND", "DOMAIN", "TYPE", "KEYS", "PACKETS", "BYTES", "DROPS", "AGE", "EXPIRES",
    ]);
    for c in chans {
        let domain = match c.domain.split_once('/') {
            Some((ee, h)) if h.len() > 16 => format!("{ee}/{}…", &h[..16]),
            _ => c.domain.clone(),
        };
        t.row(vec![
            c.id.to_string(),
            c.kind.clone(),
            domain,
            format!("0x{:04X}", c.type_id),
            c.keys
                .iter()
                .map(|k| match k.char_indices().nth(20) {
                    Some((i, _)) => format!("{}…", &k[..i]),
                    None => k.clone(),
                })
                .collect::<Vec<_>>()
                .join(" "),
            c.packets.to_string(),
            super::table::bytes(c.bytes),
            c.drops.to_string(),
            format!("{:.1} s", c.age_ms as f64 / 1000.0),
            c.expires_in_ms
                .map_or("-".into(), |e| format!("{:.1} s", e as f64 / 1000.0)),
        ]);
    }
    t.render()
}

/// `anode domains`.
pub fn domains(ees: &[DomainsInfo]) -> String {
    if ees.is_empty() {
        return "no EE on this node keeps NodeOS domains\n".into();
    }
    // One NodeOS for the node: every EE's domain is a child of its root (domain 0, `node`),
    // and ids are unique across the EEs.
    let mut out = String::from("node (domain 0): one NodeOS for every EE below\n");
    for e in ees {
        let own = e
            .domains
            .iter()
            .find(|d| d.parent == Some(0))
            .map_or_else(String::new, |d| format!(" (domain {})", d.id));
        out.push_str(&format!(
            "{}{own}: memory {} of {}, {} terminations\n",
            e.ee,
            super::table::bytes(e.memory_used),
            super::table::bytes(e.memory_limit),
            e.terminations
        ));
        let mut t = Table::new(&[
            "DOMAIN",
            "PARENT",
            "PRINCIPAL",
            "PACKETS",
            "BYTES",
            "CPU_NS",
            "MEMORY",
            "DROPS",
        ]);
        for d in &e.domains {
            let drops: u64 = d.drops.values().sum();
            t.row(vec![
                d.id.to_string(),
                d.parent.map_or_else(|| "-".into(), |p| p.to_string()),
                match (d.name.is_empty(), d.authenticated) {
                    (false, _) => {
                        let short = d.principal.get(..16).unwrap_or(&d.principal);
                        format!("{} ({short}...)", d.name)
                    }
                    (true, Some(false)) => format!("{} (unauthenticated)", d.principal),
                    (true, Some(true)) => {
                        let short = d.principal.get(..22).unwrap_or(&d.principal);
                        format!("{short}... (signed)")
                    }
                    (true, None) => d.principal.clone(),
                },
                d.packets.to_string(),
                d.bytes.to_string(),
                d.cpu_ns.to_string(),
                format!(
                    "{} / {}",
                    super::table::bytes(d.memory_bytes),
                    super::table::bytes(d.memory_limit)
                ),
                drops.to_string(),
            ]);
        }
        out.push_str(&t.render());
        for r in &e.recent_terminations {
            out.push_str(&format!(
                "terminated: domain {} ({}): {}\n",
                r.domain, r.principal, r.reason
            ));
        }
    }
    out
}

/// One delivery, for `anode listen`.
pub fn delivery(d: &DeliveryInfo) -> String {
    let body = match d.payload.as_text() {
        Some(t) if !t.chars().any(|c| c.is_control() && c != '\n' && c != '\t') => {
            t.trim_end_matches('\n').to_string()
        }
        _ => format!("hex:{}", d.payload.to_hex()),
    };
    format!(
        "{} -> port {} ({} bytes, rb {}, flow {}): {body}",
        d.src,
        d.port,
        d.payload.0.len(),
        d.rb,
        d.flow
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_ctl::Payload;

    #[test]
    fn drop_rows_split_the_ee_from_the_reason_and_explain_it() {
        let m: std::collections::BTreeMap<String, u64> = [
            ("no_route".to_string(), 2),
            ("capsule+nodeos/bandwidth".to_string(), 5),
            ("plan/uncaught_exception".to_string(), 1),
        ]
        .into_iter()
        .collect();
        let rows = drop_rows(&m, false);
        let got: Vec<(&str, &str, u64)> = rows
            .iter()
            .map(|r| (r.by.as_str(), r.reason.as_str(), r.count))
            .collect();
        assert_eq!(
            got,
            [
                ("capsule+nodeos", "bandwidth", 5),
                ("node", "no_route", 2),
                ("plan", "uncaught_exception", 1)
            ]
        );
        assert_eq!(rows[1].meaning, "No route to the destination.");
        let text = drops(&rows);
        assert!(
            text.contains("capsule+nodeos") && text.contains("No route"),
            "{text}"
        );
        let all = drop_rows(&m, true);
        assert_eq!(
            all.len(),
            anode_core::DropReason::ALL.len(),
            "each reason once"
        );
        assert!(all.iter().any(|r| r.reason == "park_full" && r.count == 0));
        assert_eq!(drops(&[]).lines().count(), 1);
    }

    #[test]
    fn durations_and_deliveries() {
        assert_eq!(ms(1500), "1.5s");
        assert_eq!(ms(61_000), "1m01s");
        assert_eq!(ms(3_700_000), "1h01m");
        let d = DeliveryInfo {
            port: 7,
            src: "127.0.0.1:4001".parse().unwrap(),
            flow: 0,
            rb: 31,
            type_id: 1,
            payload: Payload::from("hi\n"),
        };
        assert_eq!(
            delivery(&d),
            "127.0.0.1:4001 -> port 7 (3 bytes, rb 31, flow 0): hi"
        );
        let b = DeliveryInfo {
            payload: Payload(vec![0, 1]),
            ..d
        };
        assert!(delivery(&b).ends_with("hex:0001"));
    }
}
