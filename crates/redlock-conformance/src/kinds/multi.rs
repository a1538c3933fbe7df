//! Multi-resource locks on real servers (docs/kinds.md, "Multi-resource lock"): two clients
//! locking overlapping sets never hold together and neither waits on the other forever; a
//! node that holds part of a set votes no and keeps nothing of it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::Duration;

use redlock_testkit::Reply;

use super::{MS, SETTLE, exists_on, patient};
use crate::scenarios::{cluster, eventually, value_on};
use redlock_core::AcquireOutcome;

use crate::{AcquireFailure, Driver, Guard, LockError, LockKind, LockOptions, RetryPolicy};

/// Hand-offs per client in [`overlapping_multi_locks_never_hold_together_and_both_finish`].
const ROUNDS: u32 = 20;

/// Two clients lock {a, b} and {c, b} (named in the other order: the set is sorted before
/// anything is sent) 20 times each, holding a few milliseconds. Every call gets its set —
/// each is bounded by its retry policy's wait, so "both finish" is a bound by construction,
/// and a deadlock would show as a call that gave up — and no two holds of `b` overlap. The
/// guard lists its set in byte order; a plain mutex of `b` is kept out while a set holds it.
pub fn overlapping_multi_locks_never_hold_together_and_both_finish<D: Driver>() {
    let c = cluster(3);
    let wait = Duration::from_secs(20);
    let build = || D::build(&c.urls(), |b| b.retry(patient(wait))).expect("driver");
    let (one, two) = (build(), build());
    let holding_b = AtomicU32::new(0);
    let overlaps = AtomicU32::new(0);
    let run = |d: &D, set: [&str; 2], listed: [&str; 2]| {
        for _ in 0..ROUNDS {
            let g = d
                .lock_all_with(&set, LockOptions::default())
                .expect("a multi-lock gets its set within the wait");
            assert_eq!(g.resources(), listed);
            assert_eq!(g.kind(), LockKind::Mutex);
            if holding_b.fetch_add(1, Ordering::SeqCst) > 0 {
                overlaps.fetch_add(1, Ordering::Relaxed);
            }
            thread::sleep(2 * MS);
            holding_b.fetch_sub(1, Ordering::SeqCst);
            // Granted at quorum, the set may be missing on the third node (it said no
            // there): that node's release is `AlreadyExpired` or `NotHeld`, not an error.
            g.release().expect("release");
        }
    };
    thread::scope(|s| {
        s.spawn(|| run(&one, ["a", "b"], ["a", "b"]));
        s.spawn(|| run(&two, ["c", "b"], ["b", "c"]));
    });
    assert_eq!(
        overlaps.load(Ordering::Relaxed),
        0,
        "two sets held b at once"
    );

    let set = one
        .lock_all_with(&["b", "c"], LockOptions::default())
        .unwrap();
    let refused = two.try_lock("b").err().expect("b is held by the set");
    assert!(
        matches!(
            refused.acquire_failure(),
            Some(AcquireFailure::Contended { .. })
        ),
        "{refused}"
    );
    set.release().expect("release");
}

/// Node 0 holds `p2` for someone else (set by hand). A multi-lock of {p1, p2} is granted by
/// nodes 1 and 2; node 0 votes no and keeps nothing: no `p1` there, `p2` still the other
/// holder's. With `p2` held on two nodes the set cannot be had, and the failed attempt
/// leaves nothing of it on any node.
pub fn a_node_holding_part_of_a_set_votes_no_and_keeps_nothing<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.urls(), |b| b.retry(RetryPolicy::once())).expect("driver");
    d.lock("warm-up").unwrap().release().unwrap();
    c.node(0).command(&["SET", "p2", "other"]).unwrap();
    let g = d
        .lock_all_with(&["p2", "p1"], LockOptions::default())
        .expect("two of three nodes");
    // Decided at quorum, node 0's answer may not have been in yet; an inspection goes to
    // each node on the connection the script went on, after it, so once it is answered the
    // script has run on every node.
    let votes: Vec<_> = g.stats().nodes.into_iter().map(|n| n.outcome).collect();
    assert!(
        matches!(votes[0], AcquireOutcome::Held | AcquireOutcome::Pending),
        "{votes:?}"
    );
    d.inspect("p1").expect("inspection");
    assert!(!exists_on(&c, 0, "p1"), "node 0 kept part of the set");
    assert_eq!(value_on(&c, 0, "p2"), Reply::bulk("other"));
    let token = g.token();
    for i in 1..3 {
        for key in ["p1", "p2"] {
            let held = || value_on(&c, i, key) == Reply::bulk(&token);
            assert!(eventually(SETTLE, held), "node {i} lacks {key}");
        }
    }
    g.release().expect("release");
    let gone = || (1..3).all(|i| !exists_on(&c, i, "p1") && !exists_on(&c, i, "p2"));
    assert!(eventually(SETTLE, gone), "the set outlived its release");
    assert_eq!(value_on(&c, 0, "p2"), Reply::bulk("other"));

    c.node(1).command(&["SET", "p2", "other"]).unwrap();
    let err = d
        .lock_all_with(&["p1", "p2"], LockOptions::default())
        .err()
        .expect("p2 is held on two of three nodes");
    assert!(matches!(err, LockError::Acquire { .. }), "{err}");
    let clean = || (0..3).all(|i| !exists_on(&c, i, "p1"));
    assert!(eventually(SETTLE, clean), "the failed attempt left p1");
    for i in 0..2 {
        assert_eq!(value_on(&c, i, "p2"), Reply::bulk("other"));
    }
    assert!(!exists_on(&c, 2, "p2"));
}
