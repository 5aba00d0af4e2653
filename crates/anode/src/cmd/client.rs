//! Commands that talk to a running node over its control socket: `status`, `routes`,
//! `neighbors`, `links`, `stats`, `domains`, `send`, `listen`, `link up|down`, `stop`.
//!
//! Each takes `--socket PATH` or `--node-port PORT` to pick the node (default: the only node
//! running under the default socket directory), or `--node HOST:PORT --key BASE.key` for a
//! remote node (its `[remote] listen`; every request signed, see `anode_ctl::remote`), and
//! `--json` for the protocol's JSON instead of tables.

mod show;
pub(crate) mod table;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anode_ctl::{Client, ClientError, Payload, SendOptions, StreamItem, path};
use anode_wire::NodeAddr;
use serde::Serialize;

/// Which node, and how to print.
#[derive(Debug, Clone, clap::Args)]
pub struct Conn {
    /// The node's control socket.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Pick the node by its UDP port (its default control socket).
    #[arg(long, value_name = "PORT", conflicts_with = "socket")]
    node_port: Option<u16>,
    /// A remote node's management address (HOST:PORT, its `[remote] listen`; needs --key),
    /// or a node of a running `anode emulate --realtime` by its name in the topology.
    #[arg(long, value_name = "HOST:PORT|NAME", conflicts_with_all = ["socket", "node_port"])]
    node: Option<String>,
    /// The secret key (BASE.key of `anode keygen`) that signs requests to a remote node.
    #[arg(long, value_name = "FILE", requires = "node")]
    key: Option<PathBuf>,
    /// How long each signed request stays valid, in seconds (at most the node's max_ttl_s).
    #[arg(long, value_name = "SECS", default_value_t = anode_ctl::remote::DEFAULT_TTL_S, requires = "key")]
    ttl: u64,
    /// Print JSON (one object per line) instead of tables.
    #[arg(long)]
    json: bool,
}

/// `up` or `down`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum UpDown {
    /// Administratively up.
    Up,
    /// Administratively down (its neighbor goes down at once).
    Down,
}

/// Client subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Show a running node's address, uptime, links, neighbors and traffic.
    Status(Conn),
    /// Show a running node's routing table.
    Routes(Conn),
    /// Show a running node's up neighbors.
    Neighbors(Conn),
    /// Show a running node's links.
    Links(Conn),
    /// Show a running node's counters (node, UDP driver, control server).
    Stats(Conn),
    /// Show a running node's drops: where (the node or an EE), the reason, the count and what
    /// the reason means. Every drop is counted under one reason of one list, the node's and
    /// the EEs' alike.
    #[command(after_help = "\
