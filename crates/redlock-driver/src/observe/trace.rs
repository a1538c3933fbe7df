//! The `tracing` side of the observer: a `redlock.lock` span for each lock call (op,
//! resource), with a child span per step (`redlock.acquire`, `redlock.extend`,
//! `redlock.release`), a span per query (`redlock.inspect`, `redlock.release_token`), and
//! events for connections, refused handshakes, command fallbacks and losses.
//!
//! Never a token (not even a query's holder) and never a password: nodes are named by the
//! configuration's names, which are `host:port`.

use std::fmt::{self, Write};
use std::time::{Duration, Instant};

use redlock_core::{
    AcquireFailure, AcquireOutcome, AcquireStats, Acquired, ConnId, ConnectionError, Event,
    Inspection, LostReason, NodeCommands, NodeFault, NodeId, NodeName, OpId, ReleaseOutcome,
    Resource,
};
use tracing::field::Empty;
use tracing::{Span, debug, info, info_span, warn};

use super::Step;
use super::node::NodeState;

/// Whether a subscriber may record anything: one relaxed load (the level filter is `OFF`
/// until a subscriber is set).
#[inline]
pub(super) fn listening() -> bool {
    tracing::level_filters::LevelFilter::current() != tracing::level_filters::LevelFilter::OFF
}

/// One operation's spans: the whole call's (or the query's), and its step in flight.
pub(super) struct OpSpans {
    lock: Span,
    step: Span,
    kind: StepKind,
}

/// Which step `OpSpans::step` is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StepKind {
    None,
    Acquire,
    Extend,
    Release,
    /// A query: its one span is `lock`.
    Query,
}

/// The spans of a lock call about to start: `redlock.lock` and its `redlock.acquire`.
pub(super) fn lock(resource: &Resource) -> OpSpans {
    let lock = info_span!(parent: None, "redlock.lock", op = Empty, resource = %Key(resource));
    let step = info_span!(
        parent: &lock,
        "redlock.acquire",
        attempts = Empty,
        outcome = Empty,
        votes = Empty,
        validity_ms = Empty,
        elapsed_ms = Empty,
        waited_ms = Empty,
        fencing_token = Empty,
    );
    let kind = StepKind::Acquire;
    OpSpans { lock, step, kind }
}

/// The span of a query (an inspection or a release by token) the core accepted.
pub(super) fn query(step: Step<'_>, resource: &Resource, op: OpId) -> OpSpans {
    let (op, key) = (op.as_raw(), Key(resource));
    let lock = match step {
        Step::Inspect(_) => info_span!(
            parent: None,
            "redlock.inspect",
            op,
            resource = %key,
            outcome = Empty,
            agreeing = Empty,
            validity_ms = Empty,
        ),
        _ => info_span!(
            parent: None,
            "redlock.release_token",
            op,
            resource = %key,
            outcome = Empty,
            votes = Empty,
        ),
    };
    let (step, kind) = (Span::none(), StepKind::Query);
    OpSpans { lock, step, kind }
}

impl OpSpans {
    /// Whether no subscriber records these spans (then nothing is kept for them).
    pub(super) fn is_disabled(&self) -> bool {
        self.lock.is_disabled()
    }

    /// The core accepted the call as `op`.
    pub(super) fn set_op(&self, op: OpId) {
        self.lock.record("op", op.as_raw());
    }

    /// The user asked to extend, release or cancel.
    pub(super) fn requested(&mut self, step: Step<'_>) {
        let lock = &self.lock;
        match step {
            Step::Extend => {
                let span = info_span!(
                    parent: lock,
                    "redlock.extend",
                    outcome = Empty,
                    validity_ms = Empty,
                );
                self.replace_step(span, StepKind::Extend, "superseded by another extension");
            }
            Step::Release => {
                let span =
                    info_span!(parent: lock, "redlock.release", outcome = Empty, votes = Empty);
                self.replace_step(span, StepKind::Release, "superseded by the release");
            }
            Step::Cancel => debug!(parent: &self.step, "acquisition cancelled"),
            Step::Inspect(_) | Step::ReleaseToken(_) => {}
        }
    }

    /// The step in flight ends with `outcome` (an extension's answer, say), and `span`
    /// takes its place.
    fn replace_step(&mut self, span: Span, kind: StepKind, outcome: &str) {
        self.take_step(StepKind::Extend).record("outcome", outcome);
        (self.step, self.kind) = (span, kind);
    }

