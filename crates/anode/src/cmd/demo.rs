//! `anode demo` (being built; see the module owner's work).

/// Arguments of `anode demo`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> super::CmdResult {
    Err("'anode demo' is not built yet".into())
}
