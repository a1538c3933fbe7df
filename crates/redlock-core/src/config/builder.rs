//! [`ConfigBuilder`]: the setters, with their defaults, and [`build`](ConfigBuilder::build),
//! which checks every rule once and names the field at fault.

use std::sync::Arc;
use std::time::Duration;

use super::{
    ClockCheck, Config, DEFAULT_DRIFT_FACTOR, DEFAULT_DRIFT_FLOOR, DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_READ_BUFFER, DEFAULT_MAX_REPLY_SIZE, DEFAULT_RECONNECT_MAX, DEFAULT_RECONNECT_MIN,
    DEFAULT_TTL, Fencing, MAX_RECONNECT_BACKOFF, MIN_BUFFER, ReleaseNotifications,
    RestartQuarantine, Timing, WaiterQueue, default_attempt_timeout,
};
use crate::address::NodeAddress;
use crate::error::ConfigError;
use crate::id::{MAX_NODES, NodeId, NodeName};
#[cfg(feature = "_mutants")]
use crate::mutant::Mutant;
use crate::policy::{AutoExtend, NodeSettings, RetryDelay, RetryPolicy};

/// Builds a [`Config`]; [`build`](Self::build) checks every rule and names the broken field.
///
/// Every setter has a default (those of [`Config::builder`]). The node-level features are
/// one value each, as quinn's `TransportConfig` takes its subsystems: an `Option` where the
/// feature can be off, so a setting that needs the feature on lives inside it and a
/// combination that makes no sense cannot be written.
///
/// | Setter | Value | Default |
/// | --- | --- | --- |
/// | [`restart_quarantine`](Self::restart_quarantine) | `Option<`[`RestartQuarantine`]`>` | on, window from the ttl, young nodes not quarantined |
/// | [`clock_check`](Self::clock_check) | `Option<`[`ClockCheck`]`>` | on, no clock quarantine |
/// | [`release_notifications`](Self::release_notifications) | `Option<`[`ReleaseNotifications`]`>` | on, no jitter |
/// | [`waiter_queue`](Self::waiter_queue) | `Option<`[`WaiterQueue`]`>` | on, patience from the retry policy |
/// | [`fencing`](Self::fencing) | [`Fencing`] | locks fenced where they ask, suffix `:fence` |
/// | [`auto_extend`](Self::auto_extend) | `Option<`[`AutoExtend`]`>` | off |
/// | [`retry`](Self::retry) | [`RetryPolicy`] | 3 attempts, 50–250 ms apart |
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{ClockCheck, Config, Fencing, RestartQuarantine};
///
/// let config = Config::builder(5)
///     .restart_quarantine(Some(RestartQuarantine {
///         ttl: Some(Duration::from_secs(60)),
///         young_nodes: true,
///     }))
///     .clock_check(Some(ClockCheck { quarantine: true }))
///     .release_notifications(None)
///     .fencing(Fencing::every_lock())
///     .build()
///     .unwrap();
/// assert_eq!(config.restart_quarantine().and_then(|q| q.ttl), Some(Duration::from_secs(60)));
/// assert!(config.release_notifications().is_none());
/// ```
#[derive(Debug, Clone)]
pub struct ConfigBuilder {
    /// Each node's session settings.
    nodes: Vec<NodeSettings>,
    /// Each node's name, where one was given.
    names: Vec<Option<String>>,
    /// Votes needed, if raised above the majority.
    quorum: Option<usize>,
    /// The default lock time to live.
    ttl: Duration,
    /// Drift allowance proportional to the ttl.
    drift_factor: f64,
    /// Fixed drift allowance.
    drift_floor: Duration,
    /// Time each node has to answer an attempt, if not derived from the ttl.
    attempt_timeout: Option<Duration>,
    /// Time each node has to answer a release, if not the attempt timeout.
    release_timeout: Option<Duration>,
    /// Smallest validity accepted (exclusive).
    min_validity: Duration,
    /// Retry policy of an acquisition.
    retry: RetryPolicy,
    /// The caller's delay between acquisition attempts, if any.
    retry_delay: Option<RetryDelay>,
    /// Automatic renewal, if on.
    auto_extend: Option<AutoExtend>,
    /// Largest single reply accepted.
    max_reply_size: usize,
    /// Most undecoded bytes kept per node.
    max_read_buffer: usize,
    /// First reconnect delay.
    reconnect_min: Duration,
    /// Longest reconnect delay.
    reconnect_max: Duration,
    /// Most requests in flight per node.
    max_in_flight: usize,
    /// Whether scripts are loaded on every new connection.
    preload_scripts: bool,
    /// Whether the nodes' own release and extend commands are used.
    native_commands: bool,
    /// Release notifications, if on.
    release_notifications: Option<ReleaseNotifications>,
    waiter_queue: Option<WaiterQueue>,
    /// Fencing: on by default or per lock, and the counter's suffix.
    fencing: Fencing,
    /// The clock-rate check, if on.
    clock_check: Option<ClockCheck>,
    /// The restart quarantine, if on.
    restart_quarantine: Option<RestartQuarantine>,
    /// A node index given to [`node`](Self::node) beyond the node count.
    node_out_of_range: Option<usize>,
    /// Each node's address, where [`address`](Self::address) gave one: no server may be
    /// two nodes.
    addresses: Vec<Option<NodeAddress>>,
    /// The deliberate bug to run with (simulation negative controls).
    #[cfg(feature = "_mutants")]
    mutant: Option<Mutant>,
}

