//! A deterministic simulation of Redlock: simulated Redis nodes, a network that delays,
//! splits, reorders (across links), cuts and half-closes (late delivery), skewed clocks,
//! and a virtual-time scheduler driving real `redlock_core::Client`s.
//!
//! No real IO, no sleeps, no threads: a [`Scenario`] (seed and knobs) fully determines a run,
//! so a failing seed replays exactly ([`Sim::enable_log`] prints it). The [`Checker`] records
//! every hold in true time and reports two holders of one resource at once (the safety
//! property of docs/algorithm.md, which §1 and §4 give).
//!
//! ```
//! use std::time::Duration;
//! use redlock_core::Config;
//! use redlock_sim::{Scenario, Sim};
//!
//! let config = Config::builder(5).ttl(Duration::from_secs(1)).build().unwrap();
//! let report = Sim::new(Scenario::new(7, config)).run();
//! assert!(report.violation.is_none());
//! assert!(report.workloads_done);
//! ```
//!
//! # Layout
//! - [`clock`]: true time and per-process clocks with constant rates.
//! - [`node`], `keyspace`, [`script`], [`kinds`] (the models of the multi-resource,
//!   reader-writer and semaphore scripts and of the waiters' queue's acquire, leave and
//!   release, with their tables of cases), `lua` (what the
//!   models share: argument reading, errors, the release channel), `conditional`, `sorted`
//!   (the fencing counter's sorted-set commands), [`pubsub`] (sessions, channels,
//!   `SUBSCRIBE`/`PUBLISH`), `resp` (RESP2 and RESP3): a node executing the core's
//!   commands; [`profile`]: which server it
//!   behaves as (its `HELLO`, its native commands, its ACL).
//! - `push`: pub/sub messages on their way to subscribed connections, and their faults
//!   ([`PushFaults`]: lost, doubled, held back; `SUBSCRIBE` ignored).
//! - `network`: per-link FIFO delivery with delay, splitting, slow reply links
//!   ([`SlowLink`]), cuts and generations;
//!   `orphan`: half-closed connections whose held bytes reach the node late.
//! - [`Sim`] (`sim.rs`, `driver.rs`, `fault.rs`): the scheduler, the client driver, faults;
//!   `event`: what the scheduler queues; [`Report`] (`report.rs`): counters and the trace
//!   hash.
//! - `workload`, [`checker`]: what clients do (one task each, or several sharing the
//!   client; `kind_mix` ([`KindMix`]): which lock kind each call takes), and what must
//!   never happen (`holds`: which holds of the lock kinds may not overlap); `liveness`
//!   ([`Starvation`]): what must eventually happen while the lock changes hands; `linger`:
//!   the release property (a key outlives its release by at most the release timeout), and
//!   `release_watch` looks for it; `refusal_watch`: extensions refused for good;
//!   `fairness` ([`Overtaken`]): the waiters' queue serves the waiters first come, first
//!   served, within a slack. `death`: clients that die ([`ClientDeath`]), whose unfinished
//!   calls the properties leave out.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod checker;
pub mod clock;
mod conditional;
mod death;
mod driver;
mod event;
mod fairness;
mod fault;
mod holds;
mod keyspace;
mod kind_mix;
pub mod kinds;
mod linger;
mod liveness;
mod lua;
mod network;
pub mod node;
mod orphan;
pub mod profile;
pub mod pubsub;
mod push;
mod random;
mod refusal_watch;
mod release_watch;
mod report;
mod resp;
mod scenario;
pub mod script;
mod sim;
mod sorted;
mod workload;

pub use checker::{Checker, FencingViolation, Interval, OpRecord, Violation};
pub use clock::{Clock, SimTime};
pub use fairness::{Idle, Overtaken};
pub use holds::{Conflict, Hold, HoldKind};
pub use keyspace::{ChannelDenied, Keys, Keyspace, TimeDenied, WALL_EPOCH_NANOS, WrongType};
pub use kind_mix::KindMix;
pub use linger::Linger;
pub use liveness::Starvation;
pub use network::{NetworkKnobs, SlowLink};
pub use node::{Node, NodeState};
pub use profile::{HelloAnswer, ServerProfile};
pub use pubsub::{Delivery, Session};
pub use random::Dice;
pub use report::{ClockEvent, Report, Stats};
pub use resp::{Frame, Protocol, ServerReply};
pub use scenario::{
    ClientDeath, ClockRates, DEATH_LOOKOUT, FaultKnobs, PushFaults, Resources, Scenario,
    SuppliedToken, WallStep, WorkloadKnobs,
};
pub use script::{NativeScript, ScriptFn, Scripts};
pub use sim::Sim;
