//! Counting semaphores on real servers (docs/kinds.md, "Counting semaphore" and "The
//! semaphore's quorum"): a third holder of two permits waits for a release; a holder asking
//! another number of permits gets the `PERMITS` error; on five nodes two permits need four.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use super::{MS, SETTLE, assert_released, members_on, patient};
use crate::scenarios::{cluster, eventually};
use crate::{AcquireFailure, Driver, Guard, LockError, LockKind, LockOptions, RetryPolicy};

/// The options of a holder of one of `permits` permits, with `retry`.
fn permit(permits: u32, retry: RetryPolicy) -> LockOptions {
    LockOptions::default()
        .kind(LockKind::semaphore(permits))
        .retry(retry)
}

/// Two holders of a semaphore of 2 hold together; a third's single attempt is refused, and
/// a third that waits gets its permit only after one of the two released (a flag set before
/// that release is seen set when it gets in: ordered by the nodes, not by time). Each node
/// counts two holders at the end, and none after the releases.
pub fn a_third_holder_of_two_permits_waits_until_one_releases<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.urls(), |b| b).expect("driver");
    let wait = Duration::from_secs(20);
    let first = d
        .lock_with("pool", permit(2, patient(wait)))
        .expect("permit 1");
    let second = d
        .lock_with("pool", permit(2, patient(wait)))
        .expect("permit 2");
    assert_eq!(first.kind(), LockKind::semaphore(2));
    let refused = d.lock_with("pool", permit(2, RetryPolicy::once()));
    assert!(
        matches!(
            refused.as_ref().err().and_then(LockError::acquire_failure),
            Some(AcquireFailure::Contended { .. })
        ),
        "a third holder of two permits: {:?}",
        refused.err()
    );
    let released = AtomicBool::new(false);
    let third = thread::scope(|s| {
        let waiter = s.spawn(|| {
            let g = d
                .lock_with("pool", permit(2, patient(wait)))
                .expect("permit 3 in time");
            (g, released.load(Ordering::SeqCst))
        });
        thread::sleep(100 * MS);
        released.store(true, Ordering::SeqCst);
        assert_released(&first.release());
        let (g, after_release) = waiter.join().expect("the waiting thread");
        assert!(after_release, "a third holder got in before a release");
        g
    });
    let two = || (0..3).all(|i| members_on(&c, i, "pool:permits") == 2);
    assert!(eventually(SETTLE, two), "each node counts two holders");
    assert_released(&second.release());
    assert_released(&third.release());
    let none = || (0..3).all(|i| members_on(&c, i, "pool:permits") == 0);
    assert!(eventually(SETTLE, none), "a permit outlived its release");
}

/// A holder of a semaphore of 2 is in place; a call asking for 3 fails at once, without a
/// retry, with `AcquireFailure::PermitsMismatch` naming both numbers and the nodes that
/// said so, and leaves nothing (docs/errors.md, "Lock kinds").
pub fn a_holder_asking_another_k_gets_the_permits_error<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.urls(), |b| b).expect("driver");
    let holder = d
        .lock_with("pool", permit(2, patient(Duration::from_secs(5))))
        .unwrap();
    let err = d
        .lock_with("pool", permit(3, patient(Duration::from_secs(5))))
        .err()
        .expect("another k");
    let LockError::Acquire {
        reason:
            AcquireFailure::PermitsMismatch {
                asked,
                in_place,
                nodes,
            },
        stats,
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!((*asked, *in_place), (3, 2), "{err}");
    assert!(!nodes.is_empty(), "{err}");
    assert_eq!(stats.attempts, 1, "a wrong call is not retried: {err}");
    assert!(
        err.to_string().starts_with(
            "could not acquire the lock: this call asked for a semaphore of 3 \
                          permits, but its holders hold it as one of 2 permits on "
        ),
        "{err}"
    );
    let two_left = || (0..3).all(|i| members_on(&c, i, "pool:permits") == 1);
    assert!(
        eventually(SETTLE, two_left),
        "the refused call left a permit"
    );
    holder.release().expect("release");
}

/// On five nodes a semaphore of 2 needs four of them (floor(2 * 5 / 3) + 1). With one node
/// killed it is still acquired, extended and released; with two killed it fails, naming the
/// two dead nodes as failed votes, though three nodes (a majority) would grant it.
pub fn a_semaphore_of_two_on_five_nodes_needs_four<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| b.attempt_timeout(Duration::from_millis(200))).expect("driver");
    d.lock("warm-up").unwrap().release().unwrap();
    c.node(4).kill().expect("kill node 4");
    let g = d
        .lock_with("four", permit(2, RetryPolicy::once()))
        .expect("four of five nodes");
    g.extend().expect("extended on four nodes");
    g.release().expect("released on four nodes");
    c.node(3).kill().expect("kill node 3");
    let err = d
        .lock_with("four", permit(2, RetryPolicy::once()))
        .err()
        .expect("three of five nodes are not enough for two permits");
    let LockError::Acquire {
        reason: AcquireFailure::QuorumUnreachable { errors },
        ..
    } = &err
    else {
        panic!("{err}");
    };
    let dead: Vec<String> = [3, 4]
        .iter()
        .map(|&i| c.node(i).addr().to_string())
        .collect();
    assert_eq!(errors.len(), 2, "{err}");
    for (node, _) in errors {
        assert!(dead.contains(&node.to_string()), "{err}");
    }
    // A mutex, on the majority quorum, is still had.
    d.try_lock("four-mutex")
        .expect("three of five")
        .release()
        .unwrap();
}
