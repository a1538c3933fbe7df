//! Hand-overs on the defaults family's queued emphasis (`common/defaults.rs`): a client's
//! lock calls for one resource wait in its line, and a held lock passes its hold to the
//! next call without going to the nodes (docs/design.md, "Local queueing"), the same
//! stored value until the same deadline. The correct core keeps every property over the
//! budget, with holds as long as the queued emphasis gives them and with holds that use up
//! to 90% of their validity; a hand-over that counts the old validity again from the
//! hand-over (`Mutant::HandOverKeepsValidity`) breaks mutual exclusion within it.

mod common;

use common::{Broken, Emphasis, Found, broken, defaults, first_broken, long_holds};
use redlock_core::Mutant;

use redlock_sim::{Scenario, Sim};

/// Seeds each test looks at.
const BUDGET: u64 = 200;

/// Calls that took their hold by a hand-over (acquired after no attempt of their own).
fn hand_overs(scenario: Scenario) -> usize {
    let report = Sim::new(scenario).run();
    (report.checker.ops().iter())
        .filter(|r| r.acquired_after == Some(0))
        .count()
}

#[test]
fn correct_core_keeps_every_property_with_long_holds_handed_over() {
    let mut failures = Vec::new();
    for seed in 0..BUDGET {
        let scenario = long_holds(seed, None);
        let report = Sim::new(scenario.clone()).run();
        if let Some(broken) = broken(&scenario, &report) {
            failures.push(format!("{broken}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {BUDGET} runs broke a property; the first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[test]
fn finds_a_hand_over_that_keeps_the_old_validity() {
    let found = first_broken(
        BUDGET,
        |seed| long_holds(seed, Some(Mutant::HandOverKeepsValidity)),
        |_, b| matches!(b, Broken::Safety(_)),
    )
    .expect("no two holders within the budget");
    show(&found);
    let Broken::Safety(v) = &found.broken else {
        unreachable!("the detection keeps safety breaks only")
    };
    let calls = found.report.checker.ops();
    let took = |iv: &redlock_sim::Interval| {
        calls
            .iter()
            .any(|r| r.client == iv.client && r.op == iv.op && r.acquired_after == Some(0))
    };
    assert!(
        took(&v.first) || took(&v.second),
        "one of the two holders took its hold by a hand-over: {v}"
    );
}

/// The family hands over on both shapes of hold, so the budget above tests hand-overs
/// (fewer where another client waits in the waiters' queue: a line's hand-off through the
/// nodes then gives it its turn, and the line hands over less; and fewer since a waiter
/// that cannot hear polls, which meets the lines more often: 122 → 110 in the queued
/// emphasis).
#[test]
fn the_queued_emphasis_hands_over() {
    let (mut queued, mut long) = (0, 0);
    for seed in 0..60 {
        queued += hand_overs(defaults(seed, Emphasis::Queued));
        long += hand_overs(long_holds(seed, None));
    }
    println!("hand-overs in 60 seeds: {queued} (queued emphasis), {long} (long holds)");
    assert!(queued > 100 && long > 10, "{queued} and {long} hand-overs");
}

/// Prints what the detection found.
fn show(found: &Found) {
    println!(
        "hand-over keeping the old validity: first failing seed {} of budget {BUDGET}, \
         property {}: {}",
        found.report.seed,
        found.broken.property(),
        found.broken
    );
}
