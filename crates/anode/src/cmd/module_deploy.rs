//! `anode module deploy|undeploy|deployments`: service modules deployed along a path
//! (NetServ signaling with soft state; `anode_modules::deploy`).
//!
//! `deploy PKG.amod --to DST --sign KEY`: stages the package at the node this command talks
//! to (the origin), signs a request with KEY (a `[[deploy.key]]` of the nodes on the path),
//! injects it there and prints one line per node of the path as its result arrives:
//! installed, present (refreshed), refused (reason) or failed (reason), with the time since
//! the request left. It ends when the target has answered and every node before it has, or
//! at `--timeout`. The exit status is 0 only if every node that answered did what was asked
//! and the target answered. Deployed modules go when `--ttl` passes without another deploy
//! of the same package (a refresh). `undeploy NAME --to DST --sign KEY` removes them along
//! the path; `deployments` lists what is deployed at one node and the service's counters.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anode_ctl::{Client, StreamItem};
use anode_modules::deploy::NewRequest;
use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_DEPLOY;
use anode_wire::deploy::{HopResult, Message, Op};

use super::client::{Conn, connect_to};

/// How long a request stays valid after it is signed.
const VALID: Duration = Duration::from_secs(60);

/// Where and how to send a deploy or undeploy request.
#[derive(Debug, clap::Args)]
pub struct Path {
    /// The last node of the path (its address, IP:PORT).
    #[arg(long, value_name = "ADDR")]
    to: NodeAddr,
    /// The secret key (BASE.key of `anode keygen`) that signs the request; its public half
    /// must be in the [[deploy.key]] of the nodes on the path.
    #[arg(long, value_name = "FILE")]
    sign: PathBuf,
    /// How long to wait for the nodes' results, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    timeout: f64,
    /// The node's control socket.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Pick the node by its UDP port (its default control socket).
    #[arg(long, value_name = "PORT", conflicts_with = "socket")]
    node_port: Option<u16>,
    /// A node of a running `anode emulate --realtime`, by its name in the topology.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["socket", "node_port"])]
    node: Option<String>,
    /// Print JSON (one object per line: each node's result, then a summary).
    #[arg(long)]
    json: bool,
}

/// `anode module deploy`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  anode module deploy counter-1.0.0.amod --to 198.18.0.6:3322 --sign ops.key --node-port 3322
  anode module deploy counter-1.0.0.amod --to 198.18.0.6:3322 --sign ops.key --ttl 300 --json

Every node on the path checks the signature against its [[deploy.key]] and the package's
against its [modules] trusted_keys, fetches the package from the node before it (or, with
--repo, from the repository), installs and starts it, and answers. Run the same command again before the ttl passes to keep the
modules (a refresh); `anode module undeploy` removes them.")]
pub struct DeployArgs {
    /// The package (.amod, signed by a publisher the nodes trust).
    package: PathBuf,
    /// A module repository (http://HOST:PORT, e.g. `anode repo serve`) serving the same
    /// package: every node on the path fetches it from there (`GET URL/NAME/VERSION`) at
    /// once instead of from the node before it, and falls back to the path if it fails.
    #[arg(long, value_name = "URL")]
    repo: Option<String>,
    /// Soft-state lifetime: the modules go this many seconds after the last deploy.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    ttl: u32,
    #[command(flatten)]
    path: Path,
}

/// `anode module undeploy`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: anode module undeploy counter --to 198.18.0.6:3322 --sign ops.key --node-port 3322"
)]
pub struct UndeployArgs {
    /// The module's name.
    name: String,
    #[command(flatten)]
    path: Path,
}

fn conn(p: &Path) -> Conn {
    Conn::local(p.socket.clone(), p.node_port, p.node.clone(), p.json)
}

/// Runs `deploy`.
pub fn deploy(a: DeployArgs) -> super::CmdResult {
    let bytes = std::fs::read(&a.package)
        .map_err(|e| format!("cannot read {}: {e}", a.package.display()))?;
    let repo = match a.repo {
        Some(r) if !r.starts_with("http://") => {
            return Err(format!(
                "--repo {r}: only http:// repositories are supported"
            ));
        }
        Some(r) if r.len() > anode_wire::deploy::MAX_REPO => {
            return Err(format!(
                "--repo: a URL of at most {} bytes",
                anode_wire::deploy::MAX_REPO
            ));
        }
        Some(r) => r.trim_end_matches('/').to_string(),
        None => String::new(),
    };
    send(
        &a.path,
        Op::Deploy,
        Some(bytes),
        (String::new(), repo),
        a.ttl,
    )
}

