//! A release that grants (docs/design.md, "A release that grants"), on the defaults
//! family's queued emphasis with long holds (`common::long_holds`): a contested line's
//! release places its next call, and a later release of another client grants the key to
//! that call, which holds on a quorum of grants without an attempt. The correct core keeps
//! every property with holds by grants among the others (tests/hand_over.rs runs the same
//! family over more seeds; here the holds by grants are counted, so that the family keeps
//! making them); a hold by grants that counts its validity over the whole ttl
//! (`Mutant::GrantSpansTtl`), where the nodes set the key for what was left of the place
//! when that was shorter, breaks mutual exclusion.

mod common;

use common::{Broken, broken, first_broken, long_holds};
use redlock_core::Mutant;
use redlock_sim::{Report, Sim};

/// Seeds the mutant's detection looks at.
const BUDGET: u64 = 200;

/// Seeds whose holds by grants are counted (tests/hand_over.rs checks the properties of
/// the same family over [`BUDGET`]).
const COUNTED: u64 = 60;

/// Holds by grants the correct core must make over [`COUNTED`] seeds (measured: 3,348; a
/// family that stops granting would keep every property and test nothing).
const GRANTED_FLOOR: usize = 1_500;

/// Calls that held by grants: no attempt of their own, and the call's place id (which
/// carries its ttl after a `~`) as the value.
fn granted(report: &Report) -> usize {
    (report.checker.ops().iter())
        .filter(|r| r.acquired_after == Some(0))
        .filter(|r| {
            r.stored
                .as_ref()
                .is_some_and(|t| t.as_bytes().contains(&b'~'))
        })
        .count()
}

#[test]
fn correct_core_keeps_every_property_with_holds_by_grants() {
    let (mut failures, mut holds) = (Vec::new(), 0);
    for seed in 0..COUNTED {
        let scenario = long_holds(seed, None);
        let report = Sim::new(scenario.clone()).run();
        holds += granted(&report);
        if let Some(broken) = broken(&scenario, &report) {
            failures.push(format!("{broken}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    println!("holds by grants in {COUNTED} seeds: {holds}");
    assert!(holds >= GRANTED_FLOOR, "only {holds} holds by grants");
}

#[test]
fn finds_a_hold_by_grants_counted_over_the_ttl() {
    let found = first_broken(
        BUDGET,
        |seed| long_holds(seed, Some(Mutant::GrantSpansTtl)),
        |_, b| matches!(b, Broken::Safety(_)),
    )
    .expect("no two holders within the budget");
    let Broken::Safety(v) = &found.broken else {
        unreachable!("the detection keeps safety breaks only")
    };
    println!("found at seed {}: {v}", found.scenario.seed);
    // One of the two holders held by grants.
    let calls = found.report.checker.ops();
    let by_grants = |client: usize, op| {
        calls.iter().any(|r| {
            (r.client, r.op) == (client, op)
                && r.stored
                    .as_ref()
                    .is_some_and(|t| t.as_bytes().contains(&b'~'))
        })
    };
    assert!(
        by_grants(v.first.client, v.first.op) || by_grants(v.second.client, v.second.op),
        "{v}"
    );
}
