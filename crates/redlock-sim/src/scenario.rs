//! [`Scenario`]: every knob of one simulated run (seed, core configuration, clients,
//! resources, clock skew, network, faults, workload, scripts, servers), with quiet defaults.
//!
//! A scenario is plain data; tests build families of them from a seed. Nothing here runs.

use std::time::Duration;

use redlock_core::{AutoExtend, Config};

use crate::kind_mix::KindMix;
use crate::network::{NetworkKnobs, SlowLink};
use crate::profile::ServerProfile;
use crate::script::Scripts;

/// One simulated run: build it, then hand it to [`Sim::new`](crate::Sim::new).
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Seeds every random choice of the run.
    pub seed: u64,
    /// The core configuration every client uses; its node count is the number of nodes.
    pub config: Config,
    /// Number of clients, each with its own core and clock.
    pub clients: usize,
    /// Which resources clients lock.
    pub resources: Resources,
    /// Each clock (clients and nodes) runs at a rate in `[1 - s, 1 + s]`, drawn as
    /// `clock_rates` says.
    pub clock_skew: f64,
    /// How clock rates are drawn within the skew.
    pub clock_rates: ClockRates,
    /// Delays and splitting.
    pub network: NetworkKnobs,
    /// Pauses, cuts, crashes, flushes, half-closes.
    pub faults: FaultKnobs,
    /// Faults on each node's pub/sub messages: node `i` has `push_faults[i % len]`; empty
    /// means none anywhere.
    pub push_faults: Vec<PushFaults>,
    /// What clients do.
    pub workload: WorkloadKnobs,
    /// Clients that do something else than [`workload`](Self::workload), as `(client,
    /// knobs)`: a process whose work differs from the others' (an occasional job beside a
    /// busy service). Empty: every client does `workload`.
    pub workload_of: Vec<(usize, WorkloadKnobs)>,
    /// The scripts nodes can run.
    pub scripts: Scripts,
    /// Whether nodes start with every script cached (`false` exercises `-NOSCRIPT`).
    pub preload_scripts: bool,
    /// The server each node behaves as: node `i` is `servers[i % len]`; empty means
    /// [`ServerProfile::REDIS_7_0`] everywhere (scripts only).
    pub servers: Vec<ServerProfile>,
    /// The run stops at this true time.
    pub time_limit: Duration,
    /// Each node's wall clock (`TIME`, the fencing floor) starts off by up to this much
    /// either way, drawn from dice of its own (zero: every wall clock starts in step). The
    /// wall clocks also drift apart at the nodes' clock rates.
    pub wall_spread: Duration,
    /// Checks every explicit release: once its deadline (the release timeout) has passed,
    /// its key must be gone from every node that was reachable for at least this long
    /// before the deadline (see [`Linger`](crate::Linger)). `None`: no check.
    pub release_linger: Option<Duration>,
    /// Nodes whose clock runs at `1 + skew` instead of a rate drawn from `clock_skew`, as
    /// `(node, skew)` (the draw still happens, so every other knob of a seed stays).
    pub node_skews: Vec<(usize, f64)>,
    /// Steps of nodes' wall clocks (`TIME`) at given true times.
    pub wall_steps: Vec<WallStep>,
    /// Clients created later, one per entry, at that true time, after the first `clients`
    /// (their numbers follow): a process started while the others run, as every `redlock
    /// exec` is. Its core does nothing before then, so it first connects then. Its clock,
    /// core and workload come from dice of its own, so the other clients keep their runs.
    pub late_clients: Vec<Duration>,
    /// Nodes whose replies pass a slow link ([`SlowLink`]); empty: none.
    pub slow_links: Vec<SlowLink>,
    /// How much later than the usual moment a release is checked for keys left behind
    /// (see [`release_linger`](Self::release_linger)): time for a reply that a slow link
    /// holds back to arrive, and for what the client sends on it to take effect.
    pub release_check_delay: Duration,
    /// Clients that die, one entry each (see [`ClientDeath`]); empty: none. No die is cast
    /// for them, so a scenario without deaths keeps its run.
    pub client_deaths: Vec<ClientDeath>,
    /// Clients whose user may not run `HELLO` on any node (an ACL): every connection of
    /// theirs stays on RESP2, as a client of a version before RESP3 would. Such a client
    /// never announces itself as a waiter nor hears a release (docs/design.md, "Hearing of
    /// waiters"). Empty: none.
    pub silent_clients: Vec<usize>,
}

