//! `anode policy sign|verify`: ed25519-signed NodeOS policies (`anode_nodeos::SignedPolicy`),
//! with the publisher keys of `anode keygen`.
//!
//! - `anode policy sign LIMITS.toml --principal P --key BASE.key [--out FILE]` signs the
//!   policy in LIMITS.toml (the keys of one policy table: cpu_share, memory_bytes, ...) for
//!   principal P and writes the signed policy (default: stdout).
//! - `anode policy verify FILE --trust HEX` says whether a node trusting HEX would accept it,
//!   and if not whether it is unsigned, tampered with, or signed by an untrusted key.
//!
//! A node takes signed policies from `[nodeos] signed` with `[nodeos] trusted_keys`.

use std::path::PathBuf;

use anode_nodeos::{Policy, SignedPolicy};

/// `anode policy ...`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Sign a principal's policy (LIMITS.toml: cpu_share, memory_bytes, ...) with a key.
    Sign {
        /// The policy's limits (TOML, the keys of one policy table).
        limits: PathBuf,
        /// Whose policy: "capsule/<sha256 hex>", "plan/<address>", "capsule/*", ...
        #[arg(long)]
        principal: String,
        /// The secret key file from `anode keygen` (BASE.key).
        #[arg(long)]
        key: PathBuf,
        /// Where to write the signed policy (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Check a signed policy as a node trusting the given keys would.
    Verify {
        /// The signed policy.
        file: PathBuf,
        /// A trusted key (hex, BASE.pub of `anode keygen`); repeat for more.
        #[arg(long = "trust", required = true)]
        trust: Vec<String>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the command.
pub fn run(c: PolicyCommand) -> super::CmdResult {
    match c {
        PolicyCommand::Sign {
            limits,
            principal,
            key,
            out,
        } => {
            let text = std::fs::read_to_string(&limits)
                .map_err(|e| format!("cannot read {}: {e}", limits.display()))?;
            let policy: Policy = toml::from_str(&text).map_err(|e| {
                format!(
                    "{}: {}; write policy keys (cpu_share, memory_bytes, soft_state_bytes, code_bytes, channel_bandwidth, max_children, max_channels, channels)",
                    limits.display(),
                    e.message().trim()
                )
            })?;
            check_principal(&principal)?;
            let key = anode_modules::read_key(&key).map_err(|e| {
                format!("{e}; make a key with `anode keygen --out BASE` and pass BASE.key")
            })?;
            let signed = SignedPolicy::sign(&principal, policy, &key).to_toml();
            match out {
                Some(o) => std::fs::write(&o, signed)
                    .map_err(|e| format!("cannot write {}: {e}", o.display()))?,
                None => print!("{signed}"),
            }
            Ok(())
        }
        PolicyCommand::Verify { file, trust, json } => {
            let keys = trust
                .iter()
                .map(|k| anode_modules::parse_public(k))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let sp =
                SignedPolicy::from_toml(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            sp.verify(&keys)
                .map_err(|e| format!("{}: refused: {e}", file.display()))?;
            if json {
                let v = serde_json::json!({
                    "file": file.display().to_string(), "ok": true, "principal": sp.principal,
                });
                println!("{v}");
            } else {
                println!("{}: ok, policy of {:?}", file.display(), sp.principal);
            }
            Ok(())
        }
    }
}

/// A principal a node's NodeOS knows (the rule node config files use too).
fn check_principal(p: &str) -> super::CmdResult {
    match anode_node::config::nodeos::principal_problem(p) {
        None => Ok(()),
        Some(why) => Err(format!("--principal: {why}")),
    }
}
