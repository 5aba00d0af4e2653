//! `anode new protocol NAME` and `anode new module NAME`: a capsule protocol or a service
//! module crate to start from (the work is in `anode_guest_build::scaffold`).

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
    /// A service-module crate: a packet processor that drops every 2nd datagram, its
    /// manifest, the module SDK, a three-node topology that installs it.
    #[command(
        after_help = "Then:\n  cd NAME && cargo build --release && anode emulate topology.toml\n  anode module pack .   # NAME-0.1.0.amod, to sign and install on real nodes"
    )]
    Module {
        /// The crate's and the module's name (lowercase letters, digits and '-').
        name: String,
        /// Where to put it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// Runs `anode new ...`.
pub fn run(c: NewCommand) -> super::CmdResult {
    let (name, dir, make): (_, _, fn(&_, &_) -> _) = match c {
        NewCommand::Protocol { name, dir } => (name, dir, anode_guest_build::scaffold::protocol),
        NewCommand::Module { name, dir } => (name, dir, anode_guest_build::scaffold::module),
    };
    let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
    let files = make(&dir, &name).map_err(|e| e.to_string())?;
    println!("created {} ({} files)", dir.display(), files.len());
    println!(
        "next:\n  cd {}\n  cargo build --release\n  anode emulate topology.toml",
        dir.display()
    );
    Ok(())
}
