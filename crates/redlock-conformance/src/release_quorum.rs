//! A release returns once a quorum has answered (algorithm.md §6), and the nodes still
//! pending then are released in the background, bounded by the release timeout.
//!
//! Whether the release returns *fast* is the cluster bench's to measure (a same-run ratio);
//! this scenario asserts what holds by construction: with the release timeout far longer
//! than the test, a release that waited for every node could not report the paused node as
//! pending, and only the background release can delete the key there before its ttl.

use std::time::Duration;

use redlock_testkit::Reply;

use crate::scenarios::{cluster, eventually, value_on};
use crate::{Driver, Guard, ReleaseOutcome};

/// One node of five paused (SIGSTOP: its connection stays open and no answer comes): the
/// release returns with that node [`ReleaseOutcome::Pending`] and a quorum released; once
/// the node resumes, within the release timeout, its key is gone.
pub fn release_returns_at_quorum_and_finishes_on_the_paused_node<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| b.ttl(TTL).release_timeout(RELEASE_TIMEOUT)).unwrap();
    d.lock("warm").unwrap().release().unwrap();
    let g = d.lock("rq").unwrap();
    let token = Reply::bulk(&g.token());
    for i in 0..5 {
        // The lock returned at a quorum; the slowest node's SET may land a moment later.
        let set = eventually(Duration::from_secs(1), || value_on(&c, i, "rq") == token);
        assert!(set, "node {i} never got the key");
    }
    c.node(4).pause().unwrap();
    let report = g.release();
    let paused_resumed = c.node(4).resume();
    let report = report.expect("a release report");
    paused_resumed.unwrap();
    assert_eq!(report[4], ReleaseOutcome::Pending, "{report:?}");
    let released = (report.iter()).filter(|o| **o == ReleaseOutcome::Released);
    assert!(released.count() >= 3, "{report:?}");
    // The ttl is far off: only the background release can have deleted the key.
    let gone = eventually(Duration::from_secs(5), || {
        value_on(&c, 4, "rq") == Reply::Nil
    });
    assert!(gone, "the key outlived its release on the resumed node");
    // The other nodes: released, or released in the background.
    for i in 0..4 {
        let gone = eventually(Duration::from_secs(1), || {
            value_on(&c, i, "rq") == Reply::Nil
        });
        assert!(gone, "key left on node {i}");
    }
}

/// One node of five behind a proxy that drops its bytes: the release returns with that node
/// [`ReleaseOutcome::Pending`]; when the link is then cut, the background release is sent
/// again on the node's next connection and deletes the key there (its request was lost, so
/// nothing else can).
pub fn a_release_lost_on_a_broken_link_is_resent_in_the_background<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.proxy_urls(), |b| {
        b.ttl(TTL).release_timeout(RELEASE_TIMEOUT)
    })
    .unwrap();
    d.lock("warm").unwrap().release().unwrap();
    let g = d.lock("lost").unwrap();
    let token = Reply::bulk(&g.token());
    for i in 0..5 {
        let set = eventually(Duration::from_secs(1), || value_on(&c, i, "lost") == token);
        assert!(set, "node {i} never got the key");
    }
    c.proxy(4).blackhole(true);
    let dropped = c.proxy(4).dropped_to_node();
    let report = g.release().expect("a release report");
    assert_eq!(report[4], ReleaseOutcome::Pending, "{report:?}");
    // The release returns at quorum, maybe before the proxy has read the request to node 4:
    // lifting the blackhole then would forward it. Lift it once the request is dropped.
    let lost = eventually(Duration::from_secs(5), || {
        c.proxy(4).dropped_to_node() > dropped
    });
    assert!(lost, "the release never reached the proxy");
    c.proxy(4).blackhole(false);
    // The request is gone with the blackhole: the key stays until the link breaks.
    assert_eq!(value_on(&c, 4, "lost"), token);
    c.proxy(4).cut();
    let gone = eventually(Duration::from_secs(5), || {
        value_on(&c, 4, "lost") == Reply::Nil
    });
    assert!(gone, "the release was not sent again on the new connection");
}

/// Far longer than the test: the key can only go by its release.
const TTL: Duration = Duration::from_secs(60);
/// Far longer than the test too: a release that waited for every node would still be
/// waiting when the checks above run.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(30);