    /// The step in flight if it is a `kind`; it ends when dropped.
    fn take_step(&mut self, kind: StepKind) -> Span {
        if self.kind != kind {
            return Span::none();
        }
        self.kind = StepKind::None;
        std::mem::replace(&mut self.step, Span::none())
    }

    pub(super) fn acquired(&mut self, acquired: &Acquired, waited: Duration, nodes: &[NodeState]) {
        let span = self.take_step(StepKind::Acquire);
        record_stats(&span, &acquired.stats, waited, nodes);
        span.record("outcome", "acquired");
        span.record("validity_ms", ms(acquired.validity));
        if let Some(fencing_token) = acquired.fencing_token {
            span.record("fencing_token", fencing_token);
        }
        debug!(parent: &span, "lock acquired");
    }

    pub(super) fn acquire_failed(
        &mut self,
        reason: &AcquireFailure,
        stats: &AcquireStats,
        waited: Duration,
        nodes: &[NodeState],
    ) {
        let span = self.take_step(StepKind::Acquire);
        record_stats(&span, stats, waited, nodes);
        span.record("outcome", "failed");
        info!(parent: &span, %reason, "lock not acquired");
    }

    pub(super) fn extended(&mut self, validity: Duration) {
        let span = self.take_step(StepKind::Extend);
        match span.is_none() {
            // An auto-extension: no call waits for it.
            true => debug!(parent: &self.lock, validity_ms = ms(validity), "lock extended"),
            false => {
                span.record("outcome", "extended");
                span.record("validity_ms", ms(validity));
            }
        }
    }

    pub(super) fn lost(&mut self, reason: &LostReason) {
        // A release in flight goes on to its `Released`; an extension ends here.
        self.take_step(StepKind::Extend).record("outcome", "lost");
        warn!(parent: &self.lock, %reason, "lock lost");
    }

    pub(super) fn released(
        &mut self,
        outcomes: &[ReleaseOutcome],
        names: &[NodeName],
        nodes: &[NodeState],
    ) {
        let span = match self.kind {
            StepKind::Query => self.lock.clone(),
            StepKind::Release => self.take_step(StepKind::Release),
            // A release nobody asked for (after a loss, or of an orphan).
            _ => info_span!(parent: &self.lock, "redlock.release", outcome = Empty, votes = Empty),
        };
        if span.is_disabled() {
            return;
        }
        let released = (outcomes.iter())
            .filter(|o| **o == ReleaseOutcome::Released)
            .count();
        let mut votes = String::new();
        for (i, outcome) in outcomes.iter().enumerate() {
            let id = NodeId::new(i);
            let answered = !matches!(outcome, ReleaseOutcome::Failed(_));
            vote(
                &mut votes,
                &Named(names, id),
                outcome,
                answered,
                nodes.get(i),
            );
        }
        span.record(
            "outcome",
            format_args!("released on {released} of {}", outcomes.len()),
        );
        span.record("votes", votes);
        debug!(parent: &span, "lock released");
    }

    pub(super) fn inspected(&mut self, inspection: &Inspection) {
        let span = &self.lock;
        let held = if inspection.holder.is_some() {
            "held"
        } else {
            "free"
        };
        span.record("outcome", held);
        span.record("agreeing", inspection.agreeing);
        if let Some(validity) = inspection.validity {
            span.record("validity_ms", ms(validity));
        }
    }
}

/// A step's attempts, elapsed and waiting time, and each node's vote with its round trip.
fn record_stats(span: &Span, stats: &AcquireStats, waited: Duration, nodes: &[NodeState]) {
    if span.is_disabled() {
        return;
    }
    span.record("attempts", stats.attempts);
    span.record("elapsed_ms", ms(stats.elapsed));
    span.record("waited_ms", ms(waited));
    let mut votes = String::new();
    for n in &stats.nodes {
        let answered = matches!(n.outcome, AcquireOutcome::Locked | AcquireOutcome::Held);
        let state = nodes.get(n.node.id().index());
        vote(&mut votes, &n.node, &n.outcome, answered, state);
    }
    span.record("votes", votes);
}

/// Appends `node: outcome` to a list of votes, with the node's last round trip (`(rtt …)`)
/// if the vote is the node's answer.
fn vote(
    out: &mut String,
    node: &dyn fmt::Display,
    outcome: &dyn fmt::Display,
    answered: bool,
    state: Option<&NodeState>,
) {
    let sep = if out.is_empty() { "" } else { ", " };
    let _ = write!(out, "{sep}{node}: {outcome}");
    if let Some(rtt) = state.and_then(|s| s.rtt).filter(|_| answered) {
        let _ = write!(out, " (rtt {rtt:?})");
    }
}

