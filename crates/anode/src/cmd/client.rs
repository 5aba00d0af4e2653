//! Commands that talk to a running node over its control socket (being built).

/// Client subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Show a running node's status.
    Status,
}

/// Runs a client command.
pub fn run(_c: ClientCommand) -> super::CmdResult {
    Err("client commands are not built yet".into())
}
