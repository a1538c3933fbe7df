//! [`Config`] and its builder: every number the algorithm uses, validated once, with the
//! defaults of the [Valkey distlock page](https://valkey.io/topics/distlock/) (algorithm.md
//! §1, §2, §4), and one value per node-level feature.
//!
//! - `mod.rs`: [`Config`], its getters and the windows derived from it, the defaults;
//! - `builder.rs`: [`ConfigBuilder`], its setters and the rules checked at `build`;
//! - `timing.rs`: `Timing`, the time parameters of one lock, and their rules;
//! - `subsystems.rs`: the features' settings, [`RestartQuarantine`], [`ClockCheck`],
//!   [`ReleaseNotifications`] and [`Fencing`] (STYLE.md §3b: quinn's
//!   `Option<SubConfig>`).
//!
//! Per-lock overrides live in [`LockOptions`](crate::LockOptions); they are checked against
//! the same rules when a lock is requested. Nothing here talks to nodes.

mod builder;
mod subsystems;
mod timing;

use std::sync::Arc;
use std::time::Duration;

use crate::id::NodeName;
#[cfg(feature = "_mutants")]
use crate::mutant::Mutant;
use crate::policy::{AutoExtend, NodeSettings, RetryDelay, RetryPolicy};

pub use builder::ConfigBuilder;
pub use subsystems::{ClockCheck, Fencing, ReleaseNotifications, RestartQuarantine, WaiterQueue};
pub(crate) use timing::{Timing, default_attempt_timeout};

/// Validated configuration shared by every lock of a [`Client`](crate::Client).
///
/// Made by [`Config::builder`]; the getters return what was built. Besides the numbers of
/// the algorithm, it holds one value per node-level feature, `None` where the feature is
/// off (the builder's setters of the same names say what each does):
/// [`restart_quarantine`](Self::restart_quarantine) ([`RestartQuarantine`]),
/// [`clock_check`](Self::clock_check) ([`ClockCheck`]),
/// [`release_notifications`](Self::release_notifications) ([`ReleaseNotifications`]),
/// [`fencing`](Self::fencing) ([`Fencing`], always there: any lock may ask for a token),
/// and [`auto_extend`](Self::auto_extend) ([`AutoExtend`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Each node's session settings (AUTH, SELECT), in node order.
    pub(crate) nodes: Vec<NodeSettings>,
    /// Each node's name, shared with every lock (errors name nodes by it).
    pub(crate) names: Arc<[NodeName]>,
    /// Votes needed to acquire or extend, q.
    pub(crate) quorum: usize,
    /// The default lock's time parameters.
    pub(crate) timing: Timing,
    /// The default retry policy of an acquisition.
    pub(crate) retry: RetryPolicy,
    /// The caller's delay between acquisition attempts, if any.
    pub(crate) retry_delay: Option<RetryDelay>,
    /// The default auto-extension, if on.
    pub(crate) auto_extend: Option<AutoExtend>,
    /// How long each node has to answer a release.
    pub(crate) release_timeout: Duration,
    /// Largest single reply accepted from a node, in bytes.
    pub(crate) max_reply_size: usize,
    /// Most undecoded bytes buffered per node between inputs.
    pub(crate) max_read_buffer: usize,
    /// The first reconnect delay.
    pub(crate) reconnect_min: Duration,
    /// The longest reconnect delay.
    pub(crate) reconnect_max: Duration,
    /// Most requests written to one node and not yet answered.
    pub(crate) max_in_flight: usize,
    /// Whether the scripts are loaded on every new connection.
    pub(crate) preload_scripts: bool,
    /// Whether nodes are released and extended with their own commands where they have them.
    pub(crate) native_commands: bool,
    /// Release notifications (notify.rs), if on: waiters subscribe (`HELLO 3`).
    pub(crate) release_notifications: Option<ReleaseNotifications>,
    /// The waiters' queue (waiters/mod.rs), if on: contended mutexes queue on the nodes.
    pub(crate) waiter_queue: Option<WaiterQueue>,
    /// Whether locks are fenced by default, and the fencing counter key's suffix.
    pub(crate) fencing: Fencing,
    /// The restart quarantine (quarantine.rs), if on: a restarted or young node's
    /// acquisition votes count as "no" for a while.
    pub(crate) restart_quarantine: Option<RestartQuarantine>,
    /// The clock-rate check (clock_rate.rs), if on: each node's clock rate is checked
    /// against the drift factor.
    pub(crate) clock_check: Option<ClockCheck>,
    /// The deliberate bug to run with, for the simulation's negative controls.
    #[cfg(feature = "_mutants")]
    pub(crate) mutant: Option<Mutant>,
}

