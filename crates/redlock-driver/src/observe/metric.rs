//! The `metrics` side of the observer: counters, histograms and gauges through the
//! `metrics` facade, registered once when the loop starts (so with the recorder installed
//! then) and updated through their handles.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `redlock_acquired_total` | counter | | locks acquired |
//! | `redlock_acquire_failed_total` | counter | `reason` | acquisitions that failed, by reason |
//! | `redlock_extended_total` | counter | | extensions (called or automatic) |
//! | `redlock_lost_total` | counter | `reason` | held locks lost, by reason |
//! | `redlock_released_total` | counter | | lock releases finished |
//! | `redlock_acquire_seconds` | histogram | | from the lock call to the lock |
//! | `redlock_handoff_wait_seconds` | histogram | | time in line behind an earlier call |
//! | `redlock_node_round_trip_seconds` | histogram | `node` | a write to the next reply |
//! | `redlock_held_locks` | gauge | | locks held now |
//! | `redlock_nodes_up` | gauge | `handle`, `node` | 1 while this handle's connection to the node is up, else 0 |

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};
use redlock_core::{AcquireFailure, LostReason, NodeId, NodeName};

/// Every handle the observer updates, and what it added to the gauges (taken back when the
/// loop ends: `redlock_held_locks` counts over every loop in the process, and this loop's
/// `redlock_nodes_up` series drop to 0).
pub(super) struct Metrics {
    acquired: Counter,
    acquire_failed: [Counter; FAILURES.len()],
    extended: Counter,
    lost: [Counter; LOSSES.len()],
    released: Counter,
    acquire_seconds: Histogram,
    handoff_wait: Histogram,
    /// Registered on each node's first round trip, when its name is known.
    round_trip: Vec<Option<Histogram>>,
    held_locks: Gauge,
    /// This loop's `handle` label: its number among the loops of the process.
    handle: String,
    /// Each node's `redlock_nodes_up` series and whether it is at 1; registered on the
    /// node's first connection or failure, when its name is known.
    nodes_up: Vec<Option<(Gauge, bool)>>,
    held: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        describe();
        Self {
            acquired: counter!("redlock_acquired_total"),
            acquire_failed: FAILURES
                .map(|reason| counter!("redlock_acquire_failed_total", "reason" => reason)),
            extended: counter!("redlock_extended_total"),
            lost: LOSSES.map(|reason| counter!("redlock_lost_total", "reason" => reason)),
            released: counter!("redlock_released_total"),
            acquire_seconds: histogram!("redlock_acquire_seconds"),
            handoff_wait: histogram!("redlock_handoff_wait_seconds"),
            round_trip: Vec::new(),
            held_locks: gauge!("redlock_held_locks"),
            handle: (NEXT_HANDLE.fetch_add(1, Ordering::Relaxed) + 1).to_string(),
            nodes_up: Vec::new(),
            held: 0,
        }
    }
}

impl Metrics {
    /// A lock was acquired `taken` after its call, of which it `waited` in line.
    pub(super) fn acquired(&mut self, taken: Duration, waited: Duration) {
        self.acquired.increment(1);
        self.acquire_seconds.record(taken);
        self.waited(waited);
        self.held += 1;
        self.held_locks.increment(1.0);
    }

    pub(super) fn acquire_failed(&mut self, reason: &AcquireFailure, waited: Duration) {
        let i = match reason {
            AcquireFailure::Contended { .. } => 0,
            AcquireFailure::QuorumUnreachable { .. } => 1,
            AcquireFailure::ValidityExhausted => 2,
            AcquireFailure::WaitDeadline { .. } => 3,
            AcquireFailure::Cancelled => 4,
            AcquireFailure::HeldLocally => 5,
            _ => 6,
        };
        self.acquire_failed[i].increment(1);
        self.waited(waited);
    }

    pub(super) fn extended(&mut self) {
        self.extended.increment(1);
    }

    /// A lock was lost; `held` if it was still counted as held.
    pub(super) fn lost(&mut self, reason: &LostReason, held: bool) {
        let i = match reason {
            LostReason::DeadlinePassed => 0,
            LostReason::NotOwned { .. } => 1,
            LostReason::QuorumUnreachable { .. } => 2,
            LostReason::Refused { .. } => 3,
            _ => 4,
        };
        self.lost[i].increment(1);
        self.let_go(held);
    }

