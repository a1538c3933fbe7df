//! Property (S) over thousands of seeded scenarios: 3/5/7 nodes, contention, pauses, cuts,
//! crashes with a safe restart delay, half-closes with late delivery, reordering, skew within
//! the drift allowance, short ttls, supplied tokens (reused by every call of a client in half
//! the scenarios); and with every clock at the edge of the drift allowance. Also: the same
//! seed gives the same run. Nodes are Redis 7 (scripts), Valkey 9 / Redis 8.4 (native
//! commands), probed (HELLO refused, natives tried, fallback) or a mix of these.
//! `REDLOCK_SIM_SCENARIOS` sets the scenario count.

mod common;

use common::{EDGE_SKEW, assert_safe, clock_edge, family_count, safety, scenario_count};
use redlock_sim::Sim;

/// Runs every `parts`-th seed from `part`, and checks that the scenarios did exercise what
/// they are meant to (expiry, extension, retries, faults), so a pass is not vacuous.
fn run_part(part: u64, parts: u64) {
    let (mut acquired, mut retried, mut lost, mut extended, mut cancelled) = (0, 0, 0, 0, 0);
    let (mut pauses, mut cuts, mut crashes, mut noscript) = (0, 0, 0, 0);
    let (mut half_closes, mut late_commands) = (0, 0);
    let (mut native, mut native_refused, mut hellos, mut hellos_refused) = (0, 0, 0, 0);
    for seed in (part..scenario_count()).step_by(parts as usize) {
        let report = assert_safe(safety(seed));
        for op in report.checker.ops() {
            acquired += u32::from(op.acquired_after.is_some());
            retried += u32::from(op.acquired_after.is_some_and(|a| a > 1));
            lost += u32::from(op.lost);
            extended += op.extended;
            cancelled += u32::from(op.cancelled);
        }
        pauses += report.stats.pauses;
        cuts += report.stats.cuts;
        crashes += report.stats.crashes;
        noscript += report.stats.noscript;
        half_closes += report.stats.half_closes;
        late_commands += report.stats.orphan_commands;
        native += report.stats.native;
        native_refused += report.stats.native_refused;
        hellos += report.stats.hellos;
        hellos_refused += report.stats.hellos_refused;
    }
    println!(
        "part {part}: {native} native commands run, {native_refused} refused (fallbacks), \
         {hellos} HELLOs answered, {hellos_refused} refused, {noscript} NOSCRIPT"
    );
    if scenario_count() >= 100 * parts {
        let seen = [
            acquired,
            retried,
            lost,
            extended,
            cancelled,
            pauses,
            cuts,
            crashes,
            noscript,
            half_closes,
            native,
            native_refused,
            hellos,
            hellos_refused,
        ];
        assert!(
            seen.iter().all(|n| *n > 0) && late_commands > 0,
            "a behaviour never happened: {seen:?}, {late_commands} late commands"
        );
    }
}

#[test]
fn safety_holds_under_faults_part_0() {
    run_part(0, 4);
}

#[test]
fn safety_holds_under_faults_part_1() {
    run_part(1, 4);
}

#[test]
fn safety_holds_under_faults_part_2() {
    run_part(2, 4);
}

#[test]
fn safety_holds_under_faults_part_3() {
    run_part(3, 4);
}

#[test]
fn safety_holds_with_every_clock_at_the_edge_of_the_drift_allowance() {
    // Rates 1 ± 0.495% are 0.995% apart at most: inside the default 1% allowance, no floor.
    // Half the usual family count: these runs are retry storms, several times a safety run.
    let mut lost = 0;
    for seed in 0..(family_count() / 2).max(10) {
        let scenario = clock_edge(seed, 0.01);
        let sim = Sim::new(scenario.clone());
        for node in sim.nodes() {
            let off = (node.clock().rate() - 1.0).abs();
            assert!(
                (off - EDGE_SKEW).abs() < 1e-9,
                "a node clock off the edge: {off}"
            );
        }
        let report = assert_safe(scenario);
        lost += report.checker.ops().iter().filter(|op| op.lost).count();
    }
    assert!(lost > 0, "no holder ever held to its deadline");
}

#[test]
fn same_seed_same_run() {
    for seed in [3, 17, 1234] {
        let a = Sim::new(safety(seed)).run();
        let b = Sim::new(safety(seed)).run();
        assert_eq!(
            a.trace_hash, b.trace_hash,
            "seed {seed} ran differently twice"
        );
        assert_eq!(a.stats, b.stats);
        assert_eq!(a.checker.intervals(), b.checker.intervals());
        assert!(a.stats.events > 100, "seed {seed} did next to nothing");
    }
    let other = Sim::new(safety(4)).run();
    assert_ne!(other.trace_hash, Sim::new(safety(3)).run().trace_hash);
}

#[test]
fn running_in_pieces_is_running_once() {
    let scenario = safety(5);
    let limit = scenario.time_limit;
    let mut whole = Sim::new(scenario.clone());
    assert!(whole.run_until(limit, u64::MAX));
    let mut sim = Sim::new(scenario);
    assert!(sim.run_until(limit / 20, u64::MAX));
    for _ in 0..10 {
        assert!(sim.step(), "the run is still busy early on");
    }
    assert!(sim.run_until(limit, u64::MAX));
    assert_eq!(sim.trace_hash(), whole.trace_hash());
}
