//! Negative controls: deliberate bugs in the core, one in the node model's native commands
//! and the operator's (a restart without delay, with the restart quarantine off), each of
//! which the checker must catch within a fixed seed budget, and the correct core on the very
//! same scenario families, which must pass. The mutants are reachable only here
//! (dev-dependency feature `_mutants`).
//!
//! The node mutant is a `DELIFEQ` that does not compare. Its twin, a `SET IFEQ` that creates
//! a missing key, hurts only an extension that reaches a node after the key expired and is
//! still answered, which no family here produces with the correct core; the command
//! contract catches that one (`crates/redlock-contract/tests/sim.rs`).
mod common;

use std::time::Duration;

use common::{
    MUTANT_BUDGET, assert_safe, clock_edge, contention, crashy, crashy_stepped, family_count,
    first_violation, late_delivery, late_extend, late_releases, skewed, slow_network,
};
use redlock_core::{Mutant, RestartQuarantine};
use redlock_sim::profile::NodeMutant;
use redlock_sim::{Scenario, ServerProfile, Sim, SuppliedToken};

/// Asserts that `family` breaks property (S) within the budget, and prints the first seed.
fn assert_caught(name: &str, family: impl Fn(u64) -> Scenario) {
    let Some(report) = first_violation(MUTANT_BUDGET, family) else {
        panic!("mutant {name} was not caught within {MUTANT_BUDGET} seeds");
    };
    let v = report
        .violation
        .expect("first_violation returns a violating run");
    println!(
        "mutant {name}: first failing seed {} of budget {MUTANT_BUDGET}: {v}",
        report.seed
    );
}

fn assert_family_safe(family: impl Fn(u64) -> Scenario) {
    for seed in 0..family_count() {
        assert_safe(family(seed));
    }
}

#[test]
fn mutant_quorum_half_is_caught() {
    assert_caught("QuorumHalf", |seed| {
        contention(seed, |b| b.mutant(Mutant::QuorumHalf))
    });
}

#[test]
fn correct_core_is_safe_under_contention() {
    assert_family_safe(|seed| contention(seed, |b| b));
}

#[test]
fn mutant_no_drift_allowance_is_caught() {
    assert_caught("drift below skew", |seed| skewed(seed, 0.0, Duration::ZERO));
}

#[test]
fn correct_core_is_safe_with_a_drift_allowance_above_the_skew() {
    // Rates 5% apart need ttl * 2s/(1+s) = 9.5% of the ttl; give 10% plus the default floor.
    assert_family_safe(|seed| skewed(seed, 0.10, Duration::from_millis(2)));
}

#[test]
fn mutant_drift_allowance_half_the_clock_edge_is_caught() {
    // The edge scenarios (clocks 0.995% apart) with half the allowance they need: shows that
    // they are sharp enough for `safety_holds_with_every_clock_at_the_edge_of_the_drift_
    // allowance` (tests/safety.rs) to mean something.
    assert_caught("drift 0.5% at the clock edge", |seed| {
        clock_edge(seed, 0.005)
    });
}

#[test]
fn mutant_restart_without_delay_is_caught() {
    assert_caught("restart without delay, quarantine off", |seed| {
        crashy(seed, Some(Duration::ZERO), |b| b.restart_quarantine(None))
    });
}

#[test]
fn correct_core_is_safe_with_delayed_restarts() {
    assert_family_safe(|seed| crashy(seed, None, |b| b));
}

/// The restart quarantine (docs/safety.md, "Restart quarantine") turns the restart delay from an assumption into
/// a property: the family whose negative control above is caught within the mutant budget
/// is safe over that whole budget with the quarantine on.
#[test]
fn correct_core_quarantines_restarts_without_delay() {
    for seed in 0..MUTANT_BUDGET {
        assert_safe(crashy(seed, Some(Duration::ZERO), |b| {
            b.restart_quarantine(Some(RestartQuarantine::default()))
        }));
    }
}

