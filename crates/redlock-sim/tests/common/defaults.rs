//! The defaults family: the library as a user gets it, every default of
//! `Config::builder(n)` on (restart quarantine, clock check, native commands, release
//! notifications, release at quorum), and nothing assumed that the client says it checks:
//! empty restarts without any delay, ttls from 50 ms to 2 s, node wall clocks spread up to
//! the drift allowance, uptimes stepped forward at restarts, connections that are old when
//! a node restarts, clients created while others run, calls queued in one client while
//! others wait, and replies of a node squeezed through a slow link.
//!
//! One function of a seed and an emphasis, [`defaults`] (three emphases weigh the same
//! knobs differently: [`Emphasis`]; [`every_default`] takes them in turn), and [`broken`]:
//! the four properties every run must keep. What the family still assumes is in
//! docs/safety.md.

use std::fmt;
use std::time::Duration;

use redlock_core::{Config, ConfigBuilder, Mutant, RetryPolicy};
use redlock_sim::{
    Dice, FaultKnobs, FencingViolation, KindMix, Linger, Report, Resources, Scenario,
    ServerProfile, Sim, SlowLink, Starvation, Violation, WorkloadKnobs,
};

use super::ms;

/// What a scenario of the family stresses; every emphasis keeps every default on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emphasis {
    /// Nodes restart empty at once, often, with their uptime sometimes stepped forward,
    /// after the clients' connections have been open for a while; fenced locks on part of
    /// the workload, contention on one resource.
    Restart,
    /// Several tasks of one client lock one resource in a row (the client's line) while
    /// other clients wait; short holds, waiters that wait up to a few seconds.
    Queued,
    /// Many short-lived clients, each created while the others run (one `redlock exec`
    /// each), and nodes whose replies pass a slow link.
    Fresh,
    /// Every lock kind (docs/kinds.md) on a share of the calls, each on its own resources,
    /// while nodes restart empty at once, often: multi-locks beside mutexes, readers and
    /// writers, permit holders. Not in [`ALL`](Self::ALL), so that [`every_default`] and the
    /// three older emphases keep their seeds.
    Kinds,
}

impl Emphasis {
    /// Every emphasis, in the order [`every_default`] takes them.
    pub const ALL: [Self; 3] = [Self::Restart, Self::Queued, Self::Fresh];
}

/// Seeds of the family per emphasis on which the correct core must keep every property.
pub const DEFAULTS_BUDGET: u64 = 500;

/// A waiter starves if another client hands the lock to its own next call more often than
/// this while it waits ([`redlock_sim::Checker::handoff_starvation`]): a line that lets a
/// waiter of another client go first (queue.rs) loses a race to it now and then, never
/// this many times in a row; a line that never lets it go does it every few milliseconds.
pub const HANDOFF_BOUND: usize = 32;

/// The family as one function of a seed: scenario `seed` of the emphasis `seed % 3` picks.
pub fn every_default(seed: u64) -> Scenario {
    defaults(seed, Emphasis::ALL[(seed % 3) as usize])
}

/// Scenario `seed` of the family, with `emphasis`.
pub fn defaults(seed: u64, emphasis: Emphasis) -> Scenario {
    defaults_with(seed, emphasis, None)
}

/// [`defaults`] with a deliberate bug of the core (a negative control), if `mutant`.
pub fn defaults_with(seed: u64, emphasis: Emphasis, mutant: Option<Mutant>) -> Scenario {
    defaults_changed(seed, emphasis, mutant, |b| b)
}

