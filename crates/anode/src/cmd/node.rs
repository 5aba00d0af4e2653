//! `anode node --config FILE`: one node over real UDP, with a control socket.
//!
//! Order of work: read and check the config (errors name the file and line), build the
//! `Node` with its links, static routes and execution environments (PLAN and capsules, the
//! capsule code cache from `[capsule] cache_dir`), bind the control socket (refusing if
//! another node is live on it), start the UDP driver, serve until SIGINT/SIGTERM or a
//! `shutdown` request, then stop the control server (removing the socket file) and the driver.

use std::path::PathBuf;

use anode_ether::signals;
use anode_node::config::{self, NodeFile};
use anode_node::run::StopCause;
use anode_node::{NodeBuilder, RunOptions, RunningNode};

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
    /// With --check: print what the config sets up as JSON.
    #[arg(long, requires = "check")]
    pub json: bool,
    /// Also trust this module publisher key (64 hex digits, `anode keygen`'s BASE.pub), as
    /// if it were in [modules] trusted_keys. Repeatable.
    #[arg(long, value_name = "HEX")]
    pub trust_key: Vec<String>,
    /// Take the node over from the process that started this one (`anode upgrade` passes
    /// this; not for people).
    #[arg(long = "upgrade-fd", value_name = "FD", hide = true)]
    pub upgrade_fd: Option<i32>,
}

/// Runs the command.
pub fn run(args: Args) -> super::CmdResult {
    let mut file = config::load(&args.config).map_err(|e| e.to_string())?;
    for k in &args.trust_key {
        let k = k.trim();
        anode_modules::parse_public(k).map_err(|e| {
            format!("--trust-key '{k}' is not an ed25519 public key ({e}); give the 64 hex digits of BASE.pub")
        })?;
        file.modules.trusted_keys.push(k.to_string());
    }
    if args.check && args.json {
        println!("{}", summary_json(&file));
        return config::check_dirs(&file);
    }
    if args.check {
        print_summary(&file);
        return config::check_dirs(&file);
    }
    // Before the control socket exists: a SIGTERM sent as soon as it appears must stop the
    // node cleanly, not kill it by the default action (leaving the socket file behind).
    super::install_signals()?;
    let mut opts = RunOptions::from_file(&file);
    // What a successor runs (`anode upgrade`): this command line, another binary.
    opts.upgrade_args = Some(std::env::args_os().skip(1).collect());
    let running = match args.upgrade_fd {
        Some(fd) => take_over(&file, opts, fd)?,
        None => {
            let node = NodeBuilder::from_file(&file)
                .build(std::time::Instant::now())
                .map_err(|e| e.to_string())?;
            RunningNode::start(node, opts).map_err(|e| e.to_string())?
        }
    };
    serve(&file, running)
}

/// The successor's start (`anode upgrade`, `anode_node::upgrade`): the node built from the
/// same file, the code and state of the old process taken over, its sockets adopted.
fn take_over(file: &NodeFile, opts: RunOptions, fd: i32) -> Result<RunningNode, String> {
    use anode_node::upgrade::Successor;
    let succ = Successor::adopt(fd).map_err(|e| e.to_string())?;
    let fail = |why: String| {
        succ.fail(&why);
        format!("cannot take the node over: {why}")
    };
    let mut node = NodeBuilder::from_file(file)
        .build(std::time::Instant::now())
        .map_err(|e| fail(e.to_string()))?;
    succ.hello().map_err(|e| e.to_string())?;
    succ.build_code(&mut node).map_err(|e| e.to_string())?;
    let (state, inherited) = succ.receive_state().map_err(|e| fail(e.to_string()))?;
    let report = node
        .take_over(std::time::Instant::now(), &state)
        .map_err(|e| fail(e.to_string()))?;
    let running =
        RunningNode::start_with(node, opts, Some(inherited)).map_err(|e| fail(e.to_string()))?;
    tracing::info!(
        held = report.held,
        neighbors = report.routing.neighbors,
        "took the node over from the old process"
    );
    succ.took_over(report).map_err(|e| e.to_string())?;
    Ok(running)
}

