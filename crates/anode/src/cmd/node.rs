//! `anode node --config FILE`: one node over real UDP, with a control socket.
//!
//! Order of work: read and check the config (errors name the file and line), build the
//! `Node` with its links, static routes and execution environments (PLAN and capsules, the
//! capsule code cache from `[capsule] cache_dir`), bind the control socket (refusing if
//! another node is live on it), start the UDP driver, serve until SIGINT/SIGTERM or a
//! `shutdown` request, then stop the control server (removing the socket file) and the driver.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anode_core::Node;
use anode_io::NodeHandle;

use crate::config::{self, NodeFile};
use crate::control::{self, ControlServer, Driver, Job, NodeGone};
use anode_ether::signals;

/// Arguments of `anode node`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example (two nodes on this machine, from the repository root):
  anode --log info node --config examples/node-a.toml
  anode --log info node --config examples/node-b.toml      # in a second terminal
  anode status --node-port 4001                            # in a third

The config file is TOML: [node] address, [routing] timers, one [[link]] per neighbor,
optional [[route]]s and [control] socket. examples/node-a.toml explains every key.
Stop the node with Ctrl-C (or `anode stop`); the control socket is removed.")]
pub struct Args {
    /// The node's config file (TOML).
    #[arg(long, short, value_name = "FILE")]
    pub config: PathBuf,
    /// Check the config file, print what it sets up, and exit.
    #[arg(long)]
    pub check: bool,
}

/// The UDP driver as the control server's [`Driver`].
#[derive(Debug)]
struct Udp(NodeHandle);

impl Driver for Udp {
    fn run(&self, job: Job) -> Result<(), NodeGone> {
        self.0.call(move |n, now| job(n, now)).map_err(|_| NodeGone)
    }