/// The queued emphasis with holds that use 10% to 90% of the validity the call was given
/// (the emphasis gives a section of 1 to 10 ms): a hold used past what is left of it shows
/// as two holders (a hand-over that counts the old validity again, a hold by grants
/// counted over more than the nodes set the key for). One client starts, and 2 to 5 more
/// come within its first 3 s: a line hands over only while no other client waits (it hears
/// of one: docs/design.md, "Hearing of waiters"), and its release grants the key only to a
/// call of another client that waits, so the others must come while the holds are in use.
pub fn long_holds(seed: u64, mutant: Option<Mutant>) -> Scenario {
    let mut scenario = defaults_with(seed, Emphasis::Queued, mutant);
    scenario.workload.hold = (0.1, 0.9);
    let mut d = Dice::new(seed ^ 0x10a6_4015);
    scenario.clients = 1;
    scenario.late_clients = (0..d.range(2, 5))
        .map(|_| d.millis(Duration::ZERO, Duration::from_secs(3)))
        .collect();
    scenario
}

/// The client of [`lone_line`] that visits only at the start.
pub const LONE_VISITOR: usize = 1;

/// The queued emphasis with one client's line alone for most of the run: a second client
/// ([`LONE_VISITOR`]) makes one to three calls at the start, so that the line's first calls
/// find the lock held by another client, wait in the waiters' queue and listen on the
/// release channel (notify.rs), and the line counts as contested; then only the line runs,
/// 2 to 4 tasks of 60 to 120 calls each.
///
/// No node faults: a node that missed a holder's leave keeps its place until the place's
/// patience lapses (waiters/mod.rs), and the line's next calls, placed behind it there,
/// count as contested meanwhile (lock/acquire/place.rs), which is the queue's bound on a dead
/// waiter and not what this family measures: whether the line hands over again once the
/// other client is gone.
pub fn lone_line(seed: u64, mutant: Option<Mutant>) -> Scenario {
    let mut scenario = defaults_with(seed, Emphasis::Queued, mutant);
    let mut d = Dice::new(seed ^ 0x10e1_11e5);
    scenario.clients = 2;
    scenario.late_clients = Vec::new();
    scenario.faults.every = None;
    scenario.workload.ops_per_client = d.range(60, 120) as u32;
    let visitor = WorkloadKnobs {
        tasks: 1,
        ops_per_client: d.range(1, 3) as u32,
        ..scenario.workload
    };
    scenario.workload_of = vec![(LONE_VISITOR, visitor)];
    scenario
}

/// [`defaults_with`], with one default changed by `change` (a detection that needs a
/// default off to show its defect).
pub fn defaults_changed(
    seed: u64,
    emphasis: Emphasis,
    mutant: Option<Mutant>,
    change: impl Fn(ConfigBuilder) -> ConfigBuilder,
) -> Scenario {
    let build = |b: ConfigBuilder| {
        let b = match mutant {
            Some(m) => change(b.mutant(m)),
            None => change(b),
        };
        b.build().expect("valid defaults config")
    };
    match emphasis {
        Emphasis::Restart => restart(seed, build),
        Emphasis::Queued => queued(seed, build),
        Emphasis::Fresh => fresh(seed, build),
        Emphasis::Kinds => kinds(seed, build),
    }
}

/// A property a run broke, the first found in the order of the variants.
#[derive(Debug, Clone)]
pub enum Broken {
    /// Two holders at once (the checker's `violation`).
    Safety(Violation),
    /// A fencing token that does not grow from one hold to the next (`fencing_violation`).
    Fencing(FencingViolation),
    /// A waiter that another client kept handing the lock past ([`HANDOFF_BOUND`]).
    Starved(Starvation),
    /// A released key left on a node the client could reach (`release_linger`).
    Linger(Linger),
    /// A call told a validity above the ttl it asked for (`validity_beyond_ttl`): its keys
    /// outlive that ttl.
    OverTtl(String),
}

impl Broken {
    /// The property's name.
    pub fn property(&self) -> &'static str {
        match self {
            Self::Safety(_) => "mutual exclusion",
            Self::Fencing(_) => "fencing tokens grow",
            Self::Starved(_) => "no starvation (bounded hand-offs)",
            Self::Linger(_) => "no key left after a release",
            Self::OverTtl(_) => "validity within the ttl asked for",
        }
    }
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Safety(v) => write!(f, "{}: {v}", self.property()),
            Self::Fencing(v) => write!(f, "{}: {v}", self.property()),
            Self::Starved(s) => write!(f, "{}: {s}", self.property()),
            Self::Linger(l) => write!(f, "{}: {l}", self.property()),
            Self::OverTtl(o) => write!(f, "{}: {o}", self.property()),
        }
    }
}

