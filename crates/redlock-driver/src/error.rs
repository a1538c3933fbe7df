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

/// No variant has a source: each `Display` already says the cause in full (the core's
/// error, each node's fault, the TLS file's reason), and a cause is shown in `Display` or
/// returned by `source()`, never both (Rust API guidelines, C-GOOD-ERR). So `{}` alone says
/// everything, and chain printers such as anyhow's `{:#}` say each sentence once. The cause
/// is still reachable as data: match the variant (`LockError::Config(e)`,
/// [`acquire_failure`](LockError::acquire_failure)).
impl Error for LockError {}

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

/// Transparent: it displays as the error it holds, and the lock error's source is its own
/// (none). A closure's error needs only `Debug + Display`, so its source is not reachable
/// here.
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
    use std::time::Duration;

    use redlock_core::{Config, ConnectionError, NodeAddress, NodeFault, NodeId, NodeName};

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
        let lost = LockError::from(LostReason::NotOwned {
            nodes: vec![name(1, "127.0.0.1:7002")],
        });
        assert_eq!(
            lost.to_string(),
            "lock lost: our token is gone from 127.0.0.1:7002"
        );
    }

    /// A configuration error, as the core makes one.
    fn config_error() -> ConfigError {
        Config::builder(1).ttl(Duration::ZERO).build().unwrap_err()
    }

    /// One error of every variant, nested where a variant wraps another error. The match
    /// has no wildcard: a new variant does not compile until it is added here.
    fn every_variant() -> Vec<LockError> {
        let refused = NodeFault::Connection(ConnectionError::Refused);
        let all = vec![
            acquire(AcquireFailure::QuorumUnreachable {
                errors: vec![
                    (name(0, "a:1"), refused.clone()),
                    (name(1, "b:1"), NodeFault::Timeout),
                ],
            }),
            acquire(AcquireFailure::WaitDeadline {
                last: Some(Box::new(AcquireFailure::QuorumUnreachable {
                    errors: vec![(name(0, "a:1"), refused)],
                })),
            }),
            acquire(AcquireFailure::Contended {
                nodes: vec![name(0, "a:1")],
            }),
            LockError::Lost(LostReason::NotOwned {
                nodes: vec![name(0, "a:1")],
            }),
            LockError::NotHeld,
            LockError::Config(config_error()),
            LockError::Address(NodeAddress::parse("redis://u:hunter2@h:0").unwrap_err()),
            LockError::Usage(UsageError::EmptyResource),
            LockError::Usage(UsageError::InvalidOption(config_error())),
            LockError::Shutdown,
            LockError::Tls {
                node: "127.0.0.1:6390".into(),
                reason: "cannot read the CA file `/x`: No such file or directory".into(),
            },
            LockError::Start("no tokio runtime".into()),
        ];
        for e in &all {
            match e {
                LockError::Acquire { .. }
                | LockError::Lost(_)
                | LockError::NotHeld
                | LockError::Config(_)
                | LockError::Address(_)
                | LockError::Usage(_)
                | LockError::Shutdown
                | LockError::Tls { .. }
                | LockError::Start(_) => {}
            }
        }
        all
    }

    /// The texts of `e` and its `source()` chain, outermost first (at most 8).
    fn chain(e: &dyn Error) -> Vec<String> {
        let mut texts = vec![e.to_string()];
        let mut next = e.source();
        while let Some(cause) = next {
            texts.push(cause.to_string());
            assert!(texts.len() <= 8, "a chain longer than 8: {texts:?}");
            next = cause.source();
        }
        texts
    }

    /// No link of a chain repeats a later one's text, so `{:#}` (anyhow) says each sentence
    /// once; every variant, the core errors they wrap, and `WithLockError`.
    #[test]
    fn no_sentence_repeats_down_the_source_chain() {
        let mut errors: Vec<Box<dyn Error>> = (every_variant().into_iter())
            .map(|e| Box::new(e) as Box<dyn Error>)
            .collect();
        errors.push(Box::new(NodeFault::Connection(ConnectionError::Refused)));
        errors.push(Box::new(UsageError::InvalidOption(config_error())));
        errors.push(Box::new(WithLockError::<String>::Lock(LockError::Config(
            config_error(),
        ))));
        for e in errors {
            let texts = chain(&*e);
            for (i, outer) in texts.iter().enumerate() {
                for inner in &texts[i + 1..] {
                    assert!(
                        !outer.contains(inner.as_str()),
                        "{outer:?} repeats its source {inner:?} ({e:?})"
                    );
                }
            }
            assert!(!format!("{e:?} {texts:?}").contains("hunter2"), "{e:?}");
        }
    }

    #[test]
    fn wrapped_errors_are_data_not_sources() {
        let bad = NodeAddress::parse("nope").unwrap_err();
        let e = LockError::from(bad.clone());
        assert_eq!(e.to_string(), bad.to_string());
        assert!(matches!(&e, LockError::Address(a) if *a == bad));
        let usage = LockError::from(UsageError::EmptyResource);
        assert!(matches!(usage, LockError::Usage(UsageError::EmptyResource)));
        // WithLockError is transparent: the lock error's text and (empty) chain.
        let with = WithLockError::<String>::Lock(e);
        assert_eq!(
            with.to_string(),
            format!("invalid node URL `nope`: {}", bad.reason())
        );
        assert!(with.source().is_none());
        assert!(WithLockError::Closure("boom".to_owned()).source().is_none());
    }
}