impl Config {
    /// Starts a configuration for `nodes` independent primaries with every default.
    pub fn builder(nodes: usize) -> ConfigBuilder {
        ConfigBuilder::new(nodes)
    }

    /// Number of nodes, N.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Votes needed to acquire or extend, q (`N/2 + 1` unless raised).
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// Default lock time to live.
    pub fn ttl(&self) -> Duration {
        self.timing.ttl()
    }

    /// Clock-drift allowance for the default ttl: `ttl * drift_factor + drift_floor`.
    pub fn drift(&self) -> Duration {
        self.timing.drift()
    }

    /// How long each node has to answer one acquire or extend attempt.
    pub fn attempt_timeout(&self) -> Duration {
        self.timing.attempt_timeout
    }

    /// How long each node has to answer a release.
    pub fn release_timeout(&self) -> Duration {
        self.release_timeout
    }

    /// The smallest validity accepted as a successful acquisition (exclusive).
    pub fn min_validity(&self) -> Duration {
        self.timing.min_validity
    }

    /// The retry policy of [`Client::acquire`](crate::Client::acquire).
    pub fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    /// The caller-chosen delay between acquisition attempts, if one was set.
    pub fn retry_delay(&self) -> Option<&RetryDelay> {
        self.retry_delay.as_ref()
    }

    /// Default auto-extension, if enabled.
    pub fn auto_extend(&self) -> Option<&AutoExtend> {
        self.auto_extend.as_ref()
    }

    /// Connection settings of one node.
    pub fn node(&self, index: usize) -> Option<&NodeSettings> {
        self.nodes.get(index)
    }

    /// Each node's name, in node order: the address given to
    /// [`ConfigBuilder::address`] or [`ConfigBuilder::node_name`], else `node#N`.
    pub fn node_names(&self) -> &[NodeName] {
        &self.names
    }

    /// Largest single reply accepted from a node, in bytes.
    pub fn max_reply_size(&self) -> usize {
        self.max_reply_size
    }

    /// Most undecoded bytes buffered per node between inputs.
    pub fn max_read_buffer(&self) -> usize {
        self.max_read_buffer
    }

    /// Most requests written to one node and not yet answered; see
    /// [`ConfigBuilder::max_in_flight`].
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// Release notifications, if on (the default); see
    /// [`ConfigBuilder::release_notifications`].
    pub fn release_notifications(&self) -> Option<&ReleaseNotifications> {
        self.release_notifications.as_ref()
    }

    /// The waiters' queue, if on (the default); see [`ConfigBuilder::waiter_queue`].
    pub fn waiter_queue(&self) -> Option<&WaiterQueue> {
        self.waiter_queue.as_ref()
    }

    /// The restart quarantine, if on (the default); see
    /// [`ConfigBuilder::restart_quarantine`].
    pub fn restart_quarantine(&self) -> Option<&RestartQuarantine> {
        self.restart_quarantine.as_ref()
    }

    /// Whether locks are fenced by default, and the fencing counter's key suffix; see
    /// [`ConfigBuilder::fencing`].
    pub fn fencing(&self) -> &Fencing {
        &self.fencing
    }