/// A client process dies for good: every connection of it closes (the nodes drop its
/// subscriptions, as a server does on a closed connection), it is never fed another input
/// or timer, and its workload ends. Its calls in flight never finish; a lock it holds stays
/// on the nodes until its keys expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientDeath {
    /// The client (its number, late clients after the first ones).
    pub client: usize,
    /// The true time from which it dies.
    pub at: Duration,
    /// If set, the client dies at the first whole millisecond from `at` on at which one of
    /// its lock calls has been waiting this long without acquiring (a waiter with a place in
    /// the nodes' queue, for a wait past its first attempt's round), and at `at` plus
    /// [`DEATH_LOOKOUT`] at the latest; `None`: at `at`, whatever it is doing.
    pub waiting_for: Option<Duration>,
}

/// How long past its [`ClientDeath::at`] a death that waits for a waiting call looks for
/// one before the client dies anyway.
pub const DEATH_LOOKOUT: Duration = Duration::from_secs(5);

/// A node's wall clock jumps at a true time, as a clock set by hand or stepped by a time
/// daemon: `TIME` reads `by` later (negative: earlier) from then on. Key expiry does not
/// move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallStep {
    /// The node.
    pub node: usize,
    /// When, in true time since the start.
    pub at: Duration,
    /// By how many nanoseconds (negative: back).
    pub by: i64,
}

/// Which resource each lock operation asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resources {
    /// Every client picks at random among this many shared resources (contention).
    Shared(usize),
    /// Each client has its own resource (no contention).
    PerClient,
}

/// How each clock's rate is drawn from `[1 - s, 1 + s]` (`s` = [`Scenario::clock_skew`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockRates {
    /// Uniformly in the range.
    Uniform,
    /// At one end or the other, at random: the largest rate differences the skew allows.
    Edges,
}

/// Faults injected at random times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultKnobs {
    /// Gap between fault injections, uniform in this range; `None`: no random faults.
    pub every: Option<(Duration, Duration)>,
    /// No random fault is injected after this true time.
    pub until: Duration,
    /// No random fault is injected before this true time: the first comes one gap after it.
    pub from: Duration,
    /// Relative weight of node pauses.
    pub pause_weight: u32,
    /// Relative weight of link cuts.
    pub cut_weight: u32,
    /// Relative weight of node crashes.
    pub crash_weight: u32,
    /// Relative weight of script cache flushes (`SCRIPT FLUSH` on a node).
    pub flush_weight: u32,
    /// Relative weight of half-closes: a middlebox holds what the client writes on a link for
    /// `half_close_hold`, then the client side dies (the client reconnects) and the held bytes
    /// reach the node `late_delivery` later, run there on the orphaned server side.
    pub half_close_weight: u32,
    /// How long the middlebox holds a link's client bytes before its client side dies.
    pub half_close_hold: (Duration, Duration),
    /// How long after the client side died the held bytes reach the node.
    pub late_delivery: (Duration, Duration),
    /// How long a pause lasts.
    pub pause: (Duration, Duration),
    /// How long a crashed node stays down before it restarts empty. Safe only if at least
    /// the largest ttl (on the node's clock); zero is the "restart without delay" fault.
    pub restart_delay: (Duration, Duration),
    /// At most this many nodes down at once (crashes beyond it are skipped).
    pub max_down: usize,
    /// Nodes crashed from the start (the first ones), never restarted.
    pub down_at_start: usize,
    /// Chance that a crash keeps the node's data (persistence: an append-only file synced
    /// on every write), so that the restart loads it back; drawn only when above zero.
    pub persist_chance: f64,
    /// A node that restarts without its data comes back with its wall clock stepped back
    /// by this much (zero: not stepped). Past the restart delay, a fencing floor taken from
    /// it no longer exceeds the numbers issued before the crash: a negative control.
    pub restart_clock_back: Duration,
    /// A node that restarts has its wall clock stepped forward by this much once its
    /// process has started (zero: not stepped), as NTP corrects a clock that booted behind:
    /// its `INFO` uptime then claims it started long ago. Only its run id shows the restart.
    pub restart_clock_ahead: Duration,
    /// A node that restarts reports an uptime this much too high (zero: true), its wall
    /// clock unmoved: as a clock that booted behind by this much and was stepped right (by
    /// NTP) once the process had started. Unlike `restart_clock_ahead`, the nodes' wall
    /// clocks (their fencing floors) stay as close as they were; only the run id shows the
    /// restart.
    pub restart_uptime_ahead: Duration,
    /// Relative weight of evictions: a node drops one key with a ttl (a lock's key, never a
    /// fencing counter), as under a `volatile-*` eviction policy.
    pub evict_weight: u32,
    /// Relative weight of retypes: a node's key with a ttl (a lock's key) becomes a list
    /// with the same ttl, as if another program used the name; lock commands on it then
    /// fail with `WRONGTYPE`, a refusal for good.
    pub retype_weight: u32,
    /// `(before, after)`: from `before` ahead of a late client's start
    /// ([`Scenario::late_clients`]) until `after` past it, a crash is skipped if with it a
    /// quorum of nodes would have crashed within `before` of each other. With `before` the
    /// restart quarantine's window and `after` the time the new client takes to hear from
    /// every node, no new client meets a quorum of nodes restarted together: what a client
    /// that has never seen them cannot tell from a cluster started a moment ago
    /// (docs/safety.md, "Restart quarantine"). A single node's restart is not spared.
    /// `None`: crashes at any time.
    pub spare_new_clients: Option<(Duration, Duration)>,
}

