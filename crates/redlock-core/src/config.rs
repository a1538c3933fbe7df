//! [`Config`] and its builder: every number the algorithm uses, validated once, with the
//! defaults of the [Valkey distlock page](https://valkey.io/topics/distlock/) (algorithm.md
//! §1, §2, §4).
//!
//! Per-lock overrides live in [`LockOptions`]; they are checked against the same rules when
//! a lock is requested. Nothing here talks to nodes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::address::NodeAddress;
use crate::error::ConfigError;
use crate::id::{MAX_NODES, NodeId, NodeName};
#[cfg(feature = "_mutants")]
use crate::mutant::Mutant;
use crate::policy::{AutoExtend, NodeSettings, RetryDelay, RetryPolicy};

/// Validated configuration shared by every lock of a [`Client`](crate::Client).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub(crate) nodes: Vec<NodeSettings>,
    /// Each node's name, shared with every lock (errors name nodes by it).
    pub(crate) names: Arc<[NodeName]>,
    pub(crate) quorum: usize,
    pub(crate) timing: Timing,
    pub(crate) retry: RetryPolicy,
    pub(crate) retry_delay: Option<RetryDelay>,
    pub(crate) auto_extend: Option<AutoExtend>,
    pub(crate) release_timeout: Duration,
    pub(crate) max_reply_size: usize,
    pub(crate) max_read_buffer: usize,
    pub(crate) reconnect_min: Duration,
    pub(crate) reconnect_max: Duration,
    pub(crate) max_in_flight: usize,
    pub(crate) preload_scripts: bool,
    pub(crate) native_commands: bool,
    /// Whether waiters subscribe to release notifications (`HELLO 3`; notify.rs).
    pub(crate) release_notifications: bool,
    /// The longest random delay before an attempt a notification starts.
    pub(crate) notification_jitter: Duration,
    /// Whether locks are fenced unless their options say otherwise.
    pub(crate) fenced: bool,
    /// Appended to a lock's key to name its fencing counter key.
    pub(crate) fence_suffix: Bytes,
    /// Whether a restarted or young node's acquisition votes count as "no" for a while
    /// (quarantine.rs).
    pub(crate) restart_quarantine: bool,
    /// The longest ttl of any lock on the nodes, if set; otherwise the ttl.
    pub(crate) quarantine_ttl: Option<Duration>,
    /// Whether a young node not known to have restarted is quarantined too.
    pub(crate) quarantine_young_nodes: bool,
    /// Whether each node's clock rate is checked against the drift factor (clock_rate.rs).
    pub(crate) clock_check: bool,
    /// Whether a node whose clock the check found misbehaving is quarantined.
    pub(crate) clock_quarantine: bool,
    #[cfg(feature = "_mutants")]
    pub(crate) mutant: Option<Mutant>,
}

/// The time parameters of one lock, derived from the ttl and checked together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Timing {
    /// Lock time to live, whole milliseconds (what `PX` carries).
    pub(crate) ttl_ms: u64,
    pub(crate) drift_factor: f64,
    pub(crate) drift_floor: Duration,
    pub(crate) attempt_timeout: Duration,
    pub(crate) min_validity: Duration,
}

impl Timing {
    pub(crate) fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// `ttl * drift_factor + drift_floor`, rounded up to whole microseconds.
    pub(crate) fn drift(&self) -> Duration {
        crate::quorum::drift(self.ttl(), self.drift_factor, self.drift_floor)
    }

    /// The ttl in whole milliseconds, as `PX` carries it; anything finer is refused.
    pub(crate) fn whole_ms(ttl: Duration) -> Result<u64, ConfigError> {
        if !ttl.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(ConfigError::new(
                "ttl",
                format!("{ttl:?} is not whole milliseconds (PX takes milliseconds)"),
            ));
        }
        Ok(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
    }

