//! The one error type of the wire crate: every variant says why a packet was refused.

use thiserror::Error;

/// Why bytes could not be parsed (or a value could not be emitted).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// Fewer bytes than the structure needs.
    #[error("{what} truncated: needs {need} bytes, has {have}")]
    Truncated {
        /// Which structure was being read.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A version this implementation does not speak.
    #[error("{what} version {found} not supported (this node speaks version {supported})")]
    UnsupportedVersion {
        /// Which structure.
        what: &'static str,
        /// Version found in the packet.
        found: u8,
        /// Version this node speaks.
        supported: u8,
    },
    /// A length field that contradicts the structure or the buffer.
    #[error("{what} has an invalid length field: {detail}")]
    BadLength {
        /// Which structure.
        what: &'static str,
        /// What is wrong with it.
        detail: &'static str,
    },
    /// An address-type code that is not IPv4 or IPv6.
    #[error("unknown address type {0} in identifier option")]
    UnknownAddressType(u16),
    /// A control message kind this node does not know.
    #[error("unknown control message kind {0}")]
    UnknownControlKind(u8),
    /// A field holds a value that is not allowed.
    #[error("{what}: {detail}")]
    BadField {
        /// Which field.
        what: &'static str,
        /// What is wrong with it.
        detail: &'static str,
    },
    /// A value too large for its field when emitting.
    #[error("{what} too large to encode: {len} exceeds {max}")]
    TooLarge {
        /// Which structure.
        what: &'static str,
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
}
