//! Errors of the module system; every variant says what went wrong and why.

/// Why a module operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModuleError {
    /// The manifest is not valid TOML or breaks a rule.
    #[error("manifest: {0}")]
    Manifest(String),
    /// The package file is malformed.
    #[error("package: {0}")]
    Package(String),
    /// The package carries no signature.
    #[error("module {0} is unsigned: refused (sign it with `anode module sign`)")]
    Unsigned(String),
    /// The signature does not verify: manifest or code changed after signing.
    #[error("module {0} is tampered: its signature does not match its manifest and code")]
    Tampered(String),
    /// Signed by a key this node does not trust.
    #[error("module {name} is signed by untrusted publisher key {key}: refused")]
    Untrusted {
        /// The module.
        name: String,
        /// The publisher key (hex).
        key: String,
    },
    /// A key file could not be read or is malformed.
    #[error("key: {0}")]
    Key(String),
    /// The WebAssembly code does not compile or lacks the exports its kind needs.
    #[error("code of {name}: {reason}")]
    Code {
        /// The module.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// Instantiating or calling the module failed (trap, fuel, limits).
    #[error("module {name} faulted: {reason}")]
    Fault {
        /// The module.
        name: String,
        /// The trap or limit.
        reason: String,
    },
    /// No module of that name is installed.
    #[error("no module named {0} is installed")]
    NotInstalled(String),
    /// A module of that name is already installed.
    #[error("module {0} is already installed (use upgrade)")]
    AlreadyInstalled(String),
    /// The operation does not fit the module's state.
    #[error("module {name}: {reason}")]
    State {
        /// The module.
        name: String,
        /// Why the operation is not possible now.
        reason: String,
    },
    /// The configuration given does not fit the module's schema.
    #[error("configuration of {name}: {reason}")]
    Config {
        /// The module.
        name: String,
        /// What does not fit.
        reason: String,
    },
    /// I/O on a file or the repository.
    #[error("{0}")]
    Io(String),
}
