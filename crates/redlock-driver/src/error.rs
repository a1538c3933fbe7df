//! What a driver's calls fail with: [`LockError`], and [`WithLockError`] for
//! [`with_lock`](crate::Handle::with_lock). `LockError` wraps the core's reasons and errors
//! instead of re-listing them, and adds what only a driver can say: the lock is not held, the
//! driver is gone, the driver could not start.

use std::error::Error;
use std::fmt;

use redlock_core::{
    AcquireFailure, AddressError, ConfigError, LostReason, NodeFault, NodeId, UsageError,
};

/// What a driver's lock call can fail with. Shared by every driver.
///
/// The core's reasons are wrapped whole, so one pattern still picks one case:
/// `Err(LockError::Acquire(AcquireFailure::Contended { .. }))` is "someone else holds it".
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockError {
    /// The lock could not be acquired; the core's reason says why and names the nodes.
    Acquire(AcquireFailure),
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
    /// The driver could not start; says why (no runtime to run on, or the system refused a
    /// thread or a poller).
    Start(String),
}

impl From<AcquireFailure> for LockError {
    fn from(failure: AcquireFailure) -> Self {
        Self::Acquire(failure)
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
            Self::Acquire(failure) => {
                f.write_str("could not acquire the lock: ")?;
                acquire_failure(f, failure)
            }
            Self::Lost(reason) => {
                f.write_str("lock lost: ")?;
                lost_reason(f, reason)
            }
            Self::NotHeld => {
                f.write_str("the lock is not held: it was released, or a release overtook this")
            }
            Self::Config(e) => write!(f, "bad configuration: {e}"),
            Self::Address(e) => e.fmt(f),
            Self::Usage(e) => write!(f, "API misuse: {e}"),
            Self::Shutdown => f.write_str("the lock driver has shut down"),
            Self::Start(why) => write!(f, "the lock driver could not start: {why}"),
        }
    }
}

impl Error for LockError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Config(e) => Some(e),
            Self::Address(e) => Some(e),
            Self::Usage(e) => Some(e),
            // The core's failure and loss reasons are data, not errors: the text above
            // spells them out, nodes included.
            _ => None,
        }
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

fn acquire_failure(f: &mut fmt::Formatter<'_>, failure: &AcquireFailure) -> fmt::Result {
    match failure {
        AcquireFailure::Contended { nodes } => {
            f.write_str("another client holds it on ")?;
            nodes_list(f, nodes)
        }
        AcquireFailure::QuorumUnreachable { errors } => {
            f.write_str("too many nodes failed: ")?;
            faults(f, errors)
        }
        AcquireFailure::ValidityExhausted => {
            f.write_str("a quorum agreed too late to leave any validity")
        }
        AcquireFailure::WaitDeadline => {
            f.write_str("the wait deadline passed before an attempt succeeded")
        }
        AcquireFailure::Cancelled => f.write_str("the acquisition was cancelled"),
        other => write!(f, "{other:?}"),
    }
}

fn lost_reason(f: &mut fmt::Formatter<'_>, reason: &LostReason) -> fmt::Result {
    match reason {
        LostReason::DeadlinePassed => {
            f.write_str("its deadline passed before an extension succeeded")
        }
        LostReason::NotOwned { nodes } => {
            f.write_str("our token is gone from ")?;
            nodes_list(f, nodes)
        }
        LostReason::QuorumUnreachable { errors } => {
            f.write_str("extensions failed on too many nodes until the deadline: ")?;
            faults(f, errors)
        }
        other => write!(f, "{other:?}"),
    }
}

fn nodes_list(f: &mut fmt::Formatter<'_>, nodes: &[NodeId]) -> fmt::Result {
    if nodes.is_empty() {
        return f.write_str("no node");
    }
    for (i, node) in nodes.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        write!(f, "{sep}{node}")?;
    }
    Ok(())
}

fn faults(f: &mut fmt::Formatter<'_>, errors: &[(NodeId, NodeFault)]) -> fmt::Result {
    if errors.is_empty() {
        return f.write_str("no node answered");
    }
    for (i, (node, fault)) in errors.iter().enumerate() {
        let sep = if i == 0 { "" } else { "; " };
        write!(f, "{sep}{node}: {fault}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use redlock_core::NodeAddress;

    use super::*;

    #[test]
    fn messages_say_what_failed_and_name_the_nodes() {
        let contended = LockError::from(AcquireFailure::Contended {
            nodes: vec![NodeId::new(0), NodeId::new(2)],
        });
        assert_eq!(
            contended.to_string(),
            "could not acquire the lock: another client holds it on node#0, node#2"
        );
        let unreachable = LockError::from(AcquireFailure::QuorumUnreachable {
            errors: vec![
                (NodeId::new(1), NodeFault::Timeout),
                (NodeId::new(2), NodeFault::Disconnected),
            ],
        });
        assert_eq!(
            unreachable.to_string(),
            "could not acquire the lock: too many nodes failed: node#1: node did not answer in \
             time; node#2: node disconnected"
        );
        let lost = LockError::from(LostReason::NotOwned {
            nodes: vec![NodeId::new(1)],
        });
        assert_eq!(lost.to_string(), "lock lost: our token is gone from node#1");
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
