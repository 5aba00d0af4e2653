//! Following a running node for `anode view --node-port N`: its status, routes, NodeOS
//! domains and code cache, asked over its control socket once per interval.

use std::time::{Duration, Instant};

use anode_ctl::{Client, ClientError};

use crate::model::RateTracker;
use crate::server::Hub;

/// Publishes the node `c` is connected to every `every`, until `stop` says so or the node
/// goes away (then the error says why).
pub fn follow_node(
    c: &mut Client,
    hub: &Hub,
    every: Duration,
    stop: &dyn Fn() -> bool,
) -> Result<(), ClientError> {
    let started = Instant::now();
    let mut rates = RateTracker::new();
    while !stop() {
        let tick = Instant::now();
        let st = c.status()?;
        let routes = c.routes()?;
        // A node without EEs has neither: show it all the same.
        let domains = c.domains().unwrap_or_default();
        let code = c.code_list().unwrap_or_default();
        let view = rates.from_node(started.elapsed(), &st, &routes, domains, code);
        hub.publish(&view);
        while !stop() && tick.elapsed() < every {
            std::thread::sleep(Duration::from_millis(50).min(every));
        }
    }
    Ok(())
}