/// Runs `undeploy`.
pub fn undeploy(a: UndeployArgs) -> super::CmdResult {
    send(&a.path, Op::Undeploy, None, (a.name, String::new()), 0)
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Binds a free application port for the results.
fn bind_port(c: &mut Client) -> Result<u16, String> {
    let mut last = String::new();
    for _ in 0..32 {
        let port = rand::Rng::gen_range(&mut rand::thread_rng(), 49_152..=65_535u16);
        match c.bind_app(TYPE_DEPLOY, port) {
            Ok(()) => return Ok(port),
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!("cannot bind a port for the results: {last}"))
}

/// Sends a request; `(name, repo)`: the module to undeploy, the repository to deploy from.
fn send(
    p: &Path,
    op: Op,
    package: Option<Vec<u8>>,
    (name, repo): (String, String),
    ttl_s: u32,
) -> super::CmdResult {
    let key = anode_modules::read_key(&p.sign).map_err(|e| e.to_string())?;
    let mut c = connect_to(&conn(p))?;
    let origin = c.node_info().node;
    let err = |e: anode_ctl::ClientError| e.to_string();
    if let Some(bytes) = &package {
        c.module_stage(bytes.clone()).map_err(err)?;
    }
    let reply_port = bind_port(&mut c)?;
    let req = NewRequest {
        op,
        origin,
        target: p.to,
        package,
        name,
        ttl_s,
        reply_port,
        unix_ms: unix_ms(),
        valid: VALID,
        nonce: rand::random(),
        rb: 64,
        repo,
    };
    let (req, pkt) = req.build(&key).map_err(|e| e.to_string())?;
    let start = Instant::now();
    c.inject(pkt, false).map_err(err)?;
    if !p.json {
        println!(
            "{} {} {} from {origin} to {}:",
            op.name(),
            req.name,
            req.version,
            p.to
        );
    }
    let results = collect(&mut c, p, &req.nonce, start)?;
    summary(p, op, &req.name, &results)
}

/// Reads results until the target and every hop before it answered, or the timeout.
fn collect(
    c: &mut Client,
    p: &Path,
    nonce: &[u8; 16],
    start: Instant,
) -> Result<Vec<(HopResult, Duration)>, String> {
    let deadline = start + Duration::from_secs_f64(p.timeout.clamp(0.1, 3600.0));
    let mut got: BTreeMap<u8, (HopResult, Duration)> = BTreeMap::new();
    let mut last_hop = None;
    while Instant::now() < deadline {
        let item = match c.next_item(Some(deadline)) {
            Ok(i) => i,
            Err(anode_ctl::ClientError::Timeout) => break,
            Err(e) => return Err(e.to_string()),
        };
        let StreamItem::Delivery(d) = item else {
            continue;
        };
        let Ok(Message::Result(r)) = Message::parse(d.payload.as_bytes()) else {
            continue;
        };
        if &r.nonce != nonce {
            continue;
        }
        let t = start.elapsed();
        print_hop(p.json, &r, t);
        if r.last {
            last_hop = Some(r.hop);
        }
        got.insert(r.hop, (r, t));
        if let Some(h) = last_hop
            && (0..=h).all(|i| got.contains_key(&i))
        {
            break;
        }
    }
    Ok(got.into_values().collect())
}

fn print_hop(json: bool, r: &HopResult, t: Duration) {
    let ms = t.as_secs_f64() * 1e3;
    if json {
        println!(
            "{}",
            serde_json::json!({
                "hop": r.hop, "node": r.node.to_string(), "outcome": r.outcome.name(),
                "reason": r.reason, "target": r.last,
                "elapsed_at_node_ms": f64::from(r.elapsed_us) / 1e3,
                "t_ms": (ms * 1000.0).round() / 1000.0,
            })
        );
    } else {
        let why = if r.reason.is_empty() {
            String::new()
        } else {
            format!("  {}", r.reason)
        };
        println!(
            "  hop {:<2} {:<22} {:<9} {:>8.1} ms{why}",
            r.hop,
            r.node.to_string(),
            r.outcome.name(),
            ms
        );
    }
}

fn summary(p: &Path, op: Op, name: &str, results: &[(HopResult, Duration)]) -> super::CmdResult {
    let target = results.iter().any(|(r, _)| r.last);
    let ok = results.iter().filter(|(r, _)| r.outcome.ok()).count();
    let last_ms = results
        .iter()
        .map(|(_, t)| t.as_secs_f64() * 1e3)
        .fold(0.0, f64::max);
    let fine = target && ok == results.len();
    if p.json {
        println!(
            "{}",
            serde_json::json!({
                "op": op.name(), "module": name, "to": p.to.to_string(),
                "answered": results.len(), "ok": ok, "target_answered": target,
                "last_ms": (last_ms * 1000.0).round() / 1000.0, "done": fine,
            })
        );
    } else {
        println!(
            "{} of {} nodes did it; last result after {last_ms:.1} ms{}",
            ok,
            results.len(),
            if target {
                ""
            } else {
                " (the target did not answer: is it reachable, and does it run modules?)"
            }
        );
    }
    if fine {
        Ok(())
    } else {
        Err(format!(
            "{} {name}: {} of {} nodes that answered did not{}",
            op.name(),
            results.len() - ok,
            results.len(),
            if target {
                ""
            } else {
                "; the target did not answer"
            }
        ))
    }
}

/// `anode module deployments`: what is deployed at one node, and the counters.
pub fn deployments(c: &Conn) -> super::CmdResult {
    let (l, counters) = connect_to(c)?
        .module_deployments()
        .map_err(|e| e.to_string())?;
    if c.json() {
        let v = serde_json::json!({ "deployed": l, "counters": counters });
        println!("{v}");
        return Ok(());
    }
    if l.is_empty() {
        println!("nothing deployed here");
    } else {
        let mut t = super::client::table::Table::new(&[
            "NAME", "VERSION", "BY", "TTL", "GOES IN", "PACKAGE",
        ]);
        for d in &l {
            t.row(vec![
                d.name.clone(),
                d.version.clone(),
                d.by.clone(),
                format!("{} s", d.ttl_s),
                format!("{:.1} s", d.expires_in_ms as f64 / 1e3),
                d.package_sha256.chars().take(16).collect(),
            ]);
        }
        print!("{}", t.render());
    }
    let line: Vec<String> = counters
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!(
        "counters: {}",
        if line.is_empty() {
            "none yet".into()
        } else {
            line.join(", ")
        }
    );
    Ok(())
}