#[test]
fn mutant_forget_run_id_is_caught() {
    assert_caught("ForgetRunId", |seed| {
        crashy_stepped(seed, |b| {
            b.restart_quarantine(Some(RestartQuarantine::default()))
                .mutant(Mutant::ForgetRunId)
        })
    });
}

#[test]
fn correct_core_quarantines_restarts_whose_uptime_was_stepped() {
    for seed in 0..MUTANT_BUDGET {
        assert_safe(crashy_stepped(seed, |b| {
            b.restart_quarantine(Some(RestartQuarantine::default()))
        }));
    }
}

#[test]
fn mutant_resurrecting_extend_is_caught() {
    assert_caught("ResurrectingExtend", |seed| {
        late_extend(seed, |b| b.mutant(Mutant::ResurrectingExtend))
    });
}

#[test]
fn correct_core_is_safe_with_late_extensions() {
    assert_family_safe(|seed| late_extend(seed, |b| b));
}

#[test]
fn mutant_validity_from_quorum_is_caught() {
    assert_caught("ValidityFromQuorum", |seed| {
        slow_network(seed, |b| b.mutant(Mutant::ValidityFromQuorum))
    });
}

#[test]
fn correct_core_is_safe_on_a_slow_network() {
    assert_family_safe(|seed| slow_network(seed, |b| b));
}

#[test]
fn mutant_shared_stored_value_is_caught_across_attempts() {
    // Each lock call supplies its own token, so only the attempts of one call share a value.
    // The correct core passes this family: tests/late_delivery.rs.
    assert_caught("SharedStoredValue, a token per call", |seed| {
        late_delivery(seed, Some(SuppliedToken::PerCall), |b| {
            b.mutant(Mutant::SharedStoredValue)
        })
    });
}

#[test]
fn mutant_shared_stored_value_is_caught_across_calls() {
    // Every call of a client supplies the same token; caught only by a violation in which a
    // late release written by an earlier call deleted the first holder's key.
    let family = |seed| {
        late_delivery(seed, Some(SuppliedToken::PerClient), |b| {
            b.mutant(Mutant::SharedStoredValue)
        })
    };
    let found = (0..MUTANT_BUDGET).find_map(|seed| {
        let scenario = family(seed);
        let report = Sim::new(scenario.clone()).run();
        let release = late_releases(scenario, &report)
            .into_iter()
            .find(|r| r.from_earlier_call)?;
        Some((report, release))
    });
    let Some((report, release)) = found else {
        panic!("SharedStoredValue across calls was not caught within {MUTANT_BUDGET} seeds");
    };
    let v = report
        .violation
        .expect("late releases come from a violating run");
    println!(
        "mutant SharedStoredValue across calls: first failing seed {} of budget \
         {MUTANT_BUDGET}: {v}\nlate release of an earlier call: {}",
        report.seed, release.line
    );
}

/// `scenario` on Valkey 9.1 nodes (native `DELIFEQ` and `SET IFEQ`), with `mutant` in
/// their model if given.
fn on_valkey_9(mut scenario: Scenario, mutant: Option<NodeMutant>) -> Scenario {
    let mut valkey = ServerProfile::VALKEY_9_1;
    valkey.mutant = mutant;
    scenario.servers = vec![valkey];
    scenario
}

#[test]
fn node_mutant_delifeq_that_does_not_compare_is_caught() {
    // A holder past its deadline releases with `DELIFEQ`: a node that deletes whatever the
    // key holds frees the next holder's lock for a third client.
    assert_caught("node DELIFEQ unchecked", |seed| {
        on_valkey_9(contention(seed, |b| b), Some(NodeMutant::DelIfEqUnchecked))
    });
}

#[test]
fn correct_core_is_safe_on_native_nodes() {
    let mut native = 0;
    for seed in 0..family_count() {
        native += assert_safe(on_valkey_9(late_extend(seed, |b| b), None))
            .stats
            .native;
        native += assert_safe(on_valkey_9(contention(seed, |b| b), None))
            .stats
            .native;
    }
    assert!(
        native > 0,
        "no native command ran: the families above test nothing new"
    );
}