impl Default for FaultKnobs {
    /// No faults. Once enabled, every kind has weight 1 except half-closes (0, newer: a
    /// scenario that names the older weights only keeps its runs).
    fn default() -> Self {
        Self {
            every: None,
            until: Duration::MAX,
            from: Duration::ZERO,
            pause_weight: 1,
            cut_weight: 1,
            crash_weight: 1,
            flush_weight: 1,
            half_close_weight: 0,
            half_close_hold: (Duration::ZERO, Duration::from_millis(100)),
            late_delivery: (Duration::from_millis(50), Duration::from_millis(300)),
            pause: (Duration::from_millis(10), Duration::from_millis(200)),
            restart_delay: (Duration::from_secs(1), Duration::from_secs(2)),
            max_down: usize::MAX,
            down_at_start: 0,
            persist_chance: 0.0,
            restart_clock_back: Duration::ZERO,
            restart_clock_ahead: Duration::ZERO,
            restart_uptime_ahead: Duration::ZERO,
            evict_weight: 0,
            retype_weight: 0,
            spare_new_clients: None,
        }
    }
}

/// Faults on the way of one node's pub/sub messages (release notifications) to the
/// connections subscribed there. Each applies to `message` pushes only, never to replies or
/// to `subscribe`/`unsubscribe` confirmations, and draws dice only when above zero.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PushFaults {
    /// Chance that a message is lost: a subscription lost without a disconnect.
    pub drop: f64,
    /// Chance that a message is written twice in a row.
    pub duplicate: f64,
    /// Chance that a message is held back by `delay_by` and only then written to its
    /// connection: replies written meanwhile go first, so it can arrive after the waiter's
    /// next attempt, or after it gave up and unsubscribed. ([`stall`](Self::stall) delays a
    /// message and everything behind it alike instead.)
    pub delay: f64,
    /// How long a held-back message waits.
    pub delay_by: (Duration, Duration),
    /// Chance that a message is written at once but stalls its connection by `stall_by`:
    /// it, and every reply behind it, arrive that much later (head-of-line blocking, as a
    /// lost TCP segment does).
    pub stall: f64,
    /// How long a stall lasts.
    pub stall_by: (Duration, Duration),
    /// `SUBSCRIBE` is confirmed as usual and registers nothing: the node never tells the
    /// client of a release.
    pub ignore_subscribe: bool,
}

