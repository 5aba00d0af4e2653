//! One module per subcommand (or family of subcommands).

pub mod capsule;
pub mod capture;
pub mod client;
pub mod code;
pub mod demo;
pub mod emulate;
pub mod experiment;
pub mod lab;
pub mod module;
pub mod module_deploy;
pub mod module_ops;
pub mod multicast;
pub mod new;
pub mod node;
pub mod plan;
pub mod plan_inject;
pub mod policy;
pub mod ports;
pub mod router;
pub mod store;
pub mod tools;
pub mod topo;
pub mod view;

/// The error every command returns: a message for a person, already saying what to do.
pub type CmdResult = Result<(), String>;

/// Installs the SIGINT/SIGTERM handlers (`anode_ether::signals`) with a message for a person.
pub fn install_signals() -> CmdResult {
    anode_ether::signals::install().map_err(|e| format!("cannot install signal handlers: {e}"))
}

/// A MESSAGE argument's bytes: the text, or hex with `--hex`.
pub fn message_bytes(message: String, hex: bool) -> Result<Vec<u8>, String> {
    if hex {
        Ok(anode_ctl::Payload::from_hex(&message)
            .map_err(|e| e.to_string())?
            .0)
    } else {
        Ok(message.into_bytes())
    }
}

/// When a `--timeout` in seconds ends (checked: 0.001 s to a year).
pub fn deadline(timeout: Option<f64>) -> Result<Option<std::time::Instant>, String> {
    match timeout {
        Some(t) if !(0.001..=31_536_000.0).contains(&t) => {
            Err("--timeout must be between 0.001 and 31536000 seconds".into())
        }
        t => Ok(t.map(|t| std::time::Instant::now() + std::time::Duration::from_secs_f64(t))),
    }
}

/// Ok if `count` (when given) messages came; else how many of how many did.
pub fn all_came(got: u64, count: Option<u64>) -> CmdResult {
    match count {
        Some(c) if got < c => Err(format!("{got} of {c} messages came")),
        _ => Ok(()),
    }
}

/// One message a group or a service got: `group 7: text` (hex if binary), or a JSON line.
pub fn print_data(json: bool, (what, id): (&str, u64), data: &[u8]) {
    let p = anode_ctl::Payload(data.to_vec());
    if json {
        let mut v = serde_json::Map::new();
        v.insert(what.into(), id.into());
        v.insert("data".into(), p.to_hex().into());
        println!("{}", serde_json::Value::Object(v));
        return;
    }
    match p.as_text() {
        Some(t) => println!("{what} {id}: {t}"),
        None => println!("{what} {id}: {} (hex)", p.to_hex()),
    }
}
