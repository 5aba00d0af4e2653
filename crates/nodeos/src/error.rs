//! The NodeOS error type: every variant says what was refused and why.

use crate::DomainId;

/// Why a NodeOS call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeOsError {
    /// No policy is configured for the principal, so it gets nothing.
    #[error("no policy is configured for principal {0:?}")]
    UnknownPrincipal(String),
    /// The domain does not exist or was terminated.
    #[error("domain {0} does not exist or was terminated")]
    NoSuchDomain(DomainId),
    /// The parent domain already has as many children as its policy allows.
    #[error("domain {parent} may have at most {max} child domains")]
    TooManyChildren {
        /// The parent.
        parent: DomainId,
        /// Its policy's limit.
        max: u32,
    },
    /// A child may not get more than its parent has.
    #[error("child policy exceeds its parent's: {0}")]
    ExceedsParent(String),
    /// A memory charge would exceed a limit.
    #[error("domain {domain}: {kind} charge of {bytes} bytes refused: {why}")]
    OverLimit {
        /// The domain charged.
        domain: DomainId,
        /// What kind of memory.
        kind: &'static str,
        /// The charge.
        bytes: u64,
        /// Which limit.
        why: String,
    },
    /// The domain's policy does not allow this channel.
    #[error("domain {domain} may not open channel {spec:?}: {why}")]
    ChannelRefused {
        /// The domain.
        domain: DomainId,
        /// The protocol spec asked for.
        spec: String,
        /// Why not.
        why: String,
    },
    /// The channel does not exist.
    #[error("channel {0} does not exist")]
    NoSuchChannel(u64),
    /// A protocol spec did not parse.
    #[error("bad protocol spec: {0}")]
    Spec(#[from] crate::chan::SpecError),
    /// Demux keys are unusable.
    #[error("bad demux keys: {0}")]
    BadKeys(String),
    /// The root domain cannot be terminated or re-created.
    #[error("the root domain (the node) cannot be terminated")]
    RootIsPermanent,
    /// A pool does not exist.
    #[error("memory pool {0} does not exist")]
    NoSuchPool(u32),
}