    /// The restart quarantine's window for locks of at most `ttl` (the largest this client
    /// asked for): the longest ttl on the nodes plus its drift allowance.
    pub(crate) fn quarantine_window(&self, ttl: Duration) -> Duration {
        let longest = self.restart_quarantine.and_then(|q| q.ttl);
        let ttl = longest.unwrap_or(self.ttl()).max(ttl);
        let timing = &self.timing;
        ttl.saturating_add(crate::quorum::drift(
            ttl,
            timing.drift_factor,
            timing.drift_floor,
        ))
    }

    /// The restart quarantine's window for a client that hands out fencing tokens, when
    /// the nodes' wall clocks are `spread` apart: long enough that a restarted node's
    /// fencing floor has passed every number issued before it lost its counter (the floor
    /// moves once a second, and the largest number may come from the node whose clock is
    /// ahead), plus the drift allowance twice (the node's clock against ours, and the
    /// pipeline's low estimate of it). docs/safety.md, "Restarts and lost writes".
    pub(crate) fn fence_window(&self, spread: Duration) -> Option<Duration> {
        #[cfg(feature = "_mutants")]
        if self.mutant == Some(Mutant::FenceWindowTtlOnly) {
            return None;
        }
        let base = crate::fencing::FENCE_FLOOR_STEP.saturating_add(spread);
        let timing = &self.timing;
        let drift = crate::quorum::drift(base, timing.drift_factor, timing.drift_floor);
        Some(base.saturating_add(drift.saturating_mul(2)))
    }

    /// Whether nodes are released and extended with their own commands where they have
    /// them; see [`ConfigBuilder::native_commands`].
    pub fn native_commands(&self) -> bool {
        self.native_commands
    }

    /// The clock-rate check, if on (the default); see [`ConfigBuilder::clock_check`].
    pub fn clock_check(&self) -> Option<&ClockCheck> {
        self.clock_check.as_ref()
    }
}

/// Default lock time to live.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
/// Default proportional drift allowance (algorithm.md §4; the
/// [Valkey distlock page](https://valkey.io/topics/distlock/), "Safety arguments").
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;
/// Default fixed drift allowance (the distlock reference implementation uses 2 ms).
pub const DEFAULT_DRIFT_FLOOR: Duration = Duration::from_millis(2);
/// Longest ttl accepted: far beyond any sane lease, and `now + ttl` never overflows a node's
/// 64-bit millisecond clock.
pub const MAX_TTL_MS: u64 = 1 << 50;
/// Default largest reply.
pub const DEFAULT_MAX_REPLY_SIZE: usize = 64 * 1024;
/// Appended to a lock's key to name its fencing counter key.
pub const DEFAULT_FENCE_SUFFIX: &str = ":fence";
/// Default read buffer cap per node.
pub const DEFAULT_MAX_READ_BUFFER: usize = 1024 * 1024;
/// Longest reconnect backoff accepted: a node that failed is tried again at least about this
/// often (plus jitter), and the backoff maths stays far from `Duration`'s limit.
pub const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(3600);
/// Default longest random delay before an attempt a release notification starts
/// ([`ReleaseNotifications::jitter`]): none. The drivers' timers count in whole
/// milliseconds, so a delay below one costs a millisecond, far more than the round trip
/// it would spread; with two processes on a resource the fair hand-off (a contested line's
/// next call yields) already keeps their attempts apart.
pub const DEFAULT_NOTIFICATION_JITTER: Duration = Duration::ZERO;

/// Default cap on requests in flight per node ([`ConfigBuilder::max_in_flight`]): far above
/// what a healthy node leaves unanswered (a client with hundreds of locks in progress has
/// hundreds in flight), and a few MiB of queued commands for a node that stopped answering.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 10_000;
/// Smallest reply and read buffer caps accepted.
const MIN_BUFFER: usize = 64;
/// Default first reconnect delay.
const DEFAULT_RECONNECT_MIN: Duration = Duration::from_millis(50);
/// Default longest reconnect delay.
const DEFAULT_RECONNECT_MAX: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests;

/// The migration note of CHANGELOG.md, whose "after" snippets are compiled and run as
/// doctests here.
#[cfg(doctest)]
#[doc = include_str!("../../../../CHANGELOG.md")]
struct ChangelogSnippets;
