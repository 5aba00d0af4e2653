//! `anode capsule send`: capsules of any code object (your own protocol's .wasm, or a code
//! object the node has, by hash) from a running node toward DEST; prints what the code
//! delivers back to the session's port. The work is in `anode_ctl::send`.

use std::path::Path;
use std::time::Duration;

use anode_ctl::send::{CapsuleSend, SendEvent, send_capsules};
use anode_ctl::{CapsuleSession, Payload, SessionCode};
use anode_ether::signals;
use anode_wire::NodeAddr;

use super::client::{Conn, connect_to};

/// `anode capsule` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum CapsuleCommand {
    /// Send capsules of any code (a .wasm file, or the hash of code the node has) toward DEST.
    #[command(after_help = "Examples:\n  \
        anode capsule send --node-port 4001 127.0.0.1:4003 --code my_proto.wasm --payload hi\n  \
        anode capsule send --node-port 4001 127.0.0.1:4003 --code 1a2b...(64 hex) -c 100 --rate 50\n\n\
        Every node on the path loads the code from its previous hop the first time it sees it.\n\
        Whatever the code delivers to the session's port (printed first; --port to choose it)\n\
        is printed as it comes, until --wait seconds after the last capsule.")]
    Send(SendArgs),
}

/// `anode capsule send` arguments.
#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// The destination node (IP:PORT).
    dest: NodeAddr,
    /// The code: a WebAssembly file, or the SHA-256 (64 hex digits) of code the node has.
    #[arg(long, value_name = "FILE.wasm|HASH")]
    code: String,
    /// The capsule payload, as text.
    #[arg(long, conflicts_with = "hex")]
    payload: Option<String>,
    /// The capsule payload, as hex.
    #[arg(long, value_name = "HEX")]
    hex: Option<String>,
    /// Capsules to send.
    #[arg(long, short = 'c', default_value_t = 1)]
    count: u64,
    /// Capsules per second (default: as fast as the node takes them).
    #[arg(long)]
    rate: Option<f64>,
    /// Resource bound (hops) of each capsule.
    #[arg(long, default_value_t = 32)]
    rb: u16,
    /// Flow id of each capsule.
    #[arg(long, default_value_t = 0)]
    flow: u64,
    /// The application port deliveries come to (default: a free one).
    #[arg(long)]
    port: Option<u16>,
    /// Seconds to wait for deliveries after the last capsule.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    wait: f64,
    #[command(flatten)]
    conn: Conn,
}

/// Runs `anode capsule ...`.
pub fn run(c: CapsuleCommand) -> super::CmdResult {
    match c {
        CapsuleCommand::Send(a) => send(a),
    }
}

fn send(a: SendArgs) -> super::CmdResult {
    if !(0.0..=3600.0).contains(&a.wait) {
        return Err("--wait must be between 0 and 3600 seconds".into());
    }
    let interval = match a.rate {
        Some(r) if !(r > 0.0 && r <= 1e6) => return Err("--rate must be in (0, 1000000]".into()),
        Some(r) => Duration::from_secs_f64(1.0 / r),
        None => Duration::ZERO,
    };
    let payload = match (&a.payload, &a.hex) {
        (_, Some(h)) => Payload::from_hex(h).map_err(|e| format!("--hex: {e}"))?.0,
        (Some(t), None) => t.as_bytes().to_vec(),
        (None, None) => Vec::new(),
    };
    let wasm;
    let code = if Path::new(&a.code).is_file() {
        wasm = anode_capsule::read_code_file(Path::new(&a.code))?;
        SessionCode::Wasm(&wasm)
    } else {
        let hash = anode_ctl::app::parse_code_name(&a.code).map_err(|_| {
            format!(
                "--code {}: neither a file nor a 64-hex-digit code hash",
                a.code
            )
        })?;
        SessionCode::Cached(hash)
    };
    super::install_signals()?;
    let mut s = CapsuleSession::open_with(connect_to(&a.conn)?, code, a.port)?;
    let json = a.conn.json();
    if !json {
        let hash: String = s
            .code()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        println!(
            "capsules of code {hash}... from {} to {}; deliveries to port {}",
            s.node(),
            a.dest,
            s.port()
        );
    }
    let o = CapsuleSend {
        dest: a.dest,
        payload,
        count: a.count,
        interval,
        rb: a.rb,
        flow: a.flow,
        wait: Duration::from_secs_f64(a.wait),
    };
    let sum = send_capsules(&mut s, &o, &signals::stop_requested, &mut |e| {
        if json {
            if let Ok(line) = serde_json::to_string(e) {
                println!("{line}");
            }
            return;
        }
        match e {
            SendEvent::Dropped { seq, drop } => {
                println!("capsule {seq} dropped by the node: {drop}")
            }
            SendEvent::Delivery { at_ms, payload } => {
                let p = Payload(payload.clone());
                match p.as_text().filter(|t| !t.chars().any(char::is_control)) {
                    Some(t) => println!("delivery at {at_ms} ms: {t:?}"),
                    None => println!("delivery at {at_ms} ms: {} (hex)", p.to_hex()),
                }
            }
        }
    })?;
    if json {
        println!(
            "{}",
            serde_json::to_string(&sum).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "{} sent, {} dropped, {} delivered back{}{}",
            sum.sent,
            sum.dropped,
            sum.deliveries,
            if sum.code_was_cached {
                ""
            } else {
                " (the code was new to the node)"
            },
            if sum.interrupted { "; interrupted" } else { "" }
        );
    }
    Ok(())
}
