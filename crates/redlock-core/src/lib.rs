//! The Redlock distributed-lock algorithm over N independent Redis or Valkey primaries, as
//! a pure state machine.
//!
//! `redlock-core` does no IO and asks the machine for nothing: no sockets, no threads, no
//! `async`, no clock reads, no global RNG. The caller hands it the current monotonic time
//! and whatever arrived from each node; it hands back bytes to write, the next deadline, and
//! lock events. All quorum, clock-drift, validity, timeout, retry, extension and release
//! logic lives here once, so every driver (tokio, async-io, blocking) behaves the same.
//!
//! Every rule of the algorithm, with its reason and the test that shows it, is in
//! [`docs::algorithm`] (code comments cite it by section, `algorithm.md §4`); it follows the
//! [Valkey distlock page](https://valkey.io/topics/distlock/). What the lock does and
//! does not promise (process pauses, clock jumps, node restarts, fencing) is in
//! [`docs::safety`]; read it before relying on a lock for correctness.
//!
//! # Two layers
//! - **Operation layer**, [`Lock`]: one lock's life as per-node [`Request`]s and reply
//!   reading. For library authors who own their connections: send each request's
//!   [`Command`] to its node with any client, hand back the decoded [`Reply`].
//! - **Connection layer**, [`Client`]: N ordered byte streams and any number of concurrent
//!   locks. Drivers use this one.
//!
//! What each layer gives, and where it lives (docs/design.md has the module map):
//!
//! | feature | [`Lock`] (an embedder's own connections) | what only [`Client`] adds |
//! |---|---|---|
//! | acquire with retries, quorum, drift, validity ([`docs::algorithm`] §1–§5, §7) | `lock/acquire.rs`, `lock/wait.rs`, `quorum.rs`, `round.rs` | |
//! | extension and auto-extension (§8–§10) | `lock/extend.rs` | |
//! | release on all N, cleanup of failed attempts (§6) | `lock/release.rs` | release at a quorum, the rest in the background |
//! | inspection, release by token | `lock/inspect.rs`, [`Lock::release_token`] | |
//! | fencing tokens ([`docs::safety`], "Fencing tokens") | the counter script, its floor read by the script (`fencing.rs`) | the pipelined `ZADD GT` form, its floor from the node's `TIME` (`fencing.rs`, `session/`) |
//! | native release and extension (`DELIFEQ`, `SET IFEQ`) | when the caller says each node's [`NodeCommands`] ([`Lock::poll_request_using`]) | chosen per node from its `HELLO` (`server.rs`, `session/`) |
//! | RESP, FIFO reply matching, handshake, reconnection, backlog cap (§13) | | `resp.rs`, `node/`, `session/` |
//! | local queueing: one contender per resource per client, and the hand-over of a held lock to the next call | | `queue.rs` (`Lines`), `lock/queued.rs`, `lock/hand_over.rs` |
//! | release notifications: wait for the release, not the retry timer | [`Lock::handle_release_notice`]; [`Lock::poll_unheard`] where you do not listen | subscriptions and routing (`notify.rs`, `Watching`), and which nodes can be heard |
//! | restart quarantine, same server named twice ([`docs::safety`], "Node restarts") | | `INFO`/`CONFIG GET` at connect, the decision and its window (`health.rs`, `quarantine.rs`) |
//! | clock-rate check ([`docs::safety`], "Checking the clock rates") | | `TIME` samples and findings (`health.rs`, `clock_rate.rs`) |
//!
//! The configuration is one [`Config`], typed by feature: each node-level feature above is
//! one value of its builder ([`RestartQuarantine`], [`ClockCheck`], [`ReleaseNotifications`],
//! [`Fencing`], [`RetryPolicy`], [`AutoExtend`]).
//!
//! # Lock kinds
//! Besides the mutex of one resource, a lock can be a multi-resource lock
//! ([`Client::acquire_all_with`], all or none), a reader or a writer of a reader-writer
//! lock, or a permit of a counting semaphore ([`LockOptions::kind`] with a [`LockKind`]):
//! [`docs::kinds`] gives their keys, scripts, quorums and examples.
//!
//! # The run loop
//! Drain outputs, wait for one thing, feed it with a fresh `now`, repeat. The numbered
//! duties are spelled out with MUST on [`Client`].
//!
//! ```no_run
//! use std::time::Instant;
//! use redlock_core::{Client, Config, ConnId, ConnectionError, Event, Input, NodeId, Output};
//! # enum Wake<'a> { Bytes(ConnId, &'a [u8]), Up(ConnId), Down(ConnId, ConnectionError), Timer }
//! # fn wait_for_one_thing<'a>(_deadline: Option<Instant>) -> Wake<'a> { Wake::Timer }
//! # fn driver_clock() -> Instant { unimplemented!("the driver's monotonic clock") }
//! # fn write(_: NodeId, _: &[u8]) {}
//! # fn connect(_: ConnId) {}
//! # fn close(_: ConnId) {}
//! # fn deliver(_: Event) {}
//!
//! // 1. Build the client from a config and a CSPRNG: here the OS's generator, through the
//! //    `getrandom` crate (feature `sys_rng`) and `rand_core`; any `rand_core::CryptoRng`
//! //    will do (the drivers use a `chacha20::ChaCha20Rng` seeded once from the OS's, which
//! //    saves a system call per token; one with a fixed seed makes tests repeatable).
//! let config = Config::builder(5).build()?;
//! let mut client = Client::new(config, rand_core::UnwrapErr(getrandom::SysRng));
//! loop {
//!     // 2. Drain: act on every output until Timeout or Idle.
//!     let deadline = loop {
//!         match client.poll_output() {
//!             Output::Transmit(t) => write(t.node, &t.bytes),
//!             // A new connection to its node, replacing any earlier one; inputs name it.
//!             Output::Connect(conn) => connect(conn),
//!             Output::Disconnect(conn) => close(conn),
//!             Output::Event(event) => deliver(event),
//!             Output::Timeout(at) => break Some(at),
//!             Output::Idle => break None,
//!         }
//!     };
//!     // 3. Wait for exactly one thing, then feed it with a fresh `now`, naming the
//!     //    connection it came from (input from a replaced connection is ignored).
//!     let now = driver_clock();
//!     let input = match wait_for_one_thing(deadline) {
//!         Wake::Bytes(conn, bytes) => Input::Received { now, conn, bytes },
//!         Wake::Up(conn) => Input::Connected { now, conn },
//!         Wake::Down(conn, reason) => Input::Disconnected { now, conn, reason },
//!         Wake::Timer => Input::Timeout(now),
//!     };
//!     client.handle_input(input)?;
//! }
//! # #[allow(unreachable_code)]
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # A complete driver over `std::net::TcpStream`
//! Non-blocking sockets polled in one thread: enough to show the contract, not a production
//! driver (those are `redlock-tokio`, `redlock-async-std` and `redlock-blocking`).
//!
//! ```no_run
#![doc = include_str!("../examples/std_tcp.rs")]
//! ```
//!
//! # Panics
//! Nothing a node sends can panic the core: replies are decoded defensively, size-capped,
//! and a malformed stream is a node fault. The `expect`s in the code name the invariant
//! that makes them unreachable.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod address;
mod client;
mod clock_rate;
mod command;
mod config;
mod error;
mod fault;
mod fencing;
mod grant;
mod health;
mod id;
mod identity;
mod inspection;
mod io;
mod kinds;
mod lock;
mod mutant;
mod node;
mod notify;
mod options;
mod policy;
mod quarantine;
mod queue;
mod quorum;
mod reply_vote;
mod resp;
mod round;
mod script;
mod server;
mod session;
mod time;
mod token;
mod vote;
mod waiters;

