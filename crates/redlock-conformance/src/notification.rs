//! Release notifications (docs/design.md, "Release notifications"): a waiter of another client learns of a release from
//! the nodes (RESP3 pushes on its one connection per node) and tries at once, instead of a
//! retry delay later; a subscription that a node drops falls back to the timer and is made
//! again on the new connection; a node whose ACL denies the channel refuses the
//! subscription, and its connection stays.

use std::thread;
use std::time::{Duration, Instant};

use redlock_testkit::{Cluster, Conn, Node, Reply};

use crate::scenarios::{cluster, eventually};
use crate::{Driver, Guard, RetryPolicy};

const KEY: &str = "notified";
const CHANNEL: &str = "redlock:released:notified";

/// A retry delay of one second: an acquisition within a few hundred milliseconds of the
/// release can only have been started by the notification.
pub(crate) fn slow_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: Some(10),
        max_wait: Some(Duration::from_secs(20)),
        delay_min: Duration::from_secs(1),
        delay_max: Duration::from_secs(1),
    }
}

/// How many connections of `node` are subscribed to the lock's release channel.
fn subscribers(node: &Node) -> i64 {
    match node.command(&["PUBSUB", "NUMSUB", CHANNEL]) {
        Ok(Reply::Array(items)) => items.get(1).and_then(Reply::as_int).unwrap_or(0),
        _ => 0,
    }
}

/// Waits until every node has the waiter's subscription.
fn wait_subscribed(c: &Cluster) {
    let all = || c.nodes().iter().all(|n| subscribers(n) >= 1);
    assert!(
        eventually(Duration::from_secs(5), all),
        "the waiter never subscribed on every node"
    );
}

/// Two clients of `c`'s nodes, each with the slow retry.
fn two_clients<D: Driver>(c: &Cluster) -> (D, D) {
    let build = || D::build(&c.urls(), |b| b.retry(slow_retry())).unwrap();
    (build(), build())
}

/// Client A holds the lock; client B waits in a thread. Returns B's thread, which yields
/// B's guard and when B got it.
fn waiter<D: Driver>(b: &D) -> thread::JoinHandle<(D::Guard, Instant)> {
    let b = b.clone();
    thread::spawn(move || {
        let guard = b
            .lock_with(KEY, crate::LockOptions::default())
            .expect("the waiter gets the lock");
        (guard, Instant::now())
    })
}

/// Releases `held` and returns the waiter's guard once it has the lock, which must be
/// within 500 ms of the release: a notification's doing, not the 1 s retry delay (`why`
/// says what else it would mean).
fn release_to<G: Guard>(held: G, waiting: thread::JoinHandle<(G, Instant)>, why: &str) -> G {
    let released_at = Instant::now();
    held.release().unwrap();
    let (guard, got_at) = waiting.join().expect("waiter");
    let wait = got_at.saturating_duration_since(released_at);
    assert!(
        wait < Duration::from_millis(500),
        "the waiter took {wait:?} after the release: {why}"
    );
    guard
}

/// With a retry delay of 1 s, a waiter gets the lock within milliseconds of the holder's
/// release: on its second attempt, started by the release's announcement.
pub fn a_waiter_gets_the_lock_as_soon_as_it_is_released<D: Driver>() {
    let c = cluster(3);
    let (a, b) = two_clients::<D>(&c);
    let held = a.lock_with(KEY, crate::LockOptions::default()).unwrap();
    let waiting = waiter(&b);
    wait_subscribed(&c);
    let guard = release_to(held, waiting, "a retry delay, not a notification");
    // One refused attempt, its place in the waiters' queue (and the agreed ticket, if the
    // client had not read the nodes' clocks yet), one after the release.
    let attempts = guard.stats().attempts;
    assert!((3..=4).contains(&attempts), "{attempts} attempts");
    guard.release().unwrap();
    // Done waiting: no subscription is left behind.
    let none = || c.nodes().iter().all(|n| subscribers(n) == 0);
    assert!(
        eventually(Duration::from_secs(5), none),
        "a subscription was left behind"
    );
}

