//! The waiters families: the waiters' queue (docs/design.md, "The waiters' queue") as a user
//! gets it, every default of `Config::builder(n)` on, nothing assumed that the client checks
//! itself. 3 to 5 clients contend for one resource with short sections, each call waiting
//! as long as the others' work takes (no attempt limit, a long `max_wait`), over a network
//! with jitter.
//!
//! - [`waiters`]: 1 or 2 clients (never all) die, most while a call of theirs waits in the
//!   queue, some whenever; pub/sub messages are lost on some nodes. Property: no live
//!   waiter starves ([`redlock_sim::Checker::starvation`], the plain form).
//! - [`fair`]: no deaths, no lost messages, a LAN. Property: no waiting call is overtaken
//!   by more than [`OVERTAKE_BOUND`] waiters of other clients that began over the
//!   [`fair_slack`] after it ([`redlock_sim::Checker::unfairness`]). [`fair_slow`], the
//!   same over a network whose round trips can outlast the attempt timeout, is measured
//!   only.
//! - [`fair_lines`]: [`fair`] with 2 or 3 tasks per client, whose calls wait in their
//!   client's line, which may hand the hold from call to call; every node speaks RESP3 and
//!   allows channels (what hearing of waiters needs). Property: no waiting call is
//!   overtaken by more than [`OVERTAKE_BOUND`] calls of other clients that began over the
//!   slack after it, newcomers included ([`redlock_sim::Checker::overtaken_by_calls`]);
//!   and no resource sits free for longer than [`IDLE_BOUND`] while a call waits for it
//!   ([`redlock_sim::Checker::idle_while_waiting`]).
//! - [`fair_lines_silent`]: busy lines that hear every node beside an occasional job that
//!   cannot announce itself (a RESP2 client). Property: the job's waiting calls are let in
//!   within [`SILENT_LATENESS`], and the lock never sits free past [`IDLE_BOUND`] while a
//!   call waits (a waiter that cannot hear polls).

use std::time::Duration;

use redlock_core::{Config, ConfigBuilder, RetryPolicy};
use redlock_sim::{
    ClientDeath, Dice, HelloAnswer, Overtaken, PushFaults, Report, Resources, Scenario,
    ServerProfile, Sim, Starvation, WorkloadKnobs,
};

use super::ms;

/// Seeds of [`waiters`] on which the correct core must keep the property.
pub const WAITERS_BUDGET: u64 = 100;

/// Seeds within which a negative control of [`waiters`] must be found.
pub const WAITERS_DETECTION: u64 = 60;

/// Seeds of [`fair`] on which the correct core must keep the bound.
pub const FAIR_BUDGET: u64 = 100;

/// Seeds within which [`fair`] without the queue must break the bound.
pub const FAIR_DETECTION: u64 = 30;

/// How long a resource may sit free while a call waits for it, in [`fair_lines`] (every
/// node speaks RESP3, no message is lost): a waiter is told its turn by the nodes'
/// announcements, and waits for no timer. On seeds 0..200 the longest is 10.7 ms (a retry
/// delay of a call that found the lock held between two holds); a head that missed its
/// turn waited for its place's renewal, about 280 ms, in 14 runs of 200 before the fixes
/// that the property guards (tests/waiters.rs).
pub const IDLE_BOUND: Duration = Duration::from_millis(50);

/// Seeds within which `Mutant::HeadWaitsForRelease` must leave a resource idle past
/// [`IDLE_BOUND`] (4 runs of 200 do, the first at seed 108).
pub const IDLE_DETECTION: u64 = 200;

/// How long every call of the families waits at most: far longer than the others' work
/// (3-5 clients of 6 to 12 sections of at most 12 ms, a dead holder's ttl of at most 1 s,
/// two dead waiters' patience of about a second each).
pub const MAX_WAIT: Duration = Duration::from_secs(20);

