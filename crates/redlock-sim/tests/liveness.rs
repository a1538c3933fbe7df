//! Liveness and cleanup without faults: (L) every acquisition of an uncontended resource
//! succeeds on its first attempt, also with a minority of nodes down from the start; (C)
//! once everything is released, no key is left; and cancelled acquisitions leave no key.

mod common;

use std::time::Duration;

use common::{cleanup, quiet};
use redlock_core::STAMP_LEN;
use redlock_sim::{Report, Sim};

const SEEDS: u64 = 100;

fn assert_all_first_attempt(report: &Report) {
    assert!(
        report.workloads_done,
        "seed {}: workload unfinished",
        report.seed
    );
    assert!(report.violation.is_none(), "{:?}", report.violation);
    for op in report.checker.ops() {
        assert_eq!(
            op.acquired_after,
            Some(1),
            "seed {}: client {} {} was not acquired at once: {op:?}",
            report.seed,
            op.client,
            op.op
        );
        assert!(!op.lost && op.released, "seed {}: {op:?}", report.seed);
    }
}

#[test]
fn uncontended_locks_succeed_on_the_first_attempt() {
    for seed in 0..SEEDS {
        assert_all_first_attempt(&Sim::new(quiet(seed, |_| 0)).run());
    }
}

#[test]
fn uncontended_locks_succeed_on_the_first_attempt_with_a_minority_down() {
    for seed in 0..SEEDS {
        let report = Sim::new(quiet(seed, |n| (n - 1) / 2)).run();
        assert!(
            report.stats.refused > 0,
            "seed {seed}: the dead nodes were never tried"
        );
        assert_all_first_attempt(&report);
    }
}

/// Runs until nothing is in flight and every operation is over, then returns the sim.
fn run_to_quiet(seed: u64, cancel: f64) -> Sim {
    let scenario = cleanup(seed, cancel);
    let limit = scenario.time_limit;
    let mut sim = Sim::new(scenario);
    assert!(
        sim.run_until_quiet(limit, 5_000_000),
        "seed {seed}: never quiet"
    );
    // Every key was set with a 10 s ttl at or after time zero: none could have expired.
    assert!(sim.now().since_start() < Duration::from_secs(9));
    sim
}

#[test]
fn no_key_remains_after_every_release() {
    for seed in 0..SEEDS {
        let sim = run_to_quiet(seed, 0.0);
        let keys = sim.live_keys();
        assert!(keys.is_empty(), "seed {seed}: keys left behind: {keys:?}");
        let ops = sim.checker().ops();
        assert!(ops.iter().all(|op| op.released || op.failed.is_some()));
    }
}

#[test]
fn cancelled_acquisitions_leave_no_key() {
    let mut cancelled = 0;
    for seed in 0..SEEDS {
        let sim = run_to_quiet(seed, 0.5);
        let keys = sim.live_keys();
        for op in sim.checker().ops().iter().filter(|op| op.cancelled) {
            cancelled += 1;
            // Every operation here uses a supplied token, so its keys can be named: each
            // attempt stores it stamped, `<value>:<40 hex digits>`.
            let token = op.token.as_ref().expect("cleanup scenarios supply tokens");
            let supplied = token.supplied().unwrap_or(token.as_bytes());
            let left: Vec<_> = keys
                .iter()
                .filter(|(_, _, _, value)| {
                    value.len() == supplied.len() + STAMP_LEN && value.starts_with(supplied)
                })
                .collect();
            assert!(
                left.is_empty(),
                "seed {seed}: cancelled {op:?} left {left:?}"
            );
        }
        assert!(keys.is_empty(), "seed {seed}: keys left behind: {keys:?}");
    }
    assert!(
        cancelled > SEEDS,
        "too few cancellations to mean anything: {cancelled}"
    );
}
