//! Redlock distributed locks over N independent Redis or Valkey nodes, with blocking calls and
//! no async runtime.
//!
//! A thin driver: one background thread per [`Redlock`] owns the sans-IO
//! [`redlock_core::Client`] and N non-blocking `mio` sockets polled together, and every
//! quorum, drift, validity, retry and extension decision is the core's. The handle, guard and
//! request bookkeeping are `redlock-driver`'s, shared with the async drivers; this crate waits
//! on them by parking the calling thread, and moves bytes. Read [what a lock promises](redlock_core::docs::safety) and [the algorithm, rule by
//! rule](redlock_core::docs::algorithm); every error's message, with what to do, is in
//! [the error table](redlock_core::docs::errors).
//!
//! A node named by host name is resolved on a short-lived helper thread, within the connect
//! timeout, so a slow lookup delays only that node; an IP address needs no lookup.
//!
//! ```no_run
//! # fn demo() -> Result<(), redlock_blocking::LockError> {
//! use std::time::Duration;
//! use redlock_blocking::Redlock;
//!
//! let redlock = Redlock::builder(["redis://127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"])?
//!     .config(|c| c.ttl(Duration::from_secs(10)))
//!     .build()?;
//! let guard = redlock.lock("invoices:42")?;
//! println!("holding {} for {:?}", guard.token(), guard.validity());
//! let report = guard.release()?;
//! println!("released: {report:?}");
//!
//! // Or run a closure under an auto-extended lock:
//! let total = redlock.with_lock("invoices:43", |lock| {
//!     assert!(lock.validity() > Duration::ZERO);
//!     Ok::<_, std::io::Error>(42)
//! });
//! # Ok(()) }
//! ```
//!
//! # Features
//! - `tracing`: a span for each lock call and its steps (acquire, extend, release) with
//!   each node's vote and round trip, and events for connections, refused handshakes,
//!   command fallbacks and losses, through the `tracing` crate.
//! - `metrics`: counters, histograms and gauges (acquired, failed, extended, lost,
//!   released; acquire latency, hand-off wait, node round trips; held locks, nodes up)
//!   through the `metrics` facade; install the recorder before `build()`.
//!
//! Every span, event and metric is listed on [`redlock_driver::Observer`]; neither feature
//! ever shows a token or a password. `redlock-tokio`'s `examples/tracing.rs` and
//! `examples/prometheus.rs` show both (the same calls work here).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod driver;
mod guard;
mod kinds;
mod park;
mod resolve;
mod stream;

use std::sync::Arc;
use std::time::Instant;

use redlock_core::Config;
use redlock_driver::{DriverParts, Start};

pub use guard::{LockGuard, LockRef};
pub use redlock_driver::prelude::*;

use driver::Driver;
use park::block_on;

/// A handle to a set of N nodes. Cheap to clone; `Send + Sync`.
///
/// The lock calls are those of [`Handle`], reached through `Deref`. The driver thread runs
/// as long as a handle or a guard exists, or an operation (a background release, say) is
/// unfinished.
pub type Redlock = redlock_driver::Redlock<MioThread>;

/// Builds a [`Redlock`] from node URLs and core configuration; [`build`](Builder::build)
/// starts the driver thread.
pub type Builder = redlock_driver::Builder<MioThread>;

/// How this driver starts: a thread of its own polling the sockets with `mio`, on std's
/// clock. Only [`Redlock`]'s and [`Builder`]'s parameter.
#[derive(Debug)]
pub enum MioThread {}

impl Start for MioThread {
    type Handle = Handle;

    fn start(parts: DriverParts) -> Result<(), LockError> {
        let driver = Driver::new(parts, Arc::new(resolve::system))
            .map_err(|e| LockError::Start(format!("no poller: {e}")))?;
        std::thread::Builder::new()
            .name("redlock-driver".to_owned())
            .spawn(move || driver.run())
            .map_err(|e| LockError::Start(format!("no driver thread: {e}")))?;
        Ok(())
    }

    /// std's clock, which `mio`'s poll timeouts and thread parking count in.
    fn now() -> Instant {
        Instant::now()
    }
}

/// The blocking lock calls, what [`Redlock`] derefs to: each waits on the shared async
/// handle by parking the calling thread. Cheap to clone; `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Handle(redlock_driver::Handle);

impl From<redlock_driver::Handle> for Handle {
    fn from(handle: redlock_driver::Handle) -> Self {
        Self(handle)
    }
}

impl Handle {
    /// The configuration in use.
    pub fn config(&self) -> &Config {
        self.0.config()
    }

    /// Acquires `resource`, retrying per the configured policy; blocks until it is held or
    /// the policy gives up.
    pub fn lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        block_on(self.0.lock(resource)).map(LockGuard::new)
    }

    /// Makes a single attempt to acquire `resource`.
    pub fn try_lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        block_on(self.0.try_lock(resource)).map(LockGuard::new)
    }

    /// Acquires with per-call options: ttl, wait, retry, token, auto-extension, and the
    /// lock's kind ([`LockOptions::kind`]; the short forms are [`read_lock`](Self::read_lock),
    /// [`write_lock`](Self::write_lock), [`semaphore`](Self::semaphore), and
    /// [`lock_all`](Self::lock_all) for several resources at once).
    pub fn lock_with(
        &self,
        resource: impl Into<Resource>,
        options: LockOptions,
    ) -> Result<LockGuard, LockError> {
        block_on(self.0.lock_with(resource, options)).map(LockGuard::new)
    }

    /// Looks at `resource` on every node without changing anything; blocks until every
    /// node has answered or timed out. See [`redlock_driver::Handle::inspect`].
    pub fn inspect(&self, resource: impl Into<Resource>) -> Result<Inspection, LockError> {
        block_on(self.0.inspect(resource))
    }

    /// Releases `resource` on every node where it holds exactly `token`, and reports each
    /// node; blocks until done. See [`redlock_driver::Handle::release_token`].
    pub fn release_token(
        &self,
        resource: impl Into<Resource>,
        token: Token,
    ) -> Result<Vec<ReleaseOutcome>, LockError> {
        block_on(self.0.release_token(resource, token))
    }

    /// Runs `f` under the lock with auto-extension, then releases.
    ///
    /// If the lock is lost while `f` runs, `f` can see it through [`LockRef::is_lost`] or
    /// [`LockRef::wait_lost`], and the result is [`WithLockError::Lock`] with
    /// [`LockError::Lost`]. So it is if `f` returns at or after the lock's deadline, even
    /// before the driver thread has noticed it. An error from `f` wins over any lock error.
    pub fn with_lock<T, E, F>(
        &self,
        resource: impl Into<Resource>,
        f: F,
    ) -> Result<T, WithLockError<E>>
    where
        F: FnOnce(LockRef) -> Result<T, E>,
    {
        // `f` runs inside the future, on this thread, while `block_on` polls it.
        block_on(
            self.0
                .with_lock(resource, |lock| std::future::ready(f(LockRef(lock)))),
        )
    }
}