    /// A release finished; `held` if the lock was still counted as held.
    pub(super) fn released(&mut self, held: bool) {
        self.released.increment(1);
        self.let_go(held);
    }

    /// `node`'s connection came up (`true`), or went down or failed: its series is 1 or 0.
    pub(super) fn node_up(&mut self, node: NodeId, names: &[NodeName], up: bool) {
        let i = node.index();
        if self.nodes_up.len() <= i {
            self.nodes_up.resize(i + 1, None);
        }
        let handle = &self.handle;
        let (gauge, is_up) = self.nodes_up[i].get_or_insert_with(|| {
            let name = node_label(node, names);
            let gauge = gauge!("redlock_nodes_up", "handle" => handle.clone(), "node" => name);
            (gauge, false)
        });
        *is_up = up;
        gauge.set(if up { 1.0 } else { 0.0 });
    }

    /// One round trip to `node`.
    pub(super) fn round_trip(&mut self, node: NodeId, names: &[NodeName], rtt: Duration) {
        let i = node.index();
        if self.round_trip.len() <= i {
            self.round_trip.resize(i + 1, None);
        }
        let histogram = self.round_trip[i].get_or_insert_with(
            || histogram!("redlock_node_round_trip_seconds", "node" => node_label(node, names)),
        );
        histogram.record(rtt);
    }

    /// Records time spent in line, if any: most calls never wait.
    fn waited(&self, waited: Duration) {
        if !waited.is_zero() {
            self.handoff_wait.record(waited);
        }
    }

    fn let_go(&mut self, held: bool) {
        if held {
            self.held = self.held.saturating_sub(1);
            self.held_locks.decrement(1.0);
        }
    }
}

impl Drop for Metrics {
    /// The loop is over: its locks and connections no longer count.
    fn drop(&mut self) {
        self.held_locks.decrement(self.held as f64);
        for (gauge, up) in self.nodes_up.iter_mut().flatten() {
            if std::mem::take(up) {
                gauge.set(0.0);
            }
        }
    }
}

/// Says what each metric is (the recorder may show it, e.g. as Prometheus `# HELP`).
fn describe() {
    describe_counter!("redlock_acquired_total", "Locks acquired");
    describe_counter!(
        "redlock_acquire_failed_total",
        "Acquisitions that failed, by reason"
    );
    describe_counter!(
        "redlock_extended_total",
        "Lock extensions, called or automatic"
    );
    describe_counter!("redlock_lost_total", "Held locks lost, by reason");
    describe_counter!("redlock_released_total", "Lock releases finished");
    describe_histogram!(
        "redlock_acquire_seconds",
        Unit::Seconds,
        "From a lock call to the lock"
    );
    describe_histogram!(
        "redlock_handoff_wait_seconds",
        Unit::Seconds,
        "Time a lock call waited behind an earlier call of this client for its resource"
    );
    describe_histogram!(
        "redlock_node_round_trip_seconds",
        Unit::Seconds,
        "From a write to a node to its next reply"
    );
    describe_gauge!("redlock_held_locks", "Locks held now");
    describe_gauge!(
        "redlock_nodes_up",
        "1 while this handle's connection to the node is up, else 0"
    );
}

/// The `node` label: the node's name from the configuration (its address, no password).
fn node_label(node: NodeId, names: &[NodeName]) -> String {
    names
        .get(node.index())
        .map_or_else(|| node.to_string(), |n| n.as_str().to_owned())
}

/// The number of the next loop's `handle` label, less one: loops are numbered from 1 in
/// the order they start in this process.
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(0);

/// The `reason` label of each acquisition failure.
const FAILURES: [&str; 7] = [
    "contended",
    "quorum_unreachable",
    "validity_exhausted",
    "wait_deadline",
    "cancelled",
    "held_locally",
    "other",
];

/// The `reason` label of each loss.
const LOSSES: [&str; 5] = [
    "deadline_passed",
    "not_owned",
    "quorum_unreachable",
    "refused",
    "other",
];
