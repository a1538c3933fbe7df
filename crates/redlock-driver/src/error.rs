//! What a driver's calls fail with: [`LockError`], and [`WithLockError`] for
//! [`with_lock`](crate::Handle::with_lock). `LockError` wraps the core's reasons and errors
//! instead of re-listing them, and adds what only a driver can say: the lock is not held, the
//! driver is gone, the driver could not start.

use std::error::Error;
use std::fmt;

use redlock_core::{
    AcquireFailure, AcquireStats, AddressError, ConfigError, LostReason, UsageError,
};

/// What a driver's lock call can fail with. Shared by every driver.
///
/// The core's reasons are wrapped whole, so one pattern still picks one case:
/// `Err(LockError::Acquire { reason: AcquireFailure::Contended { .. }, .. })` is "someone
/// else holds it". `Display` is a sentence that names the nodes by address; the table of
/// every message, with what to do about it, is in `docs/errors.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockError {
    /// The lock could not be acquired.
    Acquire {
        /// Why: the core's reason, naming the nodes.
        reason: AcquireFailure,
        /// Attempts made, time spent, and each node's answer in the last attempt.
        stats: AcquireStats,
    },
    /// The lock was lost (before or while this call ran).
    Lost(LostReason),
    /// The lock is not held: it was released, or a release overtook this request.
    NotHeld,
    /// The configuration, or a per-lock option, is invalid.
    Config(ConfigError),
    /// A node URL is invalid.
    Address(AddressError),
    /// The API was misused.
    Usage(UsageError),
    /// The driver has shut down: its runtime, task or thread is gone.
    Shutdown,
    /// A `rediss://` node's TLS settings are unusable: a certificate or key file cannot be
    /// read or used, or the host is no TLS server name.
    Tls {
        /// The node, by address.
        node: String,
        /// What is wrong, naming the file; never a file's contents.
        reason: String,
    },
    /// The driver could not start; says why (no runtime to run on, or the system refused a
    /// thread or a poller).
    Start(String),
}

impl LockError {
    /// Why the acquisition failed, if this is [`LockError::Acquire`]: one pattern picks a
    /// case, e.g. `matches!(e.acquire_failure(), Some(AcquireFailure::Contended { .. }))`.
    pub fn acquire_failure(&self) -> Option<&AcquireFailure> {
        match self {
            Self::Acquire { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

impl From<LostReason> for LockError {
    fn from(reason: LostReason) -> Self {
        Self::Lost(reason)
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

/// A bad per-lock option is a configuration error, whichever call found it; every other
/// misuse stays [`LockError::Usage`].
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
            Self::Acquire { reason, .. } => write!(f, "could not acquire the lock: {reason}"),
            Self::Lost(reason) => write!(f, "lock lost: {reason}"),
            Self::NotHeld => {
                f.write_str("the lock is not held: it was released, or a release overtook this")
            }
            Self::Config(e) => write!(f, "bad configuration: {e}"),
            Self::Address(e) => e.fmt(f),
            Self::Usage(e) => write!(f, "API misuse: {e}"),
            Self::Shutdown => f.write_str("the lock driver has shut down"),
            Self::Start(why) => write!(f, "the lock driver could not start: {why}"),
            Self::Tls { node, reason } => write!(f, "TLS settings of node {node}: {reason}"),
        }
    }
}

impl Error for LockError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Config(e) => Some(e),
            Self::Address(e) => Some(e),
            Self::Usage(e) => Some(e),
            // A failed acquisition's first node fault (a connection's reason, itself an
            // error) is the cause one layer down; the text above lists every node's.
            Self::Acquire { reason, .. } => first_fault(reason),
            // Loss reasons are data, not errors: the text above spells them out.
            _ => None,
        }
    }
}

