//! The event pump: routes the node's events to connections and logs what changes.
//!
//! Deliveries (of any Type ID: datagrams, PLAN, capsules) go to the connection owning their
//! port (or are counted as `unbound_port_drops`); neighbor changes and EE logs are logged and
//! broadcast to subscribers (EE logs also to connections that injected packets asking for
//! them). The node has no route-change event, so the pump also polls the route-change
//! counter every [`ROUTE_POLL`] and, when it moved, diffs the table, logs each change at info
//! and broadcasts it.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anode_core::Event;
use anode_ctl::{NodeEvent, RouteInfo, ServerMessage};
use anode_wire::NodeAddr;

use super::state::Shared;
use super::{call, convert};

/// How often the routing table is checked for changes.
const ROUTE_POLL: Duration = Duration::from_millis(200);

/// Runs until the server stops or the node's event channel closes.
pub(super) fn run(shared: &Shared, events: &Receiver<Event>) {
    let mut routes = RouteWatch::default();
    let mut next_poll = Instant::now();
    while !shared.stopping.load(Ordering::Acquire) {
        match events.recv_timeout(next_poll.saturating_duration_since(Instant::now())) {
            Ok(ev) => on_event(shared, ev),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                routes.poll(shared);
                return;
            }
        }
        if Instant::now() >= next_poll {
            routes.poll(shared);
            next_poll = Instant::now() + ROUTE_POLL;
        }
    }
}

fn on_event(shared: &Shared, ev: Event) {
    match ev {
        Event::Delivered(d) => {
            let port = d.port;
            if !shared.deliver(port, ServerMessage::Delivery(convert::delivery(&d))) {
                tracing::debug!(port, src = %d.src, "delivery for an unbound port dropped");
            }
        }
        Event::NeighborUp { link, addr } => {
            let link_name = name_of(shared, link.0);
            tracing::info!(%link, name = %link_name, %addr, "neighbor up");
            shared.broadcast(&ServerMessage::Event(NodeEvent::NeighborUp {
                link: link.0,
                link_name,
                addr,
            }));
        }
        Event::NeighborDown { link, addr } => {
            let link_name = name_of(shared, link.0);
            tracing::info!(%link, name = %link_name, %addr, "neighbor down");
            shared.broadcast(&ServerMessage::Event(NodeEvent::NeighborDown {
                link: link.0,
                link_name,
                addr,
            }));
        }
        Event::Log { ee, message } => {
            tracing::info!(%ee, "{message}");
            shared.broadcast_log(&ServerMessage::Event(NodeEvent::Log { ee, message }));
        }
    }
}

fn name_of(shared: &Shared, link: u32) -> String {
    call(&*shared.driver, move |n, _| convert::link_name(n, link)).unwrap_or_default()
}

/// The last routing table seen.
#[derive(Debug, Default)]
struct RouteWatch {
    changes: Option<u64>,
    table: BTreeMap<NodeAddr, RouteInfo>,
}

impl RouteWatch {
    fn poll(&mut self, shared: &Shared) {
        let seen = self.changes;
        let r = call(&*shared.driver, move |n, _| {
            let c = n.route_changes();
            (c, (Some(c) != seen).then(|| convert::routes(n)))
        });
        let Ok((changes, Some(now))) = r else {
            return;
        };
        self.changes = Some(changes);
        let now: BTreeMap<NodeAddr, RouteInfo> = now.into_iter().map(|r| (r.dest, r)).collect();
        for (dest, r) in &now {
            if self.table.get(dest) == Some(r) {
                continue;
            }
            match (r.reachable, r.next_hop) {
                (true, Some(via)) => {
                    tracing::info!(%dest, %via, metric = r.metric, origin = ?r.origin, "route")
                }
                (true, None) => {}
                (false, _) => tracing::info!(%dest, "route unreachable"),
            }
            shared.broadcast(&ServerMessage::Event(NodeEvent::RouteChanged {
                route: r.clone(),
            }));
        }
        for dest in self.table.keys().filter(|d| !now.contains_key(d)) {
            tracing::info!(%dest, "route removed");
            shared.broadcast(&ServerMessage::Event(NodeEvent::RouteRemoved {
                dest: *dest,
            }));
        }
        self.table = now;
    }
}
