//! `anode store get|put|delete`: a key-value store kept in a node's files, over capsules
//! (the work is in `anode_ctl::store`; the protocol is `guest/protocols/store`).

use std::time::Duration;

use anode_capsule::protocols;
use anode_ctl::CapsuleSession;
use anode_ctl::store::{self, Op};
use anode_wire::NodeAddr;

use super::client::{Conn, connect_to};

/// `anode store` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum StoreCommand {
    /// Print KEY's value at DEST.
    #[command(after_help = "Example: anode store get 127.0.0.1:4003 greeting --node-port 4001")]
    Get {
        #[command(flatten)]
        at: At,
    },
    /// Set KEY to VALUE at DEST (kept in DEST's files: across restarts, until deleted).
    #[command(
        after_help = "Example: anode store put 127.0.0.1:4003 greeting hello --node-port 4001"
    )]
    Put {
        #[command(flatten)]
        at: At,
        /// The value (text; --hex for bytes; at most 1,024 bytes).
        value: String,
        /// VALUE is hex.
        #[arg(long)]
        hex: bool,
    },
    /// Remove KEY at DEST.
    #[command(after_help = "Example: anode store delete 127.0.0.1:4003 greeting --node-port 4001")]
    Delete {
        #[command(flatten)]
        at: At,
    },
}

/// Where and which key.
#[derive(Debug, clap::Args)]
pub struct At {
    /// The node keeping the key (IP:PORT).
    dest: NodeAddr,
    /// The key (1-64 characters of A-Z a-z 0-9 . _ -).
    #[arg(id = "store_key", value_name = "KEY")]
    key: String,
    /// Resource bound (hops) of the request; the reply gets what is left.
    #[arg(long, default_value_t = 32)]
    rb: u16,
    /// Seconds to wait for the reply.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    wait: f64,
    #[command(flatten)]
    conn: Conn,
}

/// Runs `anode store ...`.
pub fn run(c: StoreCommand) -> super::CmdResult {
    let (op, at, value) = match c {
        StoreCommand::Get { at } => (Op::Get, at, Vec::new()),
        StoreCommand::Put { at, value, hex } => (Op::Put, at, super::message_bytes(value, hex)?),
        StoreCommand::Delete { at } => (Op::Delete, at, Vec::new()),
    };
    if !(0.01..=3600.0).contains(&at.wait) {
        return Err("--wait must be between 0.01 and 3600 seconds".into());
    }
    // Checked before the node is asked, so a bad key never costs a round trip.
    store::check_key(&at.key).map_err(|e| e.to_string())?;
    let mut s = CapsuleSession::open(connect_to(&at.conn)?, protocols::STORE)?;
    let wait = Duration::from_secs_f64(at.wait);
    let got = store::call(&mut s, at.dest, (op, &at.key, &value), at.rb, wait)
        .map_err(|e| e.to_string())?;
    let json = at.conn.json();
    match op {
        Op::Get if json => {
            let p = anode_ctl::Payload(got);
            let v = serde_json::json!({"key": at.key, "value": p.as_text(), "hex": p.to_hex()});
            println!("{v}");
        }
        Op::Get => {
            let p = anode_ctl::Payload(got);
            match p.as_text() {
                Some(t) => println!("{t}"),
                None => println!("{} (hex)", p.to_hex()),
            }
        }
        _ if json => println!("{}", serde_json::json!({"key": at.key, "done": true})),
        Op::Put => println!("{} = {} bytes at {}", at.key, value.len(), at.dest),
        Op::Delete => println!("{} deleted at {}", at.key, at.dest),
    }
    Ok(())
}
