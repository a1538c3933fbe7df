//! The lock kinds (docs/kinds.md) driven by the simulation: the kinds family
//! (`common/kinds.rs`) under crashes, cuts, pauses and clock rates within the allowance,
//! where the correct core keeps every property of the checker (no overlapping exclusive
//! sets, no writer beside another holder, never more than k permit holders nor holders
//! disagreeing on k, fencing); each of the kinds' mutants (the design's list, "Mutants that
//! must be caught") caught within a seed budget; and the kinds' liveness: a writer is not
//! starved by arriving readers, a semaphore keeps its permits in use.

mod common;

use std::time::Duration;

use common::{Broken, Stress, broken, kinds, late_readers};
use redlock_core::{AcquireFailure, Mutant, RetryPolicy};
use redlock_sim::{
    Conflict, HoldKind, Interval, KindMix, Report, Resources, Scenario, Sim, SimTime,
};

/// Seeds each mutant may look at before it counts as not caught.
const KINDS_MUTANT_BUDGET: u64 = 100;

/// Seeds per stress on which the correct core must keep every property.
const KINDS_BUDGET: u64 = 100;

/// A waiting writer may see the resource pass to a new generation of readers at most this
/// many times before it acquires (docs/kinds.md, "Reader-writer lock": writer preference).
/// Its mark keeps new readers out; a generation gets in only where no mark lives: before
/// its first attempt failed, or after another writer took the resource (which deletes the
/// mark) and before its next attempt sets it again. Seen at most 9 times in 200 seeds.
const READER_HANDOFFS_PAST_A_WRITER: usize = 16;

/// The run of `scenario`, and the first property it broke.
fn run(scenario: &Scenario) -> (Report, Option<Broken>) {
    let report = Sim::new(scenario.clone()).run();
    assert_eq!(
        report.stats.bad_requests, 0,
        "seed {}: malformed request",
        report.seed
    );
    let broken = broken(scenario, &report);
    (report, broken)
}

/// The first seed of `family` whose run breaks mutual exclusion with `conflict` (compared
/// by variant), within [`KINDS_MUTANT_BUDGET`]; panics if none does, prints it otherwise.
fn assert_caught(name: &str, family: impl Fn(u64) -> Scenario, conflict: fn(&Conflict) -> bool) {
    for seed in 0..KINDS_MUTANT_BUDGET {
        let (report, broken) = run(&family(seed));
        if let Some(Broken::Safety(v)) = broken.filter(|b| matches!(b, Broken::Safety(_))) {
            assert!(conflict(&v.conflict), "mutant {name}: another break: {v}");
            println!(
                "mutant {name}: first failing seed {} of budget {KINDS_MUTANT_BUDGET}: {v}",
                report.seed
            );
            return;
        }
    }
    panic!("mutant {name} was not caught within {KINDS_MUTANT_BUDGET} seeds");
}

