//! The handle, guard, bookkeeping and async driver loop shared by the Redlock drivers
//! (`redlock-tokio`, `redlock-async-std`, `redlock-blocking`). Runtime-agnostic: it uses
//! only tokio's `sync` channels, which need no tokio runtime, and it does IO only through
//! the [`Runtime`] a driver gives it. Its API is async; the blocking driver waits on these
//! futures by parking the calling thread.
//!
//! Users reach this crate through a driver, which re-exports [`Handle`] (behind its
//! `Redlock`), [`LockGuard`], [`LockRef`] and [`WithLockError`], or wraps them in blocking
//! calls. What a driver gets from here:
//! - [`Setup`] collects what every builder collects (node URLs, core configuration, connect
//!   timeout, the loop's clock). [`Setup::build`] validates it and returns the user's [`Handle`] with the
//!   [`DriverParts`] the driver's loop owns: the core `Client`, the command receiver and the
//!   node addresses.
//! - [`Builder`] is the builder users see, generic over the driver's [`Start`] (how it starts
//!   its loop); each driver names `Builder<ItsStart>` its own `Builder`.
//! - [`Waiters`] is the loop's bookkeeping: it takes each [`Cmd`] the handles send, each core
//!   `Event` the loop drains, and releases locks whose `lock()` future was dropped.
//! - [`IoLoop`] is the whole loop of an async driver (connect, read, write once per node per
//!   turn, sleep until the core's deadline, batch under load), over a [`Runtime`]: the
//!   runtime's sockets, timer, clock and yield. `redlock-tokio` and `redlock-async-std` are
//!   a [`Runtime`] and a [`Start`] each. The blocking driver has its own `mio` loop and uses
//!   [`Waiters`] directly, as below.
//!
//! ```no_run
//! use std::time::{Duration, Instant};
//! use redlock_driver::{DriverParts, Setup, Waiters};
//! use redlock_core::Output;
//!
//! let urls = ["redis://127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"];
//! let (handle, parts) = Setup::from_urls(urls)?
//!     .config(|c| c.ttl(Duration::from_secs(10)))
//!     .build()?;
//! // A real driver spawns its async loop; `handle.lock("invoices:42").await` from here on.
//! std::thread::spawn(move || run(parts));
//!
//! fn run(parts: DriverParts) {
//!     let DriverParts { mut client, mut commands, .. } = parts;
//!     let mut waiters = Waiters::new();
//!     loop {
//!         // Drain: events go to their waiters; the rest is the driver's IO.
//!         loop {
//!             match client.poll_output() {
//!                 Output::Event(event) => waiters.dispatch(event),
//!                 Output::Timeout(_) | Output::Idle => break,
//!                 _ => { /* write, connect, disconnect */ }
//!             }
//!         }
//!         if waiters.release_orphan(Instant::now(), &mut client) {
//!             continue;
//!         }
//!         // Wait for one thing (here only a command) and feed it. A real driver finishes
//!         // the operations in flight before it returns.
//!         let Some(cmd) = commands.blocking_recv() else { return };
//!         waiters.command(Instant::now(), &mut client, cmd);
//!     }
//! }
//! # Ok::<(), redlock_core::LockError>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod guard;
mod handle;
mod io_loop;
mod setup;
mod waiters;

pub use guard::{LockGuard, LockRef};
pub use handle::{Handle, WithLockError};
pub use io_loop::{Connecting, IoLoop, Runtime};
pub use setup::{Builder, DriverParts, OsRng, Setup, Start};
pub use waiters::{Cmd, Waiters};
