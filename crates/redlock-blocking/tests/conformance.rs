//! The shared driver conformance suite (`redlock-conformance`) run for the blocking driver,
//! against real servers. The adapter is almost the API itself: the driver already blocks.

use std::convert::Infallible;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use redlock_blocking::{
    AcquireFailure, LockGuard, LockKind, Redlock, Resource, Token, WithLockError,
};
use redlock_conformance::{
    AcquireStats, Config, ConfigBuilder, Driver, Guard, Inspection, LockError, LockOptions,
    LostReason, ReleaseOutcome, ReleaseResult, RetryPolicy, conformance_suite, sleep_past,
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

    fn build_with_connect_timeout(
        urls: &[String],
        connect_timeout: Duration,
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError> {
        let builder = Redlock::builder(urls)?.config(configure);
        Ok(Self(builder.connect_timeout(connect_timeout).build()?))
    }

    fn config(&self) -> &Config {
        self.0.config()
    }

    fn handle_debug(&self) -> String {
        format!("{:?}", self.0)
    }

    fn lock_with(&self, resource: &str, options: LockOptions) -> Result<BlockingGuard, LockError> {
        self.0.lock_with(resource, options).map(BlockingGuard)
    }

    fn inspect(&self, resource: &str) -> Result<Inspection, LockError> {
        self.0.inspect(resource)
    }

    fn release_token(&self, resource: &str, token: &str) -> ReleaseResult {
        let token = Token::new(token.to_owned())?;
        self.0.release_token(resource, token)
    }

    fn lock_all_with(
        &self,
        resources: &[&str],
        options: LockOptions,
    ) -> Result<BlockingGuard, LockError> {
        let set = resources.iter().copied();
        self.0.lock_all_with(set, options).map(BlockingGuard)
    }

    fn abandon_after(&self, resources: &[&str], options: LockOptions, after: Duration) {
        // A blocking call cannot be dropped midway: give up through the wait bound instead.
        let retry = options.retry.unwrap_or(*self.0.config().retry());
        let give_up = options.retry(RetryPolicy {
            max_wait: Some(after),
            ..retry
        });
        let outcome = match resources {
            [one] => self.0.lock_with(*one, give_up),
            set => self.0.lock_all_with(set.iter().copied(), give_up),
        };
        assert!(
            matches!(
                outcome,
                Err(LockError::Acquire {
                    reason: AcquireFailure::WaitDeadline { .. } | AcquireFailure::Contended { .. },
                    ..
                })
            ),
            "the acquisition did not give up: {outcome:?}"
        );
    }

    fn try_lock(&self, resource: &str) -> Result<BlockingGuard, LockError> {
        self.0.try_lock(resource).map(BlockingGuard)
    }

    fn with_lock_holding(&self, resource: &str, hold: Duration) -> Result<Duration, LockError> {
        let run = self.0.with_lock(resource, |lock| {
            thread::sleep(hold);
            Ok::<_, Infallible>(lock.validity())
        });
        run.map_err(|e| match e {
            WithLockError::Lock(e) => e,
            WithLockError::Closure(never) => match never {},
        })
    }

    fn with_lock_past_deadline(&self, resource: &str, past: Duration) -> Result<(), LockError> {
        let run = self.0.with_lock(resource, |lock| {
            sleep_past(lock.deadline(), past);
            Ok::<_, Infallible>(())
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

    fn kind(&self) -> LockKind {
        self.0.kind()
    }

    fn resources(&self) -> Vec<String> {
        let text = |r: &Resource| String::from_utf8_lossy(r.as_bytes()).into_owned();
        self.0.resources().iter().map(text).collect()
    }

    fn validity(&self) -> Duration {
        self.0.validity()
    }

    fn lost_reason(&self) -> Option<LostReason> {
        self.0.lost_reason()
    }

    fn stats(&self) -> AcquireStats {
        self.0.stats().clone()
    }

    fn fencing_token(&self) -> Option<u64> {
        self.0.fencing_token()
    }

    fn extend(&self) -> Result<Instant, LockError> {
        self.0.extend()
    }

    fn release(self) -> Result<Vec<ReleaseOutcome>, LockError> {
        self.0.release()
    }

    fn extend_then_release(self, after: Duration) -> (Result<Instant, LockError>, ReleaseResult) {
        // Blocking calls from two threads, started together.
        let view = self.0.lock_ref();
        let start = Barrier::new(2);
        thread::scope(|s| {
            let extend = s.spawn(|| {
                start.wait();
                view.extend()
            });
            start.wait();
            thread::sleep(after);
            let released = self.0.release();
            (extend.join().expect("the extending thread"), released)
        })
    }
}

conformance_suite!(Blocking);
