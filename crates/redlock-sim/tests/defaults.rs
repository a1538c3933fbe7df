//! The defaults family (`common/defaults.rs`): the library as a user gets it, every default
//! on, assuming nothing the client says it checks. It found four defects where the
//! defaults meet, each by a property of its own, on the core before they were fixed; each
//! detection below now runs against the mutant that puts that defect back (the old
//! behaviour, `redlock_core::Mutant`), with the seed budget it must be found in. A fifth,
//! which the fuzzer found first (a hand-over past the new call's ttl), it finds too since
//! the checker compares each validity with the ttl asked for. The correct core keeps every
//! property over the whole budget.

mod common;

use std::time::Duration;

use common::{
    Broken, DEFAULTS_BUDGET, Emphasis, Found, broken, defaults, defaults_changed, defaults_with,
    first_broken,
};
use redlock_core::{AcquireFailure, ConfigBuilder, Mutant, NodeFault};
use redlock_sim::{HoldKind, KindMix, Scenario, Sim};

/// Seeds each detection may look at.
const DETECTION_BUDGET: u64 = 200;

/// Seeds of the kinds emphasis on which the correct core must keep every property.
const KINDS_BUDGET: u64 = 200;

/// Defect 1: a fencing token goes backwards after one empty restart. The restart
/// quarantine keeps a restarted node's votes out for the ttl and its drift, but its fencing
/// counter restarts at the floor of its wall clock's second: within that second, a quorum
/// of restarted nodes (or of restarted nodes and nodes behind) hands out a token below one
/// already issued. Caught by `fencing_violation`.
fn fencing_backwards(family: impl Fn(u64) -> Scenario) -> Option<Found> {
    first_broken(DETECTION_BUDGET, family, |_, b| {
        matches!(b, Broken::Fencing(_))
    })
}

/// Defect 2: a waiter of another client never gets the lock while a client whose line
/// holds several calls hands it from one call to the next. The line yields only when it is
/// contested, and a native release (`DELIFEQ`, `DELEX`) never says that someone waits: its
/// `PUBLISH`'s answer is not read. Caught by the bounded-hand-offs starvation, on nodes
/// where every waiter can subscribe.
fn starved_behind_native_releases(family: impl Fn(u64) -> Scenario) -> Option<Found> {
    first_broken(DETECTION_BUDGET, family, |s, b| {
        matches!(b, Broken::Starved(_)) && s.servers.iter().all(|p| p.channels)
    })
}

/// Defect 2, the other way in: a waiter that never subscribes (release notifications off)
/// is never counted, whatever the release command, and waits on its retry timer: only a
/// line's courtesy hand-off lets it in. (A waiter that would subscribe but cannot, on nodes
/// that deny every channel, polls instead: waiters/mod.rs in the core, `UNHEARD_POLL_EVERY`,
/// and a line's hand-off through the nodes lets it in too.)
fn starved_without_subscription(family: impl Fn(u64) -> Scenario) -> Option<Found> {
    first_broken(DETECTION_BUDGET, family, |s, b| {
        matches!(b, Broken::Starved(_)) && s.config.release_notifications().is_none()
    })
}

/// Defect 3: the stepped-uptime defence compares the new process's start with the moment
/// the node was last seen, which is when the connection's `INFO` was read: a connection
/// older than the step takes a restart for an old one, no quarantine, and its grant forms
/// a second quorum. Caught by `violation` (two holders).
fn restart_missed_behind_stepped_uptime(family: impl Fn(u64) -> Scenario) -> Option<Found> {
    first_broken(DETECTION_BUDGET, family, |_, b| {
        matches!(b, Broken::Safety(_))
    })
}

/// Defect 4: a release refused after it was decided is never sent again. Until a node's
/// first `HELLO` reply is read the client probes it with native commands; on a node
/// without `DELIFEQ` whose replies are slow, the refusal arrives after the release was
/// decided at its quorum, and the script never follows: the key stays for its ttl. Caught by
/// the release check (`release_linger`).
fn refused_release_left_behind(family: impl Fn(u64) -> Scenario) -> Option<Found> {
    first_broken(DETECTION_BUDGET, family, |_, b| {
        matches!(b, Broken::Linger(_))
    })
}

/// A defect the fuzzer found first (fuzz/, `client_inputs`): a hand-over to a call that
/// asked for a shorter ttl than the holder's told it a validity above its own ttl, and left
/// it keys that outlive that ttl. Caught by `validity_beyond_ttl`.
fn validity_past_ttl(family: impl Fn(u64) -> Scenario) -> Option<Found> {
    first_broken(DETECTION_BUDGET, family, |_, b| {
        matches!(b, Broken::OverTtl(_))
    })
}