/// The nodes drop the waiter's subscriptions (`CLIENT KILL TYPE pubsub`): a release while
/// they are gone is still seen, by the retry timer; and the waiter subscribes again on its
/// new connections, so the next release is announced to it.
pub fn a_dropped_subscription_falls_back_to_the_timer_and_is_made_again<D: Driver>() {
    let c = cluster(3);
    let (a, b) = two_clients::<D>(&c);

    // A release while the subscriptions are dropped: the timer still gets it.
    let held = a.lock_with(KEY, crate::LockOptions::default()).unwrap();
    let waiting = waiter(&b);
    wait_subscribed(&c);
    for node in c.nodes() {
        node.command(&["CLIENT", "KILL", "TYPE", "pubsub"]).unwrap();
    }
    held.release().unwrap();
    let (guard, _) = waiting.join().expect("waiter");
    assert!(guard.stats().attempts >= 2);
    guard.release().unwrap();
    // The channel it kept while it held goes once its release is done (docs/design.md,
    // "Kept while held"), so a subscription seen below is the next wait's: the waiter found
    // the lock held and listens.
    let none = || c.nodes().iter().all(|n| subscribers(n) == 0);
    assert!(
        eventually(Duration::from_secs(5), none),
        "the channel kept while the lock was held was not given up after its release"
    );

    // The waiter's connections were replaced: its next wait subscribes on them, and the
    // next release reaches it at once.
    let held = a.lock_with(KEY, crate::LockOptions::default()).unwrap();
    let waiting = waiter(&b);
    wait_subscribed(&c);
    for node in c.nodes() {
        node.command(&["CLIENT", "KILL", "TYPE", "pubsub"]).unwrap();
    }
    // Subscribed again on the new connections, while still waiting.
    wait_subscribed(&c);
    let guard = release_to(held, waiting, "the subscription was not made again");
    guard.release().unwrap();
}

/// How many connections a node accepted since it started (`INFO stats`), asked on `conn`.
fn connections_received(conn: &mut Conn) -> u64 {
    let info = conn.command(&["INFO", "stats"]).expect("INFO");
    let info = info.as_str().expect("INFO is text");
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_connections_received")
}

/// Node 0's ACL denies every channel (`resetchannels`): it answers the waiter's
/// `SUBSCRIBE` with `-NOPERM`, an ordinary reply where RESP3 confirms with a push. The
/// refusal is read as that answer: node 0's connections stay (no reconnection), its votes
/// count, and the two other nodes' announcements still start the waiter at once.
pub fn a_node_denying_the_channel_keeps_its_connection<D: Driver>() {
    let c = cluster(3);
    let denying = c.node(0);
    let reply = denying
        .command(&["ACL", "SETUSER", "default", "resetchannels"])
        .unwrap();
    assert!(!matches!(reply, Reply::Error(_)), "{reply}");
    let (a, b) = two_clients::<D>(&c);
    let held = a.lock_with(KEY, crate::LockOptions::default()).unwrap();
    let waiting = waiter(&b);
    let others = || c.nodes()[1..].iter().all(|n| subscribers(n) >= 1);
    assert!(
        eventually(Duration::from_secs(5), others),
        "never subscribed"
    );
    // One connection for the checks, so that they count no connection but the drivers'.
    let mut admin = denying.connect().expect("connect");
    let connections = connections_received(&mut admin);
    // Long enough for a reconnection storm to show (the backoff starts at milliseconds).
    thread::sleep(Duration::from_millis(300));
    let numsub = admin.command(&["PUBSUB", "NUMSUB", CHANNEL]).unwrap();
    assert_eq!(
        numsub,
        Reply::Array(vec![Reply::bulk(CHANNEL), Reply::Int(0)]),
        "the ACL let the subscription through"
    );
    let guard = release_to(
        held,
        waiting,
        "the two other nodes' announcements were not heard",
    );
    guard.release().unwrap();
    assert_eq!(
        connections_received(&mut admin),
        connections,
        "node 0 was reconnected after refusing the subscription"
    );
}