/// Runs a started node until a signal, a shutdown request or an upgrade.
fn serve(file: &NodeFile, mut running: RunningNode) -> super::CmdResult {
    if let Some(a) = running.metrics_addr() {
        eprintln!("anode: metrics on http://{a}/metrics");
    }
    if let Some(r) = &file.remote {
        eprintln!(
            "anode: remote management on TCP {} ({} key(s)); every remote action is logged",
            r.listen,
            r.keys.len()
        );
    }
    eprintln!(
        "anode: node {} running on UDP {} with {} link(s); control socket {} (pid {})\n\
         anode: try `anode status --socket {}`; Ctrl-C stops the node (--log info shows neighbors and routes)",
        file.node.address,
        running.local_addr(),
        file.links.len(),
        file.socket.display(),
        std::process::id(),
        file.socket.display(),
    );
    let cause = running.wait(signals::stop_requested);
    let why = cause.as_str();
    tracing::info!("stopping: {why}");
    if cause == StopCause::Upgraded {
        let Some(child) = running.retire() else {
            return Ok(());
        };
        eprintln!(
            "anode: node {} handed over to pid {}; this process waits for it and passes signals on",
            file.node.address,
            child.id()
        );
        let st = anode_node::upgrade::follow_successor(child, signals::stop_requested)
            .map_err(|e| format!("cannot wait for the node's new process: {e}"))?;
        return if st.success() {
            Ok(())
        } else {
            Err(format!("the node's new process exited with {st}"))
        };
    }
    let stopped = running.stop();
    match stopped.node {
        Some(n) => {
            let c = n.counters();
            eprintln!(
                "anode: node {} stopped ({why}): {} packets in, {} out, {} forwarded, {} delivered, {} forwarded in the kernel",
                n.address(),
                c.rx_packets,
                c.tx_packets,
                c.fast_path,
                c.delivered,
                stopped.driver.kernel_forwarded
            );
        }
        None => eprintln!("anode: node stopped ({why})"),
    }
    Ok(())
}