/// The first node fault of a failed acquisition, as an error: the wait deadline's last
/// attempt, or the attempt's own.
fn first_fault(reason: &AcquireFailure) -> Option<&(dyn Error + 'static)> {
    match reason {
        AcquireFailure::QuorumUnreachable { errors } => errors
            .first()
            .map(|(_, fault)| fault as &(dyn Error + 'static)),
        AcquireFailure::WaitDeadline { last: Some(last) } => first_fault(last),
        _ => None,
    }
}

/// The error of [`Handle::with_lock`](crate::Handle::with_lock): the closure's own, or the
/// lock's.
#[derive(Debug)]
pub enum WithLockError<E> {
    /// Acquiring failed, or the lock was lost while the closure ran.
    Lock(LockError),
    /// The closure failed.
    Closure(E),
}

impl<E: fmt::Display> fmt::Display for WithLockError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lock(e) => e.fmt(f),
            Self::Closure(e) => e.fmt(f),
        }
    }
}

/// Transparent: it displays as the error it holds, and the lock error's source is its own.
/// A closure's error needs only `Debug + Display`, so its source is not reachable here.
impl<E: fmt::Debug + fmt::Display> Error for WithLockError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Lock(e) => e.source(),
            Self::Closure(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use redlock_core::{ConnectionError, NodeAddress, NodeFault, NodeId, NodeName};

    use super::*;

    fn name(i: usize, name: &str) -> NodeName {
        NodeName::new(NodeId::new(i), name)
    }

    fn acquire(reason: AcquireFailure) -> LockError {
        LockError::Acquire {
            reason,
            stats: AcquireStats::default(),
        }
    }

    #[test]
    fn messages_say_what_failed_and_name_the_nodes_by_address() {
        let contended = acquire(AcquireFailure::Contended {
            nodes: vec![name(0, "127.0.0.1:7001"), name(2, "[::1]:7003")],
        });
        assert_eq!(
            contended.to_string(),
            "could not acquire the lock: another client holds it on 127.0.0.1:7001, [::1]:7003"
        );
        let refused = NodeFault::Connection(ConnectionError::Refused);
        let unreachable = acquire(AcquireFailure::QuorumUnreachable {
            errors: vec![
                (name(1, "db1:6379"), NodeFault::Timeout),
                (name(2, "db2:6379"), refused.clone()),
            ],
        });
        assert_eq!(
            unreachable.to_string(),
            "could not acquire the lock: too many nodes failed: db1:6379: no answer before the \
             attempt's deadline; db2:6379: connection refused"
        );
        // The first node's fault is the cause one layer down.
        assert_eq!(
            unreachable.source().map(ToString::to_string),
            Some("no answer before the attempt's deadline".to_owned())
        );
        let waited = acquire(AcquireFailure::WaitDeadline {
            last: Some(Box::new(AcquireFailure::QuorumUnreachable {
                errors: vec![(name(0, "a:1"), refused.clone())],
            })),
        });
        assert_eq!(
            waited.to_string(),
            "could not acquire the lock: the wait deadline passed; the last attempt: too many \
             nodes failed: a:1: connection refused"
        );
        let cause = waited.source().expect("the node fault");
        assert_eq!(cause.to_string(), "connection refused");
        assert!(
            cause.source().is_some(),
            "the connection error under the fault"
        );
        let lost = LockError::from(LostReason::NotOwned {
            nodes: vec![name(1, "127.0.0.1:7002")],
        });
        assert_eq!(
            lost.to_string(),
            "lock lost: our token is gone from 127.0.0.1:7002"
        );
    }

    #[test]
    fn wrapped_errors_are_sources() {
        let bad = NodeAddress::parse("nope").unwrap_err();
        let e = LockError::from(bad.clone());
        let source = e.source().map(ToString::to_string);
        assert_eq!(source, Some(bad.to_string()));
        assert!(LockError::Shutdown.source().is_none());
        let usage = LockError::from(UsageError::EmptyResource);
        assert!(matches!(usage, LockError::Usage(UsageError::EmptyResource)));
        assert!(usage.source().is_some());
        // WithLockError is transparent: the lock error's source, not the lock error again.
        let with = WithLockError::<String>::Lock(e);
        assert_eq!(
            with.to_string(),
            format!("invalid node URL `nope`: {}", bad.reason())
        );
        assert_eq!(
            with.source().map(ToString::to_string),
            Some(bad.to_string())
        );
        assert!(WithLockError::Closure("boom".to_owned()).source().is_none());
    }
}
