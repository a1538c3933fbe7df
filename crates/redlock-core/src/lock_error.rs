//! [`LockError`]: what a driver's lock call can fail with. Built from the core's own
//! outcomes and errors; the core itself never returns it.

use std::fmt;

use crate::address::AddressError;
use crate::error::{ConfigError, UsageError};
use crate::id::NodeId;
use crate::io::{AcquireFailure, LostReason, NodeFault};

/// What a driver's lock call can fail with: the acquire failures and losses of the core's
/// events, bad configuration, and the driver being gone. Shared by every driver.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockError {
    /// Other holders kept us from a quorum; lists the nodes where the key was held.
    Contended {
        /// Nodes on which another token held the key.
        nodes: Vec<NodeId>,
    },
    /// Too many nodes failed; lists each failed node with its fault.
    QuorumUnreachable {
        /// Each failed node with its fault.
        errors: Vec<(NodeId, NodeFault)>,
    },
    /// A quorum said yes, too late to leave any usable validity.
    ValidityExhausted,
    /// The overall wait deadline passed before an attempt succeeded.
    WaitDeadline,
    /// The acquisition was cancelled.
    Cancelled,
    /// The lock was lost.
    Lost(LostReason),
    /// The lock is not held (already released).
    NotHeld,
    /// The configuration is invalid.
    Config(ConfigError),
    /// A node URL is invalid.
    Address(AddressError),
    /// The API was misused.
    Usage(UsageError),
    /// The driver has shut down (its runtime or thread is gone).
    Shutdown,
    /// The driver could not start; says why (no runtime to run on, or the system refused a
    /// thread or a poller).
    Start(String),
}

impl From<AcquireFailure> for LockError {
    fn from(f: AcquireFailure) -> Self {
        match f {
            AcquireFailure::Contended { nodes } => Self::Contended { nodes },
            AcquireFailure::QuorumUnreachable { errors } => Self::QuorumUnreachable { errors },
            AcquireFailure::ValidityExhausted => Self::ValidityExhausted,
            AcquireFailure::WaitDeadline => Self::WaitDeadline,
            AcquireFailure::Cancelled => Self::Cancelled,
        }
    }
}

impl From<ConfigError> for LockError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

impl From<AddressError> for LockError {
    fn from(e: AddressError) -> Self {
        Self::Address(e)
    }
}

impl From<UsageError> for LockError {
    fn from(e: UsageError) -> Self {
        match e {
            UsageError::InvalidOption(c) => Self::Config(c),
            other => Self::Usage(other),
        }
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Contended { nodes } => {
                write!(f, "lock held by another client on {} node(s)", nodes.len())?;
                list(f, nodes.iter().map(|n| n.to_string()))
            }
            Self::QuorumUnreachable { errors } => {
                f.write_str("quorum unreachable")?;
                list(f, errors.iter().map(|(n, e)| format!("{n}: {e}")))
            }
            Self::ValidityExhausted => f.write_str("quorum reached too late: no validity left"),
            Self::WaitDeadline => f.write_str("gave up: the wait deadline passed"),
            Self::Cancelled => f.write_str("acquisition cancelled"),
            Self::Lost(reason) => write!(f, "lock lost: {reason:?}"),
            Self::NotHeld => f.write_str("the lock is not held"),
            Self::Config(e) => e.fmt(f),
            Self::Address(e) => e.fmt(f),
            Self::Usage(e) => e.fmt(f),
            Self::Shutdown => f.write_str("the lock driver has shut down"),
            Self::Start(why) => write!(f, "the lock driver could not start: {why}"),
        }
    }
}

impl std::error::Error for LockError {}

fn list(f: &mut fmt::Formatter<'_>, items: impl Iterator<Item = String>) -> fmt::Result {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        Ok(())
    } else {
        write!(f, " ({})", items.join("; "))
    }
}
