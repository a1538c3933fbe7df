//! The node-level features' settings, one value each, as quinn's `TransportConfig` takes an
//! `Option<MtuDiscoveryConfig>` (STYLE.md §3b, "A feature is a room"): the restart
//! quarantine (quarantine.rs), the clock-rate check (clock_rate.rs), release notifications
//! (notify.rs) and fencing (server.rs). A feature that can be off is an `Option` in the
//! builder: `None` is off, and a setting that only means something while the feature is on
//! lives inside its value, so "young nodes quarantined, quarantine off" cannot be written.
//!
//! Like [`RetryPolicy`](crate::RetryPolicy) and [`AutoExtend`](crate::AutoExtend), each is
//! a plain struct with public fields and a [`Default`] equal to what
//! [`Config::builder`](crate::Config::builder) turns on; change one field with
//! `..Default::default()`. Each checks its own values at
//! [`ConfigBuilder::build`](crate::ConfigBuilder::build), naming the field
//! (`restart_quarantine.ttl`, `fencing.suffix`).

use std::time::Duration;

use super::{DEFAULT_FENCE_SUFFIX, DEFAULT_NOTIFICATION_JITTER, MAX_TTL_MS};
use crate::error::ConfigError;

/// The restart quarantine (on by default; docs/safety.md, "Node restarts"): a node that
/// may have lost the keys of locks still held elsewhere votes "no" to acquisitions until
/// the longest ttl and its drift allowance have passed since it started.
///
/// At each connection the client asks the node who it is (`INFO server`: `run_id`,
/// `uptime_in_seconds`) and how it persists (`CONFIG GET append*`), pipelined with the rest
/// of the handshake. A node that restarted since this client last saw it (a new `run_id`)
/// is quarantined ([`Event::NodeQuarantined`](crate::Event::NodeQuarantined)); extensions
/// and releases still go to it. A node that syncs every write (`appendonly yes`,
/// `appendfsync always`) is not
/// ([`Event::QuarantineSkipped`](crate::Event::QuarantineSkipped)). Set with
/// [`ConfigBuilder::restart_quarantine`](crate::ConfigBuilder::restart_quarantine); `None`
/// there turns it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RestartQuarantine {
    /// The longest ttl of any lock any client may hold on these nodes, for the window
    /// (`None`, the default: this configuration's
    /// [`ttl`](crate::ConfigBuilder::ttl)). A lock of this client with a longer ttl (per
    /// lock, [`LockOptions`](crate::LockOptions)) widens the window from then on. Set it if
    /// other clients use longer ttls: a node that lost their keys must not vote until those
    /// locks have expired. Above zero and at most [`MAX_TTL_MS`].
    pub ttl: Option<Duration>,
    /// Also quarantine a node that started less than the window ago although this client
    /// does not know it restarted (default off): one seen for the first time, or seen
    /// before as this very young process. Such a node may have restarted empty just before
    /// this client started, while another client still holds a lock on the other nodes;
    /// only this catches that. Off by default because a cluster started a moment ago looks
    /// the same, and would grant no lock for a whole window after it starts (every test,
    /// demo and first deployment that starts its nodes and locks at once). Turn it on where
    /// clients start while nodes may restart (autoscaled fleets), and the nodes are
    /// long-lived.
    pub young_nodes: bool,
}

impl RestartQuarantine {
    /// The value rules: a ttl above zero and at most [`MAX_TTL_MS`].
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if let Some(ttl) = self.ttl
            && (ttl.is_zero() || ttl.as_millis() > u128::from(MAX_TTL_MS))
        {
            return Err(ConfigError::new(
                "restart_quarantine.ttl",
                format!("must be above zero and at most {MAX_TTL_MS} ms"),
            ));
        }
        Ok(())
    }
}

/// The clock-rate check (on by default; docs/safety.md, "Checking the clock rates"): each
/// node's clock must run at the client's rate within the drift factor.
///
/// Now and then (at most once a second per node) a `TIME` goes out in the same write as a
/// request the node gets anyway, so an idle client sends nothing and a busy one no extra
/// round trip. From these readings, each bounded by its round trip, the client measures
/// the node's clock rate against its own monotonic clock over windows of at least five
/// seconds and reports [`Event::ClockRate`](crate::Event::ClockRate) when the whole
/// measured interval lies outside `1 ± drift_factor`, and
/// [`Event::ClockStep`](crate::Event::ClockStep) when the clock jumped by more than the
/// round trips and the allowance explain. Set with
/// [`ConfigBuilder::clock_check`](crate::ConfigBuilder::clock_check); `None` there turns it
/// off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClockCheck {
    /// Quarantine a node whose clock the check finds misbehaving (default off): its votes
    /// for acquisitions count as "no", as a restarted node's do
    /// ([`Event::NodeQuarantined`](crate::Event::NodeQuarantined), cause `ClockRate` or
    /// `ClockStep`), while extensions and releases still go to it. After a rate outside the
    /// allowance, for two of the windows it was measured over (each new report extends it,
    /// so a clock that stays off stays quarantined); after a step, for the restart
    /// quarantine's window (the longest ttl and its drift allowance), since every key on the
    /// node may have expired early or live on.
    pub quarantine: bool,
}

