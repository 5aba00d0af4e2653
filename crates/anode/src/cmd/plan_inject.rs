//! `anode plan inject FILE --entry 'f(args)' --rb N [--node-port P | --socket S]`: builds a
//! PLAN packet here (compiled and type-checked, entry arguments evaluated as at the node),
//! injects it at the running node as its source, and prints what comes back until
//! `--timeout`: `print` output at that node, deliveries to the packet's session port, and
//! errors (the `plan:error` log, e.g. a failure reported to the handler).
//!
//! With `--sign BASE.key` the packet is signed (ANEP authentication option, scheme 1:
//! `anode_nodeos::auth`) with the time in microseconds as its sequence number; a node whose
//! policy names the key (`["plan/key/<hex>"]`) charges it to that signer's domain, any other
//! node treats it as unsigned (its source's, unauthenticated, domain).
//!
//! Contract: the wait is bounded by `--timeout` (or ends after `--expect` prints/deliveries);
//! exit status 1 if the program does not build, the key cannot be read, the node refuses the
//! packet, or an error came back.

use std::time::{Duration, Instant};

use anode_ctl::{ClientError, ErrorCode, NodeEvent, StreamItem};
use anode_plan::Interpreter;
use anode_plan::ee::{PacketSpec, PlanEe};
use anode_wire::NodeAddr;
use anode_wire::anep::TYPE_PLAN;
use serde::Serialize;

use super::client::{Conn, connect_to};

/// Arguments of `anode plan inject`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example (three nodes running, this one on UDP port 4001):
  anode plan inject crates/plan/programs/ping/noeval.plan --node-port 4001 \\
      --entry 'ping(127.0.0.1:4001, 127.0.0.1:4003)' --rb 16
prints `print` output at the node (\"Success\"), deliveries and errors as they come, and
returns once nothing more came for --settle seconds (or after --expect answers, or at
--timeout).")]
pub struct InjectArgs {
    /// The PLAN source file.
    pub file: String,
    /// The entry call, e.g. 'ping(127.0.0.1:4001, 127.0.0.1:4003)'.
    #[arg(long)]
    pub entry: String,
    /// Resource bound of the packet.
    #[arg(long, default_value_t = 32)]
    pub rb: u16,
    /// Evaluation destination (default: the node itself, which evaluates the entry first).
    #[arg(long, value_name = "ADDR")]
    pub eval_at: Option<NodeAddr>,
    /// Error handler function named in the packet (e.g. defHandler).
    #[arg(long, default_value = "")]
    pub handler: String,
    /// The PLAN port bound for deliveries (the packet's session).
    #[arg(long, default_value_t = 7000)]
    pub port: u16,
    /// Seconds to wait for what comes back.
    #[arg(long, default_value_t = 3.0)]
    pub timeout: f64,
    /// Once something came back, stop after this many seconds with nothing more (0: wait
    /// for the whole --timeout). Ignored with --expect.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.5)]
    pub settle: f64,
    /// Stop as soon as this many prints and deliveries came back.
    #[arg(long)]
    pub expect: Option<usize>,
    /// Sign the packet with this secret key (BASE.key of `anode keygen`): nodes whose policy
    /// names the key (["plan/key/<BASE.pub>"]) run it as that signer, authenticated.
    /// (`--key` is the remote-management key of `--node`.)
    #[arg(long, value_name = "BASE.key")]
    pub sign: Option<std::path::PathBuf>,
    /// With --sign: the signature's sequence number (default: the time in microseconds). A
    /// node drops a number it has accepted from this key before as a replay
    /// (`plan/replayed`), also after a restart; this option is for testing exactly that.
    #[arg(long, value_name = "N", requires = "sign")]
    pub seq: Option<u64>,
    #[command(flatten)]
    pub conn: Conn,
}

/// `pkt` signed with the key in `path`, its sequence number `seq` or else the time in
/// microseconds since the Unix epoch (increasing from one inject to the next, as the nodes'
/// replay windows want).
fn sign(pkt: &[u8], path: &std::path::Path, seq: Option<u64>) -> Result<Vec<u8>, String> {
    let key = anode_modules::read_key(path).map_err(|e| {
        format!(
            "{e}; make a key with `anode keygen --out BASE` and pass BASE.key ({})",
            path.display()
        )
    })?;
    let seq = seq.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    });
    anode_nodeos::auth::sign_packet(pkt, &key, seq).map_err(|e| e.to_string())
}