/// A waiting call may be overtaken by this many waiters (calls that did not acquire at
/// their first attempt) that began over [`fair_slack`] after it, and no more. On seeds
/// 0..300 of [`fair`] with the queue, no run has such an overtake at all; without the
/// queue, 131 runs have one or more and 67 three or more (tests/waiters.rs,
/// `measure_overtakes_and_starvation`). The margin of 2 is for what a run may still do
/// within the rules: a `next:` message lost, or an attempt timed out, each costing a
/// waiter a turn ([`fair_slow`], whose round trips can outlast the attempt timeout: 3 runs
/// of 300 with one or two). Newcomers (a first plain `SET NX` landing between a release
/// and the head's grant) are not bounded: see `fairness.rs`.
pub const OVERTAKE_BOUND: usize = 2;

/// Seeds of [`fair_lines_silent`] on which the correct core must keep its properties.
pub const SILENT_BUDGET: u64 = 60;

/// Seeds within which a negative control of [`fair_lines_silent`] must be found.
pub const SILENT_DETECTION: u64 = 60;

/// How late a waiting call of a silent client of [`fair_lines_silent`] may be let in: no
/// call of another client that began more than this after it may acquire first. A line
/// that hears everywhere goes through the nodes every 250 ms (queue.rs,
/// `HEAR_SILENT_WAITERS_EVERY`), where its next call's attempt meets the silent waiter's
/// place; the margin is for a section (at most 45 ms) and the waiter's poll (10 ms). On
/// seeds 0..100 the latest is 227 ms; a line that never makes the trip lets calls that began
/// up to 763 ms later pass, in 13 runs of 100 past this bound (tests/waiters.rs,
/// `measure_silent_waiters`).
pub const SILENT_LATENESS: Duration = Duration::from_millis(350);

