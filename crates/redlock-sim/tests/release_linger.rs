//! A release returns once a quorum has answered and finishes on the
//! other nodes in the background, sending again on the next connection where one broke.
//! Property: no released key outlives its release by more than the release timeout on a
//! node the client can reach ([`redlock_sim::Linger`]), and safety is unchanged. The
//! negative control (`Mutant::ReleaseNotFinished`: the round dropped at the decision) leaves
//! keys behind on the same family.
mod common;

use std::time::Duration;

use common::{MUTANT_BUDGET, family_count, servers};
use redlock_core::{Config, Mutant, RetryPolicy};
use redlock_sim::{Dice, FaultKnobs, HoldKind, KindMix, Report, Resources, Scenario, Sim};

/// Locks held well within their ttl on 3 or 5 nodes, while links are cut (the client
/// reconnects within a few milliseconds), nodes pause briefly and script caches are
/// flushed, every 10 to 40 ms. The keys' ttl is far above the release timeout, so a key a
/// release left behind is still there when its deadline has passed.
fn cuts_and_pauses(seed: u64, mutant: Option<Mutant>) -> Scenario {
    let mut d = Dice::new(seed ^ 0x0e1e_a5e0);
    let nodes = [3, 5][d.index(2)];
    let (profiles, native) = servers(seed, nodes);
    let mut builder = Config::builder(nodes)
        .ttl(ms(2_000))
        .attempt_timeout(ms(30))
        .release_timeout(RELEASE_TIMEOUT)
        .reconnect_backoff(ms(1), ms(5))
        .native_commands(native)
        .retry(RetryPolicy {
            max_attempts: Some(20),
            max_wait: None,
            delay_min: ms(2),
            delay_max: ms(10),
        });
    if let Some(mutant) = mutant {
        builder = builder.mutant(mutant);
    }
    let mut s = Scenario::new(seed, builder.build().expect("valid config"));
    s.servers = profiles;
    s.clients = d.range(2, 4) as usize;
    s.resources = Resources::Shared(2);
    s.workload.ops_per_client = 8;
    s.workload.ttl = (ms(1_500), ms(2_500));
    s.workload.hold = (0.01, 0.1);
    s.workload.think = (ms(0), ms(20));
    s.network.latency_max = d.duration(ms(1), ms(3));
    s.faults = FaultKnobs {
        every: Some((ms(10), ms(40))),
        pause_weight: 1,
        cut_weight: 4,
        crash_weight: 0,
        flush_weight: 1,
        pause: (ms(5), ms(60)),
        ..FaultKnobs::default()
    };
    s.release_linger = Some(GRACE);
    s.time_limit = ms(8_000);
    s
}

#[test]
fn released_keys_are_gone_from_reachable_nodes_by_the_release_deadline() {
    let mut releases_checked = 0;
    for seed in 0..family_count() {
        let report = run(cuts_and_pauses(seed, None));
        if let Some(v) = &report.violation {
            panic!("property (S) broken: {v}");
        }
        if let Some(linger) = &report.linger {
            panic!("{linger}");
        }
        releases_checked += released(&report);
    }
    // The property looked at something: releases of held locks happened.
    assert!(releases_checked > 100, "{releases_checked} releases");
}

#[test]
fn mutant_release_not_finished_leaves_keys_behind() {
    let found = (0..MUTANT_BUDGET)
        .map(|seed| run(cuts_and_pauses(seed, Some(Mutant::ReleaseNotFinished))))
        .find(|r| r.linger.is_some());
    let Some(report) = found else {
        panic!("ReleaseNotFinished left no key behind within {MUTANT_BUDGET} seeds");
    };
    let linger = report.linger.expect("found by its linger");
    println!(
        "mutant ReleaseNotFinished: first failing seed {}: {linger}",
        report.seed
    );
}

/// The release check reads every kind's keys (release_watch.rs): on the same family with
/// every kind of lock, the round dropped at the decision (`Mutant::ReleaseNotFinished`)
/// leaves a multi-lock's keys, a reader's slot and a permit holder's slot behind, each found;
/// the correct core leaves nothing on the same seeds.
#[test]
fn every_kind_left_behind_by_an_unfinished_release_is_found() {
    let with_kinds = |seed, mutant| {
        let mut s = cuts_and_pauses(seed, mutant);
        s.resources = Resources::Shared(3);
        s.workload.kinds = KindMix::every_kind();
        s
    };
    // Mutex, multi-lock, reader, writer, permit.
    let mut found = [0usize; 5];
    for seed in 0..MUTANT_BUDGET {
        let report = run(with_kinds(seed, Some(Mutant::ReleaseNotFinished)));
        let Some(linger) = &report.linger else {
            continue;
        };
        let ops = report.checker.ops();
        let op = ops
            .iter()
            .find(|r| (r.client, r.op) == (linger.client, linger.op));
        if let Some(op) = op {
            found[match op.kind {
                HoldKind::Exclusive if op.more.is_empty() => 0,
                HoldKind::Exclusive => 1,
                HoldKind::Reader => 2,
                HoldKind::Writer => 3,
                HoldKind::Permit(_) => 4,
            }] += 1;
        }
    }
    println!("unfinished releases left behind (mutex, set, reader, writer, permit): {found:?}");
    for (what, i) in [("multi-lock", 1), ("reader", 2), ("permit", 4)] {
        assert!(found[i] > 0, "no {what} left behind was found");
    }
    for seed in 0..MUTANT_BUDGET {
        let report = run(with_kinds(seed, None));
        if let Some(linger) = &report.linger {
            panic!("the correct core left a key behind: {linger}");
        }
        if let Some(v) = &report.violation {
            panic!("property (S) broken: {v}");
        }
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

/// Operations that were released after being held.
fn released(report: &Report) -> usize {
    let ops = report.checker.ops();
    ops.iter()
        .filter(|r| r.stored.is_some() && r.released)
        .count()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Far above the LAN's round trip and a reconnect, far below the keys' ttl.
const RELEASE_TIMEOUT: Duration = Duration::from_millis(300);
/// A node counts as reachable if its link has been open for this long before the release's
/// deadline: a reconnect within the backoff (at most 5 ms) and the doubling resend delay
/// after it (below twice the time the link was down) fit in it.
const GRACE: Duration = Duration::from_millis(100);