/// The project's documents, shipped with the crate: read them before relying on a lock.
pub mod docs {
    /// What a lock promises and what it does not: process pauses, clock jumps, node
    /// restarts, fencing (the repository's `docs/safety.md`).
    #[doc = include_str!("../doc/safety.md")]
    pub mod safety {}

    /// Every rule of the algorithm, its reason, and the test that fails without it (the
    /// repository's `docs/algorithm.md`).
    #[doc = include_str!("../doc/algorithm.md")]
    pub mod algorithm {}

    /// Every error a driver returns, with its exact message and what to do about it (the
    /// repository's `docs/errors.md`).
    #[doc = include_str!("../doc/errors.md")]
    pub mod errors {}

    /// The lock kinds beyond the mutex: multi-resource locks, reader-writer locks and
    /// counting semaphores, their keys, scripts, quorums and API (the repository's
    /// `docs/kinds.md`).
    #[doc = include_str!("../doc/kinds.md")]
    pub mod kinds {}
}

pub use address::{AddressError, NodeAddress, TlsOptions, TlsRoots, Transport};
pub use client::Client;
pub use command::{Command, EXTEND_SCRIPT, RELEASE_SCRIPT};
pub use config::{
    ClockCheck, Config, ConfigBuilder, DEFAULT_DRIFT_FACTOR, DEFAULT_DRIFT_FLOOR,
    DEFAULT_FENCE_SUFFIX, DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_READ_BUFFER, DEFAULT_MAX_REPLY_SIZE,
    DEFAULT_NOTIFICATION_JITTER, DEFAULT_TTL, Fencing, MAX_RECONNECT_BACKOFF, MAX_TTL_MS,
    ReleaseNotifications, RestartQuarantine, WaiterQueue,
};
pub use error::{ConfigError, UsageError};
pub use fencing::{FENCED_ACQUIRE_SCRIPT, RAISE_FENCE_SCRIPT};
pub use grant::GRANT_PREFIX;
pub use id::{ConnId, MAX_NODES, NodeId, NodeName, OpId, RequestId};
pub use inspection::{
    Agreed, HolderSet, Inspection, KeyState, MAX_INSPECTED_HOLDERS, SharedHolders, SharedKeys,
    SlotHolder,
};
pub use io::{
    AcquireFailure, AcquireOutcome, AcquireStats, Acquired, ConnectionError, Event, Input,
    LostReason, NodeFault, NodeOutcome, Output, ReleaseOutcome, Transmit,
};
pub use kinds::{
    LockKind, MULTI_ACQUIRE_SCRIPT, MULTI_EXTEND_SCRIPT, MULTI_RELEASE_SCRIPT, READ_ACQUIRE_SCRIPT,
    READ_EXTEND_SCRIPT, READ_RELEASE_SCRIPT, SEM_ACQUIRE_SCRIPT, SEM_EXTEND_SCRIPT,
    SEM_RELEASE_SCRIPT, WRITE_ABANDON_SCRIPT, WRITE_ACQUIRE_SCRIPT, WRITE_RELEASE_SCRIPT,
    resource_set,
};
pub use lock::{Lock, Request};
pub use notify::{
    RELEASE_CHANNEL_PREFIX, WAITING_CHANNEL_PREFIX, release_channel, waiting_channel,
};
pub use options::LockOptions;
pub use policy::{
    AutoExtend, DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_DELAY_MAX, DEFAULT_RETRY_DELAY_MIN, DelayInput,
    NodeSettings, RetryDelay, RetryPolicy,
};
pub use quarantine::{QuarantineCause, QuarantineSkip};
pub use resp::{Decoder, ProtocolError, Reply};
pub use script::Script;
pub use server::{
    CommandSource, ExtendCommand, FenceCommand, NodeCommands, ReleaseCommand, ServerFamily,
    ServerVersion,
};
pub use token::{MAX_TOKEN_LEN, Resource, STAMP_LEN, TOKEN_RANDOM_BYTES, Token};
pub use waiters::{
    NEXT_PREFIX, QUEUE_ACQUIRE_SCRIPT, QUEUE_LEAVE_SCRIPT, QUEUE_RELEASE_SCRIPT, QUEUE_SUFFIX,
    QUEUE_UNTIL_SUFFIX,
};

#[cfg(feature = "_mutants")]
#[doc(hidden)]
pub use command::RESURRECTING_EXTEND_SCRIPT;
#[cfg(feature = "_mutants")]
#[doc(hidden)]
pub use fencing::NO_FLOOR_FENCED_ACQUIRE_SCRIPT;
#[cfg(feature = "_mutants")]
#[doc(hidden)]
pub use kinds::{
    READ_EXTEND_RESURRECTS_SCRIPT, SEM_ACQUIRE_OFF_BY_ONE_SCRIPT,
    WRITE_ACQUIRE_IGNORES_READERS_SCRIPT,
};
#[cfg(feature = "_mutants")]
#[doc(hidden)]
pub use mutant::Mutant;
#[cfg(feature = "_mutants")]
#[doc(hidden)]
pub use waiters::QUEUE_ACQUIRE_NEVER_PRUNES_SCRIPT;

#[cfg(test)]
#[path = "../tests/support/epoch.rs"]
mod test_epoch;