Example:
  anode drops --node-port 4002          # the non-zero drop counters, explained
  anode drops --node-port 4002 --all    # every reason a drop can have, with its count")]
    Drops {
        /// List every reason, also those with no drops.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show the NodeOS domains of a running node's EEs (CPU, memory, drops, terminations).
    Domains(Conn),
    /// Show a running node's open NodeOS channels: the cut-through channels EEs opened for
    /// flows (kind, domain, Type ID, demux keys, packets, bytes, drops, age, expiry).
    #[command(after_help = "\
Example:
  anode flood --node-port 4001 127.0.0.1:4003 --count 2000 --cut-through
  anode channels --node-port 4002     # the flow's channel at the middle node, its packet count")]
    Channels(Conn),
    /// Send a datagram from the node to an application port at DEST.
    #[command(after_help = "Example: anode send --node-port 4001 127.0.0.1:4002 --port 7 hello")]
    Send {
        /// The destination node (IP:PORT).
        dest: NodeAddr,
        /// The destination application port.
        #[arg(long, short)]
        port: u16,
        /// Resource bound (hops the datagram may take); the node's default_rb if not given.
        #[arg(long)]
        rb: Option<u16>,
        /// Flow id.
        #[arg(long, default_value_t = 0)]
        flow: u64,
        /// MESSAGE is hex (e.g. 00ff10), not text.
        #[arg(long)]
        hex: bool,
        /// Send under this ANEP Type ID (an EE module's, e.g. 0x0A10; `anode module ees`
        /// lists them) instead of as a plain datagram: the EE runs at the destination.
        #[arg(long, value_name = "TYPE_ID", value_parser = parse_type_id)]
        ee: Option<u16>,
        /// With --ee: the EE runs at every hop on the way, not only at the destination.
        #[arg(long, requires = "ee")]
        every_hop: bool,
        /// Send this many copies.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        count: u64,
        /// With --count: at most this many a second (default: as fast as the node takes them).
        #[arg(long, value_name = "PPS")]
        rate: Option<f64>,
        /// The payload.
        message: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Receive datagrams for an application port and print them.
    #[command(
        after_help = "Example: anode listen --node-port 4002 --port 7 --count 1 --timeout 10"
    )]
    Listen {
        /// The application port to claim.
        #[arg(long, short)]
        port: u16,
        /// Exit after this many datagrams.
        #[arg(long)]
        count: Option<u64>,
        /// Exit after this many seconds (an error if --count was not reached).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Take a link administratively up or down (by name or number).
    Link {
        /// up or down.
        state: UpDown,
        /// The link's name or number (see `anode links`).
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Stop a running node.
    Stop(Conn),
    /// Replace a running node's process by a new `anode` binary without losing a packet:
    /// the new process takes over the node's sockets, routes, held capsules and EE state
    /// (the built-in EEs are native code, so this is how they are upgraded).
    #[command(after_help = "\
Example:
  cargo build --release -p anode              # a new target/release/anode
  anode upgrade --node-port 4002              # node b now runs it, same pid to its parent
  anode upgrade --node-port 4002 --binary /opt/anode-0.2/bin/anode

The node pauses only while its state moves (milliseconds; packets wait in its socket
buffer); code is built by the new process before that. If the new process fails, the
node goes on in the old one and the command says why. Applications connected to the node
(anode listen, port holders) are disconnected and reconnect.")]
    Upgrade {
        /// The new executable (default: the node's own, as it is on disk now).
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
        /// Seconds the new process may take to start and take over.
        #[arg(long, value_name = "SECS", default_value_t = 30)]
        timeout: u32,
        #[command(flatten)]
        conn: Conn,
    },
}

/// Runs a client command.
pub fn run(c: ClientCommand) -> super::CmdResult {
    run_inner(c).map_err(|e| e.to_string())
}

/// A failure of a client command.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// No socket could be chosen.
    #[error(transparent)]
    Find(#[from] path::FindSocketError),
    /// The node or the connection failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
    /// `listen` ended before --count datagrams.
    #[error("timed out after {secs} s with {got} of {want} datagram(s)")]
    ListenTimeout {
        /// Seconds waited.
        secs: f64,
        /// Datagrams received.
        got: u64,
        /// Datagrams wanted.
        want: u64,
    },
}

/// Connects to the node `c` names (for the other command modules).
pub(crate) fn connect_to(c: &Conn) -> Result<Client, String> {
    connect(c).map_err(|e| e.to_string())
}

impl Conn {
    /// A connection to a local node (or an emulation node by name), for commands that
    /// flatten their own options.
    pub(crate) fn local(
        socket: Option<PathBuf>,
        node_port: Option<u16>,
        node: Option<String>,
        json: bool,
    ) -> Conn {
        Conn {
            socket,
            node_port,
            node,
            key: None,
            ttl: anode_ctl::remote::DEFAULT_TTL_S,
            json,
        }
    }

    /// Whether `--json` was given.
    pub(crate) fn json(&self) -> bool {
        self.json
    }
}

fn connect(c: &Conn) -> Result<Client, CliError> {
    if let Some(to) = c.node.as_deref().and_then(remote_addr).transpose()? {
        let Some(key) = &c.key else {
            return Err(CliError::Usage(format!(
                "--node {to} is a remote node: sign the requests with --key BASE.key (`anode keygen --out BASE`, BASE.pub in the node's [[remote.key]])"
            )));
        };
        let key = anode_modules::read_key(key).map_err(|e| CliError::Usage(e.to_string()))?;
        let signer = anode_ctl::remote::RemoteSigner {
            key,
            to,
            ttl_s: c.ttl,
        };
        return Ok(Client::connect_remote(
            signer,
            concat!("anode-cli ", env!("CARGO_PKG_VERSION")),
        )?);
    }
    if c.key.is_some() {
        return Err(CliError::Usage(
            "--key signs requests to a remote node: give --node HOST:PORT".into(),
        ));
    }
    let named = match c.node.as_deref() {
        Some(n) => Some(path::emulation_socket_path(n)?),
        None => None,
    };
    let p = path::find_socket(named.as_deref().or(c.socket.as_deref()), c.node_port)?;
    Ok(Client::connect(
        p,
        concat!("anode-cli ", env!("CARGO_PKG_VERSION")),
    )?)
}

/// `--node` as a remote node's address: `None` for an emulation node's name (no colon).
fn remote_addr(node: &str) -> Option<Result<std::net::SocketAddr, CliError>> {
    use std::net::ToSocketAddrs;
    if !node.contains(':') {
        return None;
    }
    let found = node.to_socket_addrs().map(|mut a| a.next());
    Some(match found {
        Ok(Some(a)) => Ok(a),
        Ok(None) => Err(CliError::Usage(format!("--node {node}: no address"))),
        Err(e) => Err(CliError::Usage(format!(
            "--node {node} is not HOST:PORT ({e}); give a remote node's [remote] listen address"
        ))),
    })
}

fn print<T: Serialize>(json: bool, v: &T, human: impl FnOnce(&T) -> String) {
    if json {
        match serde_json::to_string(v) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("anode: cannot encode JSON: {e}"),
        }
    } else {
        print!("{}", human(v));
    }
}

