//! Redlock distributed locks over N independent Redis or Valkey nodes, for async-std and smol
//! users.
//!
//! async-std is discontinued upstream (its README says "use smol instead"; RUSTSEC-2025-0052),
//! and async-std and smol share one reactor, `async-io`. So this crate depends only on
//! `async-io` and `futures-lite`, never on either runtime: its futures run under
//! `async_std::task::block_on`, `smol::block_on`, a `smol::Executor`, or any other executor.
//!
//! A thin driver: one dedicated background thread (`redlock-asyncio`) runs the driver loop
//! under `async_io::block_on`. It owns the sans-IO [`redlock_core::Client`] and the N
//! connections, and every quorum, drift, validity, retry and extension decision is the core's;
//! the thread only moves bytes, sleeps until the core's deadline, and hands events to your
//! futures. A thread rather than a spawned task keeps the crate executor-agnostic: it needs
//! no spawner and behaves the same under async-std and smol. The thread ends once every
//! [`Redlock`] handle, [`LockGuard`] and [`LockRef`] is gone and every operation (a background
//! release, say) has finished. Read [what a lock promises](redlock_core::docs::safety) and [the algorithm, rule by
//! rule](redlock_core::docs::algorithm); every error's message, with what to do, is in
//! [the error table](redlock_core::docs::errors).
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_async_std::{LockError, Redlock};
//!
//! // Or `async_std::task::block_on`: both drive the same async-io reactor.
//! smol::block_on(async {
//!     let urls = ["redis://127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"];
//!     let redlock = Redlock::builder(urls)?
//!         .config(|c| c.ttl(Duration::from_secs(10)))
//!         .build()?;
//!     let guard = redlock.lock("invoices:42").await?;
//!     println!("holding {} for {:?}", guard.token(), guard.validity());
//!     let report = guard.release().await?;
//!     println!("released: {report:?}");
//!
//!     // Or run a closure under an auto-extended lock:
//!     let total = redlock
//!         .with_lock("invoices:43", |lock| async move {
//!             assert!(lock.validity() > Duration::ZERO);
//!             Ok::<_, std::io::Error>(42)
//!         })
//!         .await;
//!     println!("{total:?}");
//!     Ok::<(), LockError>(())
//! })?;
//! # Ok::<(), LockError>(())
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

mod runtime;

use std::time::Instant;

use redlock_driver::{DriverParts, IoLoop, Start};

pub use redlock_driver::prelude::*;
pub use redlock_driver::{Handle, LockGuard, LockRef};

/// A handle to a set of N nodes, served by one driver thread. Cheap to clone; `Send + Sync`.
///
/// The lock calls ([`lock`](Handle::lock), [`try_lock`](Handle::try_lock),
/// [`lock_with`](Handle::lock_with), [`with_lock`](Handle::with_lock),
/// [`inspect`](Handle::inspect), [`release_token`](Handle::release_token),
/// [`config`](Handle::config)) and those of the other lock kinds (docs/kinds.md:
/// [`lock_all`](Handle::lock_all), [`read_lock`](Handle::read_lock),
/// [`write_lock`](Handle::write_lock), [`semaphore`](Handle::semaphore) and their `try_`
/// forms; redlock-tokio's `examples/kinds.rs`, the same calls) are those of [`Handle`],
/// reached through `Deref`;
/// `Handle::clone(&redlock)` gives a handle free of the runtime's name. The driver thread
/// runs as long as a handle or a guard exists, or an operation (a background release, say)
/// is unfinished.
pub type Redlock = redlock_driver::Redlock<AsyncIo>;

/// Builds a [`Redlock`] from node URLs and core configuration; [`build`](Builder::build)
/// starts the driver thread. It needs no executor.
pub type Builder = redlock_driver::Builder<AsyncIo>;

/// async-io, as this driver's runtime: the driver loop runs under `async_io::block_on` on a
/// thread of its own, over `Async<TcpStream>` and async-io's timer. Only [`Redlock`]'s and
/// [`Builder`]'s parameter.
#[derive(Debug)]
pub enum AsyncIo {}

impl Start for AsyncIo {
    type Handle = Handle;

    fn start(parts: DriverParts) -> Result<(), LockError> {
        let driver = IoLoop::<Self>::new(parts);
        std::thread::Builder::new()
            .name(DRIVER_THREAD.into())
            .spawn(move || async_io::block_on(driver.run()))
            .map_err(|e| LockError::Start(format!("no driver thread: {e}")))?;
        Ok(())
    }

    /// std's clock, which async-io's timers count in; the guards read it too.
    fn now() -> Instant {
        Instant::now()
    }
}

/// The driver thread's name (15 bytes: Linux keeps no more).
const DRIVER_THREAD: &str = "redlock-asyncio";