/// The family with `mutant` and `emphasis`.
fn mutated(mutant: Mutant, emphasis: Emphasis) -> impl Fn(u64) -> Scenario {
    move |seed| defaults_with(seed, emphasis, Some(mutant))
}

#[test]
fn finds_fencing_backwards_with_the_ttl_window() {
    let found = fencing_backwards(mutated(Mutant::FenceWindowTtlOnly, Emphasis::Restart))
        .expect("no token went backwards within the budget");
    show("fencing token backwards (defect 1)", &found);
    let Broken::Fencing(v) = &found.broken else {
        unreachable!("the detection keeps fencing breaks only")
    };
    let later = v
        .later
        .as_ref()
        .expect("two holds, not a hold without a token");
    let (earlier, later) = (token(v.earlier.fencing_token), token(later.fencing_token));
    assert_eq!(
        earlier >> 20,
        later >> 20,
        "both tokens come from the floor of one second"
    );
    assert!(found.report.stats.crashes > 0, "after a restart");
}

/// The family with `mutant` and `emphasis`, without the waiters' queue: a line deaf to
/// waiters starves only those that wait outside it (the queue's order keeps their turn even
/// from a deaf line's hand-offs through the nodes, docs/design.md, "The waiters' queue"); a
/// user may turn it off, and nodes that refuse its script put a client back outside it.
fn mutated_without_queue(mutant: Mutant, emphasis: Emphasis) -> impl Fn(u64) -> Scenario {
    move |seed| defaults_changed(seed, emphasis, Some(mutant), |b| b.waiter_queue(None))
}

#[test]
fn finds_waiter_starved_behind_native_releases_with_a_deaf_line() {
    let family = mutated_without_queue(Mutant::LineDeafToWaiters, Emphasis::Queued);
    let found =
        starved_behind_native_releases(family).expect("no waiter starved within the budget");
    show("waiter starved behind native releases (defect 2)", &found);
    let natives = (found.scenario.servers.iter()).filter(|p| p.delifeq || p.delex);
    assert!(
        natives.count() >= found.scenario.config.quorum(),
        "a quorum of nodes releases natively"
    );
}

#[test]
fn finds_waiter_starved_without_subscription_with_a_deaf_line() {
    let family = move |seed| {
        let quiet = |b: ConfigBuilder| b.waiter_queue(None).release_notifications(None);
        defaults_changed(
            seed,
            Emphasis::Queued,
            Some(Mutant::LineDeafToWaiters),
            quiet,
        )
    };
    let found = starved_without_subscription(family).expect("no waiter starved within the budget");
    show("waiter that cannot subscribe starved (defect 2)", &found);
}

#[test]
fn finds_restart_missed_behind_stepped_uptime_with_the_sighting_at_connection() {
    let family = mutated(Mutant::SightingAtConnection, Emphasis::Restart);
    let found =
        restart_missed_behind_stepped_uptime(family).expect("no two holders within the budget");
    show("restart missed behind a stepped uptime (defect 3)", &found);
    let step = found.scenario.faults.restart_uptime_ahead;
    assert!(
        step > Duration::ZERO && step < Duration::from_secs(3_600),
        "an uptime stepped by less than the connections' age ({step:?})"
    );
    assert!(
        found.scenario.workload.start_after >= step,
        "connections older than the step"
    );
}

#[test]
fn finds_refused_release_left_behind_when_late_refusals_are_dropped() {
    let family = mutated(Mutant::LateRefusalDropped, Emphasis::Fresh);
    let found = refused_release_left_behind(family).expect("no key left behind within the budget");
    show("refused release left behind (defect 4)", &found);
    let Broken::Linger(linger) = &found.broken else {
        unreachable!("the detection keeps lingers only")
    };
    let slow = found
        .scenario
        .slow_links
        .iter()
        .any(|l| l.node == linger.node);
    assert!(slow, "the key is on a node behind a slow link");
    assert!(
        found.report.stats.native_refused > 0,
        "a native command was refused"
    );
    let node = found.scenario.server(linger.node);
    assert!(!node.delifeq, "the node has no DELIFEQ ({node:?})");
}

#[test]
fn finds_validity_past_the_ttl_asked_for_with_an_uncapped_hand_over() {
    let family = mutated(Mutant::HandOverPastTtl, Emphasis::Queued);
    let found = validity_past_ttl(family).expect("no validity above its ttl within the budget");
    show("validity above the ttl asked for (hand-over)", &found);
}

