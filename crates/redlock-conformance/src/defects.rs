//! Scenarios for driver defects found in review (docs/design.md, "Connections: generations and reasons"), one function each, generic over the
//! [`Driver`] adapter: extreme durations (P1), `with_lock` past the deadline (W1), an
//! extension racing a release (E1), and a paused node's capped backlog (L2). Each failed on
//! the drivers before their fix; each asserts what holds by construction, so a loaded
//! machine cannot make it pass or fail.

use std::time::{Duration, Instant};

use redlock_core::{AutoExtend, ConnectionError, NodeFault};

use redlock_testkit::Reply;

use crate::scenarios::{cluster, eventually, keys_on, value_on};
use crate::{
    AcquireFailure, Driver, Guard, LockError, LockOptions, LostReason, ReleaseOutcome, RetryPolicy,
    assert_report,
};

/// One lock and release of [`extreme_durations_keep_the_driver_alive`] with `timeout` as
/// the connect timeout: every key released, or, under 1 ms, a clear error or a quorum
/// reached with the other nodes' connects timed out (or back only by the release).
fn lock_with_extreme_connect_timeout<D: Driver>(d: &D, timeout: Duration, call: u32) {
    let timed_out = |o: &ReleaseOutcome| {
        matches!(
            o,
            ReleaseOutcome::Failed(NodeFault::Connection(ConnectionError::ConnectTimeout(_)))
        )
    };
    match d.lock("p1") {
        Ok(g) => {
            let report = g.release().expect("released");
            // Under 1 ms a node's connect may time out during the acquisition (no key set
            // there) and succeed on its reconnection before the release, which then finds
            // no key: "already expired" is that node's truthful answer.
            let missed = |o: &ReleaseOutcome| timed_out(o) || *o == ReleaseOutcome::AlreadyExpired;
            assert!(
                (report.iter()).all(|o| *o == ReleaseOutcome::Released
                    || *o == ReleaseOutcome::Pending
                    || timeout < MS && missed(o)),
                "connect timeout {timeout:?}, call {call}: {report:?}"
            );
        }
        Err(LockError::Acquire {
            reason: AcquireFailure::QuorumUnreachable { .. },
            ..
        }) if timeout < MS => {}
        Err(e) => panic!("connect timeout {timeout:?}, call {call}: {e:?}"),
    }
}

/// P1: zero, 1 ns and `Duration::MAX` as the connect timeout and as a lock's wait bounds and
/// ttl never panic or stop a driver. Each call locks and releases or fails with a clear
/// error, and the same driver answers the next call (never [`LockError::Shutdown`]).
pub fn extreme_durations_keep_the_driver_alive<D: Driver>() {
    let c = cluster(3);
    let urls = c.urls();
    let started = Instant::now();
    // The connect timeout. `MAX` means no timeout, so the nodes are reached. Zero and 1 ns
    // may fail every connect (an async runtime reports a loopback connect a moment later;
    // mio may see it at once), which leaves the lock without a quorum: a clear error.
    // One attempt, but a long one: with `MAX` the first call's attempt includes the new
    // connections' handshakes (HELLO, INFO, CONFIG, script loads), which the default 500 ms
    // attempt timeout does not bound by construction on a loaded machine; the release
    // timeout (the attempt timeout by default) likewise. With 0 and 1 ns the connects fail
    // at once, so the attempt ends as soon as no quorum is left, whatever its timeout.
    for timeout in EXTREMES {
        let d = D::build_with_connect_timeout(&urls, timeout, |b| {
            b.retry(RetryPolicy::once()).attempt_timeout(5 * SECOND)
        })
        .expect("every connect timeout is accepted");
        for call in 0..2 {
            lock_with_extreme_connect_timeout(&d, timeout, call);
        }
    }
    // A lock's wait bounds and ttl, on a free and on a held resource.
    let d = D::build(&urls, |b| b.ttl(Duration::from_secs(5))).unwrap();
    let held = d.lock("busy").unwrap();
    for extreme in EXTREMES {
        let wait = LockOptions::default().retry(RetryPolicy {
            max_attempts: Some(2),
            max_wait: Some(extreme),
            delay_min: MS,
            delay_max: 5 * MS,
        });
        match d.lock_with("free", wait.clone()) {
            Ok(g) => assert_report(&g.release(), &ReleaseOutcome::Released, 3),
            Err(LockError::Acquire {
                reason: AcquireFailure::WaitDeadline { .. },
                ..
            }) if extreme < MS => {}
            Err(e) => panic!("max_wait {extreme:?} on a free resource: {e:?}"),
        }
        let err = d.lock_with("busy", wait).err();
        assert_held_elsewhere(err, &format!("max_wait {extreme:?}"));
        // Retry delays at the extreme; the 1 s wait bound ends the retries.
        let delays = LockOptions::default().retry(RetryPolicy {
            max_attempts: None,
            max_wait: Some(Duration::from_secs(1)),
            delay_min: extreme,
            delay_max: extreme,
        });
        let err = d.lock_with("busy", delays).err();
        assert_held_elsewhere(err, &format!("retry delay {extreme:?}"));
        // No such ttl is valid (zero; not whole milliseconds): a configuration error.
        let err = d
            .lock_with("ttl", LockOptions::default().ttl(extreme))
            .err();
        assert!(
            matches!(err, Some(LockError::Config(_))),
            "ttl {extreme:?}: {err:?}"
        );
    }
    assert_report(&held.release(), &ReleaseOutcome::Released, 3);
    d.lock("after").unwrap().release().unwrap();
    // Generous: each step above is bounded by about a second.
    assert!(started.elapsed() < 30 * SECOND, "{:?}", started.elapsed());
}

