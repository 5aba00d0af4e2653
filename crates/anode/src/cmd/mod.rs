//! One module per subcommand (or family of subcommands).

pub mod client;
pub mod demo;
pub mod emulate;
pub mod node;
pub mod plan;
pub mod router;

/// The error every command returns: a message for a person, already saying what to do.
pub type CmdResult = Result<(), String>;