/// Release notifications (on by default; docs/design.md, "Release notifications"): a
/// waiter is told of a release instead of only polling.
///
/// A waiter whose attempt found the lock held reads the holder's remaining ttl (`PTTL`)
/// and subscribes to the resource's release channel
/// ([`release_channel`](crate::release_channel)) on every node that speaks RESP3; it tries
/// again as soon as a quorum of nodes announced a release, or when the holder's keys
/// expire, whichever comes first, and its retry delay stays as the fallback (a
/// notification can be lost). Each node's connection is switched to RESP3 by `HELLO 3`; a
/// server without RESP3 (before Redis 6) is polled as before. Releases announce themselves
/// whatever this says. Set with
/// [`ConfigBuilder::release_notifications`](crate::ConfigBuilder::release_notifications);
/// `None` there turns them off (no `HELLO 3`, no subscriptions, no `PTTL`: waiters poll
/// with the retry delay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseNotifications {
    /// The longest random delay (default [`DEFAULT_NOTIFICATION_JITTER`], none) before an
    /// attempt that a notification or the holder's expiry starts, and added to a contested
    /// line's yield (queue.rs). The waiters of several processes are told of a release at
    /// about the same time; with three or more processes waiting on one resource, a delay
    /// of a few milliseconds spreads their attempts so that one of them usually gets every
    /// node instead of all splitting the votes (measured: benches/README.md, "Hand-off").
    /// The drivers' timers count in whole milliseconds: a delay under one costs one.
    pub jitter: Duration,
}

impl Default for ReleaseNotifications {
    /// No jitter ([`DEFAULT_NOTIFICATION_JITTER`]).
    fn default() -> Self {
        Self {
            jitter: DEFAULT_NOTIFICATION_JITTER,
        }
    }
}

/// The waiters' queue (on by default; waiters/mod.rs, docs/design.md, "The waiters' queue"):
/// the calls that wait for a contended mutex, of every client, queue on the nodes, a node
/// grants the key only to its queue's head, and a release wakes the head alone instead of
/// every waiter. Fenced locks and the other kinds wait as before. Needs scripting on the
/// nodes; a node that refuses the script puts the call back to plain attempts. Set with
/// [`ConfigBuilder::waiter_queue`](crate::ConfigBuilder::waiter_queue).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaiterQueue {
    /// How long a waiter's place lasts after its last attempt renewed it: a waiter that
    /// died or lost its nodes holds up the queue for at most this long. `None` (the
    /// default): three times the lock's longest retry delay and twice its attempt timeout,
    /// at least 100 ms, so that a live waiter always renews in time.
    pub patience: Option<Duration>,
}

impl WaiterQueue {
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if let Some(patience) = self.patience
            && (patience.as_millis() < 10 || patience.as_millis() > u128::from(MAX_TTL_MS))
        {
            return Err(ConfigError::new(
                "waiter_queue.patience",
                format!("must be at least 10 ms and at most {MAX_TTL_MS} ms"),
            ));
        }
        Ok(())
    }
}

/// Fencing tokens (docs/safety.md, "Fencing tokens"): a number that grows with every
/// acquisition of a resource, across all N nodes, for storage to refuse a stale holder's
/// writes. See [`Acquired::fencing_token`](crate::Acquired::fencing_token).
///
/// Unlike the other features this is no `Option`: any lock may ask for a token
/// ([`LockOptions::fenced`](crate::LockOptions::fenced)) whatever the configuration says,
/// so the counter's key suffix always means something, and the configuration only says
/// whether a lock that does not ask is fenced. "Fencing off" is
/// [`Fencing::default`]: opt-in per lock, under [`DEFAULT_FENCE_SUFFIX`].
///
/// A fenced acquisition runs a script on every node, so it needs scripting permission even
/// where release and extension use native commands. Set with
/// [`ConfigBuilder::fencing`](crate::ConfigBuilder::fencing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fencing {
    /// Whether a lock whose [`LockOptions`](crate::LockOptions) do not say is fenced
    /// (default off).
    pub by_default: bool,
    /// What is appended to a lock's key to name its fencing counter key (default
    /// [`DEFAULT_FENCE_SUFFIX`]: the counter of `invoice:7` is `invoice:7:fence`); not
    /// empty. The counter never expires; every client of a resource must use the same
    /// suffix.
    pub suffix: String,
}

impl Default for Fencing {
    /// Fenced only where a lock asks, under [`DEFAULT_FENCE_SUFFIX`].
    fn default() -> Self {
        Self {
            by_default: false,
            suffix: DEFAULT_FENCE_SUFFIX.to_owned(),
        }
    }
}

impl Fencing {
    /// Every lock fenced unless its options say otherwise, under [`DEFAULT_FENCE_SUFFIX`].
    pub fn every_lock() -> Self {
        Self {
            by_default: true,
            ..Self::default()
        }
    }

    /// The value rules: a suffix that is not empty (the counter would be the lock's own
    /// key).
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if self.suffix.is_empty() {
            return Err(ConfigError::new(
                "fencing.suffix",
                "empty, but the fencing counter needs a key of its own",
            ));
        }
        Ok(())
    }
}