/// What `--check --json` prints: the settings the node would run with.
fn summary_json(f: &NodeFile) -> serde_json::Value {
    let r = &f.node.routing;
    let n = &f.nodeos;
    serde_json::json!({
        "config": f.path.display().to_string(),
        "ok": true,
        "address": f.node.address.to_string(),
        "bind": f.bind.to_string(),
        "routing": {
            "protocol": r.protocol,
            "hello_interval_ms": r.hello_interval.as_millis() as u64,
            "dead_interval_ms": r.dead_interval.as_millis() as u64,
            "update_interval_ms": r.update_interval.as_millis() as u64,
            "route_timeout_ms": r.route_timeout.as_millis() as u64,
        },
        "links": f.links.iter().map(|l| {
            let imp = f.impairments.iter().find(|m| m.peer == l.peer).map(|m| serde_json::json!({
                "delay_ms": m.delay.as_secs_f64() * 1e3, "loss": m.loss(),
                "rate_bps": m.rate_bps, "queue_bytes": m.queue_bytes,
            }));
            serde_json::json!({
                "name": l.name, "peer": l.peer.to_string(), "mtu": l.mtu, "cost": l.cost,
                "static": l.static_neighbor, "impair": imp,
            })
        }).collect::<Vec<_>>(),
        "routes": f.routes.iter().map(|r| serde_json::json!({
            "dest": r.dest.to_string(), "via": r.via.to_string(), "metric": r.metric,
        })).collect::<Vec<_>>(),
        "control": {
            "socket": f.socket.display().to_string(),
            "max_connections": f.control.max_connections,
            "idle_timeout_s": f.control.idle.as_secs(),
        },
        "capsule": {
            "cache_dir": f.code_cache.display().to_string(),
            "cache_max_bytes": f.code_cache_max_bytes,
            "max_code_bytes": f.code_max_bytes,
        },
        "nodeos": {
            "enabled": n.enabled,
            "memory_bytes": n.memory_bytes,
            "cpu_percent": n.cpu_ns_per_sec / 10_000_000,
            "terminate": n.terminate,
            "policy": n.policy_file.as_ref().map(|p| p.display().to_string()),
        },
        "plan": {
            "trusted_keys": f.plan.trusted_keys.len(),
            "hosts": f.plan.hosts.iter().map(|(k, v)| (k.clone(), v.to_string()))
                .collect::<std::collections::BTreeMap<_, _>>(),
        },
        "modules": {
            "trusted_keys": f.modules.trusted_keys,
            "startup": f.modules.startup.iter().map(|m| m.source.to_string()).collect::<Vec<_>>(),
        },
        "metrics": f.metrics.map(|a| a.to_string()),
        "dataplane": {
            "mode": dataplane_mode(f.dataplane),
            "udp_offload": f.udp_offload,
            "busy_poll_us": u64::try_from(f.busy_poll.as_micros()).unwrap_or(u64::MAX),
        },
        "remote": f.remote.as_ref().map(|r| serde_json::json!({
            "listen": r.listen.to_string(),
            "max_ttl_s": r.max_ttl_s,
            "max_connections": r.max_connections,
            "keys": r.keys.iter().map(|k| serde_json::json!({
                "name": k.name,
                "key": hex::encode(k.key.as_bytes()),
                "may": k.may.iter().map(|c| c.name()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })),
        "deploy": {
            "service": !f.modules.trusted_keys.is_empty(),
            "max_ttl_s": f.deploy.max_ttl_s,
            "max_package_bytes": f.deploy.max_package_bytes,
            "max_modules": f.deploy.max_modules,
            "keys": f.deploy.keys.iter().map(|k| serde_json::json!({
                "name": k.name,
                "key": hex::encode(k.key),
                "categories": k.categories.iter().map(|c| c.name()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        },
    })
}

/// `[dataplane] mode` as the file spells it.
fn dataplane_mode(k: anode_io::KernelTransit) -> &'static str {
    match k {
        anode_io::KernelTransit::Auto => "auto",
        anode_io::KernelTransit::Tc => "tc",
        anode_io::KernelTransit::Off => "socket",
    }
}

fn print_summary(f: &NodeFile) {
    println!("{}: ok", f.path.display());
    println!("node     {} (UDP bind {})", f.node.address, f.bind);
    let r = &f.node.routing;
    let proto = match r.protocol {
        anode_core::RoutingProtocol::Dv => "distance vector",
        anode_core::RoutingProtocol::Ls => "link state",
    };
    println!(
        "routing  {proto}, hello {} ms, dead {} ms, update {} ms, route timeout {} ms",
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
        if let Some(m) = f.impairments.iter().find(|m| m.peer == l.peer) {
            println!(
                "         impaired: +{} ms delay, loss {}, rate {}, queue {} bytes",
                m.delay.as_secs_f64() * 1e3,
                m.loss(),
                m.rate_bps.map_or("unlimited".to_string(), |r| format!(
                    "{} Mbit/s",
                    r as f64 / 1e6
                )),
                m.queue_bytes
            );
        }
    }
    for r in &f.routes {
        println!("route    {} via {} metric {}", r.dest, r.via, r.metric);
    }
    println!(
        "dataplane {}",
        match f.dataplane {
            anode_io::KernelTransit::Auto =>
                "auto: passive transit in the kernel (eBPF, TC ingress) where it loads, else sockets",
            anode_io::KernelTransit::Tc => "tc: passive transit in the kernel (eBPF, TC ingress)",
            anode_io::KernelTransit::Off => "socket: every packet through the node's UDP socket",
        }
    );
    println!(
        "          UDP offload {}",
        if f.udp_offload {
            "on: runs of datagrams to one peer leave as one send (UDP_SEGMENT), receives may be coalesced (UDP_GRO)"
        } else {
            "off: one datagram per send and receive"
        }
    );
    if !f.busy_poll.is_zero() {
        println!(
            "          busy polling {} us after the last packet (a CPU spins while idle)",
            f.busy_poll.as_micros()
        );
    }
    println!(
        "control  {} (at most {} connections, idle ones closed after {} s)",
        f.socket.display(),
        f.control.max_connections,
        f.control.idle.as_secs()
    );
    match &f.remote {
        None => println!("remote   off"),
        Some(r) => {
            println!(
                "remote   signed requests on TCP {} (valid at most {} s, {} connections)",
                r.listen, r.max_ttl_s, r.max_connections
            );
            for k in &r.keys {
                let may: Vec<&str> = k.may.iter().map(|c| c.name()).collect();
                println!("         key {} may {}", k.name, may.join(", "));
            }
        }
    }
    let d = &f.deploy;
    match (f.modules.trusted_keys.is_empty(), d.keys.is_empty()) {
        (true, _) => println!("deploy   off (no module host: [modules] trusted_keys is empty)"),
        (false, true) => println!("deploy   refuses every request (no [[deploy.key]])"),
        (false, false) => {
            println!(
                "deploy   modules along a path: lifetime at most {} s, packages at most {} B, {} modules",
                d.max_ttl_s, d.max_package_bytes, d.max_modules
            );
            for k in &d.keys {
                let c: Vec<&str> = k.categories.iter().map(|c| c.name()).collect();
                println!("         key {} may deploy {}", k.name, c.join(", "));
            }
        }
    }
    println!(
        "EEs      PLAN, capsule (code cache {}, at most {} MiB)",
        f.code_cache.display(),
        f.code_cache_max_bytes >> 20
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
        let signers = anode_nodeos::plan::MeteredPlan::keys_named(
            n.policies.iter().map(|(name, _)| name.as_str()),
        )
        .len();
        println!(
            "         PLAN principals: {signers} signer key(s) named (packets they sign run as them); other PLAN packets by source address, unauthenticated"
        );
        if signers > 0 {
            println!(
                "         signers' replay windows kept across restarts in {}",
                f.plan.state_file.display()
            );
        }
    } else {
        println!("nodeos   off (EEs run without domains)");
    }
    let hosts: Vec<String> = f
        .plan
        .hosts
        .iter()
        .map(|(n, a)| format!("{n}={a}"))
        .collect();
    println!(
        "plan     {} trusted key(s) for authEval; host names: {}",
        f.plan.trusted_keys.len(),
        if hosts.is_empty() {
            "none (literal addresses only)".to_string()
        } else {
            hosts.join(", ")
        }
    );
    for m in &f.modules.startup {
        println!(
            "module   {}{}",
            m.source,
            if m.start { "" } else { " (not started)" }
        );
    }
}
