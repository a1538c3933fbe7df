//! The shared driver conformance suite (`redlock-conformance`) run for the tokio driver,
//! against real servers: every call goes through a multi-threaded runtime's `block_on`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_conformance::{
    AcquireStats, Config, ConfigBuilder, Driver, Guard, Inspection, LockError, LockKind,
    LockOptions, LostReason, ReleaseOutcome, ReleaseResult, conformance_suite, sleep_past,
};
use redlock_tokio::{LockGuard, Redlock, Resource, Token, WithLockError};
use tokio::runtime::Runtime;

#[derive(Clone)]
struct Tokio {
    rt: Arc<Runtime>,
    redlock: Redlock,
}

struct TokioGuard {
    guard: LockGuard,
    rt: Arc<Runtime>,
}

impl Driver for Tokio {
    type Guard = TokioGuard;

    fn build(
        urls: &[String],
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError> {
        Self::build_with_connect_timeout(urls, Duration::from_secs(1), configure)
    }

    fn build_with_connect_timeout(
        urls: &[String],
        connect_timeout: Duration,
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let redlock = {
            let _entered = rt.enter();
            Redlock::builder(urls)?
                .config(configure)
                .connect_timeout(connect_timeout)
                .build()?
        };
        Ok(Self {
            rt: Arc::new(rt),
            redlock,
        })
    }

    fn config(&self) -> &Config {
        self.redlock.config()
    }

    fn handle_debug(&self) -> String {
        format!("{:?}", self.redlock)
    }

    fn lock_with(&self, resource: &str, options: LockOptions) -> Result<TokioGuard, LockError> {
        let guard = self
            .rt
            .block_on(self.redlock.lock_with(resource, options))?;
        Ok(self.wrap(guard))
    }

    fn inspect(&self, resource: &str) -> Result<Inspection, LockError> {
        self.rt.block_on(self.redlock.inspect(resource))
    }

    fn release_token(&self, resource: &str, token: &str) -> ReleaseResult {
        let token = Token::new(token.to_owned())?;
        self.rt
            .block_on(self.redlock.release_token(resource, token))
    }

    fn lock_all_with(
        &self,
        resources: &[&str],
        options: LockOptions,
    ) -> Result<TokioGuard, LockError> {
        let set = resources.iter().map(|r| r.to_string());
        let guard = self.rt.block_on(self.redlock.lock_all_with(set, options))?;
        Ok(self.wrap(guard))
    }

    fn abandon_after(&self, resources: &[&str], options: LockOptions, after: Duration) {
        // Dropping the future when the timeout fires cancels the acquisition.
        let outcome = match resources {
            [one] => {
                let attempt = self.redlock.lock_with(*one, options);
                (self.rt).block_on(async { tokio::time::timeout(after, attempt).await.is_ok() })
            }
            set => {
                let attempt = self.redlock.lock_all_with(set.iter().copied(), options);
                (self.rt).block_on(async { tokio::time::timeout(after, attempt).await.is_ok() })
            }
        };
        assert!(!outcome, "the acquisition finished before it was abandoned");
    }

    fn try_lock(&self, resource: &str) -> Result<TokioGuard, LockError> {
        let guard = self.rt.block_on(self.redlock.try_lock(resource))?;
        Ok(self.wrap(guard))
    }

    fn with_lock_holding(&self, resource: &str, hold: Duration) -> Result<Duration, LockError> {
        let run = self.redlock.with_lock(resource, |lock| async move {
            tokio::time::sleep(hold).await;
            Ok::<_, Infallible>(lock.validity())
        });
        self.rt.block_on(run).map_err(|e| match e {
            WithLockError::Lock(e) => e,
            WithLockError::Closure(never) => match never {},
        })
    }

    fn with_lock_past_deadline(&self, resource: &str, past: Duration) -> Result<(), LockError> {
        // Blocks the test thread, which `block_on` polls on; the loop runs on the workers.
        let run = self.redlock.with_lock(resource, |lock| async move {
            sleep_past(lock.deadline(), past);
            Ok::<_, Infallible>(())
        });
        self.rt.block_on(run).map_err(|e| match e {
            WithLockError::Lock(e) => e,
            WithLockError::Closure(never) => match never {},
        })
    }
}

impl Tokio {
    fn wrap(&self, guard: LockGuard) -> TokioGuard {
        TokioGuard {
            guard,
            rt: self.rt.clone(),
        }
    }
}

impl Guard for TokioGuard {
    fn token(&self) -> String {
        self.guard.token().to_string()
    }

    fn kind(&self) -> LockKind {
        self.guard.kind()
    }

    fn resources(&self) -> Vec<String> {
        let text = |r: &Resource| String::from_utf8_lossy(r.as_bytes()).into_owned();
        self.guard.resources().iter().map(text).collect()
    }

    fn validity(&self) -> Duration {
        self.guard.validity()
    }

    fn lost_reason(&self) -> Option<LostReason> {
        self.guard.lost_reason()
    }

    fn stats(&self) -> AcquireStats {
        self.guard.stats().clone()
    }

    fn fencing_token(&self) -> Option<u64> {
        self.guard.fencing_token()
    }

    fn extend(&self) -> Result<Instant, LockError> {
        self.rt.block_on(self.guard.extend())
    }

    fn release(self) -> Result<Vec<ReleaseOutcome>, LockError> {
        self.rt.block_on(self.guard.release())
    }

    fn extend_then_release(self, after: Duration) -> (Result<Instant, LockError>, ReleaseResult) {
        let view = self.guard.lock_ref();
        let release = async {
            tokio::time::sleep(after).await;
            self.guard.release().await
        };
        self.rt
            .block_on(async { tokio::join!(view.extend(), release) })
    }
}

conformance_suite!(Tokio);

#[test]
fn handles_are_clone_send_sync() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    fn send<T: Send + 'static>() {}
    check::<Redlock>();
    check::<redlock_tokio::LockRef>();
    send::<LockGuard>();
}