    fn driver_stats(&self) -> BTreeMap<String, u64> {
        self.0
            .stats()
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn bound_addr(&self) -> String {
        self.0.local_addr().to_string()
    }
}

/// Runs the command.
pub fn run(args: Args) -> super::CmdResult {
    let file = config::load(&args.config).map_err(|e| e.to_string())?;
    if args.check {
        print_summary(&file);
        return Ok(());
    }
    let node = build(&file)?;
    let path = file.socket.clone();
    // Claim the control socket first: a node already running there is the likelier mistake,
    // and its message is clearer than the UDP bind's.
    let listener = control::bind_socket(&path).map_err(|e| e.to_string())?;
    let driver = match anode_io::spawn(node, anode_io::DriverConfig::new(file.bind)) {
        Ok(d) => d,
        Err(e) => {
            control::remove_socket(&path);
            return Err(format!(
                "cannot run the node on UDP {} ({e}); is another program using that port? change [node] address or bind in {}",
                file.bind,
                file.path.display()
            ));
        }
    };
    let Some(events) = driver.take_events() else {
        control::remove_socket(&path);
        return Err("the UDP driver's event channel was already taken".into());
    };
    let udp = Arc::new(Udp(driver));
    let server = ControlServer::serve(listener, &path, udp.clone(), events).map_err(|e| {
        control::remove_socket(&path);
        e.to_string()
    })?;
    if let Some(addr) = file.metrics {
        // The endpoint holds the driver weakly, so it never keeps the node alive.
        let weak = Arc::downgrade(&udp);
        let text = move || {
            weak.upgrade()
                .and_then(|u| {
                    control::call(&*u, |n, _| {
                        anode_nodeos::metrics::render(&n.domain_reports())
                    })
                    .ok()
                })
                .unwrap_or_default()
        };
        let cfg = anode_nodeos::metrics::MetricsConfig {
            listen: Some(addr.to_string()),
        };
        match anode_nodeos::metrics::serve(&cfg, Arc::new(text)) {
            Ok(Some(a)) => eprintln!("anode: metrics on http://{a}/metrics"),
            Ok(None) => {}
            Err(e) => {
                server.stop();
                return Err(format!("{e} (in {})", file.path.display()));
            }
        }
    }
    signals::install().map_err(|e| format!("cannot install signal handlers: {e}"))?;
    eprintln!(
        "anode: node {} running on UDP {} with {} link(s); control socket {}\n\
         anode: try `anode status --socket {}`; Ctrl-C stops the node (--log info shows neighbors and routes)",
        file.node.address,
        udp.bound_addr(),
        file.links.len(),
        path.display(),
        path.display(),
    );
    let why = loop {
        if signals::stop_requested() {
            break "signal";
        }
        if server.shutdown_requested() {
            break "shutdown request";
        }
        if !udp.0.is_running() {
            break "the UDP driver stopped";
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    tracing::info!("stopping: {why}");
    server.stop();
    match Arc::try_unwrap(udp) {
        Ok(Udp(h)) => {
            let n = h.shutdown();
            let c = n.counters();
            eprintln!(
                "anode: node {} stopped ({why}): {} packets in, {} out, {} forwarded, {} delivered",
                n.address(),
                c.rx_packets,
                c.tx_packets,
                c.fast_path,
                c.delivered
            );
        }
        // A control thread still holds the driver; dropping it here stops the data path
        // once that thread lets go, and the process exits anyway.
        Err(_) => eprintln!("anode: node stopped ({why})"),
    }
    Ok(())
}

/// The node, with its links and static routes.
fn build(file: &NodeFile) -> Result<Node, String> {
    let now = Instant::now();
    let mut node =
        Node::new(file.node.clone(), now).map_err(|e| format!("{}: {e}", file.path.display()))?;
    for l in &file.links {
        node.add_link(l.clone(), now);
    }
    for r in &file.routes {
        node.add_static_route(r.dest, r.via, r.metric, now);
    }
    crate::ees::register_with(&mut node, Some(file.code_cache.clone()), None, &file.nodeos)
        .map_err(|e| match e {
            crate::ees::EeSetupError::Capsule(_) => format!(
                "{e} (capsule code cache {}; set [capsule] cache_dir in {})",
                file.code_cache.display(),
                file.path.display()
            ),
            crate::ees::EeSetupError::NodeOs { .. } => format!(
                "{e} ([nodeos] in {}, policy file {})",
                file.path.display(),
                file.nodeos
                    .policy_file
                    .as_ref()
                    .map_or("none".into(), |p| p.display().to_string())
            ),
        })?;
    super::module_ops::setup_node(&mut node, file)?;
    Ok(node)
}

fn print_summary(f: &NodeFile) {
    println!("{}: ok", f.path.display());
    println!("node     {} (UDP bind {})", f.node.address, f.bind);
    let r = &f.node.routing;
    println!(
        "routing  hello {} ms, dead {} ms, update {} ms, route timeout {} ms",
        r.hello_interval.as_millis(),
        r.dead_interval.as_millis(),
        r.update_interval.as_millis(),
        r.route_timeout.as_millis()
    );
    for (i, l) in f.links.iter().enumerate() {
        println!(
            "link {i}   {} -> {} (mtu {}, cost {}{})",
            if l.name.is_empty() { "-" } else { &l.name },
            l.peer,
            l.mtu,
            l.cost,
            if l.static_neighbor { ", static" } else { "" }
        );
    }
    for r in &f.routes {
        println!("route    {} via {} metric {}", r.dest, r.via, r.metric);
    }
    println!("control  {}", f.socket.display());
    println!(
        "EEs      PLAN, capsule (code cache {})",
        f.code_cache.display()
    );
    let n = &f.nodeos;
    if n.enabled {
        println!(
            "nodeos   domains per protocol; memory bound {} B; {}% CPU per EE; terminate {}; policy {}",
            n.memory_bytes,
            n.cpu_ns_per_sec / 10_000_000,
            if n.terminate { "on" } else { "off" },
            n.policy_file
                .as_ref()
                .map_or("defaults".into(), |p| p.display().to_string())
        );
    } else {
        println!("nodeos   off (EEs run without domains)");
    }
    for m in &f.modules.startup {
        println!(
            "module   {}{}",
            m.source,
            if m.start { "" } else { " (not started)" }
        );
    }
}