/// How long a waiter that cannot subscribe (every node denies the channels) may wait
/// before hand-offs past it count: a line hears nothing of it, and lets it go first only
/// once it has handed over locally for a second (the core's `queue::COURTESY_AFTER`), for
/// the retry policy's longest delay (250 ms by default); and a round trip or two.
pub const DEAF_PATIENCE: Duration = Duration::from_millis(1_000 + 250 + 50);

/// The first property the run of `scenario` broke, if any (see [`Broken`] for the order).
pub fn broken(scenario: &Scenario, report: &Report) -> Option<Broken> {
    if let Some(v) = &report.violation {
        return Some(Broken::Safety(v.clone()));
    }
    if let Some(v) = &report.fencing_violation {
        return Some(Broken::Fencing(v.clone()));
    }
    if let Some(r) = report.checker.validity_beyond_ttl() {
        let (validity, ttl) = (r.validity.unwrap_or_default(), r.ttl.unwrap_or_default());
        return Some(Broken::OverTtl(format!(
            "client {} op {:?} on {:?}: validity {validity:?} above its ttl {ttl:?}",
            r.client, r.op, r.resource
        )));
    }
    let deaf = scenario.servers.iter().all(|p| !p.channels)
        || scenario.config.release_notifications().is_none();
    let patience = if deaf { DEAF_PATIENCE } else { Duration::ZERO };
    let starved = (report.checker).handoff_starvation_after(report.end, HANDOFF_BOUND, patience);
    if let Some(s) = starved {
        return Some(Broken::Starved(s));
    }
    report.linger.clone().map(Broken::Linger)
}

/// The first seed in `0..budget` whose run of `family` breaks a property that `wanted`
/// accepts (given the scenario), with the scenario, its report and what it broke.
pub fn first_broken(
    budget: u64,
    family: impl Fn(u64) -> Scenario,
    wanted: impl Fn(&Scenario, &Broken) -> bool,
) -> Option<Found> {
    (0..budget).find_map(|seed| {
        let scenario = family(seed);
        let report = Sim::new(scenario.clone()).run();
        let broken = broken(&scenario, &report).filter(|b| wanted(&scenario, b))?;
        Some(Found {
            scenario,
            report,
            broken,
        })
    })
}

/// A run that broke a property: what [`first_broken`] finds.
#[derive(Debug)]
pub struct Found {
    /// The scenario.
    pub scenario: Scenario,
    /// Its run.
    pub report: Report,
    /// The property it broke.
    pub broken: Broken,
}

/// Restarts: 3 or 5 nodes, 2-4 clients (and up to 2 created later) on one resource,
/// crashes every 50 to 600 ms that lose the data and restart at once, in four seeds of
/// seven with the uptime stepped 3 s, 10 s, 60 s or an hour forward; sometimes pauses and
/// cuts. The clients' connections are idle for as long as that step (up to a minute) before
/// the work and the faults begin, so that the first restart of each node finds them older
/// than the step.
fn restart(seed: u64, build: impl FnOnce(ConfigBuilder) -> Config) -> Scenario {
    let (mut d, mut s, ttl_max) = opening(seed ^ 0xdefa_0001, seed, build);
    let step = [0, 0, 0, 3, 10, 60, 3_600][d.index(7)];
    s.faults.restart_uptime_ahead = Duration::from_secs(step);
    // Idle connections for longer than the step (an hour's step is caught anyway).
    let idle = if step <= 60 {
        Duration::from_secs(step) + d.millis(ms(0), ms(2_000))
    } else {
        Duration::ZERO
    };
    let active = d.millis(ms(4_000), ms(10_000));
    s.clients = d.range(2, 4) as usize;
    s.late_clients = (0..d.range(0, 2))
        .map(|_| idle + d.millis(ms(0), active))
        .collect();
    s.resources = Resources::Shared(1);
    s.workload.start_after = idle;
    s.workload.start_spread = ms(50);
    s.workload.hold = (0.05, 0.9);
    s.workload.think = (ms(0), ms(20));
    s.workload.extend_chance = 0.3;
    s.workload.extend_at = (0.3, 0.8);
    s.workload.fenced_chance = 0.5;
    // Enough operations to stay busy through the active period.
    s.workload.ops_per_client = cycles(active, ttl_max);
    s.faults = FaultKnobs {
        every: Some((ms(50), d.millis(ms(100), ms(600)))),
        // Once every client has been answered by every node after the idle time: a client
        // that last heard from a node longer ago than its uptime step cannot tell.
        from: idle + ms(300),
        until: idle + active,
        pause_weight: d.range(0, 1) as u32,
        cut_weight: d.range(0, 1) as u32,
        crash_weight: 3,
        flush_weight: 0,
        pause: (ms(1), ms(100)),
        ..s.faults
    };
    s.time_limit = idle + active + ms(5_000);
    s
}

