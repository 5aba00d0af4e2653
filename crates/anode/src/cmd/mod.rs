//! One module per subcommand (or family of subcommands).

pub mod capsule;
pub mod capture;
pub mod client;
pub mod code;
pub mod demo;
pub mod emulate;
pub mod module;
pub mod module_ops;
pub mod multicast;
pub mod new;
pub mod node;
pub mod plan;
pub mod plan_inject;
pub mod policy;
pub mod ports;
pub mod router;
pub mod tools;
pub mod view;

/// The error every command returns: a message for a person, already saying what to do.
pub type CmdResult = Result<(), String>;
