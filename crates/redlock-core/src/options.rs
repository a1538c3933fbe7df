//! Per-lock overrides ([`LockOptions`]) and the parameters one lock runs with once they are
//! resolved against the [`Config`].

use std::time::Duration;

use crate::config::{Config, Timing, default_attempt_timeout};
use crate::error::ConfigError;
use crate::policy::{AutoExtend, RetryPolicy};
use crate::token::Token;

/// Per-lock overrides of the configuration. Unset fields take the [`Config`] values.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct LockOptions {
    /// Time to live for this lock.
    pub ttl: Option<Duration>,
    /// A caller-supplied value, such as an owner id, stored by every attempt
    /// [stamped](Token::stamped) with a fresh nonce (`<value>:<40 hex digits>`).
    ///
    /// It may be reused by every lock call: the nonce makes each stored value unique, so a
    /// late command of an earlier attempt or call can never touch a later one's key. The
    /// guard's token is the stamped value; [`Token::supplied`] gives yours back. It must
    /// not be a secret: anyone who can read the keys sees it.
    pub token: Option<Token>,
    /// Retry policy for this acquisition.
    pub retry: Option<RetryPolicy>,
    /// Auto-extension for this lock: `Some(None)` turns it off, `Some(Some(..))` on.
    pub auto_extend: Option<Option<AutoExtend>>,
}

impl LockOptions {
    /// Sets the ttl.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets a caller-supplied value, stamped per attempt (see the [`token`](Self::token)
    /// field).
    pub fn token(mut self, token: Token) -> Self {
        self.token = Some(token);
        self
    }

    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Sets the overall wait bound, keeping the rest of the retry policy.
    pub fn max_wait(mut self, config: &Config, wait: Duration) -> Self {
        let mut retry = self.retry.unwrap_or(config.retry);
        retry.max_wait = Some(wait);
        self.retry = Some(retry);
        self
    }

    /// Turns auto-extension on (`Some`) or off (`None`) for this lock.
    pub fn auto_extend(mut self, auto_extend: Option<AutoExtend>) -> Self {
        self.auto_extend = Some(auto_extend);
        self
    }

    /// Resolves the options against `config` into the parameters of one lock.
    pub(crate) fn resolve(&self, config: &Config) -> Result<LockParams, ConfigError> {
        let mut timing = config.timing;
        if let Some(ttl) = self.ttl {
            if !ttl.subsec_nanos().is_multiple_of(1_000_000) {
                return Err(ConfigError::new("ttl", "must be whole milliseconds"));
            }
            timing.ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
            // A shorter ttl gets a proportionally shorter default attempt timeout.
            if timing.attempt_timeout >= ttl.saturating_sub(timing.drift()) {
                timing.attempt_timeout = default_attempt_timeout(ttl);
            }
            timing.check()?;
        }
        let retry = self.retry.unwrap_or(config.retry);
        retry.check()?;
        let auto_extend = self.auto_extend.unwrap_or(config.auto_extend);
        if let Some(auto) = &auto_extend {
            auto.check()?;
        }
        Ok(LockParams {
            nodes: config.nodes.len(),
            quorum: config.quorum,
            timing,
            retry,
            auto_extend,
            release_timeout: config.release_timeout,
            #[cfg(feature = "_mutants")]
            mutant: config.mutant,
        })
    }
}

/// Everything one lock's lifecycle needs, copied out of the configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LockParams {
    pub(crate) nodes: usize,
    pub(crate) quorum: usize,
    pub(crate) timing: Timing,
    pub(crate) retry: RetryPolicy,
    pub(crate) auto_extend: Option<AutoExtend>,
    pub(crate) release_timeout: Duration,
    #[cfg(feature = "_mutants")]
    pub(crate) mutant: Option<crate::mutant::Mutant>,
}

impl LockParams {
    /// Whether a test-only mutant is switched on.
    #[cfg(feature = "_mutants")]
    pub(crate) fn mutant(&self, m: crate::mutant::Mutant) -> bool {
        self.mutant == Some(m)
    }

    /// Whether a test-only mutant is switched on (never, without the test feature).
    #[cfg(not(feature = "_mutants"))]
    pub(crate) fn mutant(&self, _m: crate::mutant::Mutant) -> bool {
        false
    }
}