/// Scenario `seed` of the waiters family, its core configuration as `tweak` makes it from
/// the family's (a mutant, another patience, no queue).
pub fn waiters(seed: u64, tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Scenario {
    let mut d = Dice::new(seed ^ 0x3a17_e125);
    let mut s = contended(seed, &mut d, tweak);
    let dying = d.range(1, 2.min(s.clients as u64 - 1)) as usize;
    let first = d.index(s.clients);
    s.client_deaths = (0..dying)
        .map(|i| ClientDeath {
            client: (first + i) % s.clients,
            at: d.millis(ms(10), ms(150)),
            // Most die while a call waits: past its first attempt, a place in the queue.
            waiting_for: d.chance(0.75).then(|| d.millis(ms(5), ms(60))),
        })
        .collect();
    if d.chance(0.5) {
        let drop = d.float(0.05, 0.5);
        s.push_faults = (0..s.nodes())
            .map(|_| PushFaults {
                drop: if d.chance(0.5) { drop } else { 0.0 },
                ..PushFaults::default()
            })
            .collect();
    }
    s
}

/// Scenario `seed` of the fairness family: [`contended`] alone, on a LAN.
pub fn fair(seed: u64, tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Scenario {
    let mut d = Dice::new(seed ^ 0xfa12_0001);
    contended(seed, &mut d, tweak)
}

/// [`fair`] with lines: 2 to 4 clients of 2 or 3 tasks each, so that the calls of one client
/// wait in its line (the core's queue.rs) and a line may hand the hold from call to call
/// (a hand-over, which sends nothing) while a waiter of another client waits in the queue.
/// `resp3`: every node answers `HELLO` and allows channels, as hearing of waiters needs
/// (notify.rs); else the servers are drawn as in [`fair`] (measured only).
pub fn fair_lines(
    seed: u64,
    resp3: bool,
    tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> Scenario {
    let mut d = Dice::new(seed ^ 0xfa12_0002);
    let mut s = contended(seed, &mut d, tweak);
    s.clients = d.range(2, 4) as usize;
    s.workload.tasks = d.range(2, 3) as u32;
    if resp3 {
        for server in &mut s.servers {
            server.hello = HelloAnswer::Reply;
            server.channels = true;
        }
    }
    s
}

/// [`fair_lines`] (every node speaks RESP3) with 2 or 3 clients, one of which is *silent*:
/// its user may not run `HELLO`, so it speaks RESP2 on every node and never announces
/// itself as a waiter, as a client of a version before announcements would. The others'
/// lines hear every waiter that announces, so only their trip through the nodes now and
/// then (queue.rs, `HEAR_SILENT_WAITERS_EVERY`) finds the silent one waiting in the queue.
///
/// The others are busy services: 2 or 3 tasks of 80 to 150 calls with sections of about 10
/// to 45 ms and ttls of 4 to 8 s, so that a line hands the hold from call to call for
/// seconds. The silent one is an occasional job: one task, 2 to 4 calls, 1.1 to 1.6 s
/// apart, so that each of its calls comes to a line that no longer counts as contested,
/// whose trip alone (or its courtesy hand-off, up to a second later) lets it in.
pub fn fair_lines_silent(
    seed: u64,
    tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> Scenario {
    let mut d = Dice::new(seed ^ 0xfa12_0003);
    let mut s = fair_lines(seed, true, tweak);
    s.clients = d.range(2, 3) as usize;
    s.workload.ops_per_client = d.range(80, 150) as u32;
    let ttl = d.millis(ms(4_000), ms(8_000));
    s.workload.ttl = (ttl / 2, ttl);
    let section = d.millis(ms(15), ms(30)).as_secs_f64() / ttl.as_secs_f64();
    s.workload.hold = (section * 0.7, section * 1.5);
    let silent = d.index(s.clients);
    s.silent_clients = vec![silent];
    let job = WorkloadKnobs {
        tasks: 1,
        ops_per_client: d.range(2, 4) as u32,
        think: (ms(1_100), ms(1_600)),
        start_spread: ms(500),
        ..s.workload
    };
    s.workload_of = vec![(silent, job)];
    s
}

/// For each waiting call of a silent client of `scenario` ([`fair_lines_silent`]), how
/// long after it began the latest-starting call of another client that acquired first
/// began (zero when none did), in the order calls began.
pub fn silent_lateness(scenario: &Scenario, report: &Report) -> Vec<Duration> {
    let overtakes = report.checker.overtakes(report.end, Duration::ZERO);
    (overtakes.iter())
        .filter(|(a, _)| scenario.silent_clients.contains(&a.client))
        .map(|(a, by)| {
            (by.iter())
                .map(|b| b.started_at.saturating_sub(a.started_at))
                .max()
                .unwrap_or_default()
        })
        .collect()
}

/// [`fair`] over a slower network, for measurement only: ttls of 100 to 400 ms and one-way
/// delays up to 1 to 4 ms, so that a round trip (two, for an `EVAL` after `-NOSCRIPT`) may
/// outlast the default attempt timeout (5% of a lock's ttl, from 2.5 ms here).
pub fn fair_slow(seed: u64, tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Scenario {
    let mut d = Dice::new(seed ^ 0xfa12_0001);
    contended_on(seed, &mut d, tweak, Net::Slow)
}

/// The slack of [`fair`]'s property for `scenario`: a later call counts only if it began
/// more than this after the waiter. The clock error (node wall clocks start up to the
/// spread apart, drift at twice the skew over the run, and tickets are whole
/// milliseconds) plus a waiter's way to its place: its first attempt, a plain `SET NX`, is
/// refused a round trip later, and the place it then takes at once (acquire.rs, "an early
/// attempt") reaches the nodes half a round trip after that; each one-way delay is at most
/// the network's largest.
pub fn fair_slack(scenario: &Scenario) -> Duration {
    let clocks = scenario.wall_spread * 2
        + scenario
            .time_limit
            .mul_f64(2.0 * scenario.clock_skew)
            .min(ms(20))
        + ms(1);
    clocks + scenario.network.latency_max * 3
}

/// The first live waiter of the run that starved, if any.
pub fn starved(report: &Report) -> Option<Starvation> {
    report.checker.starvation(report.end)
}

/// The first waiting call of the run of `scenario` overtaken by more than `bound` calls of
/// other clients, waiters and newcomers alike (the [`fair_lines`] property).
pub fn overtaken_by_calls(scenario: &Scenario, report: &Report, bound: usize) -> Option<Overtaken> {
    let slack = fair_slack(scenario);
    report.checker.overtaken_by_calls(report.end, slack, bound)
}

/// The first waiting call of the run of `scenario` overtaken by more than `bound` waiters.
pub fn overtaken(scenario: &Scenario, report: &Report, bound: usize) -> Option<Overtaken> {
    let slack = fair_slack(scenario);
    report.checker.unfairness(report.end, slack, bound)
}

/// The most times a waiting call of the run of `scenario` was overtaken, by waiters and by
/// newcomers (calls that acquired at their first attempt), each counted on its own, and by
/// both together.
pub fn most_overtakes(scenario: &Scenario, report: &Report) -> (usize, usize, usize) {
    let slack = fair_slack(scenario);
    let mut most = (0, 0, 0);
    for (_, by) in report.checker.overtakes(report.end, slack) {
        let waiters = by.iter().filter(|b| b.acquired_after != Some(1)).count();
        most.0 = most.0.max(waiters);
        most.1 = most.1.max(by.len() - waiters);
        most.2 = most.2.max(by.len());
    }
    most
}

/// Runs `family` on seeds `0..budget` and returns the first (scenario, report) that
/// `broken` accepts.
pub fn first_where(
    budget: u64,
    family: impl Fn(u64) -> Scenario,
    broken: impl Fn(&Scenario, &Report) -> bool,
) -> Option<(Scenario, Report)> {
    (0..budget).find_map(|seed| {
        let scenario = family(seed);
        let report = Sim::new(scenario.clone()).run();
        broken(&scenario, &report).then_some((scenario, report))
    })
}

/// What both families share: 3 or 5 nodes of the servers [`ServerProfile::draw`] picks, ttls of 300 ms to 1 s, calls that wait up to [`MAX_WAIT`] with the default retry
/// delays, 3-5 clients (one task each) on one resource, 6 to 12 calls each with sections of
/// about 1 to 12 ms and up to 5 ms between them, one-way delays from 50 µs to 0.3-1.5 ms
/// (a LAN), clock rates and wall clocks within the drift allowance.
fn contended(
    seed: u64,
    d: &mut Dice,
    tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> Scenario {
    contended_on(seed, d, tweak, Net::Lan)
}

/// The network of [`contended`]: a LAN, or the slower one of [`fair_slow`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Net {
    Lan,
    Slow,
}

/// [`contended`] on the network `net`.
fn contended_on(
    seed: u64,
    d: &mut Dice,
    tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    net: Net,
) -> Scenario {
    let nodes = [3, 5][d.index(2)];
    let ttl = match net {
        Net::Lan => d.millis(ms(300), ms(1_000)),
        Net::Slow => d.millis(ms(100), ms(400)),
    };
    let builder = Config::builder(nodes).ttl(ttl).retry(RetryPolicy {
        max_attempts: None,
        max_wait: Some(MAX_WAIT),
        ..RetryPolicy::default()
    });
    let config = tweak(builder).build().expect("valid waiters config");
    let servers = ServerProfile::draw(d, nodes);
    let allowance = config.drift();
    let mut s = Scenario::new(seed, config);
    // What a mutant core sends instead of the queue's script (the correct core never does).
    s.scripts.register_all(redlock_sim::kinds::MUTANT_MODELS);
    s.servers = servers;
    s.clients = d.range(3, 5) as usize;
    s.resources = Resources::Shared(1);
    s.clock_skew = d.float(0.0, 0.002);
    s.wall_spread = d.duration(Duration::ZERO, allowance);
    s.network.latency_min = d.duration(Duration::from_micros(50), Duration::from_micros(500));
    // A LAN: a round trip (or two, for a script's `EVAL` after `-NOSCRIPT`) well within the
    // default attempt timeout, 5% of a lock's ttl (at least 7.5 ms here).
    s.network.latency_max = match net {
        Net::Lan => d.duration(Duration::from_micros(300), Duration::from_micros(1_500)),
        Net::Slow => d.duration(ms(1), ms(4)),
    };
    s.network.split_chance = 0.2;
    s.workload.ops_per_client = d.range(6, 12) as u32;
    s.workload.ttl = (ttl / 2, ttl);
    // A section of about 1 to 12 ms (the hold is a fraction of the validity).
    let section = d.millis(ms(2), ms(6)).as_secs_f64() / ttl.as_secs_f64();
    s.workload.hold = (section / 2.0, section * 2.0);
    s.workload.think = (ms(0), ms(5));
    s.workload.start_spread = ms(30);
    s.time_limit = MAX_WAIT + ms(30_000);
    s
}
