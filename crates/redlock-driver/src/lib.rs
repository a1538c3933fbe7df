//! Everything the Redlock drivers (`redlock-tokio`, `redlock-async-std`, `redlock-blocking`)
//! share but their IO: the user's `Redlock<S>` and its builder, [`LockError`], the guards,
//! the loop's bookkeeping, and the async driver loop. Runtime-agnostic: it uses
//! only tokio's `sync` channels, which need no tokio runtime, and it does IO only through
//! the [`Runtime`] a driver gives it. Its API is async; the blocking driver waits on these
//! futures by parking the calling thread.
//!
//! Every [`LockError`], its exact message and what to do about it: the repository's
//! [`docs/errors.md`](https://github.com/redlock-rs/redlock/blob/main/docs/errors.md).
//!
//! Users reach this crate through a driver, which names [`Redlock<ItsStart>`](Redlock) its
//! `Redlock` and re-exports the [`prelude`] (the core's lock options and outcomes,
//! [`LockError`] and [`WithLockError`]); the async drivers re-export [`LockGuard`] and
//! [`LockRef`] too (the blocking driver wraps them in blocking calls). What a driver gets
//! from here:
//! - [`Redlock`] and [`Builder`], generic over the driver's [`Start`]: how it starts its loop,
//!   the loop's clock ([`Start::now`]), and the handle users call through `Deref`.
//! - [`Setup`] collects what every builder collects (node URLs, core configuration, connect
//!   timeout). [`Setup::build`] validates it and returns the user's [`Handle`] with the
//!   [`DriverParts`] the driver's loop owns: the core `Client`, the command receiver, the node
//!   addresses and the clock the handle reads, which the loop MUST stamp its inputs with.
//! - [`Waiters`] is the loop's bookkeeping: it takes each [`Cmd`] the handles send, each core
//!   `Event` the loop drains, and releases locks whose `lock()` future was dropped.
//! - [`IoLoop`] is the whole loop of an async driver (connect, read, write once per node per
//!   turn, sleep until the core's deadline, batch under load), over a [`Runtime`]: the
//!   runtime's sockets, timer and yield. `redlock-tokio` and `redlock-async-std` are a
//!   [`Runtime`] and a [`Start`] each. The blocking driver has its own `mio` loop and uses
//!   [`Waiters`] directly, as below.
//! - [`Observer`] is the loop's telemetry, behind two features each driver forwards:
//!   `tracing` (a span per lock call and step, events for connections, refused handshakes,
//!   command fallbacks and losses) and `metrics` (counters, histograms and gauges through
//!   the `metrics` facade). Its docs list every span, event and metric. Neither shows a
//!   token or a password.
//!
//! ```no_run
//! use std::time::{Duration, Instant};
//! use redlock_driver::{DriverParts, LockError, Setup, Waiters};
//! use redlock_core::Output;
//!
//! let urls = ["redis://127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"];
//! let (handle, parts) = Setup::from_urls(urls)?
//!     .config(|c| c.ttl(Duration::from_secs(10)))
//!     .build(Instant::now)?;
//! // A real driver spawns its async loop; `handle.lock("invoices:42").await` from here on.
//! std::thread::spawn(move || run(parts));
//!
//! fn run(parts: DriverParts) {
//!     let DriverParts { mut client, mut commands, clock, .. } = parts;
//!     let mut waiters = Waiters::new();
//!     loop {
//!         // Drain: events go to their waiters; the rest is the driver's IO. The loop's
//!         // telemetry sees every output (and every input, before the core does).
//!         loop {
//!             let output = client.poll_output();
//!             waiters.observer().output(&client, &output);
//!             match output {
//!                 Output::Event(event) => waiters.dispatch(event),
//!                 Output::Timeout(_) | Output::Idle => break,
//!                 _ => { /* write, connect, disconnect */ }
//!             }
//!         }
//!         if waiters.release_orphan(clock(), &mut client) {
//!             continue;
//!         }
//!         // Wait for one thing (here only a command) and feed it, stamped by the one clock.
//!         // A real driver finishes the operations in flight before it returns.
//!         let Some(cmd) = commands.blocking_recv() else { return };
//!         waiters.command(clock(), &mut client, cmd);
//!     }
//! }
//! # Ok::<(), LockError>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod endpoint;
mod error;
mod guard;
mod handle;
mod handshake;
mod io_loop;
mod kinds;
mod observe;
mod op_hash;
pub mod prelude;
mod redlock;
mod request;
mod runtime;
mod setup;
mod tls;
mod waiters;
mod wire;

pub use endpoint::{Dial, Endpoint};
pub use error::{LockError, WithLockError};
pub use guard::{LockGuard, LockRef};
pub use handle::Handle;
pub use handshake::{HandshakeStep, handshake_step};
pub use io_loop::IoLoop;
pub use observe::Observer;
pub use redlock::{Builder, Redlock, Start};
pub use request::Cmd;
pub use runtime::{Connecting, Runtime};
pub use setup::{DriverParts, DriverRng, Setup};
pub use waiters::Waiters;
pub use wire::Wire;