/// Queued calls: 3 nodes (5 in a quarter of the seeds), 2-3 clients with 2-4 tasks each on
/// one resource, holds of a few milliseconds, waiters that wait up to 2-4 s; in a quarter
/// of the seeds an ACL denies every pub/sub channel (no waiter can subscribe). Rare
/// crashes and pauses.
fn queued(seed: u64, build: impl FnOnce(ConfigBuilder) -> Config) -> Scenario {
    let mut d = Dice::new(seed ^ 0xdefa_0002);
    let nodes = if d.chance(0.25) { 5 } else { 3 };
    let ttl_max = log_ttl(&mut d).max(ms(100));
    let wait = d.millis(ms(2_000), ms(4_000));
    let config = build(Config::builder(nodes).ttl(ttl_max).retry(RetryPolicy {
        max_attempts: None,
        max_wait: Some(wait),
        ..RetryPolicy::default()
    }));
    let mut s = base(seed, &mut d, config, ttl_max);
    if d.chance(0.25) {
        s.servers = s.servers.iter().map(|p| p.denying_channels()).collect();
    }
    // A LAN, under a millisecond one way: the line's yield to a waiter of another client
    // (1 ms, queue.rs) is meant for about one round trip of it.
    s.network.latency_min = d.duration(Duration::from_micros(50), Duration::from_micros(200));
    s.network.latency_max = d.duration(Duration::from_micros(300), ms(1));
    s.clients = d.range(2, 3) as usize;
    s.workload.tasks = d.range(2, 4) as u32;
    s.resources = Resources::Shared(1);
    s.workload.ops_per_client = d.range(10, 30) as u32;
    s.workload.start_spread = ms(20);
    // A section of about 1 to 10 ms.
    let section = d.millis(ms(1), ms(10)).as_secs_f64() / ttl_max.as_secs_f64();
    s.workload.hold = (section / 2.0, section * 2.0);
    s.workload.think = (ms(0), ms(3));
    s.workload.fenced_chance = 0.3;
    s.faults = FaultKnobs {
        every: Some((ms(500), ms(3_000))),
        until: ms(20_000),
        pause_weight: 1,
        cut_weight: 0,
        crash_weight: 1,
        flush_weight: 0,
        pause: (ms(1), ms(50)),
        ..s.faults
    };
    s.time_limit = ms(60_000);
    s
}

