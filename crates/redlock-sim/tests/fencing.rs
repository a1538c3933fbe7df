//! Fencing tokens (docs/safety.md, "Fencing tokens"): of two fenced holds of one resource, the one that ended
//! before the other began has the smaller token, and every fenced hold has one.
//!
//! The property runs over the safety families' seeds (`REDLOCK_SIM_SCENARIOS`, 2,000 by
//! default) with most locks fenced, node wall clocks apart, and crashes that either keep
//! the data (persistence) or restart empty after more than the largest ttl and 1 s plus the
//! wall clocks' spread (the floor's assumption). Then the negative controls: four core
//! mutants and one fault knob the property must catch within [`MUTANT_BUDGET`] seeds, each
//! beside the correct core on the very same family.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{MUTANT_BUDGET, contention, family_count, ms, retry, safety, scenario_count};
use redlock_core::{Config, ConfigBuilder, Fencing, Mutant, NO_FLOOR_FENCED_ACQUIRE_SCRIPT};
use redlock_sim::script::fenced_acquire_with;
use redlock_sim::{Dice, FaultKnobs, Keys, Report, Resources, Scenario, ServerReply, Sim};

/// The restart delay that keeps an empty restart safe for the fencing floor as well as for
/// the lock: above the largest ttl on the slowest clock, and above 1 s plus the wall
/// clocks' spread (`2 * wall_spread` apart at the start, drifting by up to `2 * skew` of the
/// run's length).
fn fence_safe_restart(ttl_max: Duration, s: &Scenario) -> (Duration, Duration) {
    let drift = s.time_limit.mul_f64(2.0 * s.clock_skew);
    let fence = Duration::from_secs(1) + 2 * s.wall_spread + drift + ms(50);
    let lock = ttl_max.mul_f64(1.0 / (1.0 - s.clock_skew)) + ms(1);
    let lo = fence.max(lock);
    (lo, lo + ms(300))
}

/// The safety family of `seed` with 80% of the locks fenced, wall clocks up to 400 ms apart,
/// and half the crashes keeping their data; empty restarts are fence-safe.
fn fenced_safety(seed: u64) -> Scenario {
    let mut s = safety(seed);
    let mut d = Dice::new(seed ^ 0xfe9ce);
    s.workload.fenced_chance = 0.8;
    s.wall_spread = d.millis(ms(0), ms(400));
    s.faults.persist_chance = 0.5;
    let ttl_max = s.config.ttl().max(s.workload.ttl.1);
    s.faults.restart_delay = fence_safe_restart(ttl_max, &s);
    s
}

