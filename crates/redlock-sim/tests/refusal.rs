//! An extension refused for good (algorithm.md §9; `WRONGTYPE`: another program replaced
//! the lock's key by a list) on more than `N - q` nodes reports the loss within one attempt
//! timeout of the extension call, instead of retrying until the lock's deadline. The
//! negative control (`Mutant::PermanentRetried`: the refusals retried like any failure)
//! reports those losses only at the deadline, on the same family.
mod common;

use std::time::Duration;

use common::{MUTANT_BUDGET, family_count};
use redlock_core::{Config, LostReason, Mutant, RetryPolicy};
use redlock_sim::{Dice, FaultKnobs, OpRecord, Report, Resources, Scenario, Sim};

/// Locks held for most of their ttl and extended explicitly up to three times, while lock
/// keys on random nodes become lists every 5 to 20 ms (and nothing else goes wrong).
fn retyped(seed: u64, mutant: Option<Mutant>) -> Scenario {
    let mut d = Dice::new(seed ^ 0x7e_7e7e);
    let nodes = [3, 5][d.index(2)];
    let mut builder = Config::builder(nodes)
        .ttl(ms(1_000))
        .attempt_timeout(ATTEMPT_TIMEOUT)
        .retry(RetryPolicy {
            max_attempts: Some(5),
            max_wait: None,
            delay_min: ms(5),
            delay_max: ms(20),
        });
    if let Some(mutant) = mutant {
        builder = builder.mutant(mutant);
    }
    let mut s = Scenario::new(seed, builder.build().expect("valid config"));
    s.clients = d.range(1, 3) as usize;
    s.resources = Resources::PerClient;
    s.workload.ops_per_client = 6;
    s.workload.ttl = (ms(800), ms(1_200));
    s.workload.hold = (0.8, 0.95);
    s.workload.extend_chance = 1.0;
    s.workload.extend_at = (0.2, 0.6);
    s.workload.max_extends = 3;
    s.faults = FaultKnobs {
        every: Some((ms(5), ms(20))),
        pause_weight: 0,
        cut_weight: 0,
        crash_weight: 0,
        flush_weight: 0,
        retype_weight: 1,
        ..FaultKnobs::default()
    };
    s.time_limit = ms(15_000);
    s
}

#[test]
fn an_extension_refused_for_good_is_lost_within_one_attempt_timeout() {
    let mut doomed = 0;
    for seed in 0..family_count() {
        let report = run(retyped(seed, None));
        if let Some(v) = &report.violation {
            panic!("property (S) broken: {v}");
        }
        for record in report.checker.ops() {
            if let Some(late) = late_loss(record) {
                panic!("seed {seed}: {late}");
            }
            doomed += usize::from(record.doomed_extend.is_some());
        }
    }
    // The property looked at something: extensions were called on refusing majorities.
    assert!(doomed > 20, "{doomed} doomed extensions");
}

#[test]
fn mutant_permanent_retried_is_caught() {
    let found = (0..MUTANT_BUDGET).find_map(|seed| {
        let report = run(retyped(seed, Some(Mutant::PermanentRetried)));
        let late = report.checker.ops().iter().find_map(late_loss)?;
        Some((seed, late))
    });
    let Some((seed, late)) = found else {
        panic!("PermanentRetried was not caught within {MUTANT_BUDGET} seeds");
    };
    println!("mutant PermanentRetried: first failing seed {seed}: {late}");
}

/// What is wrong with the loss of an operation whose extension was refused for good by too
/// many nodes: not reported, reported for another reason, or later than one attempt
/// timeout after the call.
fn late_loss(record: &OpRecord) -> Option<String> {
    let called = record.doomed_extend?;
    let op = (record.client, record.op);
    match &record.lost_at {
        Some((at, LostReason::Refused { .. })) if at.saturating_sub(called) <= ATTEMPT_TIMEOUT => {
            None
        }
        Some((at, reason)) => Some(format!(
            "{op:?}: extension called at {called}, lost at {at}: {reason}"
        )),
        None => Some(format!("{op:?}: extension called at {called}, never lost")),
    }
}

fn run(scenario: Scenario) -> Report {
    let report = Sim::new(scenario).run();
    assert!(
        report.workloads_done,
        "seed {}: workloads not done",
        report.seed
    );
    report
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Each node's time to answer one extension attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(30);