/// Fresh clients: 3 or 5 nodes, one or two of them (never a quorum) behind a link passing
/// replies at 2 to 10 bytes per millisecond, 1-2 long-lived clients and 4 to 16 created
/// later, each doing one or two locks (extended once in two) and exiting; ttls of 1 to
/// 2 s, so that a key left behind is still there when the release is checked. Rare crashes,
/// never near a new client's start.
fn fresh(seed: u64, build: impl FnOnce(ConfigBuilder) -> Config) -> Scenario {
    let mut d = Dice::new(seed ^ 0xdefa_0003);
    let nodes = [3, 5][d.index(2)];
    let ttl_max = d.millis(ms(1_000), ms(2_000));
    let config = build(Config::builder(nodes).ttl(ttl_max));
    let mut s = base(seed, &mut d, config, ttl_max);
    let slow = d.range(1, (nodes as u64 - 1) / 2) as usize;
    let first = d.index(nodes);
    s.slow_links = (0..slow)
        .map(|i| SlowLink {
            node: (first + i) % nodes,
            bytes_per_milli: d.range(2, 10) as u32,
        })
        .collect();
    s.clients = d.range(1, 2) as usize;
    let span = d.millis(ms(3_000), ms(10_000));
    s.late_clients = (0..d.range(4, 16)).map(|_| d.millis(ms(0), span)).collect();
    s.resources = Resources::Shared(d.range(1, 3) as usize);
    s.workload.ops_per_client = d.range(1, 2) as u32;
    s.workload.ttl = (ttl_max / 2, ttl_max);
    s.workload.hold = (0.02, 0.3);
    s.workload.extend_chance = 0.5;
    s.workload.extend_at = (0.05, 0.2);
    s.workload.max_extends = 1;
    s.workload.fenced_chance = 0.3;
    s.release_linger = Some(FRESH_GRACE);
    s.release_check_delay = ms(1_000);
    s.faults = FaultKnobs {
        every: Some((ms(1_000), ms(4_000))),
        until: span,
        pause_weight: 1,
        cut_weight: 0,
        crash_weight: 1,
        flush_weight: 0,
        pause: (ms(1), ms(50)),
        ..s.faults
    };
    s.time_limit = span + ms(20_000);
    s
}

/// Kinds: 3 or 5 nodes, 2-4 clients (and up to 2 created later), one call in five of each
/// kind: a mutex or a multi-lock of 2 or 3 resources of a pool of 2 or 3, a reader or a
/// writer of one resource, a permit of a semaphore of 2 or 3; crashes every 50 to 600 ms
/// that lose the data and restart at once; sometimes pauses and cuts; fenced mutexes on
/// part of the workload. One task per client: a client's next call starts once its last
/// one ended, so the bounded hand-offs read readers and permit holders as they read mutexes.
fn kinds(seed: u64, build: impl FnOnce(ConfigBuilder) -> Config) -> Scenario {
    let (mut d, mut s, ttl_max) = opening(seed ^ 0xdefa_0004, seed, build);
    // What a mutant core sends instead of the kinds' scripts (the correct core never does).
    s.scripts.register_all(redlock_sim::kinds::MUTANT_MODELS);
    let active = d.millis(ms(3_000), ms(8_000));
    s.clients = d.range(2, 4) as usize;
    s.late_clients = (0..d.range(0, 2))
        .map(|_| d.millis(ms(0), active))
        .collect();
    s.resources = Resources::Shared(d.range(2, 3) as usize);
    s.workload.kinds = KindMix {
        permits: d.range(2, 3) as u32,
        ..KindMix::every_kind()
    };
    s.workload.start_spread = ms(50);
    s.workload.hold = (0.05, 0.9);
    s.workload.think = (ms(0), ms(20));
    s.workload.extend_chance = 0.3;
    s.workload.extend_at = (0.3, 0.8);
    s.workload.fenced_chance = 0.5;
    s.workload.ops_per_client = cycles(active, ttl_max).min(40);
    s.faults = FaultKnobs {
        every: Some((ms(50), d.millis(ms(100), ms(600)))),
        from: ms(300),
        until: active,
        pause_weight: d.range(0, 1) as u32,
        cut_weight: d.range(0, 1) as u32,
        crash_weight: 3,
        flush_weight: 0,
        pause: (ms(1), ms(100)),
        ..s.faults
    };
    s.time_limit = active + ms(5_000);
    s
}

