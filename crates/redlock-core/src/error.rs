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
        /// The longest token allowed ([`MAX_TOKEN_LEN`](crate::MAX_TOKEN_LEN)).
        max: usize,
    },
    /// The resource name is empty.
    EmptyResource,
    /// A lock of several resources was asked for none
    /// ([`Client::acquire_all_with`](crate::Client::acquire_all_with)).
    NoResources,
    /// A lock of several resources was given one resource, several times, and nothing else.
    OneResourceRepeated {
        /// How many times the resource was given.
        times: usize,
    },
    /// A per-lock option is invalid (names the option and the rule it broke).
    InvalidOption(ConfigError),
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownOp(op) => write!(
                f,
                "there is no operation {op}: it was never started, or it has finished"
            ),
            Self::NotHeld(op) => write!(
                f,
                "operation {op} does not hold a lock: it is still acquiring, or it was \
                 released or lost"
            ),
            Self::UnknownNode(node) => write!(
                f,
                "node index {} is outside the configured nodes",
                node.index()
            ),
            Self::NotDrained => f.write_str(
                "an input or call came before poll_output returned Timeout or Idle; drain \
                 poll_output first",
            ),
            Self::InvalidToken { len, max } => {
                write!(
                    f,
                    "a token of {len} bytes was given; it must be 1 to {max} bytes long"
                )
            }
            Self::EmptyResource => {
                f.write_str("the resource name is empty; a lock needs a name, e.g. `invoices:42`")
            }
            Self::NoResources => f.write_str(
                "the list of resources to lock together is empty; name at least one resource",
            ),
            Self::OneResourceRepeated { times } => write!(
                f,
                "the list of resources to lock together names one resource {times} times and \
                 nothing else; lock it alone"
            ),
            Self::InvalidOption(e) => write!(f, "a lock option is invalid: {e}"),
        }
    }
}

/// No source: [`UsageError::InvalidOption`]'s text already holds its [`ConfigError`]'s,
/// and a cause is shown in `Display` or returned by `source()`, never both (Rust API
/// guidelines, C-GOOD-ERR), so that chain printers such as anyhow's `{:#}` say it once.
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

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// Every usage error reads as a sentence that says what was wrong, with no `Debug`.
    #[test]
    fn usage_errors_read_as_prose() {
        let op = OpId::from_raw(7);
        for (e, text) in [
            (
                UsageError::UnknownOp(op),
                "there is no operation op#7: it was never started, or it has finished",
            ),
            (
                UsageError::NotHeld(op),
                "operation op#7 does not hold a lock: it is still acquiring, or it was released \
                 or lost",
            ),
            (
                UsageError::UnknownNode(NodeId::new(5)),
                "node index 5 is outside the configured nodes",
            ),
            (
                UsageError::NotDrained,
                "an input or call came before poll_output returned Timeout or Idle; drain \
                 poll_output first",
            ),
            (
                UsageError::InvalidToken { len: 0, max: 512 },
                "a token of 0 bytes was given; it must be 1 to 512 bytes long",
            ),
            (
                UsageError::EmptyResource,
                "the resource name is empty; a lock needs a name, e.g. `invoices:42`",
            ),
            (
                UsageError::NoResources,
                "the list of resources to lock together is empty; name at least one resource",
            ),
            (
                UsageError::OneResourceRepeated { times: 2 },
                "the list of resources to lock together names one resource 2 times and nothing \
                 else; lock it alone",
            ),
        ] {
            assert_eq!(e.to_string(), text);
            assert!(e.source().is_none(), "{e}");
        }
        let rule = ConfigError::new("ttl", "zero, but a lock must expire; use at least 3ms");
        let e = UsageError::InvalidOption(rule.clone());
        assert_eq!(
            e.to_string(),
            "a lock option is invalid: invalid `ttl`: zero, but a lock must expire; use at \
             least 3ms"
        );
        assert!(e.source().is_none(), "the text holds the rule already");
    }
}
