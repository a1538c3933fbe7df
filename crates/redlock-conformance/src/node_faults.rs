//! Faults a node's connection or a key's owner may throw at a held lock (docs/algorithm.md §9, §13): a
//! release whose connection was killed is sent again on the next one, and an extension
//! refused for good is reported lost at once instead of at the deadline.

use std::time::Duration;

use redlock_testkit::Reply;

use crate::scenarios::{cluster, eventually, keys_on};
use crate::{Driver, Guard, LockError, LostReason, RetryPolicy};

/// `CLIENT KILL` on two of three nodes between the acquire and the release: the release is
/// sent again on the new connections, so no key outlives it and another client locks the
/// resource at once (before, both keys stayed until their 10 s ttl and the next client was
/// refused on a majority).
pub fn a_release_after_client_kill_leaves_no_key<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.urls(), |b| b.ttl(Duration::from_secs(10))).unwrap();
    let g = d.lock("killed").unwrap();
    for node in &c.nodes()[..2] {
        // `SKIPME yes` (the default) spares the test kit's own connection.
        node.command(&["CLIENT", "KILL", "TYPE", "normal"])
            .expect("CLIENT KILL");
    }
    g.release().expect("a report");
    // The background resend waits for the reconnection (backoff 25 to 75 ms).
    let gone = eventually(Duration::from_secs(3), || {
        (0..3).all(|i| keys_on(&c, i) == 0)
    });
    assert!(gone, "a key outlived its release");
    let other = D::build(&c.urls(), |b| b.retry(RetryPolicy::once())).unwrap();
    other
        .lock("killed")
        .expect("free on every node")
        .release()
        .unwrap();
}

/// A key overwritten with another type on two of three nodes: the extension is refused
/// with `WRONGTYPE` there, and the lock is reported lost at once with those errors, not
/// after its validity ran out.
pub fn an_extension_refused_for_good_is_lost_at_once<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.urls(), |b| b.ttl(Duration::from_secs(10))).unwrap();
    let g = d.lock("overwritten").unwrap();
    // A quorum decided the lock: the last node's `SET` may land after the call returned,
    // and one landing between the `DEL` and the `RPUSH` below would keep that node's key
    // a string. Wait until every node has it.
    let token = Reply::bulk(&g.token());
    let everywhere = || {
        (c.nodes().iter()).all(|n| n.command(&["GET", "overwritten"]).ok() == Some(token.clone()))
    };
    assert!(
        eventually(Duration::from_secs(5), everywhere),
        "never on every node"
    );
    for node in &c.nodes()[..2] {
        node.command(&["DEL", "overwritten"]).expect("DEL");
        let pushed = node.command(&["RPUSH", "overwritten", "x"]).expect("RPUSH");
        assert_eq!(pushed, Reply::Int(1), "the key was not a fresh list");
    }
    let err = g.extend().expect_err("refused");
    let LockError::Lost(LostReason::Refused { errors, not_ours }) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(errors.len(), 2, "{err}");
    assert!(not_ours.is_empty(), "{err}");
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
    assert_eq!(
        g.lost_reason(),
        Some(LostReason::Refused {
            errors: errors.clone(),
            not_ours: Vec::new()
        })
    );
}
