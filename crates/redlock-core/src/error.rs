//! The caller's errors: usage errors (the caller broke the contract) and configuration
//! errors. A node's failed vote is a [`NodeFault`](crate::NodeFault), next to the I/O types.
//!
//! Outcomes such as "no quorum" or "lock lost" are not errors here; they are
//! [`Event`](crate::Event)s carrying a reason.

use std::fmt;

use crate::id::{NodeId, OpId};

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