    /// Checks the rules, naming the field at fault and the numbers: a ttl too small for
    /// the drift allowance is the ttl's fault while some ttl up to the limit would do, and
    /// the drift floor's when none would.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        self.check_ttl()?;
        let drift = self.drift();
        let usable = self.ttl().saturating_sub(drift);
        let below = || {
            format!(
                "below ttl - drift allowance = {:?} - {drift:?} = {usable:?}",
                self.ttl()
            )
        };
        if self.attempt_timeout.is_zero() {
            return Err(ConfigError::new(
                "attempt_timeout",
                format!(
                    "zero gives no node time to answer; it must be above zero and {}",
                    below()
                ),
            ));
        }
        if self.attempt_timeout >= usable {
            return Err(ConfigError::new(
                "attempt_timeout",
                format!("{:?} must be {}", self.attempt_timeout, below()),
            ));
        }
        if self.min_validity >= usable {
            return Err(ConfigError::new(
                "min_validity",
                format!("{:?} must be {}", self.min_validity, below()),
            ));
        }
        Ok(())
    }

    /// The ttl's own rules: below the limit, above zero, and longer than the drift allowance
    /// (each message names the ttl and the least one that works); and the drift factor's.
    fn check_ttl(&self) -> Result<(), ConfigError> {
        if self.ttl_ms > MAX_TTL_MS {
            return Err(ConfigError::new(
                "ttl",
                format!(
                    "{}ms is above the limit of {MAX_TTL_MS}ms (2^50 ms, about 35,700 years)",
                    self.ttl_ms
                ),
            ));
        }
        if !(0.0..0.5).contains(&self.drift_factor) {
            return Err(ConfigError::new(
                "drift_factor",
                format!("{} is outside [0, 0.5)", self.drift_factor),
            ));
        }
        let use_at_least = |min: Option<u64>| match min {
            Some(min) => format!("; use at least {:?}", Duration::from_millis(min)),
            None => String::new(),
        };
        if self.ttl_ms == 0 {
            return Err(ConfigError::new(
                "ttl",
                format!(
                    "zero, but a lock must expire{}",
                    use_at_least(self.min_ttl_ms())
                ),
            ));
        }
        let drift = self.drift();
        if !self.ttl().saturating_sub(drift).is_zero() {
            return Ok(());
        }
        let Some(min) = self.min_ttl_ms() else {
            return Err(ConfigError::new(
                "drift_floor",
                format!(
                    "{:?} leaves no validity for any ttl up to the limit of {MAX_TTL_MS}ms",
                    self.drift_floor
                ),
            ));
        };
        Err(ConfigError::new(
            "ttl",
            format!(
                "{:?} leaves no validity after the drift allowance of {drift:?} \
                 (ttl * {} + {:?}){}",
                self.ttl(),
                self.drift_factor,
                self.drift_floor,
                use_at_least(Some(min)),
            ),
        ))
    }

    /// The smallest whole-millisecond ttl that leaves validity above its default attempt
    /// timeout after this drift allowance, if any up to [`MAX_TTL_MS`]. The validity left
    /// grows with the ttl faster than the default attempt timeout does (by `1 - factor`, at
    /// least 0.5, against at most 1/20), so a binary search finds it (at most 51 steps).
    fn min_ttl_ms(&self) -> Option<u64> {
        let works = |ttl_ms: u64| {
            let ttl = Duration::from_millis(ttl_ms);
            let drift = crate::quorum::drift(ttl, self.drift_factor, self.drift_floor);
            ttl.saturating_sub(drift) > default_attempt_timeout(ttl)
        };
        if !works(MAX_TTL_MS) {
            return None;
        }
        let (mut fails, mut ok) = (0, MAX_TTL_MS);
        while ok - fails > 1 {
            let mid = fails + (ok - fails) / 2;
            if works(mid) {
                ok = mid;
            } else {
                fails = mid;
            }
        }
        Some(ok)
    }
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

    /// Whether waiters listen for release notifications; see
    /// [`ConfigBuilder::release_notifications`].
    pub fn release_notifications(&self) -> bool {
        self.release_notifications
    }

    /// Whether restarted or young nodes are quarantined; see
    /// [`ConfigBuilder::restart_quarantine`].
    pub fn restart_quarantine(&self) -> bool {
        self.restart_quarantine
    }

    /// Whether a young node not known to have restarted is quarantined too; see
    /// [`ConfigBuilder::quarantine_young_nodes`].
    pub fn quarantine_young_nodes(&self) -> bool {
        self.quarantine_young_nodes
    }

    /// The restart quarantine's window for locks of at most `ttl` (the largest this client
    /// asked for): the longest ttl on the nodes plus its drift allowance.
    pub(crate) fn quarantine_window(&self, ttl: Duration) -> Duration {
        let ttl = self.quarantine_ttl.unwrap_or(self.ttl()).max(ttl);
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

    /// Whether the nodes' clock rates are checked; see [`ConfigBuilder::clock_check`].
    pub fn clock_check(&self) -> bool {
        self.clock_check
    }

    /// Whether a node whose clock misbehaves is quarantined; see
    /// [`ConfigBuilder::clock_quarantine`].
    pub fn clock_quarantine(&self) -> bool {
        self.clock_quarantine
    }
}