/// What came back.
#[derive(Debug, Default, Serialize)]
pub struct InjectReport {
    /// The node the packet was injected at.
    pub node: Option<NodeAddr>,
    /// `print` output at the node, in order.
    pub prints: Vec<String>,
    /// Deliveries to the session port (values as PLAN writes them).
    pub deliveries: Vec<String>,
    /// Errors reported at the node.
    pub errors: Vec<String>,
    /// Milliseconds from injection to the last thing that came back.
    pub last_ms: Option<f64>,
    /// Why the node dropped the packet at once (it was evaluated there and failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Runs `anode plan inject`.
pub fn run(a: InjectArgs) -> super::CmdResult {
    if !(0.0..=3600.0).contains(&a.settle) {
        return Err("--settle must be between 0 and 3600 seconds".into());
    }
    if !(0.001..=3600.0).contains(&a.timeout) {
        return Err("--timeout must be between 0.001 and 3600 seconds".into());
    }
    let text =
        std::fs::read_to_string(&a.file).map_err(|e| format!("cannot read {}: {e}", a.file))?;
    let mut client = connect_to(&a.conn)?;
    let node = client.node_info().node;
    // The node's own services, so programs type-check as they will at the node.
    let ee = PlanEe::with_defaults();
    let interp: &Interpreter = ee.interp();
    let mut spec = PacketSpec::new(node, a.eval_at.unwrap_or(node), a.rb);
    spec.session = u32::from(a.port);
    spec.handler = a.handler.clone();
    let pkt = match anode_plan::ee::build_packet(interp, &text, &a.entry, &spec) {
        Ok(p) => p,
        Err(anode_plan::ee::BuildError::Program(c)) => {
            eprint!("{}", super::plan::render(&a.file, &text, &c));
            return Err(format!("{} does not type-check", a.file));
        }
        Err(e) => return Err(format!("{}: {e}", a.file)),
    };
    let pkt = match &a.sign {
        Some(path) => sign(&pkt, path, a.seq)?,
        None => pkt,
    };
    match client.bind_app(TYPE_PLAN, a.port) {
        Ok(()) => {}
        Err(ClientError::Refused {
            code: ErrorCode::PortInUse,
            ..
        }) => {
            return Err(format!(
                "PLAN port {} is in use; pick another with --port",
                a.port
            ));
        }
        Err(e) => return Err(e.to_string()),
    }
    let t0 = Instant::now();
    let refused = match client.inject(pkt, true) {
        Ok(()) => None,
        // Evaluated here and failed at once: the EE's reason (its `plan:error` log, e.g. the
        // uncaught exception) follows on the stream; wait a moment for it.
        Err(ClientError::Refused {
            code: ErrorCode::Dropped,
            message,
        }) => Some(message),
        Err(e) => return Err(e.to_string()),
    };
    let wait = Duration::from_secs_f64(a.timeout);
    let deadline = t0
        + refused
            .as_ref()
            .map_or(wait, |_| wait.min(Duration::from_millis(500)));
    let mut r = InjectReport {
        node: Some(node),
        refused: refused.clone(),
        ..InjectReport::default()
    };
    let json = a.conn.json();
    loop {
        if a.expect
            .is_some_and(|n| r.prints.len() + r.deliveries.len() >= n)
            || (refused.is_some() && !r.errors.is_empty())
        {
            break;
        }
        // Answers are in when none came for --settle seconds after the last one.
        let until = match (r.last_ms, a.expect) {
            (Some(ms), None) if a.settle > 0.0 => deadline
                .min(t0 + Duration::from_secs_f64(ms / 1e3) + Duration::from_secs_f64(a.settle)),
            _ => deadline,
        };
        let item = match client.next_item(Some(until)) {
            Ok(i) => i,
            Err(ClientError::Timeout) => break,
            Err(e) => return Err(e.to_string()),
        };
        let got = match item {
            StreamItem::Event(NodeEvent::Log { ee, message }) if ee == "plan" => {
                if !json {
                    println!("print   {message}");
                }
                r.prints.push(message);
                true
            }
            StreamItem::Event(NodeEvent::Log { ee, message }) if ee == "plan:error" => {
                if !json {
                    println!("error   {message}");
                }
                r.errors.push(message);
                true
            }
            StreamItem::Delivery(d) if d.type_id == TYPE_PLAN && d.port == a.port => {
                let v = match anode_plan::marshal::decode_value(d.payload.as_bytes()) {
                    Ok(v) => v.to_string(),
                    Err(e) => format!("(undecodable: {e})"),
                };
                if !json {
                    println!("deliver {v} (from {})", d.src);
                }
                r.deliveries.push(v);
                true
            }
            _ => false,
        };
        if got {
            r.last_ms = Some(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    // Free the port before exiting, so an inject right after this one finds it free (closing
    // the connection frees it too, but the node notices that a moment later).
    let _ = client.unbind(a.port);
    if json {
        let s = serde_json::to_string(&r).map_err(|e| format!("cannot encode JSON: {e}"))?;
        println!("{s}");
    } else if r.prints.is_empty() && r.deliveries.is_empty() && r.errors.is_empty() {
        println!("nothing came back within {} s", a.timeout);
    }
    match (&refused, r.errors.is_empty()) {
        (None, true) => Ok(()),
        (None, false) => Err(format!("{} error(s) came back", r.errors.len())),
        (Some(why), true) => Err(format!("the node refused: {why}")),
        (Some(_), false) => Err(format!(
            "the packet failed at the node: {}",
            r.errors.join("; ")
        )),
    }
}
