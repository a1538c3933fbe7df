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

/// What a driver loop tells its telemetry: spans and events with the `tracing` feature,
/// metrics with the `metrics` feature (both off by default; each driver crate forwards
/// them, e.g. `redlock-tokio = { features = ["tracing", "metrics"] }`).
///
/// # Tracing
/// Spans, at `INFO` level, whose fields are filled in as the operation goes:
///
/// | span | parent | fields |
/// |---|---|---|
/// | `redlock.lock` | none | `op`, `resource`: one lock call, from `lock()` to its release (or failure) |
/// | `redlock.acquire` | `redlock.lock` | `attempts`, `outcome` (`acquired`, `failed`), `votes`, `validity_ms`, `elapsed_ms` (first attempt to decision), `waited_ms` (in line behind this client's earlier call for the resource), `fencing_token` |
/// | `redlock.extend` | `redlock.lock` | `outcome` (`extended`, `lost`, superseded), `validity_ms` |
/// | `redlock.release` | `redlock.lock` | `outcome` (`released on 3 of 3`), `votes` |
/// | `redlock.inspect` | none | `op`, `resource`, `outcome` (`held`, `free`), `agreeing`, `validity_ms` |
/// | `redlock.release_token` | none | `op`, `resource`, `outcome`, `votes` |
///
/// `votes` is each node's answer by address, with the node's last round trip where the
/// vote is an answer: `127.0.0.1:7001: locked (rtt 312µs), 127.0.0.1:7002: held by another
/// client (rtt 290µs), 127.0.0.1:7003: connection refused`. A round trip is from the first
/// write to a node since its last reply to the next bytes it sends: one request's round
/// trip when the node has one at a time, less under pipelining.
///
/// Events (target `redlock_driver::observe::trace`): `node connected` (`INFO`), `node
/// disconnected` and `connection attempt failed` (`WARN`; a repeated failure at `DEBUG`),
/// `node refused the handshake` (`WARN`, with the command and the server's reply, as soon
/// as the client closes the connection for it; the same refusal at each reconnection after
/// that is `node refused the handshake again`, at `DEBUG`), `connection closed:
/// protocol violation` (`WARN`, with the fault), `node refused a native command; using the
/// script instead` (`INFO`), `node had no script cached (NOSCRIPT); sent it in full`
/// (`INFO`, with `count` and `total`: the `EVALSHA` was answered `-NOSCRIPT` and resent as
/// `EVAL`), `lock lost` (`WARN`, with the reason), `lock not acquired` (`INFO`), with the
/// restart quarantine on (docs/safety.md): `node quarantined: its votes for acquisitions do
/// not count` (`WARN`, with `cause` and `for_ms`) and `node not quarantined` (`INFO`, with
/// the reason), and at `DEBUG`: `connecting`, `node commands`, `lock acquired`, `lock
/// extended` (an automatic extension), `lock released`.
///
/// No token (not even the holder an inspection finds) and no password appears in any
/// span or event, at any level: nodes are named by `host:port`.
///
/// The loop traces to the global default subscriber (it runs on a task or thread of its
/// own, outside the caller's scoped subscriber and span).
///
/// # Metrics
/// Through the `metrics` facade, to whatever recorder the application installs (e.g.
/// `metrics-exporter-prometheus`; `redlock-tokio`'s `examples/prometheus.rs`):
///
/// | name | kind | labels | what |
/// |---|---|---|---|
/// | `redlock_acquired_total` | counter | | locks acquired |
/// | `redlock_acquire_failed_total` | counter | `reason` | acquisitions that failed: `contended`, `quorum_unreachable`, `validity_exhausted`, `wait_deadline`, `cancelled`, `held_locally`, `other` |
/// | `redlock_extended_total` | counter | | extensions, called or automatic |
/// | `redlock_lost_total` | counter | `reason` | held locks lost: `deadline_passed`, `not_owned`, `quorum_unreachable`, `refused`, `other` |
/// | `redlock_released_total` | counter | | releases of lock calls finished (after a loss too) |
/// | `redlock_acquire_seconds` | histogram | | from the lock call to the lock |
/// | `redlock_handoff_wait_seconds` | histogram | | how long a call waited in line behind this client's earlier call for the same resource (only calls that waited) |
/// | `redlock_node_round_trip_seconds` | histogram | `node` | each node's round trips, as above |
/// | `redlock_held_locks` | gauge | | locks held now |
/// | `redlock_nodes_up` | gauge | `handle`, `node` | 1 while this handle's connection to the node is up, 0 while it is down or failing; one series per node of each handle |
///
/// `handle` numbers the handles (driver loops) of the process from 1, in the order they
/// are built: two handles on the same three nodes are six series, each 0 or 1, so a sum
/// over `handle` counts connections and a `max` by `node` says whether the process reaches
/// it. A node's series appears at its first connection or failed attempt.
///
/// The handles are registered when the loop starts (`Builder::build`), so the recorder
/// MUST be installed before. When a loop ends it takes back what it added to the gauges
/// (its locks leave `redlock_held_locks`, its `redlock_nodes_up` series drop to 0).
///
/// # Driver duties
/// [`Waiters`](crate::Waiters) owns the observer and feeds it the user's requests and the
/// core's events; a loop MUST feed it the rest through
/// [`Waiters::observer`](crate::Waiters::observer): every [`Input`] before the core gets
/// it ([`Observer::input`]) and every [`Output`] it drains ([`Observer::output`]). With
/// neither feature it holds nothing and every call is an empty inline function.
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
        if active::on() {
            self.active.input(client, input);
        }
        #[cfg(not(any(feature = "tracing", feature = "metrics")))]
        let _ = (client, input);
    }

    /// For each output drained from the core, before the loop acts on it: connection
    /// attempts, connections the core closes, bytes for a node (a round trip's start). Events
    /// are observed by [`Waiters::dispatch`](crate::Waiters::dispatch).
    #[inline]
    pub fn output<R: CryptoRng>(&mut self, client: &Client<R>, output: &Output) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        if active::on() {
            self.active.output(client, output);
        }
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
        if active::on() {
            self.active.requested(now, op, step);
        }
        #[cfg(not(any(feature = "tracing", feature = "metrics")))]
        let _ = (now, op, step);
    }

    /// A core event, before it is handed to its waiters.
    #[inline]
    pub(crate) fn event(&mut self, event: &Event) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        if active::on() {
            self.active.event(event);
        }
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