/// What every emphasis shares: the servers (all Valkey 9.1, all Redis 8.4, all Redis 7.0,
/// or each node at random among them), a LAN, clock rates within the drift allowance,
/// wall clocks spread up to it, restarts at once and empty (never too close to a new
/// client's start: see [`FaultKnobs::spare_new_clients`]), per-lock ttls from 50 ms up
/// to `ttl_max`, and the release check.
fn base(seed: u64, d: &mut Dice, config: Config, ttl_max: Duration) -> Scenario {
    let nodes = config.nodes();
    let kinds = [
        ServerProfile::VALKEY_9_1,
        ServerProfile::REDIS_8_4,
        ServerProfile::REDIS_7_0,
    ];
    let servers = match d.index(4) {
        3 => (0..nodes).map(|_| kinds[d.index(kinds.len())]).collect(),
        k => vec![kinds[k]; nodes],
    };
    // The configured ttl is the largest any lock asks for: its drift is the allowance. No
    // client is created within a restarted node's window (widened for clock rates): the
    // ttl and its allowance (a lock the node lost may still be held), or a second and the
    // wall clocks' spread (a fencing counter the node lost may still be above its floor).
    let allowance = config.drift();
    let window = (ttl_max + allowance).max(Duration::from_secs(1) + allowance * 2);
    let window = window.mul_f64(1.01) + ms(50);
    let mut s = Scenario::new(seed, config);
    s.servers = servers;
    s.clock_skew = d.float(0.0, 0.004);
    s.wall_spread = d.duration(Duration::ZERO, allowance);
    s.network.latency_min = d.duration(Duration::from_micros(50), Duration::from_micros(500));
    s.network.latency_max = d.duration(ms(1), ms(3));
    s.network.split_chance = 0.2;
    s.workload.ttl = (ttl_max.mul_f64(0.25).max(ms(50)), ttl_max);
    s.faults = FaultKnobs {
        restart_delay: (Duration::ZERO, Duration::ZERO),
        spare_new_clients: Some((window, NEW_CLIENT_SETTLES)),
        ..FaultKnobs::default()
    };
    s.release_linger = Some(GRACE);
    s
}

/// What the restart and kinds emphases open with: the dice of `salted` (the seed with the
/// emphasis's salt), 3 or 5 nodes, a log-uniform largest ttl, the configuration `build`
/// makes of them, and [`base`]'s scenario for `seed`; the dice and the ttl go on.
fn opening(
    salted: u64,
    seed: u64,
    build: impl FnOnce(ConfigBuilder) -> Config,
) -> (Dice, Scenario, Duration) {
    let mut d = Dice::new(salted);
    let nodes = [3, 5][d.index(2)];
    let ttl_max = log_ttl(&mut d);
    let config = build(Config::builder(nodes).ttl(ttl_max));
    let s = base(seed, &mut d, config, ttl_max);
    (d, s, ttl_max)
}

/// A ttl from 50 ms to 2 s, as many seeds below 200 ms as above 500 ms (log-uniform).
fn log_ttl(d: &mut Dice) -> Duration {
    let (lo, hi) = (50f64.ln(), 2_000f64.ln());
    ms(d.float(lo, hi).exp().round() as u64)
}

/// Lock operations per client that keep it busy for about `active`: a cycle (acquire,
/// hold, think, waits for the others) takes about the ttl.
fn cycles(active: Duration, ttl_max: Duration) -> u32 {
    let cycle = ttl_max.max(ms(20));
    (active.as_millis() / cycle.as_millis()).clamp(5, 200) as u32
}

/// How long after its start a new client has surely heard from every node (its first
/// `INFO` read), even behind a slow link: no crash until then.
const NEW_CLIENT_SETTLES: Duration = Duration::from_secs(2);
/// A node counts as reachable for the release check if its link has been open this long
/// before the release's deadline: a reconnection (the default backoff, up to 2 s) and the
/// release sent again on it fit in it.
const GRACE: Duration = Duration::from_millis(2_500);
/// The same for the fresh clients, whose links never break (no cuts) and are young when
/// they release.
const FRESH_GRACE: Duration = Duration::from_millis(20);
