//! What every test binary shares: the [`Harness`] a scenario runs in (how to build a driver,
//! spawn a task and sleep), one runner per executor, and node helpers. Scenarios themselves
//! are in `scenarios.rs`, written against the harness only, so that a shared conformance
//! suite can take them over behind an adapter.

#![allow(dead_code, unreachable_pub)]

pub mod scenarios;

use std::future::Future;
use std::panic::{AssertUnwindSafe, resume_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_io::Timer;
use futures_lite::FutureExt;
use futures_lite::future::{self, Boxed};
use redlock_async_std::{LockError, Redlock, RetryPolicy};
use redlock_core::ConfigBuilder;
use redlock_testkit::{Cluster, Reply};
use tokio::sync::oneshot;

pub const MS: Duration = Duration::from_millis(1);

/// No scenario may run longer than this, whatever it waits for.
const SCENARIO_LIMIT: Duration = Duration::from_secs(120);

/// The surroundings of a scenario: the driver builder and the executor's spawner.
#[derive(Clone)]
pub struct Harness {
    spawner: Arc<dyn Fn(Boxed<()>) + Send + Sync>,
}

/// The output of a spawned task; a panic in the task resumes in whoever awaits this.
pub struct Join<T>(oneshot::Receiver<std::thread::Result<T>>);

impl Harness {
    /// Builds a driver for `urls` with `configure` applied to the core configuration.
    pub fn build(
        &self,
        urls: &[String],
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Redlock, LockError> {
        Redlock::builder(urls)?.config(configure).build()
    }

    /// A driver for `urls` with the given ttl and every other default.
    pub fn redlock(&self, urls: &[String], ttl: Duration) -> Redlock {
        self.build(urls, |c| c.ttl(ttl)).expect("build")
    }

    /// Spawns `task` on the executor under test.
    pub fn spawn<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> Join<T> {
        let (tx, rx) = oneshot::channel();
        (self.spawner)(Box::pin(async move {
            let _ = tx.send(AssertUnwindSafe(task).catch_unwind().await);
        }));
        Join(rx)
    }
}

impl<T> Join<T> {
    /// Waits for the task; re-raises its panic.
    pub async fn join(self) -> T {
        match self.0.await {
            Ok(Ok(value)) => value,
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => panic!("the task was dropped unfinished"),
        }
    }
}

/// Runs a scenario under `async_std::task::block_on`, spawning with `async_std::task::spawn`.
pub fn on_async_std<'a, Fut: Future<Output = ()> + 'a>(scenario: impl FnOnce(Harness) -> Fut) {
    let harness = Harness {
        spawner: Arc::new(|task| drop(async_std::task::spawn(task))),
    };
    async_std::task::block_on(bounded(scenario(harness)));
}

/// Runs a scenario under `smol::block_on` on a `smol::Executor` that one more thread also
/// runs, so spawned tasks make progress while the scenario blocks in a system call.
pub fn on_smol<'a, Fut: Future<Output = ()> + 'a>(scenario: impl FnOnce(Harness) -> Fut) {
    let ex = Arc::new(smol::Executor::<'static>::new());
    let (stop, stopped) = smol::channel::bounded::<()>(1);
    let worker = {
        let ex = ex.clone();
        std::thread::spawn(move || smol::block_on(ex.run(stopped.recv())))
    };
    let harness = Harness {
        spawner: {
            let ex = ex.clone();
            Arc::new(move |task| ex.spawn(task).detach())
        },
    };
    smol::block_on(ex.run(bounded(scenario(harness))));
    // Closing the channel ends the worker's `run`.
    drop(stop);
    let _ = worker.join();
}

async fn bounded(scenario: impl Future<Output = ()>) {
    let limit = async {
        sleep(SCENARIO_LIMIT).await;
        panic!("scenario still running after {SCENARIO_LIMIT:?}");
    };
    future::or(scenario, limit).await
}

/// Sleeps on async-io's timer, which async-std and smol share.
pub async fn sleep(d: Duration) {
    Timer::after(d).await;
}

/// `Some(output)`, or `None` if `fut` did not finish within `limit` (it is then dropped).
pub async fn timeout<T>(limit: Duration, fut: impl Future<Output = T>) -> Option<T> {
    future::or(async { Some(fut.await) }, async {
        sleep(limit).await;
        None
    })
    .await
}

pub fn cluster(n: usize) -> Cluster {
    Cluster::start(n).expect("start test nodes")
}

pub fn fast_retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: Some(attempts),
        max_wait: Some(Duration::from_secs(30)),
        delay_min: MS,
        delay_max: 5 * MS,
    }
}

pub fn keys_on(cluster: &Cluster, i: usize) -> i64 {
    cluster
        .node(i)
        .command(&["DBSIZE"])
        .unwrap()
        .as_int()
        .unwrap()
}

pub fn value_on(cluster: &Cluster, i: usize, key: &str) -> Reply {
    cluster.node(i).command(&["GET", key]).unwrap()
}

/// Polls `check` every 10 ms for at most `limit`; a lock returns at quorum, so a slower
/// node may apply its command a moment later.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        sleep(10 * MS).await;
    }
}

/// One `#[test]` per scenario: starts its cluster, then runs it with the given runner.
#[macro_export]
macro_rules! scenario_tests {
    ($run:ident; $($name:ident($nodes:expr)),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let c = common::cluster($nodes);
                common::$run(|h| common::scenarios::$name(&c, h));
            }
        )*
    };
}
