//! The command contract: what every command a lock sends must do to a key on every server,
//! written once as one table in four parts (the lock key's [`CONTRACT`], the fencing
//! scripts' [`FENCE_CONTRACT`] on the key and its counter, the lock kinds' scripts'
//! [`KINDS_CONTRACT`] on a resource's keys: the multi-lock's, the reader-writer lock's and
//! the semaphore's, docs/kinds.md; and the waiters' queue's [`QUEUE_CONTRACT`] on a
//! mutex's key, queue and deadlines, docs/design.md) and run three ways, against real Redis, real Valkey and
//! the simulation's node model, so the model cannot drift from the servers and each
//! script's token check is tested where it runs.
//!
//! Test code only (`publish = false`): it sits beside the core, not in it, and depends on
//! both the test kit and the simulation, which depend on neither it nor each other's tests.
//!
//! ```no_run
//! use redlock_contract::{KindsScripts, RealNode, Scripts, SimNode, run, run_kinds};
//! use redlock_testkit::Cluster;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = Cluster::start(1)?;
//! let mut node = RealNode::connect(cluster.node(0), cluster.server())?;
//! let report = run(&mut node, Scripts::CORE)?;
//! assert!(report.is_clean(), "{report}");
//! let report = run(&mut SimNode::new(), Scripts::CORE)?;
//! assert!(report.is_clean(), "{report}");
//! let report = run_kinds(&mut SimNode::new(), KindsScripts::SPEC)?;
//! assert!(report.is_clean(), "{report}");
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//! - `table`: the contract as data, with the table in its docs;
//! - `fence`: the fencing scripts' rows (K and its counter F) and how one runs;
//! - `kinds`: the lock kinds' rows (every kinds script on its keys' states, members and
//!   expiries, and what a subscriber hears), with their table in its docs;
//! - `kinds_run`: running the kinds rows on any [`Target`], by `EVALSHA`, `EVAL` and
//!   `EVALSHA` on an empty cache, a second connection listening on the release channels;
//!   one [`KindsReport`];
//! - `kinds_scripts`: where each kinds script's body comes from, and the mutant bodies;
//! - `queue`: the waiters' queue's rows (QUEUE_ACQUIRE, QUEUE_LEAVE, QUEUE_RELEASE on a
//!   resource's key, queue and deadlines, and the `next:<id>` and release a subscriber
//!   hears), with their table in its
//!   docs, and what the never-prunes mutant does instead;
//! - `queue_run`: running the queue rows on any [`Target`] as `kinds_run` runs the kinds
//!   rows (whose key setup and read-back it shares); one [`QueueReport`];
//! - `rows`: what both runs share: each row sent three ways, one [`RowsReport`];
//! - `form`: the argument lists, the core's taken from a [`redlock_core::Lock`];
//! - `run`: one runner for any [`Target`] and the first two parts: set up, send, compare;
//!   skips what a server lacks; one [`Report`];
//! - `target`: [`RealNode`] (a test-kit node) and [`SimNode`] (`redlock_sim::Node`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod fence;
mod form;
mod kinds;
mod kinds_run;
mod kinds_scripts;
mod queue;
mod queue_run;
mod rows;
mod run;
mod table;
mod target;

pub use fence::{FENCE_CONTRACT, FenceAfter, FenceCase, FenceReply, FenceState, KeyState};
pub use form::{
    CoreCommands, FenceCommands, FenceForm, RAISE_TO, Scripts, UNCHECKED_EXTEND_SCRIPT,
    UNCHECKED_RAISE_FENCE_SCRIPT,
};
pub use kinds::{
    KINDS_CONTRACT, KindsCase, KindsKey, KindsReply, KindsScript, Life, PATIENCE_MS, SLACK_MS,
};
pub use kinds_run::{KindsReport, run_kinds, run_kinds_rows};
pub use kinds_scripts::{
    KindsScripts, READ_EXTEND_RESURRECTS, SEM_ACQUIRE_OFF_BY_ONE, WRITE_ACQUIRE_IGNORES_READERS,
};
pub use queue::{
    BROKEN_BY_NEVER_PRUNES, QUEUE_CONTRACT, QUEUE_NEVER_PRUNES_CONTRACT, QueueCase, QueueKey,
    QueueReply, QueueScript, Ticket,
};
pub use queue_run::{QueueReport, QueueScripts, run_queue, run_queue_rows};
pub use rows::{Row, RowsReport};
pub use run::{Report, run, run_rows};
pub use table::{
    ANOTHER_TOKEN, After, CONTRACT, Case, Expected, Family, Form, LONG_TTL_MS, SHORT_TTL_MS, Send,
    Since, State, TTL_MS,
};
pub use target::{RealNode, SimNode, Target};
