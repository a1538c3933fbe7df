//! The three error families of STYLE.md section 6: usage errors (the caller broke the
//! contract), configuration errors, and node faults (a node's failed vote).
//!
//! Outcomes such as "no quorum" or "lock lost" are not errors here; they are
//! [`Event`](crate::Event)s carrying a reason.

use std::fmt;

use crate::address::AddressError;
use crate::io::{AcquireFailure, LostReason, NodeId, OpId};

/// The caller used the API in a way the contract forbids. Returned synchronously.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UsageError {
    /// No operation with this id exists (never created, or already finished).
    UnknownOp(OpId),
    /// The operation is not holding a lock (still acquiring, or already released or lost).
    NotHeld(OpId),
    /// A node index outside `0..nodes` was passed.
    UnknownNode(NodeId),
    /// An input or mutation arrived before `poll_output` returned `Timeout` or `Idle`.
    NotDrained,
    /// A supplied token is empty or longer than the allowed maximum.
    InvalidToken {
        /// Length of the rejected token in bytes.
        len: usize,
    },
    /// The resource name is empty.
    EmptyResource,
    /// A per-lock option is invalid (names the option and the rule it broke).
    InvalidOption(ConfigError),
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownOp(op) => write!(f, "unknown operation {op}"),
            Self::NotHeld(op) => write!(f, "operation {op} does not hold a lock"),
            Self::UnknownNode(node) => write!(f, "unknown node {node}"),
            Self::NotDrained => f.write_str("poll_output was not drained before the next input"),
            Self::InvalidToken { len } => {
                write!(
                    f,
                    "token of {len} bytes rejected: it must be 1 to 512 bytes long"
                )
            }
            Self::EmptyResource => f.write_str("the resource name is empty"),
            Self::InvalidOption(e) => write!(f, "invalid lock option: {e}"),
        }
    }
}

impl std::error::Error for UsageError {}

/// A configuration value broke a rule. Names the field and says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    rule: String,
}

impl ConfigError {
    pub(crate) fn new(field: &'static str, rule: impl Into<String>) -> Self {
        Self {
            field,
            rule: rule.into(),
        }
    }

    /// The configuration field that is wrong, e.g. `"quorum"`.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// What the field must satisfy, in words.
    pub fn rule(&self) -> &str {
        &self.rule
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid `{}`: {}", self.field, self.rule)
    }
}

impl std::error::Error for ConfigError {}

/// Why one node's vote failed. Reported inside events; never a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeFault {
    /// The node was down or its connection dropped before it answered.
    Disconnected,
    /// The node did not answer before the round's deadline.
    Timeout,
    /// The node answered with an error reply (e.g. `-NOPERM`, `-READONLY`); the server's
    /// message is kept.
    Server(String),
    /// The node sent bytes that are not valid RESP, a reply too large, or a reply of a type
    /// the command cannot produce.
    Protocol(String),
    /// The connection handshake (`AUTH`, `SELECT`) was refused; the server's message is kept.
    Handshake(String),
    /// Not sent: the node already has this many requests unanswered (the configured
    /// [`max_in_flight`](crate::ConfigBuilder::max_in_flight)).
    Backlogged {
        /// The cap that was reached.
        max_in_flight: usize,
    },
}

impl fmt::Display for NodeFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disconnected => f.write_str("node disconnected"),
            Self::Timeout => f.write_str("node did not answer in time"),
            Self::Server(msg) => write!(f, "node replied with an error: {msg}"),
            Self::Protocol(msg) => write!(f, "protocol violation: {msg}"),
            Self::Handshake(msg) => write!(f, "connection handshake refused: {msg}"),
            Self::Backlogged { max_in_flight } => write!(
                f,
                "not sent: the node has {max_in_flight} requests unanswered (max_in_flight)"
            ),
        }
    }
}

impl std::error::Error for NodeFault {}

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