/// What each client does: a bounded number of lock operations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkloadKnobs {
    /// Lock operations per client.
    pub ops_per_client: u32,
    /// Per-lock ttl, uniform in whole milliseconds.
    pub ttl: (Duration, Duration),
    /// First operation starts uniformly in `[0, start_spread]` after `start_after` (client
    /// clock, from the client's start).
    pub start_spread: Duration,
    /// How long each client stays idle, its connections open, before its first operation's
    /// spread begins: connections that are old when the work (and the faults, with
    /// [`FaultKnobs::from`]) begins. Zero: at once.
    pub start_after: Duration,
    /// Pause between the end of one operation and the next.
    pub think: (Duration, Duration),
    /// Hold time as a fraction of the validity told at acquisition; above 1 holds past the
    /// deadline (the lock is then lost, unless extended).
    pub hold: (f64, f64),
    /// Chance that a holder calls `extend` (again after each extension, up to `max_extends`).
    pub extend_chance: f64,
    /// When a holder calls `extend`, as a fraction of the validity left; above 1 is late.
    pub extend_at: (f64, f64),
    /// Most explicit `extend` calls per lock.
    pub max_extends: u32,
    /// Chance that a lock is taken with auto-extension.
    pub auto_extend_chance: f64,
    /// The auto-extension policy used then (it must be bounded).
    pub auto_extend: AutoExtend,
    /// Chance that an acquisition is cancelled.
    pub cancel_chance: f64,
    /// A cancelled acquisition is cancelled uniformly within this time after it started.
    pub cancel_within: Duration,
    /// Chance that an operation uses a caller-supplied token (else the core generates one
    /// per attempt).
    pub token_chance: f64,
    /// Which token an operation supplies, when it does.
    pub supplied_token: SuppliedToken,
    /// Chance that a lock is fenced (`LockOptions::fenced(true)`, else `fenced(false)`);
    /// drawn only when above zero, so that other scenarios keep their runs.
    pub fenced_chance: f64,
    /// Concurrent tasks per client, each doing `ops_per_client` operations one after the
    /// other, as threads of one process sharing its client: calls of one client for one
    /// resource then wait in its line (the core's `queue.rs`). The first task draws as a
    /// client's only workload did; the others draw from dice of their own.
    pub tasks: u32,
    /// Which lock kind each call takes (docs/kinds.md); mutexes only by default, and then
    /// no die is cast for it.
    pub kinds: KindMix,
}

/// The caller-supplied token of a lock call (see [`WorkloadKnobs::token_chance`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuppliedToken {
    /// `c<client>-o<n>` for the client's n-th call (from 1; `c<client>t<task>-o<n>` for a
    /// task after the first): unique per call, the same for every attempt of that call.
    PerCall,
    /// `c<client>` for every call of the client, like an application passing `hostname:pid`.
    PerClient,
}

impl Default for WorkloadKnobs {
    /// Five short locks per client, released well within their validity.
    fn default() -> Self {
        Self {
            ops_per_client: 5,
            ttl: (Duration::from_millis(200), Duration::from_millis(500)),
            start_spread: Duration::from_millis(20),
            start_after: Duration::ZERO,
            think: (Duration::from_millis(1), Duration::from_millis(50)),
            hold: (0.1, 0.8),
            extend_chance: 0.0,
            extend_at: (0.3, 0.9),
            max_extends: 2,
            auto_extend_chance: 0.0,
            auto_extend: AutoExtend {
                renew_below: 0.5,
                max_renewals: Some(2),
                max_hold: None,
            },
            cancel_chance: 0.0,
            cancel_within: Duration::from_millis(50),
            token_chance: 0.0,
            supplied_token: SuppliedToken::PerCall,
            fenced_chance: 0.0,
            tasks: 1,
            kinds: KindMix::default(),
        }
    }
}

impl Scenario {
    /// A quiet scenario: the given config, 3 clients on distinct resources, no skew, a LAN,
    /// no faults, the default workload, scripts not preloaded, Redis 7.0 nodes, 20 s of
    /// virtual time.
    pub fn new(seed: u64, config: Config) -> Self {
        Self {
            seed,
            config,
            clients: 3,
            resources: Resources::PerClient,
            clock_skew: 0.0,
            clock_rates: ClockRates::Uniform,
            network: NetworkKnobs::default(),
            faults: FaultKnobs::default(),
            push_faults: Vec::new(),
            workload: WorkloadKnobs::default(),
            workload_of: Vec::new(),
            scripts: Scripts::default(),
            preload_scripts: false,
            servers: Vec::new(),
            time_limit: Duration::from_secs(20),
            wall_spread: Duration::ZERO,
            release_linger: None,
            node_skews: Vec::new(),
            wall_steps: Vec::new(),
            late_clients: Vec::new(),
            slow_links: Vec::new(),
            release_check_delay: Duration::ZERO,
            client_deaths: Vec::new(),
            silent_clients: Vec::new(),
        }
    }

    /// Every client: the first `clients` and the late ones.
    pub fn all_clients(&self) -> usize {
        self.clients + self.late_clients.len()
    }

    /// Number of nodes (from the configuration).
    pub fn nodes(&self) -> usize {
        self.config.nodes()
    }

    /// The pub/sub faults of node `i`.
    pub fn push_faults(&self, i: usize) -> PushFaults {
        match self.push_faults.len() {
            0 => PushFaults::default(),
            len => self.push_faults[i % len],
        }
    }

    /// The server node `i` behaves as.
    pub fn server(&self, i: usize) -> ServerProfile {
        match self.servers.len() {
            0 => ServerProfile::default(),
            len => self.servers[i % len],
        }
    }
}