impl ConfigBuilder {
    /// Every default, for `nodes` nodes.
    pub(super) fn new(nodes: usize) -> Self {
        Self {
            nodes: vec![NodeSettings::default(); nodes],
            names: vec![None; nodes],
            quorum: None,
            ttl: DEFAULT_TTL,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            drift_floor: DEFAULT_DRIFT_FLOOR,
            attempt_timeout: None,
            release_timeout: None,
            min_validity: Duration::ZERO,
            retry: RetryPolicy::default(),
            retry_delay: None,
            auto_extend: None,
            max_reply_size: DEFAULT_MAX_REPLY_SIZE,
            max_read_buffer: DEFAULT_MAX_READ_BUFFER,
            reconnect_min: DEFAULT_RECONNECT_MIN,
            reconnect_max: DEFAULT_RECONNECT_MAX,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            preload_scripts: true,
            native_commands: true,
            release_notifications: Some(ReleaseNotifications::default()),
            waiter_queue: Some(WaiterQueue::default()),
            fencing: Fencing::default(),
            clock_check: Some(ClockCheck::default()),
            restart_quarantine: Some(RestartQuarantine::default()),
            node_out_of_range: None,
            addresses: vec![None; nodes],
            #[cfg(feature = "_mutants")]
            mutant: None,
        }
    }

    /// Votes needed, q. Default `N/2 + 1`; may be raised up to N, never lowered.
    pub fn quorum(mut self, quorum: usize) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// Lock time to live (whole milliseconds; sub-millisecond parts are rejected). Default 10 s.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Drift allowance proportional to the ttl, in `[0, 0.5)`. Default 0.01.
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// Fixed drift allowance added to the proportional one. Default 2 ms.
    pub fn drift_floor(mut self, floor: Duration) -> Self {
        self.drift_floor = floor;
        self
    }

