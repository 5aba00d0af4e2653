//! `anode code list|show|put|evict`: the capsule code cache of a running node.
//!
//! Code objects are named by the SHA-256 of their WebAssembly bytes (64 hex digits), or, where
//! the node caches exactly one code object of that protocol, by its protocol name (`ping`).
//! `put` takes a `.wasm` file or the name of a built-in protocol (`ping`, `traceroute`,
//! `flood`, `multicast`, `counter`, `forward`). `state` shows the soft state a code object
//! keeps at the node.

use std::path::PathBuf;

use anode_ctl::CodeEntry;

use super::client::{Conn, connect_to};

/// `anode code ...`
#[derive(Debug, clap::Subcommand)]
pub enum CodeCommand {
    /// List the code objects in the node's memory and disk caches.
    List(Conn),
    /// Show one code object.
    Show {
        /// Its SHA-256 (64 hex digits) or protocol name.
        hash: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Install a WebAssembly module (a .wasm file, or a built-in protocol's name).
    #[command(after_help = "Example: anode code put --node-port 4001 ping")]
    Put {
        /// A .wasm file (or WebAssembly text, .wat), or one of: ping, traceroute, flood,
        /// multicast, counter, forward.
        module: PathBuf,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show the soft state a code object keeps at the node: key, value, time left.
    #[command(after_help = "Example: anode code state multicast --node-port 4001")]
    State {
        /// Its SHA-256 (64 hex digits) or protocol name.
        hash: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove a code object from memory and disk.
    Evict {
        /// Its SHA-256 (64 hex digits) or protocol name.
        hash: String,
        #[command(flatten)]
        conn: Conn,
    },
}

fn places(e: &CodeEntry) -> String {
    let mut at = Vec::new();
    if e.in_memory {
        at.push("memory");
    }
    if e.live {
        at.push("live");
    }
    if e.on_disk {
        at.push("disk");
    }
    at.join(",")
}

fn line(e: &CodeEntry) -> String {
    let name = if e.name.is_empty() { "-" } else { &e.name };
    format!(
        "{}  {name:<12} {:>10}  {:>12}  {}\n",
        e.hash,
        e.wasm_len,
        e.mem_bytes,
        places(e)
    )
}

/// The SHA-256 of the code object `name` names at the node: `name` itself if it is 64 hex
/// digits, else the one cached code object whose protocol name it is.
pub fn resolve(client: &mut anode_ctl::Client, name: &str) -> Result<String, String> {
    let name = name.trim();
    if anode_ctl::app::parse_code_name(name).is_ok() {
        return Ok(name.to_string());
    }
    let list = client.code_list().map_err(|e| e.to_string())?;
    let hits: Vec<&CodeEntry> = list.iter().filter(|c| c.name == name).collect();
    match hits.as_slice() {
        [one] => Ok(one.hash.clone()),
        [] => Err(format!(
            "no code object named '{name}' at the node: give a SHA-256 (64 hex digits) or one of the names `anode code list` shows"
        )),
        many => Err(format!(
            "{} code objects are named '{name}' ({}): give the SHA-256",
            many.len(),
            many.iter()
                .map(|c| &c.hash[..12])
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// One soft-state key or value for a human: text if it is printable, else hex.
fn shown(p: &anode_ctl::Payload) -> String {
    match p.as_text() {
        Some(t) if !t.is_empty() && t.chars().all(|c| c.is_ascii_graphic() || c == ' ') => {
            format!("\"{t}\"")
        }
        _ => p.to_hex(),
    }
}

fn out(json: bool, v: &impl serde::Serialize, text: String) -> super::CmdResult {
    if json {
        let s = serde_json::to_string(v).map_err(|e| format!("cannot encode JSON: {e}"))?;
        println!("{s}");
    } else {
        print!("{text}");
    }
    Ok(())
}

/// Runs `anode code ...`.
pub fn run(cmd: CodeCommand) -> super::CmdResult {
    let e = |e: anode_ctl::ClientError| e.to_string();
    match cmd {
        CodeCommand::List(c) => {
            let list = connect_to(&c)?.code_list().map_err(e)?;
            let text = if list.is_empty() {
                "no code objects cached\n".to_string()
            } else {
                let mut t = super::client::table::Table::new(&[
                    "CODE (SHA-256)",
                    "NAME",
                    "WASM",
                    "CACHED",
                    "WHERE",
                ]);
                for e in &list {
                    t.row(vec![
                        e.hash.clone(),
                        if e.name.is_empty() {
                            "-".into()
                        } else {
                            e.name.clone()
                        },
                        super::client::table::bytes(e.wasm_len),
                        super::client::table::bytes(e.mem_bytes),
                        places(e),
                    ]);
                }
                t.render()
            };
            out(c.json(), &list, text)
        }
        CodeCommand::Show { hash, conn } => {
            let mut client = connect_to(&conn)?;
            let hash = resolve(&mut client, &hash)?;
            let entry = client.code_show(&hash).map_err(e)?;
            let text = line(&entry);
            out(conn.json(), &entry, text)
        }
        CodeCommand::Put { module, conn } => {
            let name = module.to_string_lossy();
            let wasm = match anode_capsule::protocols::ALL.iter().find(|(n, _)| *n == name) {
                Some((_, w)) => w.to_vec(),
                None => anode_capsule::read_code_file(&module).map_err(|err| {
                    format!(
                        "{err}; give a .wasm or .wat file or a built-in protocol name (ping, traceroute, flood, multicast, counter, forward)"
                    )
                })?,
            };
            let entry = connect_to(&conn)?.code_put(wasm).map_err(e)?;
            let text = format!("installed {}", line(&entry));
            out(conn.json(), &entry, text)
        }
        CodeCommand::State { hash, conn } => {
            let mut client = connect_to(&conn)?;
            let hash = resolve(&mut client, &hash)?;
            let entries = client.code_state(&hash).map_err(e)?;
            let text = if entries.is_empty() {
                format!("no soft state for {hash}\n")
            } else {
                let mut t = super::client::table::Table::new(&["KEY", "VALUE", "EXPIRES IN"]);
                for s in &entries {
                    t.row(vec![
                        shown(&s.key),
                        shown(&s.value),
                        format!("{:.1} s", s.expires_in_ms as f64 / 1000.0),
                    ]);
                }
                t.render()
            };
            out(
                conn.json(),
                &serde_json::json!({"hash": hash, "entries": entries}),
                text,
            )
        }
        CodeCommand::Evict { hash, conn } => {
            let mut client = connect_to(&conn)?;
            let hash = resolve(&mut client, &hash)?;
            let removed = client.code_evict(&hash).map_err(e)?;
            let text = if removed {
                format!("evicted {hash}\n")
            } else {
                format!("{hash} was not cached\n")
            };
            out(
                conn.json(),
                &serde_json::json!({"hash": hash, "removed": removed}),
                text,
            )
        }
    }
}
