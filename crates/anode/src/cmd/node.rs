//! `anode node` (being built; see the module owner's work).

/// Arguments of `anode node`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> super::CmdResult {
    Err("'anode node' is not built yet".into())
}
