//! The driver under `async_std::task::block_on`, tasks spawned with `async_std::task::spawn`,
//! against real servers (redis-server, or the binary named by `REDLOCK_SERVER_BIN`): the
//! twelve scenarios, plus URL and configuration errors and connection failures.

mod common;

use std::time::{Duration, Instant};

use redlock_async_std::{AcquireFailure, LockError, Redlock, ReleaseOutcome, RetryPolicy};

scenario_tests!(on_async_std;
    mutual_exclusion(5),
    minority_down_works_majority_down_fails_in_bounded_time(5),
    paused_node_is_outwaited_and_rejoins(5),
    restarted_node_is_reconnected(3),
    expired_lock_reports_lost_and_leaves_the_next_holder_alone(5),
    auto_extension_outlasts_a_contender(5),
    release_spares_another_token(5),
    release_survives_script_flush(5),
    dropped_lock_future_leaves_no_key(5),
    garbage_node_is_a_failed_vote(2),
    thousand_auto_extended_locks(5),
    single_node(1),
);

/// Building needs no executor and succeeds with every node down; locking then fails cleanly.
/// (Bad URLs and configs are the conformance suite's.)
#[test]
fn builds_outside_any_executor() {
    let r = Redlock::builder(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"])
        .unwrap()
        .config(|c| c.retry(RetryPolicy::once()))
        .build()
        .unwrap();
    let result = async_std::task::block_on(r.lock("x"));
    assert!(matches!(
        result,
        Err(LockError::Acquire(AcquireFailure::QuorumUnreachable { .. }))
    ));
}

/// A host name is resolved off the driver thread; `localhost` may name `::1` first, where
/// nothing listens, and the next address is tried.
#[test]
fn host_names_are_resolved() {
    let c = common::cluster(1);
    let urls: Vec<String> = c
        .urls()
        .iter()
        .map(|u| u.replace("127.0.0.1", "localhost"))
        .collect();
    assert!(urls[0].contains("localhost"), "{urls:?}");
    common::on_async_std(|h| async move {
        let r = h.redlock(&urls, Duration::from_secs(5));
        let g = r.lock("named").await.unwrap();
        assert_eq!(g.release().await.unwrap(), vec![ReleaseOutcome::Released]);
    });
}

/// A node that never answers the connect is given up after the connect timeout.
#[test]
fn unreachable_node_fails_in_bounded_time() {
    // TEST-NET-1 (RFC 5737): never routed; a connect hangs or fails at once.
    let r = Redlock::builder(["192.0.2.1:6379"])
        .unwrap()
        .connect_timeout(200 * common::MS)
        .config(|c| c.retry(RetryPolicy::once()))
        .build()
        .unwrap();
    let start = Instant::now();
    let result = async_std::task::block_on(r.lock("x"));
    assert!(
        matches!(
            result,
            Err(LockError::Acquire(AcquireFailure::QuorumUnreachable { .. }))
        ),
        "{result:?}"
    );
    let bound = r.config().attempt_timeout() + Duration::from_secs(1);
    assert!(
        start.elapsed() <= bound,
        "{:?} > {bound:?}",
        start.elapsed()
    );
}

#[test]
fn handles_are_clone_send_sync() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    fn send<T: Send + 'static>() {}
    check::<Redlock>();
    check::<redlock_async_std::LockRef>();
    send::<redlock_async_std::LockGuard>();
}
