//! The shared driver conformance suite (`redlock-conformance`) run for the blocking driver,
//! against real servers. The adapter is almost the API itself: the driver already blocks.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use redlock_blocking::{LockGuard, Redlock, WithLockError};
use redlock_conformance::{
    Config, ConfigBuilder, Driver, Guard, LockError, LockOptions, LostReason, ReleaseOutcome,
    RetryPolicy, conformance_suite,
};

#[derive(Clone)]
struct Blocking(Redlock);

struct BlockingGuard(LockGuard);

impl Driver for Blocking {
    type Guard = BlockingGuard;

    fn build(
        urls: &[String],
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError> {
        Ok(Self(Redlock::builder(urls)?.config(configure).build()?))
    }

    fn config(&self) -> &Config {
        self.0.config()
    }

    fn lock_with(&self, resource: &str, options: LockOptions) -> Result<BlockingGuard, LockError> {
        self.0
            .lock_with(resource.to_owned(), options)
            .map(BlockingGuard)
    }

    fn try_lock(&self, resource: &str) -> Result<BlockingGuard, LockError> {
        self.0.try_lock(resource.to_owned()).map(BlockingGuard)
    }

    fn abandon_lock_after(&self, resource: &str, after: Duration) {
        // A blocking call cannot be dropped midway: give up through the wait bound instead.
        let give_up = LockOptions::default().retry(RetryPolicy {
            max_wait: Some(after),
            ..*self.0.config().retry()
        });
        let outcome = self.0.lock_with(resource.to_owned(), give_up);
        assert!(
            matches!(
                outcome,
                Err(LockError::WaitDeadline | LockError::Contended { .. })
            ),
            "the acquisition did not give up: {outcome:?}"
        );
    }

    fn with_lock_holding(&self, resource: &str, hold: Duration) -> Result<Duration, LockError> {
        let run = self.0.with_lock(resource.to_owned(), |lock| {
            std::thread::sleep(hold);
            Ok::<_, Infallible>(lock.validity())
        });
        run.map_err(|e| match e {
            WithLockError::Lock(e) => e,
            WithLockError::Closure(never) => match never {},
        })
    }
}

impl Guard for BlockingGuard {
    fn token(&self) -> String {
        self.0.token().to_string()
    }

    fn validity(&self) -> Duration {
        self.0.validity()
    }

    fn lost_reason(&self) -> Option<LostReason> {
        self.0.lost_reason()
    }

    fn extend(&self) -> Result<Instant, LockError> {
        self.0.extend()
    }

    fn release(self) -> Result<Vec<ReleaseOutcome>, LockError> {
        self.0.release()
    }
}

conformance_suite!(Blocking);
