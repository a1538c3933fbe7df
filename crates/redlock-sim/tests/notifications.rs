//! Release notifications (docs/design.md, "Release notifications") under every fault on their way: lost, doubled, held back
//! (past the waiter's next attempt, or past its giving up), stalling their connection, never
//! subscribed; with cuts,
//! pauses and crashes dropping subscriptions. Safety (S) is unchanged, and the liveness
//! property holds: with contended workers that release often, no lock call starves (gives
//! up, or is still waiting at the end, although the lock was freed while it waited).
//!
//! The negative control shows the liveness check able to fail: waiters whose fallback
//! (retry delay, holder's expiry) is pushed past their patience starve as soon as the nodes
//! lose notifications, and do not when notifications arrive.

mod common;

use common::{Notify, assert_safe, family_count, notification_only, notified};
use redlock_sim::{Report, Sim, Stats};

/// Runs `family` on `seeds` seeds; panics on a violation of (S) or a starving call, and
/// returns the summed statistics.
fn assert_live(seeds: u64, family: impl Fn(u64) -> redlock_sim::Scenario) -> Stats {
    let mut sum = Stats::default();
    for seed in 0..seeds {
        let report = assert_safe(family(seed));
        if let Some(s) = report.checker.starvation(report.end) {
            panic!("liveness broken: {s}");
        }
        assert!(report.workloads_done, "seed {seed}: workload unfinished");
        add(&mut sum, &report);
    }
    sum
}

fn add(sum: &mut Stats, report: &Report) {
    let s = &report.stats;
    sum.subscribes += s.subscribes;
    sum.messages += s.messages;
    sum.messages_dropped += s.messages_dropped;
    sum.messages_duplicated += s.messages_duplicated;
    sum.messages_delayed += s.messages_delayed;
    sum.messages_stalled += s.messages_stalled;
    sum.messages_unwatched += s.messages_unwatched;
    sum.released_before_subscribed += s.released_before_subscribed;
    sum.cuts += s.cuts;
    sum.client_disconnects += s.client_disconnects;
    sum.crashes += s.crashes;
}

fn seeds() -> u64 {
    family_count()
}

#[test]
fn waiters_are_told_of_releases() {
    let sum = assert_live(seeds(), |seed| notified(seed, Notify::Clean));
    assert!(sum.subscribes > 0 && sum.messages > 0, "{sum:?}");
    assert!(
        sum.cuts > 0 && sum.released_before_subscribed > 0,
        "{sum:?}"
    );
    assert_eq!(sum.client_disconnects, 0, "{sum:?}");
}

#[test]
fn lost_notifications_leave_every_waiter_live() {
    let sum = assert_live(seeds(), |seed| notified(seed, Notify::Dropped));
    assert!(sum.messages_dropped > 0, "{sum:?}");
}

#[test]
fn doubled_notifications_leave_every_waiter_live() {
    let sum = assert_live(seeds(), |seed| notified(seed, Notify::Duplicated));
    assert!(sum.messages_duplicated > 0, "{sum:?}");
}

#[test]
fn late_notifications_leave_every_waiter_live() {
    let sum = assert_live(seeds(), |seed| notified(seed, Notify::Delayed));
    assert!(
        sum.messages_delayed > 0 && sum.messages_unwatched > 0,
        "{sum:?}"
    );
}

#[test]
fn stalling_notifications_leave_every_waiter_live() {
    let sum = assert_live(seeds(), |seed| notified(seed, Notify::Stalled));
    assert!(sum.messages_stalled > 0, "{sum:?}");
}

#[test]
fn ignored_subscriptions_leave_every_waiter_live() {
    let sum = assert_live(seeds(), |seed| notified(seed, Notify::Ignored));
    assert!(sum.subscribes > 0, "{sum:?}");
}

#[test]
fn mixed_notification_faults_leave_every_waiter_live() {
    let sum = assert_live(seeds(), |seed| notified(seed, Notify::Mixed));
    let faults = sum.messages_dropped + sum.messages_delayed + sum.messages_duplicated;
    assert!(faults + sum.messages_stalled > 0, "{sum:?}");
}

/// With the fallback out of reach, notifications alone keep every waiter live while they
/// arrive...
#[test]
fn notifications_alone_keep_waiters_live() {
    let sum = assert_live(seeds(), |seed| notification_only(seed, Notify::Clean));
    assert!(sum.messages > 0, "{sum:?}");
}

/// ...and the liveness check catches the waiters that starve once nodes lose them.
#[test]
fn without_the_fallback_lost_notifications_starve_waiters() {
    for notify in [Notify::Dropped, Notify::Ignored] {
        let starved = (0..seeds()).find_map(|seed| {
            let report = Sim::new(notification_only(seed, notify)).run();
            assert!(report.violation.is_none(), "{:?}", report.violation);
            report.checker.starvation(report.end)
        });
        let starved = starved.unwrap_or_else(|| panic!("{notify:?}: no waiter starved"));
        println!("{notify:?}: {starved}");
    }
}

/// A node whose ACL denies channels refuses `SUBSCRIBE` with `-NOPERM`, a normal reply
/// where the client expects only a push (Redis 7.0.15 and Valkey 9.1.2 both do): safety and
/// liveness hold with one such node among RESP3 nodes, and the refusal is read as the
/// answer to `SUBSCRIBE`: the node's connection is never dropped for it.
#[test]
fn a_node_denying_channels_leaves_every_waiter_live() {
    let sum = assert_live(seeds(), |seed| {
        let mut s = notified(seed, Notify::Clean);
        s.servers[0] = s.servers[0].denying_channels();
        s
    });
    assert!(sum.subscribes > 0, "{sum:?}");
    assert_eq!(sum.client_disconnects, 0, "{sum:?}");
}
