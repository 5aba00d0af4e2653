//! `anode multicast join|send|members`: the multicast capsule protocol from the command line
//! (the work is in `anode_ctl::multicast`).

use anode_capsule::protocols;
use anode_ctl::{CapsuleSession, multicast};
use anode_ether::signals;
use anode_wire::NodeAddr;

use super::client::{Conn, connect_to};

/// `anode multicast` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum MulticastCommand {
    /// Join GROUP toward its root and print what is sent to the group (until Ctrl-C,
    /// --count or --timeout); the join is refreshed every minute.
    #[command(
        after_help = "Example: anode multicast join 7 --root 127.0.0.1:4001 --node-port 4002"
    )]
    Join {
        /// The group number.
        group: u32,
        /// The group's root node (where data is sent).
        #[arg(long)]
        root: NodeAddr,
        /// Exit after this many messages.
        #[arg(long, short = 'c')]
        count: Option<u64>,
        /// Exit after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
        /// Resource bound of the join.
        #[arg(long, default_value_t = 32)]
        rb: u16,
        #[command(flatten)]
        conn: Conn,
    },
    /// Send MESSAGE to GROUP from its root (the node this command talks to).
    #[command(after_help = "Example: anode multicast send 7 \"hello, group\" --node-port 4001")]
    Send {
        /// The group number.
        group: u32,
        /// The message (text; --hex for bytes).
        message: String,
        /// MESSAGE is hex.
        #[arg(long)]
        hex: bool,
        /// Resource bound of the data capsules.
        #[arg(long, default_value_t = 32)]
        rb: u16,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show the groups a node holds: the neighbors it copies each group's data to and the
    /// port of a member there (the protocol's soft state at that node).
    #[command(after_help = "Example: anode multicast members --node-port 4001")]
    Members {
        /// Only this group.
        group: Option<u32>,
        #[command(flatten)]
        conn: Conn,
    },
}

/// `multicast members`: the groups in the protocol's soft state at the node.
fn members(group: Option<u32>, conn: &Conn) -> super::CmdResult {
    let hash = hex::encode(anode_capsule::code_hash(protocols::MULTICAST));
    let entries = connect_to(conn)?
        .code_state(&hash)
        .map_err(|e| e.to_string())?;
    let groups: Vec<_> = multicast::groups(&entries)
        .into_iter()
        .filter(|g| group.is_none_or(|want| g.group == want))
        .collect();
    if conn.json() {
        let v = serde_json::to_string(&groups).map_err(|e| format!("cannot encode JSON: {e}"))?;
        println!("{v}");
        return Ok(());
    }
    if groups.is_empty() {
        println!("no multicast groups at this node");
        return Ok(());
    }
    let mut t =
        super::client::table::Table::new(&["GROUP", "DOWNSTREAM", "MEMBER PORT", "EXPIRES IN"]);
    for g in &groups {
        let down: Vec<String> = g.downstream.iter().map(ToString::to_string).collect();
        t.row(vec![
            g.group.to_string(),
            if down.is_empty() {
                "-".into()
            } else {
                down.join(", ")
            },
            g.member_port.map_or("-".into(), |p| p.to_string()),
            format!("{:.0} s", g.expires_in_ms as f64 / 1000.0),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}

/// Runs `anode multicast ...`.
pub fn run(c: MulticastCommand) -> super::CmdResult {
    match c {
        MulticastCommand::Join {
            group,
            root,
            count,
            timeout,
            rb,
            conn,
        } => {
            let deadline = super::deadline(timeout)?;
            super::install_signals()?;
            let mut s = CapsuleSession::open(connect_to(&conn)?, protocols::MULTICAST)?;
            multicast::join(&mut s, root, group, rb)?;
            eprintln!(
                "joined group {group} at {} toward root {root} (port {}); waiting for data",
                s.node(),
                s.port()
            );
            let json = conn.json();
            let got = multicast::listen(
                &mut s,
                (root, group, rb),
                count,
                deadline,
                &signals::stop_requested,
                &mut |data| super::print_data(json, ("group", u64::from(group)), data),
            )?;
            super::all_came(got, count)
        }
        MulticastCommand::Send {
            group,
            message,
            hex,
            rb,
            conn,
        } => {
            let data = super::message_bytes(message, hex)?;
            let mut s = CapsuleSession::open(connect_to(&conn)?, protocols::MULTICAST)?;
            multicast::send(&mut s, group, rb, &data)?;
            println!(
                "sent {} bytes to group {group} from its root {}",
                data.len(),
                s.node()
            );
            Ok(())
        }
        MulticastCommand::Members { group, conn } => members(group, &conn),
    }
}