/// Every property, the whole budget of `emphasis`: the correct core breaks none.
fn assert_every_property_kept(emphasis: Emphasis) {
    let mut failures = Vec::new();
    for seed in 0..DEFAULTS_BUDGET {
        let scenario = defaults(seed, emphasis);
        let report = Sim::new(scenario.clone()).run();
        if let Some(broken) = broken(&scenario, &report) {
            failures.push(format!("{emphasis:?} {broken}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {DEFAULTS_BUDGET} runs broke a property; the first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[test]
fn correct_core_keeps_every_property_with_every_default_on_across_restarts() {
    assert_every_property_kept(Emphasis::Restart);
}

#[test]
fn correct_core_keeps_every_property_with_every_default_on_with_queued_calls() {
    assert_every_property_kept(Emphasis::Queued);
}

/// Release notifications off (a user may turn them off): every waiter waits on its timer,
/// the queue's waiters polling (waiters/mod.rs in the core, `UNHEARD_POLL_EVERY`); with the
/// queue on and off, the correct core keeps every property, as the deaf line's control
/// needs (`finds_waiter_starved_without_subscription_with_a_deaf_line`).
#[test]
fn correct_core_keeps_every_property_with_release_notifications_off() {
    let mut failures = Vec::new();
    for seed in 0..DETECTION_BUDGET {
        let queue = seed % 2 == 0;
        let quiet = |b: ConfigBuilder| {
            let b = b.release_notifications(None);
            if queue { b } else { b.waiter_queue(None) }
        };
        let scenario = defaults_changed(seed, Emphasis::Queued, None, quiet);
        let report = Sim::new(scenario.clone()).run();
        if let Some(broken) = broken(&scenario, &report) {
            failures.push(format!("queue {queue}: {broken}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn correct_core_keeps_every_property_with_every_default_on_with_fresh_clients() {
    assert_every_property_kept(Emphasis::Fresh);
}

/// Every property over [`KINDS_BUDGET`] seeds of the kinds emphasis. Among them, a node
/// that restarted empty has lost the kinds' release scripts, and its `-NOSCRIPT` may come
/// after the release's round stopped waiting: the client then still sends the release as
/// `EVAL` (client.rs, `answer`), or the key or slot would stay until its ttl (seed 29 did,
/// before it did).
#[test]
fn correct_core_keeps_every_property_with_every_default_on_with_every_kind() {
    let mut failures = Vec::new();
    for seed in 0..KINDS_BUDGET {
        let scenario = defaults(seed, Emphasis::Kinds);
        let report = Sim::new(scenario.clone()).run();
        if let Some(broken) = broken(&scenario, &report) {
            failures.push(format!("{broken}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {KINDS_BUDGET} runs broke a property; the first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

/// The kinds emphasis takes every kind, with restarts that its quarantine refuses and
/// fenced mutexes beside the other kinds.
#[test]
fn the_kinds_emphasis_exercises_every_kind_across_restarts() {
    let mut seen = [0usize; 5];
    let (mut crashes, mut quarantined, mut fenced) = (0, 0, 0);
    for seed in 0..20 {
        let report = Sim::new(defaults(seed, Emphasis::Kinds)).run();
        for iv in report.checker.intervals() {
            seen[kind_index(iv.kind, iv.more.is_empty())] += 1;
            fenced += usize::from(iv.fencing_token.is_some());
        }
        crashes += report.stats.crashes as usize;
        quarantined += (report.checker.ops().iter())
            .filter(|r| quarantine_refused(r.failed.as_ref()))
            .count();
    }
    println!(
        "kinds emphasis: holds (mutex, set, reader, writer, permit) {seen:?}; {crashes} crashes, {quarantined} calls refused for a quarantined node, {fenced} fenced holds"
    );
    for (what, n) in ["mutexes", "multi-locks", "readers", "writers", "permits"]
        .iter()
        .zip(seen)
    {
        assert!(n > 20, "only {n} {what}");
    }
    assert!(crashes > 20 && quarantined > 5 && fenced > 10);
}

/// The family does what it says on runs that break nothing as well as on those that do:
/// empty restarts at once, stepped uptimes, late clients, queued calls, fenced tokens,
/// native commands and refused probes behind slow links; and a seed replays exactly.
#[test]
fn the_family_exercises_every_default() {
    let (mut crashes, mut stepped, mut late, mut queued, mut fenced) = (0, 0, 0, 0, 0);
    let (mut native, mut refused, mut spread, mut released) = (0, 0, 0, 0);
    // Where the fix is that the client refuses: calls that failed with a restarted node's
    // grant not counted.
    let mut quarantined = 0;
    for emphasis in Emphasis::ALL {
        for seed in 0..20 {
            let scenario = defaults(seed, emphasis);
            let report = Sim::new(scenario.clone()).run();
            let ops = report.checker.ops();
            let holds = report.checker.intervals();
            crashes += report.stats.crashes;
            if !scenario.faults.restart_uptime_ahead.is_zero() {
                stepped += report.stats.crashes;
            }
            late += ops.iter().filter(|r| r.client >= scenario.clients).count();
            queued += (ops.iter())
                .filter(|r| {
                    holds.iter().any(|iv| {
                        iv.client == r.client
                            && iv.resource == r.resource
                            && iv.start < r.started_at
                            && r.started_at < iv.end
                    })
                })
                .count();
            fenced += holds.iter().filter(|iv| iv.fencing_token.is_some()).count();
            native += report.stats.native;
            refused += report.stats.native_refused;
            spread += u32::from(!scenario.wall_spread.is_zero());
            released += ops.iter().filter(|r| r.released).count();
            quarantined += (ops.iter())
                .filter(|r| quarantine_refused(r.failed.as_ref()))
                .count();
            assert!(
                scenario.faults.restart_delay == (Duration::ZERO, Duration::ZERO),
                "restarts without delay"
            );
        }
    }
    let counts = [
        ("crashes", crashes as usize),
        ("crashes with a stepped uptime", stepped as usize),
        ("calls of late clients", late),
        ("calls queued behind their own client", queued),
        ("fenced holds", fenced),
        ("native commands", native as usize),
        ("native commands refused", refused as usize),
        ("scenarios with spread wall clocks", spread as usize),
        ("releases", released),
        ("calls refused for a quarantined node's grant", quarantined),
    ];
    for (what, n) in counts {
        assert!(n > 10, "only {n} {what}");
    }
    let again = |seed| Sim::new(defaults(seed, Emphasis::Restart)).run().trace_hash;
    assert_eq!(again(3), again(3), "a seed replays exactly");
}

/// Whether a call failed with a restarted node's grant not counted (its quarantine).
fn quarantine_refused(failed: Option<&AcquireFailure>) -> bool {
    match failed {
        Some(AcquireFailure::QuorumUnreachable { errors }) => errors
            .iter()
            .any(|(_, f)| matches!(f, NodeFault::Quarantined { .. })),
        _ => false,
    }
}

/// Prints what a detection found.
fn show(defect: &str, found: &Found) {
    println!(
        "{defect}: first failing seed {} of budget {DETECTION_BUDGET}, property {}: {}",
        found.report.seed,
        found.broken.property(),
        found.broken
    );
}

/// The fresh emphasis (slow links, clients created mid-run, release checks that read every
/// kind's keys) with every kind on a share of the calls: every property holds.
#[test]
fn correct_core_keeps_every_property_with_every_kind_on_fresh_clients() {
    for seed in 0..KINDS_BUDGET / 2 {
        let scenario = fresh_kinds(seed, None);
        let report = Sim::new(scenario.clone()).run();
        if let Some(broken) = broken(&scenario, &report) {
            panic!("the correct core broke a property: {broken}");
        }
    }
}

fn token(t: Option<u64>) -> u64 {
    t.expect("a fenced hold has a token")
}

/// The fresh emphasis (slow links, release checks) with every kind on a share of the calls
/// and `mutant`, if any.
fn fresh_kinds(seed: u64, mutant: Option<Mutant>) -> Scenario {
    let mut scenario = defaults_with(seed, Emphasis::Fresh, mutant);
    scenario.workload.kinds = KindMix::every_kind();
    scenario
}

/// Where a hold of `kind` (of one resource or several: `one`) counts in the tallies above:
/// mutex, multi-lock, reader, writer, permit.
fn kind_index(kind: HoldKind, one: bool) -> usize {
    match kind {
        HoldKind::Exclusive if one => 0,
        HoldKind::Exclusive => 1,
        HoldKind::Reader => 2,
        HoldKind::Writer => 3,
        HoldKind::Permit(_) => 4,
    }
}

/// The kinds' mutants on the kinds emphasis, every default on: a multi-lock taken key by
/// key, a semaphore's off-by-one and a writer that ignores readers each break mutual
/// exclusion (a kind's rule) within the detection budget. The majority quorum for a
/// semaphore and the reader's resurrecting extension need what this emphasis does not
/// give (holders on different subsets of nodes; extensions past the deadline):
/// tests/kinds.rs catches them on the kinds family.
#[test]
fn finds_kind_mutants_with_every_default_on() {
    for mutant in [
        Mutant::MultiFirstKeyVote,
        Mutant::SemAcquireOffByOne,
        Mutant::WriteAcquireIgnoresReaders,
    ] {
        let found = first_broken(
            DETECTION_BUDGET,
            mutated(mutant, Emphasis::Kinds),
            |_, b| matches!(b, Broken::Safety(_)),
        )
        .unwrap_or_else(|| panic!("{mutant:?} was not caught within the budget"));
        show(&format!("kind mutant {mutant:?}"), &found);
    }
}
