//! anode-fwd-node: one anode node with statically configured neighbors, run by `anode-io`
//! until SIGINT/SIGTERM or `--secs`; prints the node's counters and the driver's stats as
//! JSON. The forwarder under test in `scripts/bench-netns.sh`. With `--capsule` the node also
//! runs a capsule EE with `protocols::FORWARD` pre-installed (the blaster is not a node and
//! cannot serve code), so capsules naming it run their code here on every packet; the EE's
//! counters are added to the JSON as `capsule`. With `--module NAME` a built-in service
//! module (`guest/modules/NAME`, e.g. `null`) is signed with a throwaway key the node trusts,
//! installed and started, so every packet passes through it (NetServ's module-layer
//! comparison); its report (state, packets it processed) is added as `module`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anode_capsule::{CapsuleEe, protocols};
use anode_core::{LinkConfig, Node, NodeConfig};
use anode_ether::signals;
use anode_netbench::BenchError;
use anode_node::config::nodeos::NodeOsFile;
use anode_node::{EeOptions, NodeBuilder, RunOptions, RunningNode};
use anode_wire::NodeAddr;
use clap::Parser;

/// A minimal anode forwarding node for the benchmark.
#[derive(Debug, Parser)]
#[command(name = "anode-fwd-node")]
struct Args {
    /// The node's address (its UDP socket is bound here).
    #[arg(long, default_value = "198.18.1.2:3322")]
    addr: NodeAddr,
    /// A statically configured neighbor (repeat for each link).
    #[arg(long = "peer", required = true)]
    peers: Vec<NodeAddr>,
    /// Run at most this many seconds (at most 600).
    #[arg(long, default_value_t = 10.0)]
    secs: f64,
    /// Datagrams per recvmmsg/sendmmsg.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Register a capsule EE with `protocols::FORWARD` pre-installed.
    #[arg(long)]
    capsule: bool,
    /// Install and start this built-in service module (e.g. `null`: a packet processor at
    /// pre-routing matching every packet).
    #[arg(long, value_name = "NAME")]
    module: Option<String>,
}

/// The module's report (`null` without a module).
fn module_report(node: &mut Node, name: Option<&str>) -> serde_json::Value {
    let Some(info) = name.and_then(|n| anode_modules::host(node).ok()?.info(n).ok()) else {
        return serde_json::Value::Null;
    };
    serde_json::json!({
        "name": info.name,
        "state": info.state,
        "packets": info.packets,
        "last_error": info.last_error,
    })
}

fn run(a: &Args) -> Result<(), BenchError> {
    if !anode_netbench::positive_at_most(a.secs, 600.0) {
        return Err(BenchError::io("arguments")(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "need 0 < --secs <= 600",
        )));
    }
    signals::install().map_err(BenchError::io("signal handlers"))?;
    let mut b = NodeBuilder::new(NodeConfig::new(a.addr)).links(a.peers.iter().map(|p| {
        let mut l = LinkConfig::new(*p);
        l.static_neighbor = true;
        l
    }));
    if a.capsule {
        // Bare EEs (no NodeOS), as the forwarder has always measured them.
        b = b
            .ees(EeOptions {
                nodeos: NodeOsFile {
                    enabled: false,
                    ..NodeOsFile::default()
                },
                ..EeOptions::default()
            })
            .capsule_code(protocols::FORWARD.to_vec());
        let hex: String = anode_capsule::code_hash(protocols::FORWARD)
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        eprintln!("capsule EE: protocols::FORWARD installed ({hex}...)");
    }
    if let Some(name) = &a.module {
        b = b.builtin_module(name);
    }
    let node = b
        .build(Instant::now())
        .map_err(|e| BenchError::io("node")(std::io::Error::other(e.to_string())))?;
    if let Some(name) = &a.module {
        eprintln!("module {name} installed and active");
    }
    let mut opts = RunOptions::new(a.addr.socket_addr());
    opts.driver.batch = a.batch;
    let running = RunningNode::start(node, opts).map_err(|e| {
        BenchError::io(format!("driver on {}", a.addr))(std::io::Error::other(e.to_string()))
    })?;
    println!("ready {}", running.local_addr());
    let sig = signals::wait(Duration::from_secs_f64(a.secs)).map_err(BenchError::io("wait"))?;
    let stats = running.driver_stats();
    let Some(mut node) = running.stop().node else {
        return Err(BenchError::io("stop")(std::io::Error::other(
            "the node did not come back",
        )));
    };
    let capsule = capsule_report(&mut node);
    let module = module_report(&mut node, a.module.as_deref());
    let driver: serde_json::Map<String, serde_json::Value> = stats
        .fields()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    let c = node.counters();
    let batch_avg = if stats.rx_batches > 0 {
        stats.rx_datagrams as f64 / stats.rx_batches as f64
    } else {
        0.0
    };
    println!(
        "{}",
        serde_json::json!({
            "stopped_by": sig.map_or("time".to_string(), |s| format!("signal {s}")),
            "node": c,
            "driver": driver,
            "rx_batch_avg": (batch_avg * 10.0).round() / 10.0,
            "capsule": capsule,
            "module": module,
        })
    );
    Ok(())
}

/// The capsule EE's counters and its drops by reason (`null` without a capsule EE).
fn capsule_report(node: &mut Node) -> serde_json::Value {
    let drops: serde_json::Map<String, serde_json::Value> = node
        .counters()
        .ee_drop_map()
        .iter()
        .filter(|(k, _)| k.starts_with("capsule/"))
        .map(|(k, v)| (k.clone(), (*v).into()))
        .collect();
    let Some(ee) = node
        .ee_mut(anode_wire::anep::TYPE_CAPSULE)
        .and_then(|e| e.as_any_mut().downcast_mut::<CapsuleEe>())
    else {
        return serde_json::Value::Null;
    };
    let s = ee.stats();
    serde_json::json!({
        "capsules": s.capsules,
        "ran": s.runs,
        "consumed": s.consumed,
        "traps": s.traps,
        "compiled": s.compiled,
        "requests_sent": s.requests_sent,
        "load_failures": s.load_failures,
        "parked": ee.parked(),
        "drops": drops,
    })
}

fn main() -> ExitCode {
    let a = Args::parse();
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("anode-fwd-node: {e}");
            ExitCode::FAILURE
        }
    }
}
