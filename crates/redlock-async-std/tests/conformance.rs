//! The shared driver conformance suite (`redlock-conformance`) run for this driver against
//! real servers, twice: every call through `async_std::task::block_on`, then as a task
//! spawned on a `smol::Executor` that the calling thread and one more run. The suite brings
//! its own concurrency (threads); under smol each thread's call is a task on an executor, so
//! the driver's futures are polled, and woken, the way an application's spawned tasks are.

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use async_io::Timer;
use futures_lite::future;
use redlock_async_std::{LockGuard, Redlock, Resource, Token, WithLockError};
use redlock_conformance::{
    AcquireStats, Config, ConfigBuilder, Driver, Guard, Inspection, LockError, LockKind,
    LockOptions, LostReason, ReleaseOutcome, ReleaseResult, sleep_past,
};

/// An executor's `block_on`.
trait BlockOn: 'static {
    fn block_on<T: Send>(future: impl Future<Output = T> + Send) -> T;
}

struct AsyncStd;
struct Smol;

impl BlockOn for AsyncStd {
    fn block_on<T: Send>(future: impl Future<Output = T> + Send) -> T {
        async_std::task::block_on(future)
    }
}

impl BlockOn for Smol {
    /// Spawns `future` on a fresh `smol::Executor` run by this thread and a worker thread,
    /// so the task may be polled, and woken, on either; the worker ends with the call.
    fn block_on<T: Send>(future: impl Future<Output = T> + Send) -> T {
        let executor = smol::Executor::new();
        let (stop, stopped) = smol::channel::bounded::<()>(1);
        std::thread::scope(|scope| {
            scope.spawn(|| smol::block_on(executor.run(stopped.recv())));
            let task = executor.spawn(future);
            let output = smol::block_on(executor.run(task));
            // Closing the channel ends the worker's `run`; the scope joins it.
            drop(stop);
            output
        })
    }
}

/// The driver, each call blocked on with executor `E`.
struct Driven<E> {
    redlock: Redlock,
    executor: PhantomData<fn() -> E>,
}

struct DrivenGuard<E> {
    guard: LockGuard,
    executor: PhantomData<fn() -> E>,
}

impl<E> Clone for Driven<E> {
    fn clone(&self) -> Self {
        Self {
            redlock: self.redlock.clone(),
            executor: PhantomData,
        }
    }
}

impl<E: BlockOn> Driven<E> {
    fn wrap(guard: LockGuard) -> DrivenGuard<E> {
        DrivenGuard {
            guard,
            executor: PhantomData,
        }
    }
}

impl<E: BlockOn> Driver for Driven<E> {
    type Guard = DrivenGuard<E>;

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
        let redlock = Redlock::builder(urls)?
            .config(configure)
            .connect_timeout(connect_timeout)
            .build()?;
        Ok(Self {
            redlock,
            executor: PhantomData,
        })
    }

    fn config(&self) -> &Config {
        self.redlock.config()
    }

    fn handle_debug(&self) -> String {
        format!("{:?}", self.redlock)
    }

    fn lock_with(&self, resource: &str, options: LockOptions) -> Result<Self::Guard, LockError> {
        E::block_on(self.redlock.lock_with(resource, options)).map(Self::wrap)
    }

    fn inspect(&self, resource: &str) -> Result<Inspection, LockError> {
        E::block_on(self.redlock.inspect(resource))
    }

    fn release_token(&self, resource: &str, token: &str) -> ReleaseResult {
        let token = Token::new(token.to_owned())?;
        E::block_on(self.redlock.release_token(resource, token))
    }

    fn lock_all_with(
        &self,
        resources: &[&str],
        options: LockOptions,
    ) -> Result<Self::Guard, LockError> {
        let set: Vec<String> = resources.iter().map(|r| r.to_string()).collect();
        E::block_on(self.redlock.lock_all_with(set, options)).map(Self::wrap)
    }

    fn abandon_after(&self, resources: &[&str], options: LockOptions, after: Duration) {
        // Dropping the future when the timer wins cancels the acquisition.
        let set: Vec<String> = resources.iter().map(|r| r.to_string()).collect();
        let attempt = async {
            Some(match &set[..] {
                [one] => self.redlock.lock_with(one.clone(), options).await,
                _ => self.redlock.lock_all_with(set.clone(), options).await,
            })
        };
        let give_up = async {
            Timer::after(after).await;
            None
        };
        let outcome = E::block_on(future::or(attempt, give_up));
        assert!(
            outcome.is_none(),
            "the acquisition finished before it was abandoned"
        );
    }

    fn try_lock(&self, resource: &str) -> Result<Self::Guard, LockError> {
        E::block_on(self.redlock.try_lock(resource)).map(Self::wrap)
    }

    fn with_lock_holding(&self, resource: &str, hold: Duration) -> Result<Duration, LockError> {
        let run = self
            .redlock
            .with_lock(resource.to_owned(), |lock| async move {
                Timer::after(hold).await;
                Ok::<_, Infallible>(lock.validity())
            });
        E::block_on(run).map_err(|e| match e {
            WithLockError::Lock(e) => e,
            WithLockError::Closure(never) => match never {},
        })
    }

    fn with_lock_past_deadline(&self, resource: &str, past: Duration) -> Result<(), LockError> {
        // Blocks the test thread; the loop runs on its own thread.
        let run = self
            .redlock
            .with_lock(resource.to_owned(), |lock| async move {
                sleep_past(lock.deadline(), past);
                Ok::<_, Infallible>(())
            });
        E::block_on(run).map_err(|e| match e {
            WithLockError::Lock(e) => e,
            WithLockError::Closure(never) => match never {},
        })
    }
}

impl<E: BlockOn> Guard for DrivenGuard<E> {
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
        E::block_on(self.guard.extend())
    }

    fn release(self) -> Result<Vec<ReleaseOutcome>, LockError> {
        E::block_on(self.guard.release())
    }

    fn extend_then_release(self, after: Duration) -> (Result<Instant, LockError>, ReleaseResult) {
        let view = self.guard.lock_ref();
        let release = async {
            Timer::after(after).await;
            self.guard.release().await
        };
        E::block_on(future::zip(view.extend(), release))
    }
}

mod async_std_block_on {
    redlock_conformance::conformance_suite!(super::Driven<super::AsyncStd>);
}

mod smol_executor {
    redlock_conformance::conformance_suite!(super::Driven<super::Smol>);
}