/// Builds a [`Config`]; [`build`](Self::build) checks every rule and names the broken field.
#[derive(Debug, Clone)]
pub struct ConfigBuilder {
    nodes: Vec<NodeSettings>,
    names: Vec<Option<String>>,
    quorum: Option<usize>,
    ttl: Duration,
    drift_factor: f64,
    drift_floor: Duration,
    attempt_timeout: Option<Duration>,
    release_timeout: Option<Duration>,
    min_validity: Duration,
    retry: RetryPolicy,
    retry_delay: Option<RetryDelay>,
    auto_extend: Option<AutoExtend>,
    max_reply_size: usize,
    max_read_buffer: usize,
    reconnect_min: Duration,
    reconnect_max: Duration,
    max_in_flight: usize,
    preload_scripts: bool,
    native_commands: bool,
    release_notifications: bool,
    notification_jitter: Duration,
    fenced: bool,
    fence_suffix: Bytes,
    clock_check: bool,
    clock_quarantine: bool,
    /// A node index given to [`node`](Self::node) beyond the node count.
    node_out_of_range: Option<usize>,
    /// Each node's address, where [`address`](Self::address) gave one: no server may be
    /// two nodes.
    addresses: Vec<Option<NodeAddress>>,
    restart_quarantine: bool,
    quarantine_ttl: Option<Duration>,
    quarantine_young_nodes: bool,
    #[cfg(feature = "_mutants")]
    mutant: Option<Mutant>,
}

