//! `anode code list|show|put|evict`: the capsule code cache of a running node.
//!
//! Code objects are named by the SHA-256 of their WebAssembly bytes (64 hex digits). `put`
//! takes a `.wasm` file or the name of a built-in protocol (`ping`, `traceroute`, `flood`,
//! `multicast`, `counter`, `forward`).

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
        /// Its name (SHA-256, 64 hex digits).
        hash: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Install a WebAssembly module (a .wasm file, or a built-in protocol's name).
    #[command(after_help = "Example: anode code put --node-port 4001 ping")]
    Put {
        /// A .wasm file, or one of: ping, traceroute, flood, multicast, counter, forward.
        module: PathBuf,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove a code object from memory and disk.
    Evict {
        /// Its name (SHA-256, 64 hex digits).
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
            let entry = connect_to(&conn)?.code_show(&hash).map_err(e)?;
            let text = line(&entry);
            out(conn.json(), &entry, text)
        }
        CodeCommand::Put { module, conn } => {
            let name = module.to_string_lossy();
            let wasm = match anode_capsule::protocols::ALL.iter().find(|(n, _)| *n == name) {
                Some((_, w)) => w.to_vec(),
                None => std::fs::read(&module).map_err(|err| {
                    format!(
                        "cannot read {} ({err}); give a .wasm file or a built-in protocol name (ping, traceroute, flood, multicast, counter, forward)",
                        module.display()
                    )
                })?,
            };
            let entry = connect_to(&conn)?.code_put(wasm).map_err(e)?;
            let text = format!("installed {}", line(&entry));
            out(conn.json(), &entry, text)
        }
        CodeCommand::Evict { hash, conn } => {
            let removed = connect_to(&conn)?.code_evict(&hash).map_err(e)?;
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
