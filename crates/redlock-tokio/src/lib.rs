//! Redlock distributed locks over N independent Redis or Valkey nodes, for tokio.
//!
//! A thin driver: one task owns the sans-IO [`redlock_core::Client`] and the N connections,
//! and every quorum, drift, validity, retry and extension decision is the core's. This
//! crate only moves bytes, sleeps until the core's deadline, and hands events to your
//! futures. Read [what a lock promises](redlock_core::docs::safety) and [the algorithm, rule by
//! rule](redlock_core::docs::algorithm); every error's message, with what to do, is in
//! [the error table](redlock_core::docs::errors).
//!
//! ```no_run
//! # async fn demo() -> Result<(), redlock_tokio::LockError> {
//! use std::time::Duration;
//! use redlock_tokio::Redlock;
//!
//! let redlock = Redlock::builder(["redis://127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"])?
//!     .config(|c| c.ttl(Duration::from_secs(10)))
//!     .build()?;
//! let guard = redlock.lock("invoices:42").await?;
//! println!("holding {} for {:?}", guard.token(), guard.validity());
//! let report = guard.release().await?;
//! println!("released: {report:?}");
//!
//! // Or run a closure under an auto-extended lock:
//! let total = redlock
//!     .with_lock("invoices:43", |lock| async move {
//!         assert!(lock.validity() > Duration::ZERO);
//!         Ok::<_, std::io::Error>(42)
//!     })
//!     .await;
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
//! ever shows a token or a password. `examples/tracing.rs` and `examples/prometheus.rs` show both.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod runtime;

use std::time::Instant;

use redlock_driver::{DriverParts, IoLoop, Start};

pub use redlock_driver::prelude::*;
pub use redlock_driver::{Handle, LockGuard, LockRef};

/// A handle to a set of N nodes, served by one driver task. Cheap to clone; `Send + Sync`.
///
/// The lock calls ([`lock`](Handle::lock), [`try_lock`](Handle::try_lock),
/// [`lock_with`](Handle::lock_with), [`with_lock`](Handle::with_lock),
/// [`inspect`](Handle::inspect), [`release_token`](Handle::release_token),
/// [`config`](Handle::config)) and those of the other lock kinds (docs/kinds.md:
/// [`lock_all`](Handle::lock_all), [`read_lock`](Handle::read_lock),
/// [`write_lock`](Handle::write_lock), [`semaphore`](Handle::semaphore) and their `try_`
/// forms; `examples/kinds.rs`) are those of [`Handle`], reached through `Deref`;
/// `Handle::clone(&redlock)` gives a handle free of the runtime's name. The driver task runs
/// as long as a handle or a guard exists, or an operation (a background release, say) is
/// unfinished.
pub type Redlock = redlock_driver::Redlock<Tokio>;

/// Builds a [`Redlock`] from node URLs and core configuration; [`build`](Builder::build)
/// spawns the driver task on the current tokio runtime.
pub type Builder = redlock_driver::Builder<Tokio>;

/// tokio, as this driver's runtime: the driver loop is a task on the runtime current at
/// [`Builder::build`], over tokio's sockets, timer and clock. Only [`Redlock`]'s and
/// [`Builder`]'s parameter.
#[derive(Debug)]
pub enum Tokio {}

impl Start for Tokio {
    type Handle = Handle;

    fn start(parts: DriverParts) -> Result<(), LockError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| LockError::Start("no tokio runtime: call build() inside one".into()))?;
        runtime.spawn(IoLoop::<Self>::new(parts).run());
        Ok(())
    }

    /// tokio's clock, which is std's unless time is paused: the loop, its timer and the
    /// guards all read it, so paused test time skews nothing.
    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }
}
