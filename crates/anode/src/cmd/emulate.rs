//! `anode emulate` (being built; see the module owner's work).

/// Arguments of `anode emulate`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> super::CmdResult {
    Err("'anode emulate' is not built yet".into())
}