fn run_inner(cmd: ClientCommand) -> Result<(), CliError> {
    match cmd {
        ClientCommand::Status(c) => print(c.json, &connect(&c)?.status()?, show::status),
        ClientCommand::Routes(c) => print(c.json, &connect(&c)?.routes()?, |r| show::routes(r)),
        ClientCommand::Neighbors(c) => {
            print(c.json, &connect(&c)?.neighbors()?, |n| show::neighbors(n))
        }
        ClientCommand::Links(c) => print(c.json, &connect(&c)?.links()?, |l| show::links(l)),
        ClientCommand::Stats(c) => print(c.json, &connect(&c)?.stats()?, show::stats),
        ClientCommand::Drops { all, conn } => {
            let rows = show::drop_rows(&connect(&conn)?.stats()?.counters.drops, all);
            print(conn.json, &rows, |r| show::drops(r))
        }
        ClientCommand::Domains(c) => print(c.json, &connect(&c)?.domains()?, |d| show::domains(d)),
        ClientCommand::Channels(c) => {
            let (cut, chans) = connect(&c)?.channels()?;
            print(c.json, &chans, |l| show::channels(cut, l))
        }
        ClientCommand::Send {
            dest,
            port,
            rb,
            flow,
            hex,
            ee,
            every_hop,
            count,
            rate,
            message,
            conn,
        } => {
            if rb == Some(0) {
                return Err(CliError::Usage("--rb must be at least 1".into()));
            }
            if rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
                return Err(CliError::Usage("--rate must be a positive number".into()));
            }
            let payload = if hex {
                Payload::from_hex(&message).map_err(|e| CliError::Usage(e.to_string()))?
            } else {
                Payload::from(message.as_str())
            };
            let n = payload.0.len();
            let opts = SendOptions {
                rb,
                flow,
                ee_type: ee,
                every_hop,
            };
            let mut c = connect(&conn)?;
            let t0 = std::time::Instant::now();
            for i in 0..count {
                if let Some(r) = rate {
                    let due = t0 + std::time::Duration::from_secs_f64(i as f64 / r);
                    std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
                }
                c.send(dest, port, payload.clone(), opts)?;
            }
            let v = serde_json::json!({"sent": n, "count": count, "dst": dest, "port": port, "ee_type": ee});
            print(conn.json, &v, |_| {
                let what = ee.map_or(String::new(), |t| format!(" under EE 0x{t:04X}"));
                let times = if count == 1 {
                    String::new()
                } else {
                    format!(" x{count}")
                };
                format!("sent {n} bytes{times} to {dest} port {port}{what}\n")
            });
        }
        ClientCommand::Listen {
            port,
            count,
            timeout,
            conn,
        } => listen(port, count, timeout, &conn)?,
        ClientCommand::Link { state, name, conn } => {
            let up = matches!(state, UpDown::Up);
            connect(&conn)?.set_link(&name, up)?;
            let word = if up { "up" } else { "down" };
            let v = serde_json::json!({"link": name, "up": up});
            print(conn.json, &v, |_| format!("link {name} is {word}\n"));
        }
        ClientCommand::Upgrade {
            binary,
            timeout,
            conn,
        } => upgrade_node(binary, timeout, &conn)?,
        ClientCommand::Stop(c) => {
            let mut cl = connect(&c)?;
            let node = cl.node_info().node;
            cl.shutdown()?;
            let v = serde_json::json!({"stopping": node});
            print(c.json, &v, |_| format!("node {node} is stopping\n"));
        }
    }
    Ok(())
}

