//! The policies a configuration is made of: retry, auto-extension, and per-node session
//! settings. Each checks its own rules; [`Config`](crate::Config) composes them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::ConfigError;

/// How [`Client::acquire`](crate::Client::acquire) retries after a failed attempt.
///
/// At least one bound is required: a number of attempts, an overall wait, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Most attempts in all (1 = no retry). `None`: only the wait bound applies.
    pub max_attempts: Option<u32>,
    /// Give up when the next attempt would start this long after the first. `None`: only
    /// the attempt bound applies.
    pub max_wait: Option<Duration>,
    /// Shortest delay between attempts. Default 50 ms.
    pub delay_min: Duration,
    /// Longest delay between attempts; the delay is uniform in `[delay_min, delay_max]`,
    /// drawn from the caller's RNG, and never below 1 ms. Default 250 ms.
    pub delay_max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: Some(DEFAULT_MAX_ATTEMPTS),
            max_wait: None,
            delay_min: DEFAULT_RETRY_DELAY_MIN,
            delay_max: DEFAULT_RETRY_DELAY_MAX,
        }
    }
}

impl RetryPolicy {
    /// A single attempt, no retry.
    pub fn once() -> Self {
        Self {
            max_attempts: Some(1),
            ..Self::default()
        }
    }

    /// How long a lock call may wait for the lock: as long as its retries could take, that
    /// is the overall wait, or every delay at `delay_max` between its attempts, whichever
    /// ends first. A single attempt (a "try") does not wait. It bounds a wait that is not
    /// counted in attempts: in line behind another call of the same client, and attempts
    /// that a release notification started (docs/design.md, "Release notifications").
    pub(crate) fn longest_wait(&self) -> Duration {
        let by_attempts = (self.max_attempts).map(|attempts| {
            let delay = self.delay_max.max(crate::time::MIN_RETRY_DELAY);
            delay.saturating_mul(attempts.saturating_sub(1))
        });
        match (self.max_wait, by_attempts) {
            (Some(wait), Some(attempts)) => wait.min(attempts),
            (Some(bound), None) | (None, Some(bound)) => bound,
            (None, None) => Duration::ZERO,
        }
    }

    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if self.max_attempts.is_none() && self.max_wait.is_none() {
            return Err(ConfigError::new(
                "retry",
                "needs max_attempts, max_wait or both (an unbounded retry never gives up)",
            ));
        }
        if self.max_attempts == Some(0) {
            return Err(ConfigError::new("retry.max_attempts", "must be at least 1"));
        }
        if self.delay_max < self.delay_min {
            return Err(ConfigError::new(
                "retry.delay_max",
                "must be at least delay_min",
            ));
        }
        Ok(())
    }
}

/// A caller-chosen delay before each acquisition retry (as redsync's `WithRetryDelayFunc`),
/// set with [`ConfigBuilder::retry_delay`](crate::ConfigBuilder::retry_delay) or
/// [`LockOptions::retry_delay`](crate::LockOptions::retry_delay).
///
/// The function is called once per retry with the attempts made so far and the default
/// delay, drawn uniformly from `[delay_min, delay_max]` with the client's RNG (so a function
/// that scales it keeps the jitter, and the core still draws randomness only from the RNG
/// it was given). A result under 1 ms is raised to 1 ms; the [`RetryPolicy`] bounds still
/// end the wait. Extension retries keep the uniform delay: they must fit in the validity.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{Config, RetryDelay};
///
/// // Exponential backoff with jitter: 1x, 2x, 4x ... the uniform delay, at most 32x.
/// let backoff = RetryDelay::new(|d| d.jittered * 2u32.pow(d.attempts.clamp(1, 6) - 1));
/// let config = Config::builder(3).retry_delay(backoff).build().unwrap();
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct RetryDelay(Arc<dyn Fn(DelayInput) -> Duration + Send + Sync>);

/// What a [`RetryDelay`] function is told about the retry it delays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DelayInput {
    /// Attempts made so far (1 before the first retry).
    pub attempts: u32,
    /// The default delay: uniform in `[delay_min, delay_max]`, from the client's RNG.
    pub jittered: Duration,
}

impl RetryDelay {
    /// A delay computed by `f`.
    pub fn new(f: impl Fn(DelayInput) -> Duration + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// The delay before the next attempt.
    pub(crate) fn delay(&self, attempts: u32, jittered: Duration) -> Duration {
        (self.0)(DelayInput { attempts, jittered })
    }
}

/// Two delays are equal when they are the same function (clones of one `RetryDelay`).
impl PartialEq for RetryDelay {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for RetryDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RetryDelay(fn)")
    }
}

/// Automatic renewal of held locks.
///
/// At least one bound is required: unbounded renewal would turn a hung holder into a
/// deadlock (algorithm.md §10).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoExtend {
    /// Renew when the remaining validity drops below this fraction of the ttl, in (0, 1).
    /// Default 1/3.
    pub renew_below: f64,
    /// Stop after this many renewals.
    pub max_renewals: Option<u32>,
    /// Stop renewing once the lock has been held this long.
    pub max_hold: Option<Duration>,
}

impl Default for AutoExtend {
    /// Renew below 1/3 of the ttl, for at most one hour.
    fn default() -> Self {
        Self {
            renew_below: 1.0 / 3.0,
            max_renewals: None,
            max_hold: Some(Duration::from_secs(3600)),
        }
    }
}

impl AutoExtend {
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if !(self.renew_below > 0.0 && self.renew_below < 1.0) {
            return Err(ConfigError::new(
                "auto_extend.renew_below",
                "must be in (0, 1)",
            ));
        }
        if self.max_renewals.is_none() && self.max_hold.is_none() {
            return Err(ConfigError::new(
                "auto_extend",
                "needs max_renewals, max_hold or both (unbounded renewal breaks liveness)",
            ));
        }
        Ok(())
    }
}

/// How to open a session on one node after the connection is up.
///
/// Its `Debug` shows a password as `***`, so no configuration, handle or error that holds
/// one prints it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NodeSettings {
    /// `AUTH` user name (Redis 6 ACL); needs a password.
    pub username: Option<String>,
    /// `AUTH` password.
    pub password: Option<String>,
    /// `SELECT` database index (0 = no `SELECT`).
    pub db: u32,
}

impl fmt::Debug for NodeSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeSettings")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| Redacted))
            .field("db", &self.db)
            .finish()
    }
}

/// Stands in for a secret in `Debug` output.
struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl NodeSettings {
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if self.username.is_some() && self.password.is_none() {
            return Err(ConfigError::new(
                "node.username",
                "a user name needs a password",
            ));
        }
        Ok(())
    }
}

/// Default attempts per acquisition.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// Default shortest retry delay.
pub const DEFAULT_RETRY_DELAY_MIN: Duration = Duration::from_millis(50);
/// Default longest retry delay.
pub const DEFAULT_RETRY_DELAY_MAX: Duration = Duration::from_millis(250);
