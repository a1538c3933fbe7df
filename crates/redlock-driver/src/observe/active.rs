//! What the observer keeps between hooks: the time of the last input or request, each
//! node's link and unanswered write, each operation's start, state and spans. It decides
//! what happened; `trace` and `metric` say it.

use std::time::{Duration, Instant};

use rand_core::CryptoRng;
use redlock_core::{Client, Event, Input, NodeName, OpId, Output, Resource};

use super::Step;
#[cfg(feature = "metrics")]
use super::metric::Metrics;
use super::node::{NodeState, node};
#[cfg(feature = "tracing")]
use super::trace::{self, OpSpans};
use crate::op_hash::OpMap;

/// The observer's state.
#[derive(Default)]
pub(super) struct Active {
    /// The loop's clock at the last input or request: when the core last ran, so outputs
    /// and events need no clock read of their own.
    now: Option<Instant>,
    /// Each node's name, from the configuration (no password).
    names: Vec<NodeName>,
    nodes: Vec<NodeState>,
    ops: OpMap<OpId, OpState>,
    /// The node whose bytes the core read last: its commands are compared once drained.
    #[cfg(feature = "tracing")]
    received: Option<redlock_core::NodeId>,
    #[cfg(feature = "metrics")]
    metrics: Metrics,
}

/// One operation in flight.
struct OpState {
    /// When the user asked for it.
    since: Instant,
    /// A lock call (not a query): its `Released` counts as a release.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    lock: bool,
    /// Acquired, and neither lost nor released yet.
    held: bool,
    #[cfg(feature = "tracing")]
    spans: OpSpans,
}

/// An acquisition about to start.
pub(super) struct Starting {
    since: Instant,
    #[cfg(feature = "tracing")]
    spans: OpSpans,
}

/// Whether the observer has anything to do: always for the metrics (their handles are
/// already registered), and for the spans and events only while a subscriber may record
/// them, so that `tracing` compiled in costs one relaxed load per hook when nobody listens.
#[inline]
pub(super) fn on() -> bool {
    #[cfg(feature = "metrics")]
    return true;
    #[cfg(not(feature = "metrics"))]
    return trace::listening();
}

impl Active {
    pub(super) fn input<R: CryptoRng>(&mut self, client: &Client<R>, input: &Input<'_>) {
        self.now = Some(input.now());
        self.learn_names(client);
        let (conn, now) = match *input {
            Input::Connected { conn, now }
            | Input::Received { conn, now, .. }
            | Input::Disconnected { conn, now, .. } => (conn, now),
            Input::Timeout(_) => return,
        };
        // The core ignores input from a connection that is not the node's current one.
        if client.connection(conn.node()) != Some(conn) {
            return;
        }
        let node = node(&mut self.nodes, conn.node());
        match input {
            Input::Received { .. } => {
                if let Some(at) = node.sent.take() {
                    let rtt = now.saturating_duration_since(at);
                    node.rtt = Some(rtt);
                    #[cfg(feature = "metrics")]
                    self.metrics.round_trip(conn.node(), &self.names, rtt);
                }
                #[cfg(feature = "tracing")]
                {
                    self.received = Some(conn.node());
                }
            }
            Input::Connected { .. } => {
                #[cfg(feature = "metrics")]
                self.metrics.node_up(conn.node(), &self.names, true);
                (node.up, node.failing, node.sent) = (true, false, None);
                #[cfg(feature = "tracing")]
                trace::connected(&self.names, conn);
            }
            Input::Disconnected { reason, .. } => {
                let (was_up, repeated) = (node.up, node.failing);
                (node.up, node.failing, node.sent) = (false, !was_up, None);
                // Down, or a failed attempt: 0 either way (a node never reached shows too).
                #[cfg(feature = "metrics")]
                self.metrics.node_up(conn.node(), &self.names, false);
                #[cfg(feature = "tracing")]
                trace::disconnected(&self.names, conn, reason, was_up, repeated);
                #[cfg(not(feature = "tracing"))]
                let _ = (reason, repeated);
            }
            Input::Timeout(_) => {}
        }
    }

    pub(super) fn output<R: CryptoRng>(&mut self, client: &Client<R>, output: &Output) {
        match output {
            Output::Transmit(t) => {
                if let Some(now) = self.now {
                    node(&mut self.nodes, t.node).sent.get_or_insert(now);
                }
            }
            Output::Connect(conn) | Output::Disconnect(conn) => {
                self.learn_names(client);
                let node = node(&mut self.nodes, conn.node());
                let was_up = std::mem::take(&mut node.up);
                node.sent = None;
                #[cfg(feature = "metrics")]
                if was_up {
                    self.metrics.node_up(conn.node(), &self.names, false);
                }
                #[cfg(feature = "tracing")]
                match output {
                    Output::Connect(_) => trace::connecting(&self.names, *conn),
                    _ => {
                        let cause = client.down_cause(conn.node());
                        trace::closed_by_client(&self.names, *conn, cause, node);
                    }
                }
                let _ = was_up;
            }
            Output::Timeout(_) | Output::Idle => {
                // Drained: the last input's effects on the node's commands are visible.
                #[cfg(feature = "tracing")]
                if let Some(id) = self.received.take()
                    && trace::listening()
                    && let Some(commands) = client.node_commands(id)
                {
                    let state = node(&mut self.nodes, id);
                    let before = state.commands.replace(commands);
                    trace::commands(&self.names, id, before, commands);
                    let noscript = client.noscript_replies(id);
                    let seen = std::mem::replace(&mut state.noscript_replies, noscript);
                    trace::noscript(&self.names, id, noscript.saturating_sub(seen), noscript);
                }
            }
            Output::Event(_) => {}
        }
    }