/// `anode upgrade` (and `anode module upgrade capsule|plan|deploy`).
pub(crate) fn upgrade_node(
    binary: Option<PathBuf>,
    timeout: u32,
    conn: &Conn,
) -> Result<(), CliError> {
    let binary = match binary {
        Some(b) => Some(
            std::fs::canonicalize(&b)
                .map_err(|e| CliError::Usage(format!("--binary {}: {e}", b.display())))?
                .display()
                .to_string(),
        ),
        None => None,
    };
    let mut cl = connect(conn)?;
    let node = cl.node_info().node;
    let t = Duration::from_secs(u64::from(timeout.max(1)));
    let u = cl.upgrade(binary, t)?;
    print(conn.json, &u, |u| {
        let mut s = format!(
            "node {node} upgraded: pid {} -> {} ({}), {} in {} ms, paused {} ms\n",
            u.old_pid, u.new_pid, u.binary, u.new_version, u.total_ms, u.paused_ms
        );
        s += &format!(
            "  carried over: {} neighbors, {} routes, {} link-state entries, {} code objects, {} held packets, {} queued\n",
            u.neighbors, u.routes, u.lsas, u.code_objects, u.held, u.queued
        );
        if u.skipped > 0 {
            s += &format!(
                "  {} records did not fit the new process and are relearned\n",
                u.skipped
            );
        }
        for r in &u.refused {
            s += &format!("  refused: {r}\n");
        }
        s
    });
    Ok(())
}

fn listen(
    port: u16,
    count: Option<u64>,
    timeout: Option<f64>,
    conn: &Conn,
) -> Result<(), CliError> {
    let limit = match timeout {
        Some(t) if !(t.is_finite() && t > 0.0) => {
            return Err(CliError::Usage(
                "--timeout must be a positive number of seconds".into(),
            ));
        }
        Some(t) => Some(Duration::from_secs_f64(t.min(1e9))),
        None => None,
    };
    let mut c = connect(conn)?;
    c.set_timeout(None)?;
    c.bind(port)?;
    let deadline = limit.map(|l| Instant::now() + l);
    eprintln!(
        "anode: listening on port {port} of node {}{}",
        c.node_info().node,
        if count.is_none() && deadline.is_none() {
            " (Ctrl-C to stop)"
        } else {
            ""
        }
    );
    let mut got = 0u64;
    if count == Some(0) {
        return Ok(());
    }
    for item in c.subscription(deadline) {
        match item {
            Ok(StreamItem::Delivery(d)) => {
                got += 1;
                print(conn.json, &d, |d| format!("{}\n", show::delivery(d)));
                if count.is_some_and(|n| got >= n) {
                    return Ok(());
                }
            }
            Ok(_) => {}
            Err(ClientError::Timeout) => match count {
                Some(want) => {
                    return Err(CliError::ListenTimeout {
                        secs: timeout.unwrap_or(0.0),
                        got,
                        want,
                    });
                }
                None => return Ok(()),
            },
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A Type ID as `0x0A10` or `2576`.
fn parse_type_id(s: &str) -> Result<u16, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u16::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("'{s}' is not an ANEP Type ID (e.g. 0x0A10)"))
}
