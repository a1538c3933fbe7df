//! Telemetry of a driver loop ([`Observer`]): with the `tracing` feature, a span for each
//! lock operation and events for the nodes' connections; with the `metrics` feature,
//! counters, histograms and gauges through the `metrics` facade. Both translate what the
//! loop already sees (user requests, core inputs, outputs and events); the core knows
//! nothing of them. Without either feature every hook is an empty inline function.
//!
//! Never a token or a password: spans and events name nodes by their address (the
//! configuration's node names carry no password), resources by their key, and faults by the
//! core's `Display`, which repeats no secret.

#[cfg(any(feature = "tracing", feature = "metrics"))]
mod active;
#[cfg(feature = "metrics")]
mod metric;
#[cfg(any(feature = "tracing", feature = "metrics"))]
mod node;
#[cfg(feature = "tracing")]
mod trace;

use std::time::Instant;

use rand_core::CryptoRng;
use redlock_core::{Client, Event, Input, OpId, Output, Resource};

/// What a driver loop tells its telemetry. [`Waiters`](crate::Waiters) owns one and feeds it
/// the user's requests and the core's events; the loop MUST feed it the rest through
/// [`Waiters::observer`](crate::Waiters::observer): every [`Input`] before the core gets it
/// ([`Observer::input`]) and every [`Output`] it drains ([`Observer::output`]).
///
/// With neither the `tracing` nor the `metrics` feature it holds nothing and does nothing.
/// With `metrics`, the handles are registered when the loop starts (`Builder::build`), so
/// the recorder MUST be installed before.
#[derive(Default)]
pub struct Observer {
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    active: active::Active,
}

impl Observer {
    /// An observer with nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Before `input` is fed to the core: connections up and down, bytes from a node (a
    /// round trip's end), the time.
    #[inline]
    pub fn input<R: CryptoRng>(&mut self, client: &Client<R>, input: &Input<'_>) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        self.active.input(client, input);
        #[cfg(not(any(feature = "tracing", feature = "metrics")))]
        let _ = (client, input);
    }

    /// For each output drained from the core, before the loop acts on it: connection
    /// attempts, connections the core closes, bytes for a node (a round trip's start). Events
    /// are observed by [`Waiters::dispatch`](crate::Waiters::dispatch).
    #[inline]
    pub fn output<R: CryptoRng>(&mut self, client: &Client<R>, output: &Output) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        self.active.output(client, output);
        #[cfg(not(any(feature = "tracing", feature = "metrics")))]
        let _ = (client, output);
    }

    /// An acquisition of `resource` is about to start; [`Observer::started`] follows with
    /// its operation if the core accepts it.
    #[inline]
    pub(crate) fn acquiring<R: CryptoRng>(
        &mut self,
        now: Instant,
        client: &Client<R>,
        resource: &Resource,
    ) -> Starting {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        return Starting(self.active.acquiring(now, client, resource));
        #[cfg(not(any(feature = "tracing", feature = "metrics")))]
        {
            let _ = (now, client, resource);
            Starting(())
        }
    }

    /// The core accepted the operation [`Observer::acquiring`] announced.
    #[inline]
    pub(crate) fn started(&mut self, op: OpId, starting: Starting) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        self.active.started(op, starting.0);
        #[cfg(not(any(feature = "tracing", feature = "metrics")))]
        let _ = (op, starting);
    }

    /// The user asked for `step` on a lock (or on a resource, for a query) at `now`.
    #[inline]
    pub(crate) fn requested(&mut self, now: Instant, op: OpId, step: Step<'_>) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        self.active.requested(now, op, step);
        #[cfg(not(any(feature = "tracing", feature = "metrics")))]
        let _ = (now, op, step);
    }

    /// A core event, before it is handed to its waiters.
    #[inline]
    pub(crate) fn event(&mut self, event: &Event) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        self.active.event(event);
        #[cfg(not(any(feature = "tracing", feature = "metrics")))]
        let _ = event;
    }
}

/// An acquisition announced to the observer, not yet accepted by the core (its span, if
/// traced, and its start).
pub(crate) struct Starting(StartingInner);

#[cfg(any(feature = "tracing", feature = "metrics"))]
type StartingInner = active::Starting;
#[cfg(not(any(feature = "tracing", feature = "metrics")))]
type StartingInner = ();

/// What the user asked of an operation, other than acquiring it.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) enum Step<'a> {
    /// An extension of a held lock.
    Extend,
    /// A release of a held lock: by a call, by a dropped guard, or of an orphan.
    Release,
    /// A dropped `lock()` future: the acquisition is cancelled.
    Cancel,
    /// A read-only look at a resource.
    Inspect(&'a Resource),
    /// A release by token of a lock this process does not hold.
    ReleaseToken(&'a Resource),
}