/// Asserts that a lock call on a resource held by another guard failed as it should: held,
/// or its wait ran out (`what` names the setting under test).
fn assert_held_elsewhere(err: Option<LockError>, what: &str) {
    assert!(
        matches!(
            err,
            Some(LockError::Acquire {
                reason: AcquireFailure::Contended { .. }
                    | AcquireFailure::WaitDeadline { .. }
                    | AcquireFailure::HeldLocally,
                ..
            })
        ),
        "{what} on a held resource: {err:?}"
    );
}

/// W1: a `with_lock` closure that returns just after the lock's deadline gets
/// [`LockError::Lost`] with [`LostReason::DeadlinePassed`], every time, whether or not the
/// driver loop has handled the deadline yet (ttl 300 ms, no renewal).
pub fn with_lock_past_the_deadline_is_lost<D: Driver>() {
    let c = cluster(3);
    let no_renewal = AutoExtend {
        max_renewals: Some(0),
        max_hold: None,
        ..AutoExtend::default()
    };
    let d = D::build(&c.urls(), |b| b.ttl(300 * MS).auto_extend(Some(no_renewal))).unwrap();
    for run in 0..10 {
        // 100 µs past: before the loop's deadline timer has usually fired, which is the case
        // the loop's own report misses; later returns are covered by construction.
        let result = d.with_lock_past_deadline(&format!("w1:{run}"), Duration::from_micros(100));
        assert_eq!(
            result,
            Err(LockError::Lost(LostReason::DeadlinePassed)),
            "run {run}"
        );
    }
    d.lock("after").unwrap().release().unwrap();
}

/// E1: an extension raced with a release of the same lock is answered (extended, or "not
/// held" when the release overtook it), never [`LockError::Shutdown`] while the driver
/// lives; the release succeeds on every node, and the driver serves locks afterwards.
///
/// Every node is 30 ms away each way, so an extension is in flight for at least 60 ms: a
/// release started 10 ms after it overtakes it, however the threads are scheduled (the
/// 50 ms margin covers a slow start of the release). Every other run starts both at once.
pub fn extension_racing_release_is_never_shutdown<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.proxy_urls(), |b| b.ttl(Duration::from_secs(10))).unwrap();
    for i in 0..3 {
        c.proxy(i).set_latency(30 * MS);
    }
    for run in 0..20 {
        let g = d.lock(&format!("e1:{run}")).unwrap();
        let after = if run % 2 == 0 {
            Duration::ZERO
        } else {
            10 * MS
        };
        let (extended, released) = g.extend_then_release(after);
        assert!(
            matches!(extended, Ok(_) | Err(LockError::NotHeld)),
            "run {run}: {extended:?}"
        );
        assert_report(&released, &ReleaseOutcome::Released, 3);
    }
    for i in 0..3 {
        // A node still pending when the release returned is released in the background.
        let empty = eventually(SECOND, || keys_on(&c, i) == 0);
        assert!(empty, "a key left on node {i}");
    }
    d.lock("after").unwrap().release().unwrap();
}

/// The extreme values each driver-level `Duration` is tried with.
const EXTREMES: [Duration; 3] = [Duration::ZERO, Duration::from_nanos(1), Duration::MAX];
const MS: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);

/// L2: a paused node (SIGSTOP keeps its connections open, so no error ever comes) gets at
/// most `max_in_flight` requests. Past that its votes fail at once as `Backlogged`, locks go
/// on with the other four nodes without waiting for it, and once resumed it drains its
/// backlog and serves again.
pub fn paused_node_backlog_is_capped<D: Driver>() {
    const CAP: usize = 20;
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| {
        b.ttl(Duration::from_secs(5)).max_in_flight(CAP)
    })
    .unwrap();
    d.lock("warmup").unwrap().release().unwrap();
    c.node(0).pause().unwrap();
    // Each cycle sends node 0 a SET and a release: the cap is reached within 10 cycles.
    let mut backlogged = 0;
    for i in 0..60 {
        let g = d.lock(&format!("l2-{i}")).expect("4 of 5 nodes lock");
        let nodes = g.release().expect("release");
        match &nodes[0] {
            ReleaseOutcome::Failed(NodeFault::Backlogged { max_in_flight }) => {
                assert_eq!(*max_in_flight, CAP);
                backlogged += 1;
            }
            // Decided by the four others; before the cap, still waiting on node 0.
            ReleaseOutcome::Pending => {}
            other => panic!("cycle {i}: node 0 paused, yet {other:?}"),
        }
    }
    assert!(
        backlogged >= 50,
        "only {backlogged} of 60 releases saw the cap"
    );
    c.node(0).resume().unwrap();
    // Node 0 serves once a lock's key reaches it (lock and release return at a quorum,
    // so their reports need not wait for node 0).
    let serves = || {
        let g = d.lock("l2-after").expect("lock after resume");
        let token = Reply::bulk(&g.token());
        let reached = eventually(200 * MS, || value_on(&c, 0, "l2-after") == token);
        g.release().expect("release");
        reached
    };
    assert!(
        eventually(Duration::from_secs(10), serves),
        "node 0 never served again after resume"
    );
}
