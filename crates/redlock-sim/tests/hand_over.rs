//! Hand-overs on the defaults family's queued emphasis (`common/defaults.rs`): a client's
//! lock calls for one resource wait in its line, and a held lock passes its hold to the
//! next call without going to the nodes (docs/design.md, "Local queueing"), the same
//! stored value until the same deadline. The correct core keeps every property over the
//! budget, with holds as long as the queued emphasis gives them and with holds that use up
//! to 90% of their validity; a hand-over that counts the old validity again from the
//! hand-over (`Mutant::HandOverKeepsValidity`) breaks mutual exclusion within it. And a line
//! that met another client hands over again once it is alone ([`lone_line`]): a line that
//! hears its own client in a release's count of listeners never does.

mod common;

use std::time::Duration;

use common::{
    Broken, Emphasis, Found, LONE_VISITOR, broken, defaults, first_broken, lone_line, long_holds,
};
use redlock_core::Mutant;

use redlock_sim::{Report, Scenario, Sim};

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

/// A line left alone hands over again ([`lone_line`]): once the other client is gone and
/// the line no longer counts as contested (queue.rs, `CONTESTED_FOR`), at least this share
/// of its unfenced calls take their hold by a hand-over. On seeds 0..200 the least is 0.31,
/// in the 126 runs that count (the rest go through the nodes: behind a fenced call, at the
/// line's trips to hear waiters, at its courtesy hand-offs). A line that hears its own
/// client in the release's count of listeners hands over less than this in 86 of 118 runs
/// that count when it keeps its channel through its release
/// (`Mutant::ChannelKeptThroughRelease`), and in 91 of 124 when it reads the count of a
/// release that placed its next call (`Mutant::PlacedCallCounted`): none at all in most.
const LONE_SHARE: f64 = 0.2;

/// A run of [`lone_line`] counts when its line makes at least this many unfenced calls
/// after the other client is gone.
const LONE_CALLS: usize = 10;

/// Of the lone line's unfenced calls that began once the other client was gone and the
/// line no longer counted as contested (1 s after, queue.rs, `CONTESTED_FOR`, and a margin),
/// how many took their hold by a hand-over, and how many there were.
fn lone_hand_overs(report: &Report) -> (usize, usize) {
    let checker = &report.checker;
    let visitor = |client| client == LONE_VISITOR;
    let gone = (checker.intervals().iter())
        .filter(|iv| visitor(iv.client))
        .map(|iv| iv.end)
        .chain(
            (checker.ops().iter())
                .filter(|r| visitor(r.client))
                .filter_map(|r| r.failed_at),
        )
        .max()
        .map_or(Duration::ZERO, |t| t.since_start());
    let after = gone + Duration::from_millis(1_200);
    let late = (checker.ops().iter())
        .filter(|r| !visitor(r.client) && r.fenced == Some(false))
        .filter(|r| r.started_at.since_start() > after);
    let (mut handed, mut calls) = (0, 0);
    for r in late {
        calls += 1;
        handed += usize::from(r.acquired_after == Some(0));
    }
    (handed, calls)
}

/// Whether `report`'s line, left alone, handed over less than [`LONE_SHARE`] of its calls
/// (runs with fewer than [`LONE_CALLS`] such calls say nothing).
fn stopped_handing_over(report: &Report) -> Option<(usize, usize)> {
    let (handed, calls) = lone_hand_overs(report);
    (calls >= LONE_CALLS && (handed as f64) < LONE_SHARE * calls as f64).then_some((handed, calls))
}

#[test]
fn correct_core_hands_over_again_in_a_line_left_alone() {
    let (mut failures, mut counted, mut least) = (Vec::new(), 0, 1.0_f64);
    for seed in 0..BUDGET {
        let scenario = lone_line(seed, None);
        let report = Sim::new(scenario.clone()).run();
        if let Some(broken) = broken(&scenario, &report) {
            failures.push(format!("seed {seed}: {broken}"));
        }
        if let Some((handed, calls)) = stopped_handing_over(&report) {
            failures.push(format!(
                "seed {seed}: {handed} of {calls} calls handed over"
            ));
        }
        let (handed, calls) = lone_hand_overs(&report);
        if calls >= LONE_CALLS {
            counted += 1;
            least = least.min(handed as f64 / calls as f64);
        }
    }
    println!(
        "{counted} of {BUDGET} runs had {LONE_CALLS}+ calls after the other client left; \
         the least share handed over: {least:.2}"
    );
    assert!(
        counted >= BUDGET as usize / 2,
        "only {counted} runs counted"
    );
    assert!(
        failures.is_empty(),
        "{:#?}",
        &failures[..failures.len().min(5)]
    );
}

/// The seed of the first run of [`lone_line`] under `mutant`, within [`LONE_DETECTION`],
/// whose line stopped handing over.
fn first_lone_stop(mutant: Mutant) -> (u64, (usize, usize)) {
    (0..LONE_DETECTION)
        .find_map(|seed| {
            let report = Sim::new(lone_line(seed, Some(mutant))).run();
            stopped_handing_over(&report).map(|found| (seed, found))
        })
        .unwrap_or_else(|| panic!("{mutant:?}: every line handed over within the budget"))
}

/// Seeds within which a line that hears itself must be found (both first at seed 1).
const LONE_DETECTION: u64 = 30;

#[test]
fn finds_a_line_that_hears_its_own_kept_channel() {
    let (seed, (handed, calls)) = first_lone_stop(Mutant::ChannelKeptThroughRelease);
    println!("kept channel: seed {seed}, {handed} of {calls} calls handed over");
}

#[test]
fn finds_a_line_that_hears_the_call_its_release_placed() {
    let (seed, (handed, calls)) = first_lone_stop(Mutant::PlacedCallCounted);
    println!("placed call counted: seed {seed}, {handed} of {calls} calls handed over");
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
