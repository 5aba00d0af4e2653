//! `anode new protocol NAME`: a capsule protocol crate to start from (the work is in
//! `anode_guest_build::scaffold`).

use std::path::PathBuf;

/// What to make.
#[derive(Debug, clap::Subcommand)]
pub enum NewCommand {
    /// A capsule protocol crate: an echo protocol, the guest SDK, a three-node topology.
    #[command(
        after_help = "Then:\n  cd NAME && cargo build --release && anode emulate topology.toml"
    )]
    Protocol {
        /// The crate's name (lowercase letters, digits, '-' and '_').
        name: String,
        /// Where to put it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// Runs `anode new ...`.
pub fn run(c: NewCommand) -> super::CmdResult {
    let NewCommand::Protocol { name, dir } = c;
    let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
    let files = anode_guest_build::scaffold::protocol(&dir, &name).map_err(|e| e.to_string())?;
    println!("created {} ({} files)", dir.display(), files.len());
    println!(
        "next:\n  cd {}\n  cargo build --release\n  anode emulate topology.toml",
        dir.display()
    );
    Ok(())
}