/// Every seed of `0..budget` of `family` keeps every property; prints the runs and the
/// holds of each kind they made.
fn assert_kept(what: &str, budget: u64, family: impl Fn(u64) -> Scenario) -> Vec<Report> {
    let mut failures = Vec::new();
    let mut reports = Vec::new();
    for seed in 0..budget {
        let (report, broken) = run(&family(seed));
        if let Some(b) = broken {
            failures.push(b.to_string());
        }
        reports.push(report);
    }
    let holds = reports.iter().flat_map(|r| r.checker.intervals());
    let count = |kind: fn(&Interval) -> bool| holds.clone().filter(|iv| kind(iv)).count();
    println!(
        "{what}: {budget} runs, {} violations; holds: {} exclusive of one resource, {} of a \
         set, {} readers, {} writers, {} permits",
        failures.len(),
        count(|iv| iv.kind == HoldKind::Exclusive && iv.more.is_empty()),
        count(|iv| !iv.more.is_empty()),
        count(|iv| iv.kind == HoldKind::Reader),
        count(|iv| iv.kind == HoldKind::Writer),
        count(|iv| matches!(iv.kind, HoldKind::Permit(_))),
    );
    assert!(
        failures.is_empty(),
        "{what}: {} of {budget} runs broke a property; the first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    reports
}

#[test]
fn correct_core_keeps_every_property_of_every_kind_under_faults() {
    for stress in Stress::ALL {
        let reports = assert_kept(&format!("{stress:?}"), KINDS_BUDGET, |seed| {
            kinds(seed, stress, |b| b)
        });
        let holds = reports.iter().flat_map(|r| r.checker.intervals());
        let faults: u32 = reports
            .iter()
            .map(|r| r.stats.crashes + r.stats.pauses + r.stats.cuts)
            .sum();
        assert!(faults > 100, "{stress:?}: only {faults} faults");
        let expected: &[fn(&Interval) -> bool] = match stress {
            Stress::Multi => &[|iv| !iv.more.is_empty(), |iv| iv.more.is_empty()],
            Stress::ReadWrite => &[
                |iv| iv.kind == HoldKind::Reader,
                |iv| iv.kind == HoldKind::Writer,
            ],
            Stress::Semaphore => &[|iv| matches!(iv.kind, HoldKind::Permit(_))],
            Stress::Mixed => &[
                |iv| !iv.more.is_empty(),
                |iv| iv.kind == HoldKind::Reader,
                |iv| iv.kind == HoldKind::Writer,
                |iv| matches!(iv.kind, HoldKind::Permit(_)),
            ],
        };
        for (i, kind) in expected.iter().enumerate() {
            let n = holds.clone().filter(|iv| kind(iv)).count();
            assert!(n > 20, "{stress:?}: only {n} holds of the kind {i}");
        }
    }
}

#[test]
fn correct_core_keeps_every_property_with_readers_extending_late() {
    assert_kept("late readers", KINDS_BUDGET, |seed| {
        late_readers(seed, |b| b)
    });
}

#[test]
fn mutant_multi_first_key_vote_is_caught() {
    assert_caught(
        "MultiFirstKeyVote",
        |seed| kinds(seed, Stress::Multi, |b| b.mutant(Mutant::MultiFirstKeyVote)),
        |c| matches!(c, Conflict::Exclusive),
    );
}

#[test]
fn mutant_semaphore_majority_is_caught() {
    assert_caught(
        "SemaphoreMajority",
        |seed| {
            kinds(seed, Stress::Semaphore, |b| {
                b.mutant(Mutant::SemaphoreMajority)
            })
        },
        |c| matches!(c, Conflict::OverPermits { .. }),
    );
}

#[test]
fn mutant_semaphore_off_by_one_is_caught() {
    assert_caught(
        "SemAcquireOffByOne",
        |seed| {
            kinds(seed, Stress::Semaphore, |b| {
                b.mutant(Mutant::SemAcquireOffByOne)
            })
        },
        |c| matches!(c, Conflict::OverPermits { .. }),
    );
}

#[test]
fn mutant_writer_ignoring_readers_is_caught() {
    assert_caught(
        "WriteAcquireIgnoresReaders",
        |seed| {
            kinds(seed, Stress::ReadWrite, |b| {
                b.mutant(Mutant::WriteAcquireIgnoresReaders)
            })
        },
        |c| matches!(c, Conflict::WriterAndReader),
    );
}

#[test]
fn mutant_reader_extension_that_resurrects_is_caught() {
    assert_caught(
        "ReadExtendResurrects",
        |seed| late_readers(seed, |b| b.mutant(Mutant::ReadExtendResurrects)),
        |c| matches!(c, Conflict::WriterAndReader),
    );
}

/// The negative scenario of the semaphore's k: client 0 asks every semaphore for one
/// permit more than the others do. The core refuses it (`PermitsMismatch`) where holders
/// of the other k are in place, and no holder is ever admitted beside holders of another k.
#[test]
fn a_client_asking_another_k_is_refused_and_never_admitted_beside_the_others() {
    let family = |seed| {
        let mut s = kinds(seed, Stress::Semaphore, |b| b);
        s.workload.kinds.other_k_client = Some(0);
        s.workload.ops_per_client = 6;
        s
    };
    let reports = assert_kept("another k", KINDS_BUDGET, family);
    let refused = (reports.iter().flat_map(|r| r.checker.ops()))
        .filter(|op| matches!(op.failed, Some(AcquireFailure::PermitsMismatch { .. })))
        .count();
    let odd = (reports.iter().flat_map(|r| r.checker.intervals()))
        .filter(|iv| iv.client == 0)
        .count();
    println!("another k: {refused} calls refused with PermitsMismatch, {odd} holds by client 0");
    assert!(refused > 10, "only {refused} refusals");
}

/// Readers arrive without a pause (3 to 6 clients of 2 tasks each, reading nine calls in
/// ten, holds up to half the validity) on one resource: each writer acquires, and while it
/// waits the resource passes to a new generation of readers at most
/// [`READER_HANDOFFS_PAST_A_WRITER`] times (its mark keeps new readers out: writer
/// preference; the generations it sees come in the gaps other writers leave).
#[test]
fn a_writer_behind_arriving_readers_acquires_within_a_bound_of_handoffs() {
    let (mut writers, mut most, mut total, mut readers) = (0, 0, 0, 0);
    for seed in 0..40 {
        let s = arriving_readers(seed);
        let (report, broken) = run(&s);
        assert!(broken.is_none(), "{}", broken.expect("checked"));
        let ops = report.checker.ops();
        let holds = report.checker.intervals();
        for op in ops.iter().filter(|op| op.kind == HoldKind::Writer) {
            let acquired = (holds.iter()).find(|iv| (iv.client, iv.op) == (op.client, op.op));
            let Some(held) = acquired else {
                panic!("seed {seed}: a writer never acquired: {op:?}");
            };
            let handed = reader_handoffs(holds, op.started_at, held);
            writers += 1;
            total += handed;
            most = most.max(handed);
        }
        readers += holds
            .iter()
            .filter(|iv| iv.kind == HoldKind::Reader)
            .count();
    }
    println!(
        "writer preference: {writers} writers beside {readers} readers; reader generations \
         while one waited: at most {most}, {:.2} on average",
        total as f64 / f64::from(writers.max(1))
    );
    assert!(writers > 50, "only {writers} writers");
    assert!(
        most <= READER_HANDOFFS_PAST_A_WRITER,
        "a writer waited while the readers took the resource {most} times"
    );
}

/// [`a_writer_behind_arriving_readers_acquires_within_a_bound_of_handoffs`]'s scenario: no faults.
fn arriving_readers(seed: u64) -> Scenario {
    let mut s = kinds(seed, Stress::ReadWrite, |b| {
        b.retry(RetryPolicy {
            max_attempts: None,
            max_wait: Some(Duration::from_secs(10)),
            ..RetryPolicy::default()
        })
    });
    s.faults.every = None;
    s.clock_skew = 0.0;
    s.workload.tasks = 2;
    s.workload.kinds.read = 9;
    s.workload.kinds.write = 1;
    s.workload.ops_per_client = 15;
    s.workload.hold = (0.1, 0.5);
    s.workload.think = (Duration::ZERO, Duration::from_millis(2));
    s.workload.extend_chance = 0.0;
    s.workload.auto_extend_chance = 0.0;
    s.workload.cancel_chance = 0.0;
    s.time_limit = Duration::from_secs(30);
    s
}

/// A semaphore of k permits with more contenders than k keeps its permits in use: the
/// average number of holders over the time someone held or wanted one (reported; the
/// only assertion is that permits were held and never more than k at once).
#[test]
fn a_semaphore_with_more_contenders_keeps_its_permits_in_use() {
    let mut shares = Vec::new();
    for seed in 0..20 {
        let mut s = kinds(seed, Stress::Semaphore, |b| b);
        s.faults.every = None;
        s.clients = 6;
        s.workload.kinds = KindMix {
            semaphores: 1,
            ..s.workload.kinds
        };
        s.workload.ops_per_client = 8;
        s.resources = Resources::Shared(1);
        let k = s.workload.kinds.permits;
        let (report, broken) = run(&s);
        assert!(broken.is_none(), "{}", broken.expect("checked"));
        let holds = report.checker.intervals();
        let ops = report.checker.ops();
        let (Some(from), Some(to)) = (
            ops.iter().map(|op| op.started_at).min(),
            holds.iter().map(|iv| iv.end).max(),
        ) else {
            continue;
        };
        let held: f64 = holds.iter().map(|iv| span(iv.start, iv.end)).sum();
        let busy = span(from, to);
        if busy > 0.0 {
            shares.push((k, held / busy));
        }
    }
    assert!(!shares.is_empty(), "no semaphore was ever held");
    let average = shares.iter().map(|(_, h)| h).sum::<f64>() / shares.len() as f64;
    let of_k = shares.iter().map(|(k, h)| h / f64::from(*k)).sum::<f64>() / shares.len() as f64;
    println!(
        "semaphore use: {} runs, {average:.2} permits held on average, {:.0}% of k",
        shares.len(),
        of_k * 100.0
    );
    assert!(average > 0.0);
}

/// How many times the resource of `writer` passed to a new generation of readers while
/// it waited (from `called` to its start): the groups of overlapping holds of others that
/// began in that time with a reader.
fn reader_handoffs(holds: &[Interval], called: SimTime, writer: &Interval) -> usize {
    let me = (writer.client, writer.op);
    let mut others: Vec<&Interval> = (holds.iter())
        .filter(|iv| iv.resource == writer.resource && (iv.client, iv.op) != me)
        .filter(|iv| iv.end > called && iv.start < writer.start)
        .collect();
    others.sort_by_key(|iv| iv.start);
    let (mut generations, mut reach) = (0, called);
    for iv in others {
        let new_group = iv.start >= reach && iv.start > called;
        generations += usize::from(new_group && iv.kind == HoldKind::Reader);
        reach = reach.max(iv.end);
    }
    generations
}

/// Seconds from `a` to `b` (zero if `b` is not later).
fn span(a: SimTime, b: SimTime) -> f64 {
    b.since_start()
        .saturating_sub(a.since_start())
        .as_secs_f64()
}
