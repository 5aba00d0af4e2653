//! `anode ports register|send`: the portmapper capsule protocol from the command line (the
//! work is in `anode_ctl::ports`).

use std::time::Duration;

use anode_capsule::protocols;
use anode_ctl::{CapsuleSession, ports};
use anode_ether::signals;
use anode_wire::NodeAddr;

use super::client::{Conn, connect_to};

/// `anode ports` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum PortsCommand {
    /// Hold SERVICE at this node and print what is sent to it (until Ctrl-C, --count or
    /// --timeout; then the service is given up).
    #[command(after_help = "Example: anode ports register 80 --node-port 4002")]
    Register {
        /// The service number.
        service: u16,
        /// Exit after this many messages.
        #[arg(long, short = 'c')]
        count: Option<u64>,
        /// Exit after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Send MESSAGE to SERVICE at DEST.
    #[command(after_help = "Example: anode ports send 127.0.0.1:4002 80 hello --node-port 4001")]
    Send {
        /// The node holding the service.
        dest: NodeAddr,
        /// The service number.
        service: u16,
        /// The message (text; --hex for bytes).
        message: String,
        /// MESSAGE is hex.
        #[arg(long)]
        hex: bool,
        /// Resource bound of the capsule.
        #[arg(long, default_value_t = 32)]
        rb: u16,
        #[command(flatten)]
        conn: Conn,
    },
}

/// Runs `anode ports ...`.
pub fn run(c: PortsCommand) -> super::CmdResult {
    match c {
        PortsCommand::Register {
            service,
            count,
            timeout,
            conn,
        } => {
            let deadline = super::deadline(timeout)?;
            super::install_signals()?;
            let mut s = CapsuleSession::open(connect_to(&conn)?, protocols::PORTMAP)?;
            ports::register(&mut s, service, Duration::from_secs(5)).map_err(|e| e.to_string())?;
            eprintln!(
                "service {service} at {} is held by port {}; waiting",
                s.node(),
                s.port()
            );
            let json = conn.json();
            let got = ports::listen(
                &mut s,
                service,
                (count, deadline),
                &signals::stop_requested,
                &mut |data| super::print_data(json, ("service", u64::from(service)), data),
            )?;
            let _ = ports::unregister(&mut s, service);
            super::all_came(got, count)
        }
        PortsCommand::Send {
            dest,
            service,
            message,
            hex,
            rb,
            conn,
        } => {
            let data = super::message_bytes(message, hex)?;
            let mut s = CapsuleSession::open(connect_to(&conn)?, protocols::PORTMAP)?;
            ports::send(&mut s, dest, service, rb, &data)?;
            println!("sent {} bytes to service {service} at {dest}", data.len());
            Ok(())
        }
    }
}
