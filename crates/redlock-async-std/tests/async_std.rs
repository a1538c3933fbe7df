//! What only this driver needs beyond the conformance suite (`conformance.rs`), against
//! real servers (redis-server, or the binary named by `REDLOCK_SERVER_BIN`): building outside
//! any executor, host-name resolution, an unreachable node, and the handles' auto traits.

use std::time::{Duration, Instant};

use redlock_async_std::{AcquireFailure, LockError, Redlock, ReleaseOutcome, RetryPolicy};
use redlock_testkit::Cluster;

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
        Err(LockError::Acquire {
            reason: AcquireFailure::QuorumUnreachable { .. },
            ..
        })
    ));
}

/// A host name is resolved off the driver thread; `localhost` may name `::1` first, where
/// nothing listens, and the next address is tried.
#[test]
fn host_names_are_resolved() {
    let c = Cluster::start(1).expect("start a test node");
    let urls: Vec<String> = c
        .urls()
        .iter()
        .map(|u| u.replace("127.0.0.1", "localhost"))
        .collect();
    assert!(urls[0].contains("localhost"), "{urls:?}");
    let r = Redlock::builder(&urls)
        .unwrap()
        .config(|c| c.ttl(Duration::from_secs(5)))
        .build()
        .unwrap();
    async_std::task::block_on(async {
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
        .connect_timeout(Duration::from_millis(200))
        .config(|c| c.retry(RetryPolicy::once()))
        .build()
        .unwrap();
    let start = Instant::now();
    let result = async_std::task::block_on(r.lock("x"));
    assert!(
        matches!(
            result,
            Err(LockError::Acquire {
                reason: AcquireFailure::QuorumUnreachable { .. },
                ..
            })
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