    pub(super) fn acquiring<R: CryptoRng>(
        &mut self,
        now: Instant,
        client: &Client<R>,
        resource: &Resource,
    ) -> Starting {
        self.now = Some(now);
        self.learn_names(client);
        let _ = resource;
        Starting {
            since: now,
            #[cfg(feature = "tracing")]
            spans: trace::lock(resource),
        }
    }

    pub(super) fn started(&mut self, op: OpId, starting: Starting) {
        #[cfg(feature = "tracing")]
        starting.spans.set_op(op);
        // Kept for the metrics always, for the spans only when someone records them.
        #[cfg(not(feature = "metrics"))]
        if starting.spans.is_disabled() {
            return;
        }
        let state = OpState {
            since: starting.since,
            lock: true,
            held: false,
            #[cfg(feature = "tracing")]
            spans: starting.spans,
        };
        self.ops.insert(op, state);
    }

    pub(super) fn requested(&mut self, now: Instant, op: OpId, step: Step<'_>) {
        self.now = Some(now);
        #[cfg(feature = "tracing")]
        match step {
            Step::Inspect(resource) | Step::ReleaseToken(resource) => {
                // A query: traced only, and only when someone records it.
                let spans = trace::query(step, resource, op);
                if !spans.is_disabled() {
                    let (lock, held) = (false, false);
                    let state = OpState {
                        since: now,
                        lock,
                        held,
                        spans,
                    };
                    self.ops.insert(op, state);
                }
            }
            Step::Extend | Step::Release | Step::Cancel => {
                if let Some(state) = self.ops.get_mut(&op) {
                    state.spans.requested(step);
                }
            }
        }
        #[cfg(not(feature = "tracing"))]
        let _ = (op, step);
    }

    pub(super) fn event(&mut self, event: &Event) {
        #[cfg(feature = "tracing")]
        trace::clock(event);
        let Some(op) = event.op() else {
            // News of a node (the restart quarantine; the clock check, said above).
            #[cfg(feature = "tracing")]
            trace::node_news(event, self.now);
            return;
        };
        let Some(state) = self.ops.get_mut(&op) else {
            return;
        };
        let taken = (self.now).map_or(Duration::ZERO, |now| {
            now.saturating_duration_since(state.since)
        });
        let finished = match event {
            Event::Acquired(acquired) => {
                state.held = true;
                let waited = taken.saturating_sub(acquired.stats.elapsed);
                #[cfg(feature = "metrics")]
                self.metrics.acquired(taken, waited);
                #[cfg(feature = "tracing")]
                state.spans.acquired(acquired, waited, &self.nodes);
                let _ = waited;
                false
            }
            Event::AcquireFailed { reason, stats, .. } => {
                // A call that never left its resource's line waited all along.
                let waited = match stats.attempts {
                    0 => stats.elapsed,
                    _ => taken.saturating_sub(stats.elapsed),
                };
                #[cfg(feature = "metrics")]
                self.metrics.acquire_failed(reason, waited);
                #[cfg(feature = "tracing")]
                state
                    .spans
                    .acquire_failed(reason, stats, waited, &self.nodes);
                let _ = (reason, waited);
                true
            }
            Event::Extended { validity, .. } => {
                #[cfg(feature = "metrics")]
                self.metrics.extended();
                #[cfg(feature = "tracing")]
                state.spans.extended(*validity);
                let _ = validity;
                false
            }
            Event::Lost { reason, .. } => {
                #[cfg(feature = "metrics")]
                self.metrics.lost(reason, std::mem::take(&mut state.held));
                #[cfg(feature = "tracing")]
                state.spans.lost(reason);
                state.held = false;
                let _ = reason;
                false
            }
            Event::Released { nodes, .. } => {
                #[cfg(feature = "metrics")]
                if state.lock {
                    self.metrics.released(state.held);
                }
                #[cfg(feature = "tracing")]
                state.spans.released(nodes, &self.names, &self.nodes);
                let _ = nodes;
                true
            }
            Event::Inspected { inspection, .. } => {
                #[cfg(feature = "tracing")]
                state.spans.inspected(inspection);
                let _ = inspection;
                true
            }
            _ => false,
        };
        if finished {
            self.ops.remove(&op);
        }
    }

    /// Takes the nodes' names from the configuration once.
    fn learn_names<R: CryptoRng>(&mut self, client: &Client<R>) {
        if self.names.is_empty() {
            self.names = client.config().node_names().to_vec();
        }
    }
}