    /// Time each node has to answer one acquire or extend attempt. Default 5% of the ttl, at
    /// most 1 s; must be below `ttl - drift`.
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = Some(timeout);
        self
    }

    /// Time each node has to answer a release. Default: the attempt timeout. A release is
    /// reported once a quorum has answered; the nodes still pending then are released in the
    /// background until this timeout.
    pub fn release_timeout(mut self, timeout: Duration) -> Self {
        self.release_timeout = Some(timeout);
        self
    }

    /// An acquisition succeeds only with validity above this. Default zero.
    pub fn min_validity(mut self, min: Duration) -> Self {
        self.min_validity = min;
        self
    }

    /// Retry policy of [`Client::acquire`](crate::Client::acquire).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Computes each acquisition retry's delay with `delay` instead of the uniform draw
    /// alone; see [`RetryDelay`].
    pub fn retry_delay(mut self, delay: RetryDelay) -> Self {
        self.retry_delay = Some(delay);
        self
    }

    /// Renew every lock automatically. Default off.
    pub fn auto_extend(mut self, auto_extend: Option<AutoExtend>) -> Self {
        self.auto_extend = auto_extend;
        self
    }

    /// Connection settings (AUTH, SELECT) for the node at `index`.
    pub fn node(mut self, index: usize, settings: NodeSettings) -> Self {
        match self.nodes.get_mut(index) {
            Some(slot) => *slot = settings,
            None => self.node_out_of_range = Some(index),
        }
        self
    }

    /// The name errors and statistics give the node at `index` (default `node#N`). Never put
    /// a secret in it.
    pub fn node_name(mut self, index: usize, name: impl Into<String>) -> Self {
        match self.names.get_mut(index) {
            Some(slot) => *slot = Some(name.into()),
            None => self.node_out_of_range = Some(index),
        }
        self
    }

    /// The node at `index` is `address`: its session settings (AUTH, SELECT) and its name
    /// (`host:port`, without the password).
    ///
    /// Each server may be one node only: [`build`](Self::build) refuses two addresses of
    /// one server ([`NodeAddress::same_server`]: the same host and port, whatever the
    /// database, credentials or spelling of the loopback, or the same socket path) with a
    /// [`ConfigError`] on `nodes` that names both. One server counted twice would let its
    /// single failure or restart take several votes, and a "3-node quorum" on one process
    /// is no quorum.
    pub fn address(mut self, index: usize, address: &NodeAddress) -> Self {
        if let Some(slot) = self.addresses.get_mut(index) {
            *slot = Some(address.clone());
        }
        self.node(index, address.settings.clone())
            .node_name(index, address.to_string())
    }

    /// Largest single reply accepted from a node. Default 64 KiB.
    pub fn max_reply_size(mut self, bytes: usize) -> Self {
        self.max_reply_size = bytes;
        self
    }

    /// Most undecoded bytes kept per node between inputs. Default 1 MiB.
    pub fn max_read_buffer(mut self, bytes: usize) -> Self {
        self.max_read_buffer = bytes;
        self
    }

    /// Reconnect backoff: first delay and cap (doubling, with jitter). Default 50 ms to 2 s;
    /// the cap may be at most [`MAX_RECONNECT_BACKOFF`].
    pub fn reconnect_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.reconnect_min = min;
        self.reconnect_max = max;
        self
    }

    /// Most requests written to one node and not yet answered, the connection's handshake
    /// and script preloads included. Default [`DEFAULT_MAX_IN_FLIGHT`]; at least 1.
    ///
    /// A node that keeps its connection open but stops answering (a paused or overloaded
    /// server) never produces an error, so without a cap its queue of unanswered requests
    /// would grow without bound. At the cap, a new request to that node is not sent: it
    /// fails at once as that node's vote, with
    /// [`NodeFault::Backlogged`](crate::NodeFault::Backlogged), as a request to a node that
    /// is down does, and the other nodes decide the round. The connection is kept: once the
    /// node answers, its queue shrinks and it takes requests again.
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.max_in_flight = requests;
        self
    }

    /// Send `SCRIPT LOAD` for the release and extend scripts on every new connection, so
    /// that `EVALSHA` rarely meets `-NOSCRIPT` (which costs one more round trip, and lets a
    /// retry overtake a cleanup release). Default on; errors are ignored.
    pub fn preload_scripts(mut self, on: bool) -> Self {
        self.preload_scripts = on;
        self
    }

    /// Release and extend with each server's own commands where it has them (default on):
    /// `DELIFEQ` or `DELEX … IFEQ`, and `SET … IFEQ … PX`, chosen per node from its `HELLO`
    /// reply; the scripts elsewhere. They cost the server less than a script and need no
    /// scripting permission. See [`NodeCommands`](crate::NodeCommands) for the table.
    ///
    /// Off: scripts on every node, and no `HELLO` (for a server that claims a version it
    /// does not behave as).
    pub fn native_commands(mut self, on: bool) -> Self {
        self.native_commands = on;
        self
    }

    /// Release notifications (default on, [`ReleaseNotifications::default`]): wait for
    /// releases instead of only polling. A waiter whose attempt found the lock held reads
    /// the holder's remaining ttl (`PTTL`) and subscribes to the resource's release channel
    /// on every node that speaks RESP3, and tries again as soon as a quorum of nodes
    /// announced a release; see [`ReleaseNotifications`] and docs/design.md, "Release
    /// notifications".
    ///
    /// `None`: no `HELLO 3`, no subscriptions, no `PTTL`: waiters poll with the retry delay.
    pub fn release_notifications(mut self, notifications: Option<ReleaseNotifications>) -> Self {
        self.release_notifications = notifications;
        self
    }

    /// The waiters' queue (default on, [`WaiterQueue::default`]): the calls that wait for a
    /// contended mutex queue on the nodes in the order they came, and a release wakes only
    /// the head of the queue (no herd of every waiting process); see [`WaiterQueue`] and
    /// docs/design.md, "The waiters' queue".
    ///
    /// `None`: every waiter tries when it hears of a release or its retry delay ends.
    pub fn waiter_queue(mut self, queue: Option<WaiterQueue>) -> Self {
        self.waiter_queue = queue;
        self
    }

    /// Fencing tokens (default [`Fencing::default`]: a lock is fenced where its
    /// [`LockOptions::fenced`] asks, under [`DEFAULT_FENCE_SUFFIX`]); [`Fencing::every_lock`]
    /// fences every lock unless its options say otherwise. A fencing token is a number that
    /// grows with every acquisition of a resource, across all N nodes, for storage to refuse
    /// a stale holder's writes. See [`Fencing`],
    /// [`Acquired::fencing_token`](crate::Acquired::fencing_token) and docs/safety.md,
    /// "Fencing tokens".
    ///
    /// No `Option`: any lock may ask for a token whatever this says, so the counter's
    /// suffix always means something.
    ///
    /// [`LockOptions::fenced`]: crate::LockOptions::fenced
    /// [`DEFAULT_FENCE_SUFFIX`]: super::DEFAULT_FENCE_SUFFIX
    pub fn fencing(mut self, fencing: Fencing) -> Self {
        self.fencing = fencing;
        self
    }

    /// Restart quarantine (default on, [`RestartQuarantine::default`]): at each connection
    /// the client asks the node who it is (`INFO server`) and how it persists (`CONFIG GET
    /// append*`), pipelined with the rest of the handshake. A node that restarted since this
    /// client last saw it (a new `run_id`) may have lost keys of locks still held elsewhere:
    /// its votes for acquisitions count as "no" until the window (the longest ttl,
    /// [`RestartQuarantine::ttl`], plus its drift allowance) has passed since it started. A
    /// node this client sees for the first time cannot be told from one that restarted just
    /// before: see [`RestartQuarantine::young_nodes`]. See [`RestartQuarantine`] and
    /// docs/safety.md, "Node restarts".
    ///
    /// `None`: no `INFO`, no `CONFIG`; the operator must delay restarts by the longest ttl
    /// or sync every write, as docs/safety.md says.
    pub fn restart_quarantine(mut self, quarantine: Option<RestartQuarantine>) -> Self {
        self.restart_quarantine = quarantine;
        self
    }

    /// Check that each node's clock runs at the client's rate within the drift factor
    /// (default on, [`ClockCheck::default`]): a `TIME` rides, at most once a second per
    /// node, in a write the node gets anyway, and
    /// [`Event::ClockRate`](crate::Event::ClockRate) or
    /// [`Event::ClockStep`](crate::Event::ClockStep) reports a clock that misbehaves;
    /// [`ClockCheck::quarantine`] also quarantines its node. See [`ClockCheck`] and
    /// docs/safety.md, "Checking the clock rates".
    ///
    /// `None`: no `TIME` beyond the one of each connection's handshake (and a fenced
    /// pipeline's), and no clock events.
    pub fn clock_check(mut self, check: Option<ClockCheck>) -> Self {
        self.clock_check = check;
        self
    }

    /// Test-only: run the lock lifecycle with a deliberate bug (simulation negative controls).
    #[cfg(feature = "_mutants")]
    #[doc(hidden)]
    pub fn mutant(mut self, mutant: Mutant) -> Self {
        self.mutant = Some(mutant);
        self
    }

    /// The rules on the node list: its size, the nodes given settings, distinct servers.
    fn check_nodes(&self) -> Result<(), ConfigError> {
        let n = self.nodes.len();
        if n == 0 || n > MAX_NODES {
            return Err(ConfigError::new(
                "nodes",
                format!("need 1 to {MAX_NODES} nodes"),
            ));
        }
        if let Some(index) = self.node_out_of_range {
            return Err(ConfigError::new(
                "node",
                format!("settings given for node {index}, but there are only {n} nodes"),
            ));
        }
        self.check_distinct_servers()?;
        Ok(())
    }

    /// No server given as two nodes (the algorithm's N nodes are independent servers).
    fn check_distinct_servers(&self) -> Result<(), ConfigError> {
        let given: Vec<(usize, &NodeAddress)> = (self.addresses.iter().enumerate())
            .filter_map(|(i, a)| Some((i, a.as_ref()?)))
            .collect();
        for (k, &(i, a)) in given.iter().enumerate() {
            if let Some(&(j, b)) = given[k + 1..].iter().find(|(_, b)| a.same_server(b)) {
                let entry = |i: usize, a: &NodeAddress| match a.settings.db {
                    0 => format!("node {i} (`{a}`)"),
                    db => format!("node {i} (`{a}/{db}`)"),
                };
                return Err(ConfigError::new(
                    "nodes",
                    format!(
                        "{} and {} are the same server; each server may be one node only, \
                         or its one failure would count as several: give N different servers",
                        entry(i, a),
                        entry(j, b)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks every rule and returns the configuration, or the first broken field.
    pub fn build(self) -> Result<Config, ConfigError> {
        self.check_nodes()?;
        let n = self.nodes.len();
        let majority = n / 2 + 1;
        let quorum = self.quorum.unwrap_or(majority);
        if quorum < majority || quorum > n {
            return Err(ConfigError::new(
                "quorum",
                format!("must be from N/2+1 = {majority} to N = {n}"),
            ));
        }
        let ttl_ms = Timing::whole_ms(self.ttl)?;
        let attempt_timeout = self
            .attempt_timeout
            .unwrap_or_else(|| default_attempt_timeout(self.ttl));
        let timing = Timing {
            ttl_ms,
            drift_factor: self.drift_factor,
            drift_floor: self.drift_floor,
            attempt_timeout,
            min_validity: self.min_validity,
        };
        timing.check()?;
        let release_timeout = self.release_timeout.unwrap_or(attempt_timeout);
        if release_timeout.is_zero() {
            return Err(ConfigError::new("release_timeout", "must be above zero"));
        }
        self.retry.check()?;
        if let Some(auto) = &self.auto_extend {
            auto.check()?;
        }
        self.check_connections()?;
        self.check_features()?;
        Ok(Config {
            nodes: self.nodes,
            names: node_names(self.names),
            quorum,
            timing,
            retry: self.retry,
            retry_delay: self.retry_delay,
            auto_extend: self.auto_extend,
            release_timeout,
            max_reply_size: self.max_reply_size,
            max_read_buffer: self.max_read_buffer,
            reconnect_min: self.reconnect_min,
            reconnect_max: self.reconnect_max,
            max_in_flight: self.max_in_flight,
            preload_scripts: self.preload_scripts,
            native_commands: self.native_commands,
            release_notifications: self.release_notifications,
            waiter_queue: self.waiter_queue,
            fencing: self.fencing,
            restart_quarantine: self.restart_quarantine,
            clock_check: self.clock_check,
            #[cfg(feature = "_mutants")]
            mutant: self.mutant,
        })
    }

    /// The rules of the per-node connection settings: buffer caps (the restart quarantine
    /// needs room for `INFO`), reconnect backoff, requests in flight, AUTH.
    fn check_connections(&self) -> Result<(), ConfigError> {
        if self.max_reply_size < MIN_BUFFER || self.max_read_buffer < self.max_reply_size {
            return Err(ConfigError::new(
                "max_reply_size",
                format!("must be at least {MIN_BUFFER} bytes and at most max_read_buffer"),
            ));
        }
        if self.reconnect_min.is_zero() || self.reconnect_max < self.reconnect_min {
            return Err(ConfigError::new(
                "reconnect_backoff",
                "min must be above zero and max at least min",
            ));
        }
        if self.reconnect_max > MAX_RECONNECT_BACKOFF {
            return Err(ConfigError::new(
                "reconnect_backoff",
                format!("max must be at most {MAX_RECONNECT_BACKOFF:?}"),
            ));
        }
        if self.restart_quarantine.is_some()
            && self.max_read_buffer < crate::identity::MIN_READ_BUFFER
        {
            // A node's `INFO server` reply (about 1.5 KB) that arrives in parts must fit.
            return Err(ConfigError::new(
                "max_read_buffer",
                format!(
                    "must be at least {} bytes with restart_quarantine on",
                    crate::identity::MIN_READ_BUFFER
                ),
            ));
        }
        if self.max_in_flight == 0 {
            return Err(ConfigError::new(
                "max_in_flight",
                "must be at least 1 (a node with no room for a request is never used)",
            ));
        }
        for settings in &self.nodes {
            settings.check()?;
        }
        Ok(())
    }

    /// The value rules of the node-level features (subsystems.rs): each checks its own.
    fn check_features(&self) -> Result<(), ConfigError> {
        if let Some(quarantine) = &self.restart_quarantine {
            quarantine.check()?;
        }
        if let Some(queue) = &self.waiter_queue {
            queue.check()?;
        }
        self.fencing.check()
    }
}

/// Each node's name: the one given, else `node#i`.
fn node_names(names: Vec<Option<String>>) -> Arc<[NodeName]> {
    (names.into_iter().enumerate())
        .map(|(i, name)| match name {
            Some(name) => NodeName::new(NodeId::new(i), name),
            None => NodeName::unnamed(NodeId::new(i)),
        })
        .collect()
}
