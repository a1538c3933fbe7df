//! The lock kinds beyond the mutex on real servers (docs/kinds.md): multi-resource locks
//! (multi.rs), reader-writer locks (rw.rs), counting semaphores (semaphore.rs), and what
//! every kind must leave behind when cancelled or when a node dies under it (cleanup.rs),
//! and the kinds' wrong calls with their messages (usage.rs).
//! Each scenario reads the nodes directly with the test kit, so what a kind keeps on a node
//! (`R`, `R:readers`, `R:writer-waiting`, `R:permits`) is checked, not assumed.

use std::thread;
use std::time::Duration;

use redlock_core::{AcquireOutcome, Script};
use redlock_testkit::{Cluster, Reply};

use crate::{Driver, Guard, LockKind, LockOptions, ReleaseOutcome, ReleaseResult, RetryPolicy};

mod cleanup;
mod multi;
mod rw;
mod semaphore;
mod usage;

pub use cleanup::{
    a_cancelled_acquisition_of_each_kind_leaves_nothing_on_any_node,
    a_node_killed_mid_hold_and_every_kind_is_still_released_on_the_others,
    a_writer_granted_beside_a_refusing_node_leaves_no_mark_after_its_release,
};
pub use multi::{
    a_node_holding_part_of_a_set_votes_no_and_keeps_nothing,
    overlapping_multi_locks_never_hold_together_and_both_finish,
};
pub use rw::{
    a_node_that_answers_last_takes_part_in_readers_after_its_first_use,
    a_reader_s_slot_is_gone_after_its_release_and_after_its_ttl,
    a_writer_behind_a_stream_of_readers_gets_in, readers_overlap_and_a_writer_holds_alone,
};
pub use semaphore::{
    a_holder_asking_another_k_gets_the_permits_error, a_semaphore_of_two_on_five_nodes_needs_four,
    a_third_holder_of_two_permits_waits_until_one_releases,
};
pub use usage::the_kinds_wrong_calls_are_refused_with_their_messages;

/// One millisecond.
const MS: Duration = Duration::from_millis(1);

/// How long a check of the nodes may wait for a node that answered after the quorum (a lock
/// call returns at quorum; a release too, finishing on the others in the background).
const SETTLE: Duration = Duration::from_secs(3);

/// A retry policy that retries quickly for at most `wait`: the bound by construction on
/// every call of a concurrent scenario (it returns, one way or the other, within `wait`
/// plus one attempt).
fn patient(wait: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts: None,
        max_wait: Some(wait),
        delay_min: 5 * MS,
        delay_max: 20 * MS,
    }
}

/// Locks and releases a warm-up resource until no node's answer was a failure (at most 100
/// tries, 10 ms apart; an answer still pending at the quorum is no failure): from then on
/// every node is connected, so a lock is sent to all of them, not only to those whose
/// connection was up at the call.
fn warm_up<D: Driver>(d: &D) {
    for _ in 0..100 {
        let g = d.lock("warm-up").expect("warm-up");
        let failed = |o: &AcquireOutcome| matches!(o, AcquireOutcome::Failed(_));
        let any = (g.stats().nodes.iter()).any(|n| failed(&n.outcome));
        g.release().expect("warm-up release");
        if !any {
            return;
        }
        thread::sleep(10 * MS);
    }
    panic!("some node failed every warm-up lock");
}

/// Locks and releases a warm-up resource as `kind`, then waits until every node of `c` has
/// `script` (that kind's acquire) cached. A node whose first use of a script answers
/// `-NOSCRIPT` after the attempt was decided never holds that lock (it is not resent), and
/// loads every script only then: a test that needs every node to hold the kind's next lock
/// warms it first.
fn warm_kind<D: Driver>(d: &D, c: &Cluster, kind: LockKind, script: &Script) {
    let g = d
        .lock_with("warm-kind", LockOptions::default().kind(kind))
        .expect("warm-up");
    g.release().expect("warm-up release");
    let cached = |i: usize| {
        let reply = c.nodes()[i].command(&["SCRIPT", "EXISTS", script.sha1]);
        matches!(reply, Ok(Reply::Array(a)) if a.first().and_then(Reply::as_int) == Some(1))
    };
    for i in 0..c.nodes().len() {
        assert!(
            crate::scenarios::eventually(SETTLE, || cached(i)),
            "node {i} never cached the {kind:?} script"
        );
    }
}

/// Asserts that `report` is a release that freed the lock: released where it answered, and
/// `AlreadyExpired` only on nodes that never held it. A kind's script that a node has not
/// cached yet costs it a `-NOSCRIPT` and a resend; a node whose answer comes after the
/// attempt was decided at quorum may so never hold the lock (the connection preloads the
/// mutex's release and extension scripts only: redlock-core's session/mod.rs). Never
/// another holder's (`NotHeld`), never a failure.
#[track_caller]
fn assert_released(report: &ReleaseResult) {
    let ok = report.as_ref().is_ok_and(|r| {
        use ReleaseOutcome::{AlreadyExpired, Pending, Released};
        r.contains(&Released)
            && (r.iter()).all(|o| matches!(o, Released | Pending | AlreadyExpired))
    });
    assert!(ok, "not released: {report:?}");
}

/// Node `i`'s integer answer to `args` (`ZCARD`, `EXISTS`, ...); a missing key counts 0.
fn int_on(c: &Cluster, i: usize, args: &[&str]) -> i64 {
    match c.node(i).command(args) {
        Ok(Reply::Int(n)) => n,
        other => panic!("node {i}: {args:?}: {other:?}"),
    }
}

/// Whether `key` exists on node `i`.
fn exists_on(c: &Cluster, i: usize, key: &str) -> bool {
    int_on(c, i, &["EXISTS", key]) == 1
}

/// How many members the sorted set `key` has on node `i` (expired ones included: only a
/// script prunes them; the set's own expiry removes it whole).
fn members_on(c: &Cluster, i: usize, key: &str) -> i64 {
    int_on(c, i, &["ZCARD", key])
}

/// A deadline score no test outlives: node milliseconds in the year 2286.
const FOREVER: &str = "9999999999999";