/// A connection attempt starts.
pub(super) fn connecting(names: &[NodeName], conn: ConnId) {
    debug!(node = %Named(names, conn.node()), %conn, "connecting");
}

/// A connection is up.
pub(super) fn connected(names: &[NodeName], conn: ConnId) {
    info!(node = %Named(names, conn.node()), %conn, "node connected");
}

/// A connection dropped, or an attempt failed (again, if `repeated`: then at debug level).
pub(super) fn disconnected(
    names: &[NodeName],
    conn: ConnId,
    reason: &ConnectionError,
    was_up: bool,
    repeated: bool,
) {
    let node = Named(names, conn.node());
    match (was_up, repeated) {
        (true, _) => warn!(%node, %conn, %reason, "node disconnected"),
        (false, false) => warn!(%node, %conn, %reason, "connection attempt failed"),
        (false, true) => debug!(%node, %conn, %reason, "connection attempt failed again"),
    }
}

/// The core closed a connection, for `cause`: the node refused the handshake, or broke the
/// protocol. A refusal is a warning the first time and whenever its reply changes; the same
/// refusal again, at each reconnection, is said at debug level.
pub(super) fn closed_by_client(
    names: &[NodeName],
    conn: ConnId,
    cause: Option<&NodeFault>,
    state: &mut NodeState,
) {
    let node = Named(names, conn.node());
    match cause {
        Some(NodeFault::Handshake { command, message }) => {
            let refusal = (*command, message.clone());
            if state.refusal.as_ref() == Some(&refusal) {
                debug!(%node, %conn, command, reply = %message, "node refused the handshake again");
            } else {
                warn!(%node, %conn, command, reply = %message, "node refused the handshake");
                state.refusal = Some(refusal);
            }
        }
        Some(fault) => warn!(%node, %conn, %fault, "connection closed: protocol violation"),
        None => warn!(%node, %conn, "connection closed: protocol violation"),
    }
}

/// The node answered `count` more scripts with `-NOSCRIPT` (its script cache was empty), and
/// the core sent each again in full as `EVAL`; `total` since the client began.
pub(super) fn noscript(names: &[NodeName], id: NodeId, count: u64, total: u64) {
    if count > 0 {
        let node = Named(names, id);
        info!(%node, count, total, "node had no script cached (NOSCRIPT); sent it in full");
    }
}

/// The node's commands after a reply: a fallback from a native command to its script, or
/// the commands its `HELLO` chose.
pub(super) fn commands(
    names: &[NodeName],
    id: NodeId,
    before: Option<NodeCommands>,
    now: NodeCommands,
) {
    if before == Some(now) {
        return;
    }
    let node = Named(names, id);
    if let Some(command) = now.fell_back
        && before.and_then(|b| b.fell_back) != Some(command)
    {
        info!(%node, command, "node refused a native command; using the script instead");
    }
    if before.map(|b| b.source) != Some(now.source) {
        let (release, extend, fence, source) = (now.release, now.extend, now.fence, now.source);
        debug!(%node, ?release, ?extend, ?fence, ?source, "node commands");
    }
}

/// A node's clock ran at a rate outside the drift allowance, or stepped (the core's clock
/// check): the lock's safety assumption about that node's clock does not hold.
pub(super) fn clock(event: &Event) {
    match event {
        Event::ClockRate {
            node,
            low,
            high,
            over,
        } => {
            warn!(%node, low, high, ?over, "node clock rate outside the drift allowance");
        }
        Event::ClockStep { node, forward, by } => {
            warn!(%node, forward, ?by, "node clock stepped");
        }
        _ => {}
    }
}

/// The restart quarantine's news of a node: quarantined (`WARN`, with how long from `now`),
/// or not although it was checked (`INFO`).
pub(super) fn node_news(event: &Event, now: Option<Instant>) {
    match event {
        Event::NodeQuarantined { node, until, cause } => {
            let for_ms = now.map_or(0.0, |now| ms(until.saturating_duration_since(now)));
            warn!(%node, %cause, for_ms, "node quarantined: its votes for acquisitions do not count");
        }
        Event::QuarantineSkipped { node, reason } => {
            info!(%node, %reason, "node not quarantined");
        }
        _ => {}
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A node's configured name, or `node#N`.
struct Named<'a>(&'a [NodeName], NodeId);

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.get(self.1.index()) {
            Some(name) => f.write_str(name.as_str()),
            None => self.1.fmt(f),
        }
    }
}

/// A resource's key as text (lossy where it is not UTF-8).
struct Key<'a>(&'a Resource);

impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.0.as_bytes()))
    }
}
