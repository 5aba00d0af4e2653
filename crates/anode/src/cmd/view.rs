//! `anode view`: a live web page of a running node (its links and their rates, the nodes
//! it routes to, its routes, NodeOS domains and code cache), served on loopback until
//! Ctrl-C. The work is in `anode_view`; `anode emulate --view` serves the same page for an
//! emulation.

use std::net::SocketAddr;
use std::time::Duration;

use anode_ether::signals;

use super::client::{Conn, connect_to};

/// `anode view` arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example: anode view --node-port 4001   (then open http://127.0.0.1:8470/)")]
pub struct Args {
    /// Where to serve the page (loopback only).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8470")]
    listen: SocketAddr,
    /// Seconds between two looks at the node.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    interval: f64,
    #[command(flatten)]
    conn: Conn,
}

/// Runs `anode view`.
pub fn run(a: Args) -> super::CmdResult {
    if !(0.05..=3600.0).contains(&a.interval) {
        return Err("--interval must be between 0.05 and 3600 seconds".into());
    }
    let mut c = connect_to(&a.conn)?;
    super::install_signals()?;
    let v = anode_view::ViewServer::start(a.listen).map_err(|e| e.to_string())?;
    eprintln!("view: {} (Ctrl-C to quit)", v.url());
    let every = Duration::from_secs_f64(a.interval);
    anode_view::follow_node(&mut c, &v.hub(), every, &signals::stop_requested)
        .map_err(|e| format!("lost the node: {e}"))
}

/// Waits for SIGINT or SIGTERM (at once if one came already).
pub fn wait_for_signal() -> super::CmdResult {
    super::install_signals()?;
    while !signals::stop_requested() {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