impl ConfigBuilder {
    fn new(nodes: usize) -> Self {
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
            release_notifications: true,
            notification_jitter: DEFAULT_NOTIFICATION_JITTER,
            fenced: false,
            fence_suffix: Bytes::from_static(DEFAULT_FENCE_SUFFIX.as_bytes()),
            clock_check: true,
            clock_quarantine: false,
            node_out_of_range: None,
            addresses: vec![None; nodes],
            restart_quarantine: true,
            quarantine_ttl: None,
            quarantine_young_nodes: false,
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

    /// Wait for releases instead of only polling (default on). A waiter whose attempt found
    /// the lock held reads the holder's remaining ttl (`PTTL`) and subscribes to the
    /// resource's release channel ([`release_channel`](crate::release_channel)) on every
    /// node that speaks RESP3; it tries again as soon as a quorum of nodes announced a
    /// release, or when the holder's keys expire, whichever comes first, and its retry
    /// delay stays as the fallback (a notification can be lost). Each node's connection is
    /// switched to RESP3 by `HELLO 3`; a server without RESP3 (before Redis 6) is polled as
    /// before. Releases announce themselves whatever this says. See docs/design.md,
    /// "Release notifications".
    ///
    /// Off: no `HELLO 3`, no subscriptions, no `PTTL`: waiters poll with the retry delay.
    pub fn release_notifications(mut self, on: bool) -> Self {
        self.release_notifications = on;
        self
    }

    /// The longest random delay (default none) before an attempt that a release
    /// notification or the holder's expiry starts, and added to a contested line's yield
    /// (queue.rs). The waiters of several processes are told of a release at about the same
    /// time; with three or more processes waiting on one resource, a delay of a few
    /// milliseconds spreads their attempts so that one of them usually gets every node
    /// instead of all splitting the votes (measured: benches/README.md, "Hand-off"). The
    /// drivers' timers count in whole milliseconds: a delay under one costs one.
    pub fn notification_jitter(mut self, jitter: Duration) -> Self {
        self.notification_jitter = jitter;
        self
    }

    /// Hand out a fencing token with every lock (default off; [`LockOptions::fenced`]
    /// decides per lock): a number that grows with every acquisition of a resource, across
    /// all N nodes, for storage to refuse a stale holder's writes. See
    /// [`Acquired::fencing_token`](crate::Acquired::fencing_token) and docs/safety.md,
    /// "Fencing". A fenced acquisition runs a script on every node, so it needs scripting
    /// permission even where release and extension use native commands.
    ///
    /// [`LockOptions::fenced`]: crate::LockOptions::fenced
    pub fn fencing(mut self, on: bool) -> Self {
        self.fenced = on;
        self
    }

    /// What is appended to a lock's key to name its fencing counter key (default
    /// [`DEFAULT_FENCE_SUFFIX`]: the counter of `invoice:7` is `invoice:7:fence`). The
    /// counter never expires; every client of a resource must use the same suffix.
    pub fn fence_suffix(mut self, suffix: &str) -> Self {
        self.fence_suffix = Bytes::copy_from_slice(suffix.as_bytes());
        self
    }

    /// Restart quarantine (default on): at each connection the client asks the node who it
    /// is (`INFO server`: `run_id`, `uptime_in_seconds`) and how it persists (`CONFIG GET
    /// append*`), pipelined with the rest of the handshake. A node that restarted since this
    /// client last saw it (a new `run_id`) may have lost keys of locks still held elsewhere:
    /// its votes for acquisitions count as "no" until the window has passed since it started
    /// ([`Event::NodeQuarantined`](crate::Event::NodeQuarantined)). Extensions and releases
    /// still go to it. A node that syncs every write (`appendonly yes`, `appendfsync
    /// always`) is not quarantined
    /// ([`Event::QuarantineSkipped`](crate::Event::QuarantineSkipped)). The window is the
    /// longest ttl ([`restart_quarantine_ttl`](Self::restart_quarantine_ttl)) plus its
    /// drift allowance. A node this client sees for the first time cannot be told from one
    /// that restarted just before: see [`quarantine_young_nodes`](Self::quarantine_young_nodes).
    /// See docs/safety.md, "Node restarts".
    ///
    /// Off: no `INFO`, no `CONFIG`; the operator must delay restarts by the longest ttl or
    /// sync every write, as docs/safety.md says.
    pub fn restart_quarantine(mut self, on: bool) -> Self {
        self.restart_quarantine = on;
        self
    }

    /// The longest ttl of any lock any client may hold on these nodes (default: this
    /// configuration's [`ttl`](Self::ttl)), for the restart quarantine's window. A lock of
    /// this client with a longer ttl (per lock, [`LockOptions`](crate::LockOptions)) widens
    /// the window from then on. Set it if other clients use longer ttls: a node that lost
    /// their keys must not vote until those locks have expired.
    pub fn restart_quarantine_ttl(mut self, ttl: Duration) -> Self {
        self.quarantine_ttl = Some(ttl);
        self
    }

    /// Also quarantine a node that started less than the window ago although this client
    /// does not know it restarted (default off): one seen for the first time, or seen before
    /// as this very young process. Such a node may have restarted empty just before this
    /// client started, while another client still holds a lock on the other nodes; only
    /// this catches that. Off by default because a cluster started a moment ago looks the
    /// same, and would grant no lock for a whole window after it starts (every test, demo
    /// and first deployment that starts its nodes and locks at once). Turn it on where
    /// clients start while nodes may restart (autoscaled fleets), and the nodes are
    /// long-lived. Needs [`restart_quarantine`](Self::restart_quarantine).
    pub fn quarantine_young_nodes(mut self, on: bool) -> Self {
        self.quarantine_young_nodes = on;
        self
    }

    /// Check that each node's clock runs at the client's rate within the drift factor
    /// (default on). Now and then (at most once a second per node) a `TIME` goes out in the
    /// same write as a request the node gets anyway, so an idle client sends nothing and a
    /// busy one no extra round trip. From these readings, each bounded by its round trip,
    /// the client measures the node's clock rate against its own monotonic clock over
    /// windows of at least five seconds and reports
    /// [`Event::ClockRate`](crate::Event::ClockRate) when the whole measured interval lies
    /// outside `1 ± drift_factor`, and [`Event::ClockStep`](crate::Event::ClockStep) when
    /// the clock jumped by more than the round trips and the allowance explain. See
    /// docs/safety.md, "Checking the clock rates".
    ///
    /// Off: no `TIME` beyond the one of each connection's handshake (and a fenced
    /// pipeline's), and no clock events.
    pub fn clock_check(mut self, on: bool) -> Self {
        self.clock_check = on;
        self
    }

    /// Quarantine a node whose clock the [`clock_check`](Self::clock_check) finds
    /// misbehaving (default off): its votes for acquisitions count as "no", as a restarted
    /// node's do ([`Event::NodeQuarantined`](crate::Event::NodeQuarantined), cause
    /// `ClockRate` or `ClockStep`), while extensions and releases still go to it. After a
    /// rate outside the allowance, for two of the windows it was measured over (each new
    /// report extends it, so a clock that stays off stays quarantined); after a step, for the
    /// restart quarantine's window (the longest ttl and its drift allowance), since every key
    /// on the node may have expired early or live on. Needs the check: building with this
    /// on and [`clock_check(false)`](Self::clock_check) is a
    /// [`ConfigError`](crate::ConfigError) naming `clock_quarantine`.
    pub fn clock_quarantine(mut self, on: bool) -> Self {
        self.clock_quarantine = on;
        self
    }

    /// Test-only: run the lock lifecycle with a deliberate bug (simulation negative controls).
    #[cfg(feature = "_mutants")]
    #[doc(hidden)]
    pub fn mutant(mut self, mutant: Mutant) -> Self {
        self.mutant = Some(mutant);
        self
    }

    /// The rules on the node list and on switches that need one another.
    fn check_nodes_and_switches(&self) -> Result<(), ConfigError> {
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
        if self.quarantine_young_nodes && !self.restart_quarantine {
            return Err(ConfigError::new(
                "quarantine_young_nodes",
                "needs the restart quarantine on (restart_quarantine(true))",
            ));
        }
        if self.clock_quarantine && !self.clock_check {
            return Err(ConfigError::new(
                "clock_quarantine",
                "needs the clock check on (clock_check(true)): it acts on what the check finds",
            ));
        }
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
        self.check_nodes_and_switches()?;
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
        if self.fence_suffix.is_empty() {
            // The counter would be the lock's own key.
            return Err(ConfigError::new(
                "fence_suffix",
                "empty, but the fencing counter needs a key of its own",
            ));
        }
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
            notification_jitter: self.notification_jitter,
            fenced: self.fenced,
            fence_suffix: self.fence_suffix,
            restart_quarantine: self.restart_quarantine,
            quarantine_ttl: self.quarantine_ttl,
            quarantine_young_nodes: self.quarantine_young_nodes,
            clock_check: self.clock_check,
            clock_quarantine: self.clock_quarantine,
            #[cfg(feature = "_mutants")]
            mutant: self.mutant,
        })
    }

    /// The rules of the per-node connection settings: buffer caps, reconnect backoff,
    /// the restart quarantine's ttl, requests in flight, AUTH.
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
        if self.restart_quarantine && self.max_read_buffer < crate::identity::MIN_READ_BUFFER {
            // A node's `INFO server` reply (about 1.5 KB) that arrives in parts must fit.
            return Err(ConfigError::new(
                "max_read_buffer",
                format!(
                    "must be at least {} bytes with restart_quarantine on",
                    crate::identity::MIN_READ_BUFFER
                ),
            ));
        }
        if let Some(ttl) = self.quarantine_ttl
            && (ttl.is_zero() || ttl.as_millis() > u128::from(MAX_TTL_MS))
        {
            return Err(ConfigError::new(
                "restart_quarantine_ttl",
                format!("must be above zero and at most {MAX_TTL_MS} ms"),
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

/// 5% of the ttl, at most 1 s (algorithm.md §2), at least 1 µs.
pub(crate) fn default_attempt_timeout(ttl: Duration) -> Duration {
    (ttl / 20).clamp(Duration::from_micros(1), Duration::from_secs(1))
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
/// ([`ConfigBuilder::notification_jitter`]): none. The drivers' timers count in whole
/// milliseconds, so a delay below one costs a millisecond, far more than the round trip
/// it would spread; with two processes on a resource the fair hand-off (a contested line's
/// next call yields) already keeps their attempts apart.
pub const DEFAULT_NOTIFICATION_JITTER: Duration = Duration::ZERO;

/// Default cap on requests in flight per node ([`ConfigBuilder::max_in_flight`]): far above
/// what a healthy node leaves unanswered (a client with hundreds of locks in progress has
/// hundreds in flight), and a few MiB of queued commands for a node that stopped answering.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 10_000;
const MIN_BUFFER: usize = 64;
const DEFAULT_RECONNECT_MIN: Duration = Duration::from_millis(50);
const DEFAULT_RECONNECT_MAX: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::LockOptions;

    /// The same server given twice, under any spelling or database, is refused naming both
    /// entries; different servers build.
    #[test]
    fn one_server_may_be_one_node_only() {
        let build = |urls: &[&str]| {
            let mut config = Config::builder(urls.len());
            for (i, url) in urls.iter().enumerate() {
                config = config.address(i, &NodeAddress::parse(url).unwrap());
            }
            config.build()
        };
        let err = build(&[
            "redis://127.0.0.1:7450",
            "redis://127.0.0.1:7451",
            "redis://localhost:7450",
        ])
        .unwrap_err();
        assert_eq!(err.field(), "nodes");
        assert_eq!(
            err.rule(),
            "node 0 (`127.0.0.1:7450`) and node 2 (`localhost:7450`) are the same server; each \
             server may be one node only, or its one failure would count as several: give N \
             different servers"
        );
        let err = build(&[
            "redis://127.0.0.1:7450/0",
            "redis://:hunter2@127.0.0.1:7450/1",
            "redis://127.0.0.1:7450/2",
        ])
        .unwrap_err();
        assert!(
            err.rule()
                .starts_with("node 0 (`127.0.0.1:7450`) and node 1 (`127.0.0.1:7450/1`) are"),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let err = build(&["127.0.0.1:7450", "redis://127.0.0.1:7450"]).unwrap_err();
        assert_eq!(err.field(), "nodes", "{err}");
        build(&["127.0.0.1:7450", "127.0.0.1:7451", "127.0.0.2:7450"]).unwrap();
    }

    #[test]
    fn defaults_follow_the_algorithm_note() {
        let c = Config::builder(5).build().unwrap();
        assert_eq!(c.quorum(), 3);
        assert_eq!(c.ttl(), Duration::from_secs(10));
        assert_eq!(c.drift(), Duration::from_millis(102));
        assert_eq!(c.attempt_timeout(), Duration::from_millis(500));
        assert_eq!(Config::builder(4).build().unwrap().quorum(), 3);
        assert_eq!(Config::builder(1).build().unwrap().quorum(), 1);
        let long = Config::builder(3).ttl(Duration::from_secs(60)).build();
        assert_eq!(long.unwrap().attempt_timeout(), Duration::from_secs(1));
    }

    #[test]
    fn every_rule_names_its_field() {
        let field = |b: ConfigBuilder| b.build().unwrap_err().field();
        assert_eq!(field(Config::builder(0)), "nodes");
        assert_eq!(field(Config::builder(5).quorum(2)), "quorum");
        assert_eq!(field(Config::builder(5).quorum(6)), "quorum");
        assert!(Config::builder(5).quorum(5).build().is_ok());
        assert_eq!(field(Config::builder(5).ttl(Duration::ZERO)), "ttl");
        assert_eq!(
            field(Config::builder(5).ttl(Duration::from_micros(1500))),
            "ttl"
        );
        assert_eq!(
            field(Config::builder(5).ttl(Duration::from_millis(MAX_TTL_MS + 1))),
            "ttl"
        );
        assert_eq!(field(Config::builder(5).drift_factor(0.5)), "drift_factor");
        assert_eq!(field(Config::builder(5).drift_factor(-0.1)), "drift_factor");
        assert_eq!(
            field(Config::builder(5).drift_factor(f64::NAN)),
            "drift_factor"
        );
        assert_eq!(
            field(Config::builder(5).attempt_timeout(Duration::from_secs(10))),
            "attempt_timeout"
        );
        // 3 ms ttl: drift is 2.03 ms, which leaves 0.97 ms, above the default attempt
        // timeout of 0.15 ms. 2 ms leaves nothing, which is the ttl's fault.
        assert!(
            Config::builder(5)
                .ttl(Duration::from_millis(3))
                .build()
                .is_ok()
        );
        assert_eq!(
            field(Config::builder(5).ttl(Duration::from_millis(2))),
            "ttl"
        );
        assert_eq!(
            field(Config::builder(5).ttl(Duration::from_millis(1))),
            "ttl"
        );
        let retry = RetryPolicy {
            max_attempts: None,
            ..RetryPolicy::default()
        };
        assert_eq!(field(Config::builder(5).retry(retry)), "retry");
        let auto = AutoExtend {
            max_hold: None,
            ..AutoExtend::default()
        };
        assert_eq!(
            field(Config::builder(5).auto_extend(Some(auto))),
            "auto_extend"
        );
        let user_only = NodeSettings {
            username: Some("u".into()),
            ..NodeSettings::default()
        };
        assert_eq!(
            field(Config::builder(2).node(1, user_only)),
            "node.username"
        );
        assert_eq!(
            field(Config::builder(2).node(2, NodeSettings::default())),
            "node"
        );
        assert_eq!(
            field(Config::builder(2).max_reply_size(1)),
            "max_reply_size"
        );
        assert_eq!(
            field(Config::builder(2).reconnect_backoff(Duration::ZERO, Duration::from_secs(1))),
            "reconnect_backoff"
        );
        assert_eq!(field(Config::builder(2).max_in_flight(0)), "max_in_flight");
        assert!(Config::builder(2).max_in_flight(1).build().is_ok());
    }

    /// The timing rules with their exact messages: each names the field the user set and
    /// says the rule with numbers.
    #[test]
    fn timing_rules_say_why_with_numbers() {
        let rule = |b: ConfigBuilder| {
            let e = b.build().unwrap_err();
            (e.field(), e.rule().to_owned())
        };
        let ms = Duration::from_millis;
        let ttl = |d| rule(Config::builder(3).ttl(d));
        assert_eq!(
            ttl(Duration::ZERO),
            (
                "ttl",
                "zero, but a lock must expire; use at least 3ms".into()
            )
        );
        assert_eq!(
            ttl(ms(1)),
            (
                "ttl",
                "1ms leaves no validity after the drift allowance of 2.01ms (ttl * 0.01 + 2ms); \
                 use at least 3ms"
                    .into()
            )
        );
        assert_eq!(
            ttl(ms(2)).1,
            "2ms leaves no validity after the drift allowance of 2.02ms (ttl * 0.01 + 2ms); \
             use at least 3ms"
        );
        // 3 ms is the least: 3 - 2.03 = 0.97 ms of validity, above the default attempt
        // timeout of 0.15 ms.
        assert!(Config::builder(3).ttl(ms(3)).build().is_ok());
        assert_eq!(
            ttl(Duration::from_micros(1500)),
            (
                "ttl",
                "1.5ms is not whole milliseconds (PX takes milliseconds)".into()
            )
        );
        assert_eq!(
            ttl(ms(MAX_TTL_MS + 1)),
            (
                "ttl",
                "1125899906842625ms is above the limit of 1125899906842624ms (2^50 ms, about \
                 35,700 years)"
                    .into()
            )
        );
        assert!(Config::builder(3).ttl(ms(MAX_TTL_MS)).build().is_ok());
        // A large drift floor: the ttl is still at fault while a longer one would do.
        assert_eq!(
            rule(Config::builder(3).drift_floor(Duration::from_secs(20))),
            (
                "ttl",
                "10s leaves no validity after the drift allowance of 20.1s (ttl * 0.01 + 20s); \
                 use at least 21.213s"
                    .into()
            )
        );
        assert!(
            Config::builder(3)
                .drift_floor(Duration::from_secs(20))
                .ttl(ms(21_213))
                .build()
                .is_ok()
        );
        assert_eq!(
            rule(Config::builder(3).drift_floor(Duration::MAX)).0,
            "drift_floor"
        );
        assert_eq!(
            rule(Config::builder(3).drift_factor(0.7)),
            ("drift_factor", "0.7 is outside [0, 0.5)".into())
        );
        assert_eq!(
            rule(Config::builder(3).attempt_timeout(Duration::ZERO)),
            (
                "attempt_timeout",
                "zero gives no node time to answer; it must be above zero and below ttl - \
                 drift allowance = 10s - 102ms = 9.898s"
                    .into()
            )
        );
        assert_eq!(
            rule(
                Config::builder(3)
                    .ttl(ms(3))
                    .attempt_timeout(Duration::from_secs(1))
            ),
            (
                "attempt_timeout",
                "1s must be below ttl - drift allowance = 3ms - 2.03ms = 970µs".into()
            )
        );
        assert_eq!(
            rule(Config::builder(3).min_validity(Duration::from_secs(10))),
            (
                "min_validity",
                "10s must be below ttl - drift allowance = 10s - 102ms = 9.898s".into()
            )
        );
        // The same rules, with the same words, for a per-lock ttl.
        let c = Config::builder(3).build().unwrap();
        let per_lock = LockOptions::default().ttl(ms(1)).resolve(&c).unwrap_err();
        assert_eq!(
            per_lock.to_string(),
            format!("invalid `ttl`: {}", ttl(ms(1)).1)
        );
    }

    #[test]
    fn reconnect_backoff_is_capped() {
        let build = |min, max| Config::builder(3).reconnect_backoff(min, max).build();
        let cap = MAX_RECONNECT_BACKOFF;
        let err = build(Duration::MAX, Duration::MAX).unwrap_err();
        assert_eq!(err.field(), "reconnect_backoff");
        assert_eq!(err.rule(), "max must be at most 3600s");
        let err = build(Duration::from_secs(1), Duration::MAX).unwrap_err();
        assert_eq!(err.field(), "reconnect_backoff");
        let err = build(Duration::from_secs(1), cap + Duration::from_nanos(1)).unwrap_err();
        assert_eq!(err.field(), "reconnect_backoff");
        assert!(build(cap, cap).is_ok());
        assert!(build(Duration::from_nanos(1), cap).is_ok());
    }

    #[test]
    fn per_lock_ttl_rescales_the_default_attempt_timeout() {
        let c = Config::builder(3).build().unwrap();
        let p = LockOptions::default()
            .ttl(Duration::from_millis(100))
            .resolve(&c)
            .unwrap();
        assert_eq!(p.timing.attempt_timeout, Duration::from_millis(5));
        let bad = LockOptions::default().ttl(Duration::ZERO).resolve(&c);
        assert_eq!(bad.unwrap_err().field(), "ttl");
    }
}
