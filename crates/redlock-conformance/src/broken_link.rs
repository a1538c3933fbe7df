//! An extension lost on a broken link (docs/algorithm.md §8a): unlike a release, it is not
//! sent again on the node's next connection. The round is decided by the nodes that
//! answered; the node whose request was lost keeps its key on the acquisition's (or the last
//! extension's) schedule until the next extension reaches it.

use std::thread;
use std::time::Duration;

use redlock_testkit::{Cluster, Reply};

use crate::scenarios::{cluster, eventually, value_on};
use crate::{Driver, Guard};

/// One node of five behind a proxy that drops its bytes while the lock is extended: the
/// extension succeeds on the four that answered (the lock's validity is the new one, and
/// another client still finds the lock held); the fifth node's key was not extended, and
/// is not once the link is cut and the node reconnected (no resend); the next extension
/// reaches it again.
pub fn an_extension_lost_on_a_broken_link_is_not_resent<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.proxy_urls(), |b| b.ttl(TTL)).unwrap();
    d.lock("warm").unwrap().release().unwrap();
    let g = d.lock("ext-lost").unwrap();
    let token = Reply::bulk(&g.token());
    for i in 0..5 {
        let set = eventually(SETTLE, || value_on(&c, i, "ext-lost") == token);
        assert!(set, "node {i} never got the key");
    }
    // Let the keys age, so that an extended key (back to the full ttl) stands out.
    thread::sleep(AGE);
    c.proxy(4).blackhole(true);
    let dropped = c.proxy(4).dropped_to_node();
    g.extend()
        .expect("four of five nodes answer: the extension succeeds");
    // Lifted only once the proxy has read and dropped the extension to node 4: a late read
    // after the lift would forward it.
    let lost = eventually(RECONNECT, || c.proxy(4).dropped_to_node() > dropped);
    assert!(lost, "the extension never reached the proxy");
    c.proxy(4).blackhole(false);
    assert!(g.validity() > TTL - AGE / 2, "validity {:?}", g.validity());
    let extended = |i: usize| pttl(&c, i, "ext-lost") > TTL - AGE / 2;
    for i in 0..4 {
        assert!(
            eventually(SETTLE, || extended(i)),
            "node {i} was not extended"
        );
    }
    // The request to node 4 was dropped with the blackhole: its key was not extended.
    assert!(!extended(4), "node 4 extended through a blackhole");
    let other = D::build(&c.urls(), |b| b.retry(crate::RetryPolicy::once())).unwrap();
    assert!(
        other.try_lock("ext-lost").is_err(),
        "the lock is still held on the quorum that answered"
    );
    // The link breaks; the client reconnects to node 4 (a new lock's key reaches it), and
    // the extension is not sent again there.
    c.proxy(4).cut();
    // A probe lock taken while node 4 is still down is decided without it: probe again
    // until one reaches it.
    let reconnected = eventually(RECONNECT, || {
        let probe = d.lock("ext-lost-probe").unwrap();
        let probe_token = Reply::bulk(&probe.token());
        let reached = eventually(SETTLE / 4, || {
            value_on(&c, 4, "ext-lost-probe") == probe_token
        });
        probe.release().unwrap();
        reached
    });
    assert!(reconnected, "node 4 never reconnected");
    thread::sleep(SETTLE);
    assert!(!extended(4), "the lost extension was sent again");
    assert_eq!(
        value_on(&c, 4, "ext-lost"),
        token,
        "node 4 still holds our key"
    );
    // The next extension covers node 4 again.
    g.extend().expect("every node answers");
    assert!(
        eventually(SETTLE, || extended(4)),
        "node 4 missed the next extension"
    );
    g.release().unwrap();
}

/// Milliseconds left on `key` at node `i`.
fn pttl(c: &Cluster, i: usize, key: &str) -> Duration {
    let reply = c.node(i).command(&["PTTL", key]).unwrap();
    let ms = reply.as_int().unwrap_or_else(|| panic!("PTTL: {reply:?}"));
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Long enough for the whole scenario: the keys expire only if the test is broken.
const TTL: Duration = Duration::from_secs(20);
/// How long the keys age before the extension: half of it tells an extended key apart.
const AGE: Duration = Duration::from_secs(2);
/// A quorum answers first; the last node's command may land a moment later.
const SETTLE: Duration = Duration::from_secs(1);
/// The driver's reconnect backoff is at most 2 s.
const RECONNECT: Duration = Duration::from_secs(5);