/// Contention on one resource with every lock fenced and node wall clocks up to 700 ms
/// apart, so quorums often answer counters of different seconds; `evict` turns on lock key
/// eviction (a node drops a key with a ttl, never the counter).
fn fenced_contention(seed: u64, tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Scenario {
    let mut s = contention(seed, |b| tweak(b.fencing(Fencing::every_lock())));
    let mut d = Dice::new(seed ^ 0xfe9c0);
    s.wall_spread = d.millis(ms(100), ms(700));
    s
}

/// [`fenced_contention`] with a node dropping a lock key every few milliseconds.
fn fenced_evictions(seed: u64, tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Scenario {
    let mut s = fenced_contention(seed, tweak);
    s.faults = FaultKnobs {
        every: Some((ms(1), ms(10))),
        until: ms(3_000),
        pause_weight: 0,
        cut_weight: 0,
        crash_weight: 0,
        flush_weight: 0,
        evict_weight: 1,
        ..FaultKnobs::default()
    };
    s
}

/// Frequent crashes on a contended resource, every lock fenced, each empty restart delayed
/// as the floor needs, and any number of nodes down at once (so that a whole quorum may
/// come back empty: safe for the lock, whose keys are long gone by then, and for the
/// fencing counter only thanks to the floor); `clock_back` steps a restarted node's wall clock back (the fault
/// knob under test). `tweak` sets the core configuration.
fn fenced_crashy(
    seed: u64,
    clock_back: Option<Duration>,
    tweak: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> Scenario {
    let mut d = Dice::new(seed ^ 0xfec2a5);
    let nodes = [3, 5][d.index(2)];
    let builder = Config::builder(nodes)
        .ttl(ms(300))
        .attempt_timeout(ms(15))
        .reconnect_backoff(ms(2), ms(20))
        .fencing(Fencing::every_lock())
        .retry(retry(&mut d, 20, 3, 15));
    let mut s = Scenario::new(seed, tweak(builder).build().expect("valid config"));
    s.scripts
        .register(NO_FLOOR_FENCED_ACQUIRE_SCRIPT.body, no_floor);
    s.clients = d.range(3, 5) as usize;
    s.resources = Resources::Shared(1);
    s.clock_skew = d.float(0.0, 0.004);
    s.wall_spread = d.millis(ms(0), ms(200));
    s.workload.ops_per_client = 8;
    s.workload.ttl = (ms(200), ms(300));
    s.workload.hold = (0.1, 0.9);
    s.workload.start_spread = ms(5);
    s.workload.think = (ms(0), ms(300));
    s.time_limit = ms(12_000);
    let restart = fence_safe_restart(ms(300), &s);
    s.faults = FaultKnobs {
        every: Some((ms(100), ms(600))),
        until: ms(9_000),
        pause_weight: 0,
        cut_weight: 0,
        crash_weight: 1,
        flush_weight: 0,
        restart_delay: restart,
        max_down: nodes,
        restart_clock_back: clock_back.map_or(Duration::ZERO, |back| back + restart.1),
        ..FaultKnobs::default()
    };
    s
}

/// The model of [`NO_FLOOR_FENCED_ACQUIRE_SCRIPT`].
fn no_floor(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    fenced_acquire_with(keys, k, argv, false)
}

/// Runs `scenario`; panics if a fencing token failed to grow (or, with `exclusive`, if
/// two holds overlapped).
fn assert_fenced(scenario: Scenario, exclusive: bool) -> Report {
    let report = Sim::new(scenario).run();
    if let Some(v) = &report.fencing_violation {
        panic!("fencing broken: {v}");
    }
    if exclusive && let Some(v) = &report.violation {
        panic!("property (S) broken: {v}");
    }
    report
}

/// Asserts that `family` breaks the fencing property within the budget; prints the seed.
fn assert_caught(name: &str, family: impl Fn(u64) -> Scenario) {
    let found = (0..MUTANT_BUDGET)
        .map(|seed| Sim::new(family(seed)).run())
        .find_map(|r| r.fencing_violation);
    let Some(v) = found else {
        panic!("mutant {name} was not caught within {MUTANT_BUDGET} seeds");
    };
    println!(
        "mutant {name}: first failing seed {} of budget {MUTANT_BUDGET}: {v}",
        v.seed
    );
}

/// Fenced holds, write-backs and restarts seen over a family, so a pass is not vacuous.
#[derive(Debug, Default)]
struct Seen {
    fenced: u32,
    written_back: u32,
    persisted: u32,
    empty: u32,
}

impl Seen {
    fn add(&mut self, report: &Report) {
        let fenced = report.checker.intervals().iter();
        self.fenced += fenced.filter(|iv| iv.fencing_token.is_some()).count() as u32;
        let ops = report.checker.ops().iter();
        self.written_back += ops.map(|op| op.written_back as u32).sum::<u32>();
        self.persisted += report.stats.persisted_crashes;
        self.empty += report.stats.crashes - report.stats.persisted_crashes;
    }
}

fn run_part(part: u64, parts: u64) {
    let mut seen = Seen::default();
    for seed in (part..scenario_count()).step_by(parts as usize) {
        seen.add(&assert_fenced(fenced_safety(seed), true));
    }
    println!("part {part}: {seen:?}");
    if scenario_count() >= 100 * parts {
        assert!(
            seen.fenced > 0 && seen.persisted > 0 && seen.empty > 0,
            "{seen:?}"
        );
    }
}

#[test]
fn fencing_tokens_grow_under_faults_part_0() {
    run_part(0, 2);
}

#[test]
fn fencing_tokens_grow_under_faults_part_1() {
    run_part(1, 2);
}

#[test]
fn correct_core_fences_under_contention_with_clocks_apart() {
    let mut seen = Seen::default();
    for seed in 0..family_count() {
        seen.add(&assert_fenced(fenced_contention(seed, |b| b), true));
    }
    assert!(seen.fenced > 0 && seen.written_back > 0, "{seen:?}");
}

#[test]
fn correct_core_fences_when_lock_keys_are_evicted() {
    // Eviction breaks mutual exclusion (a node forgets a holder's key), not the counter.
    for seed in 0..family_count() {
        assert_fenced(fenced_evictions(seed, |b| b), false);
    }
}

#[test]
fn correct_core_fences_across_delayed_empty_restarts() {
    let mut seen = Seen::default();
    for seed in 0..family_count() {
        seen.add(&assert_fenced(fenced_crashy(seed, None, |b| b), true));
    }
    assert!(seen.empty > 0, "{seen:?}");
}

#[test]
fn mutant_fence_min_is_caught() {
    assert_caught("FenceMin", |seed| {
        fenced_contention(seed, |b| b.mutant(Mutant::FenceMin))
    });
}

#[test]
fn mutant_fence_no_write_back_is_caught() {
    assert_caught("FenceNoWriteBack", |seed| {
        fenced_contention(seed, |b| b.mutant(Mutant::FenceNoWriteBack))
    });
}

#[test]
fn mutant_fence_count_refused_is_caught() {
    // Polling: a waiter that reads the holder's ttl (release notifications) retries when
    // the keys are gone, so fewer write-backs meet an evicted key; with it, the first
    // failing seed was 398 (of 2,000), not within the budget. The mutant is in the
    // write-back, which does not depend on how a waiter waits. Likewise without the
    // clock-rate check: its `TIME` each second also refreshes each node's clock reading
    // for the floor, and the first failing seed left the budget; the check does not touch
    // the write-back either. And without the restart quarantine, which changes which nodes
    // vote after a crash (and so the seeds), not the write-back; nor the waiters' queue,
    // whose script preloads at each connection change the timing (and so the seeds), not the
    // write-back: with it, no failing seed within the budget.
    assert_caught("FenceCountRefused", |seed| {
        fenced_evictions(seed, |b| {
            (b.mutant(Mutant::FenceCountRefused))
                .release_notifications(None)
                .clock_check(None)
                .restart_quarantine(None)
                .waiter_queue(None)
        })
    });
}

#[test]
fn mutant_fence_no_floor_is_caught() {
    // With the restart quarantine off: it keeps a restarted node (and its empty counter)
    // out of acquisitions for a window, which only delays what the missing floor breaks
    // (the counter is as empty when the window ends), beyond most of these runs.
    assert_caught("FenceNoFloor", |seed| {
        fenced_crashy(seed, None, |b| {
            b.mutant(Mutant::FenceNoFloor).restart_quarantine(None)
        })
    });
}

#[test]
fn mutant_fence_pipeline_no_floor_is_caught() {
    // With the restart quarantine off, as for `FenceNoFloor`: a fencing client keeps a
    // restarted node out until its floor has passed every number it may have lost, which
    // is what a floor of 0 no longer does, so the window only delays the break.
    assert_caught("FencePipelineNoFloor", |seed| {
        fenced_crashy(seed, None, |b| {
            b.mutant(Mutant::FencePipelineNoFloor)
                .restart_quarantine(None)
        })
    });
}

#[test]
fn restart_with_the_wall_clock_behind_is_caught() {
    // The floor with a node clock stepped back by more than the restart delay. With the
    // restart quarantine off: its window is counted on the client's clock, so it would
    // cover a step back shorter than itself.
    assert_caught("clock stepped back on an empty restart", |seed| {
        fenced_crashy(seed, Some(Duration::from_secs(2)), |b| {
            b.restart_quarantine(None)
        })
    });
}
