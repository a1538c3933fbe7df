//! The waiters' queue (docs/design.md, "The waiters' queue") on real servers, with every
//! default on: the waiters of two other clients take the lock in the order they came, each
//! woken by the release ahead of it; a waiter that died heads the queue no longer than its
//! place's deadline; a contested line's release places its next call; a line that hands
//! over lets a new waiter of another client in within a few sections; and a waiter that
//! cannot hear the release (no RESP3) polls instead of leaving the lock free.

use std::thread;
use std::time::{Duration, Instant};

use redlock_testkit::{Cluster, Reply};

use crate::notification::slow_retry;
use crate::scenarios::{cluster, eventually};
use crate::{Driver, Guard, LockOptions, ReleaseOutcome, RetryPolicy};

const KEY: &str = "queued";
const QUEUE: &str = "queued:queue";
const UNTIL: &str = "queued:queue:until";

/// How many waiters node `i` of `c` has in the queue.
fn waiting(c: &Cluster, i: usize) -> i64 {
    match c.nodes()[i].command(&["ZCARD", QUEUE]) {
        Ok(reply) => reply.as_int().unwrap_or(0),
        Err(_) => 0,
    }
}

/// Waits until every node of `c` has `n` waiters in the queue.
fn wait_for_waiters(c: &Cluster, n: i64) {
    let all = || (0..c.nodes().len()).all(|i| waiting(c, i) >= n);
    assert!(
        eventually(Duration::from_secs(5), all),
        "fewer than {n} waiters took their places on every node"
    );
}

/// A waiter of `client` in a thread: its guard and when it got the lock.
fn waiter<D: Driver>(client: &D) -> thread::JoinHandle<(D::Guard, Instant)> {
    let client = client.clone();
    thread::spawn(move || {
        let guard = client
            .lock_with(KEY, LockOptions::default())
            .expect("the waiter gets the lock");
        (guard, Instant::now())
    })
}

/// Releases `held` and returns the guard of `waiting` (`who`), which must get the lock
/// within 500 ms of the release: woken by it, not by its retry delay of a second.
fn handed<D: Driver>(
    held: D::Guard,
    waiting: thread::JoinHandle<(D::Guard, Instant)>,
    who: &str,
) -> D::Guard {
    let released_at = Instant::now();
    held.release().unwrap();
    let (guard, got_at) = waiting.join().expect("the waiter's thread");
    let wait = got_at.saturating_duration_since(released_at);
    assert!(
        wait < Duration::from_millis(500),
        "{who} took {wait:?} after the release"
    );
    guard
}

/// Client A holds; B starts waiting, then C. A's release goes to B, within milliseconds
/// (the retry delay is a second), and only B's release goes to C: first come, first served
/// across processes, one waiter woken per release. Once both are done, no place is left.
pub fn waiters_of_other_clients_take_turns_in_order<D: Driver>() {
    let c = cluster(3);
    let build = || D::build(&c.urls(), |b| b.retry(slow_retry())).unwrap();
    let (a, b, third) = (build(), build(), build());
    let held = a.lock_with(KEY, LockOptions::default()).unwrap();
    let first = waiter(&b);
    wait_for_waiters(&c, 1);
    // First come, first served within the clients' clock error (whole milliseconds of the
    // nodes' clocks, as each client estimates them): the second comes well after.
    thread::sleep(Duration::from_millis(50));
    let second = waiter(&third);
    wait_for_waiters(&c, 2);

    let guard = handed::<D>(held, first, "the first waiter");
    // The second waiter is still waiting: the release woke the head only.
    thread::sleep(Duration::from_millis(100));
    assert!(!second.is_finished(), "the second waiter passed the first");
    handed::<D>(guard, second, "the second waiter")
        .release()
        .unwrap();
    let gone = || (0..c.nodes().len()).all(|i| waiting(&c, i) == 0);
    assert!(
        eventually(Duration::from_secs(5), gone),
        "a place was left behind"
    );
}

/// Every node's ACL denies the clients' user every channel (`resetchannels`): no client
/// hears a release or its turn in the queue. A waiter then polls
/// (docs/design.md, "A waiter that cannot hear polls"): with a retry delay of a second, it
/// gets the lock within milliseconds of the holder's release, trying every few milliseconds
/// meanwhile, where its timer alone would leave the lock free for most of that second.
pub fn a_waiter_that_cannot_hear_polls_and_gets_the_lock_soon<D: Driver>() {
    let c = cluster(3);
    for node in c.nodes() {
        let reply = node.command(&["ACL", "SETUSER", "default", "resetchannels"]);
        assert!(!matches!(reply, Ok(Reply::Error(_)) | Err(_)), "{reply:?}");
        let noperm = crate::errors::as_client(node, &["SUBSCRIBE", "redlock:released:queued"]);
        assert!(noperm.starts_with("NOPERM"), "{noperm}");
    }
    let build = || D::build(&c.urls(), |b| b.retry(slow_retry())).unwrap();
    let (a, b) = (build(), build());
    let held = a.lock_with(KEY, LockOptions::default()).unwrap();
    let first = waiter(&b);
    wait_for_waiters(&c, 1);
    thread::sleep(Duration::from_millis(200));
    let guard = handed::<D>(held, first, "the waiter");
    // Its timer alone makes one attempt a second; it polled.
    let attempts = guard.stats().attempts;
    assert!(attempts >= 5, "{attempts} attempts");
    guard.release().unwrap();
}

/// The node's clock in ms (`TIME`).
fn node_ms(c: &Cluster, i: usize) -> u64 {
    let Ok(Reply::Array(parts)) = c.nodes()[i].command(&["TIME"]) else {
        panic!("TIME")
    };
    let part = |k: usize| -> u64 {
        let text = parts.get(k).and_then(Reply::as_str).expect("TIME part");
        text.parse().expect("TIME number")
    };
    part(0) * 1000 + part(1) / 1000
}

/// A waiter that died at the head of the queue (its place planted on every node, ticket 1,
/// lapsing 800 ms from now, as a client that crashed right after renewing would leave it):
/// a live waiter, queued behind it while another client held the lock, is kept out after
/// that release while the dead place lasts, and gets the lock once it lapses (the queue
/// prunes it), without another release.
pub fn a_dead_waiter_holds_the_queue_no_longer_than_its_place_lasts<D: Driver>() {
    let c = cluster(3);
    let fast = RetryPolicy {
        max_attempts: None,
        max_wait: Some(Duration::from_secs(10)),
        delay_min: Duration::from_millis(20),
        delay_max: Duration::from_millis(50),
    };
    let build = || D::build(&c.urls(), |b| b.retry(fast)).unwrap();
    let (holder, live) = (build(), build());
    let held = holder.lock_with(KEY, LockOptions::default()).unwrap();
    let lasts = Duration::from_millis(800);
    for i in 0..c.nodes().len() {
        let until = (node_ms(&c, i) + 800).to_string();
        let node = &c.nodes()[i];
        node.command(&["ZADD", QUEUE, "1", "dead"]).unwrap();
        node.command(&["ZADD", UNTIL, &until, "dead"]).unwrap();
        node.command(&["PEXPIRE", QUEUE, "10000"]).unwrap();
        node.command(&["PEXPIRE", UNTIL, "10000"]).unwrap();
    }
    let planted = Instant::now();
    let waiting = waiter(&live);
    wait_for_waiters(&c, 2);
    held.release().unwrap();
    let (guard, got_at) = waiting.join().expect("live waiter");
    let waited = got_at.saturating_duration_since(planted);
    assert!(
        waited >= lasts - Duration::from_millis(100),
        "the live waiter passed a place that had not lapsed (after {waited:?})"
    );
    assert!(
        waited < lasts + Duration::from_secs(2),
        "the lapsed place held the queue for {waited:?}"
    );
    guard.release().unwrap();
}

/// Client A's line holds three calls, client B waits with two in turn: the turns alternate
/// across the two clients in the order they came (B, A, B, A after A's first), and once A's
/// line met B, its release places its next call in the queue (QUEUE_RELEASE): that call
/// waits its turn without a place attempt of its own, and B's release grants it the key
/// (docs/design.md, "A release that grants"): it holds on hearing the grants, or takes them
/// at its one attempt.
pub fn a_contested_lines_next_call_takes_its_turn_at_one_attempt<D: Driver>() {
    use std::sync::{Arc, Mutex};
    let c = cluster(3);
    let build = || D::build(&c.urls(), |b| b.retry(slow_retry())).unwrap();
    let (a, b) = (build(), build());
    let order = Arc::new(Mutex::new(Vec::new()));
    // Each call holds 30 ms, long enough for the other client's next call to take its place;
    // returns the attempts of each of `names`' calls, made one after the other.
    let calls = |client: &D, names: &'static [&'static str]| {
        let (client, order) = (client.clone(), Arc::clone(&order));
        thread::spawn(move || {
            let mut attempts = Vec::new();
            for name in names {
                let guard = client.lock_with(KEY, LockOptions::default()).unwrap();
                order.lock().unwrap().push(*name);
                attempts.push(guard.stats().attempts);
                thread::sleep(Duration::from_millis(30));
                guard.release().unwrap();
            }
            attempts
        })
    };
    let held = a.lock_with(KEY, LockOptions::default()).unwrap();
    let b_calls = calls(&b, &["B1", "B2"]);
    wait_for_waiters(&c, 1);
    // A's next two calls wait in A's line, in order (one thread each).
    let a2 = calls(&a, &["A2"]);
    thread::sleep(Duration::from_millis(10));
    let a3 = calls(&a, &["A3"]);
    // Past the time a line hands over without going to the nodes (queue.rs,
    // `HEAR_WAITERS_EVERY`): A's release goes to the nodes and hears of B.
    thread::sleep(Duration::from_millis(60));
    held.release().unwrap();
    let b_attempts = b_calls.join().expect("client B");
    let a2_attempts = a2.join().expect("A2");
    let a3_attempts = a3.join().expect("A3");
    let order = order.lock().unwrap().clone();
    assert_eq!(order, ["B1", "A2", "B2", "A3"], "turns across clients");
    // A3 came into the queue with A2's release, behind B2: granted by B2's release, at
    // most one attempt.
    assert!(
        a3_attempts.iter().all(|a| *a <= 1),
        "A3's attempts {a3_attempts:?} (A2: {a2_attempts:?}, B: {b_attempts:?})"
    );
    let gone = || (0..c.nodes().len()).all(|i| waiting(&c, i) == 0);
    assert!(
        eventually(Duration::from_secs(5), gone),
        "a place was left behind"
    );
}

/// A line that hands the hold from call to call hears a waiter of another client as it
/// comes (the waiter's announcement on the resource's waiting channel: docs/design.md,
/// "Hearing of waiters"), not at its next release through the nodes, up to 250 ms later for
/// a line that listens on every node: the waiter gets its turn within a few of the line's
/// sections, not a streak of them.
pub fn a_line_handing_over_lets_a_new_waiter_in_within_a_few_sections<D: Driver>() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    let c = cluster(3);
    let build = || D::build(&c.urls(), |b| b.retry(slow_retry())).unwrap();
    let (a, b) = (build(), build());
    let (entered, stop) = (
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    // Two threads of client A take 3 ms sections back to back (at most 2,000 each).
    let worker = |client: &D| {
        let (client, entered, stop) = (client.clone(), Arc::clone(&entered), Arc::clone(&stop));
        thread::spawn(move || {
            for _ in 0..2_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let guard = client.lock_with(KEY, LockOptions::default()).unwrap();
                entered.fetch_add(1, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(3));
                guard.release().unwrap();
            }
        })
    };
    let workers = [worker(&a), worker(&a)];
    // A's line is past its first hand-off through the nodes (the one a line makes once it
    // listens) and hands over from here on; a line that heard nobody would go to the nodes
    // again 250 ms after that (queue.rs, `HEAR_SILENT_WAITERS_EVERY`: it listens on every
    // node), some 80 sections.
    let started = eventually(Duration::from_secs(5), || {
        entered.load(Ordering::SeqCst) >= 4
    });
    assert!(started, "client A never got going");
    let before = entered.load(Ordering::SeqCst);
    let held = b.lock_with(KEY, LockOptions::default());
    let passed = entered.load(Ordering::SeqCst) - before;
    // A's threads stop before anything here can fail.
    stop.store(true, Ordering::SeqCst);
    let released = held.map(|guard| guard.release());
    for w in workers {
        w.join().expect("client A's thread");
    }
    released
        .expect("client B gets the lock")
        .expect("client B releases it");
    assert!(
        passed <= 6,
        "client A's line entered {passed} sections while client B waited"
    );
}

/// A line that met another client hands over again once it is alone (docs/design.md,
/// "Kept while held"), on real servers with every default on. Client B holds the key while
/// two threads of client A wait for it, so A's line counts as contested and its releases
/// place its next call in the waiters' queue; B goes away, and A's threads take 1 ms
/// sections back to back for 2.5 s (at most 3,000 each). From 1.3 s after B's release (a
/// line counts as contested for a second after it last met another client: queue.rs,
/// `CONTESTED_FOR`), at least a quarter of A's releases hand over. A line that counted the
/// call its release placed (which listens from before that release) as another client's
/// waiter stayed contested and handed over none.
pub fn a_line_that_met_another_client_hands_over_again_once_alone<D: Driver>() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    let c = cluster(3);
    let (a, b) = (
        D::build(&c.urls(), |b| b).unwrap(),
        D::build(&c.urls(), |b| b).unwrap(),
    );
    let held = b.lock_with(KEY, LockOptions::default()).unwrap();
    let (started, handed, late) = (
        Instant::now(),
        Arc::new(AtomicU32::new(0)),
        Arc::new(AtomicU32::new(0)),
    );
    let alone_from = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let worker = || {
        let (a, handed, late) = (a.clone(), Arc::clone(&handed), Arc::clone(&late));
        let alone_from = Arc::clone(&alone_from);
        thread::spawn(move || {
            for _ in 0..3_000 {
                if started.elapsed() > Duration::from_millis(2_500) {
                    break;
                }
                let guard = a.lock_with(KEY, LockOptions::default()).unwrap();
                thread::sleep(Duration::from_millis(1));
                let report = guard.release().unwrap();
                let alone = alone_from.lock().unwrap().map(|t| t.elapsed());
                if alone.is_some_and(|t| t > Duration::from_millis(1_300)) {
                    late.fetch_add(1, Ordering::SeqCst);
                    let over = report.iter().all(|o| *o == ReleaseOutcome::HandedOver);
                    handed.fetch_add(u32::from(over), Ordering::SeqCst);
                }
            }
        })
    };
    let workers = [worker(), worker()];
    // A's two calls find the key held and wait in the queue (its line met B).
    let queued = eventually(Duration::from_secs(5), || waiting(&c, 0) >= 1);
    thread::sleep(Duration::from_millis(20));
    *alone_from.lock().unwrap() = Some(Instant::now());
    let released = held.release();
    for w in workers {
        w.join().expect("client A's thread");
    }
    assert!(queued, "client A never waited in the queue");
    released.expect("client B releases");
    let (handed, late) = (handed.load(Ordering::SeqCst), late.load(Ordering::SeqCst));
    println!("client A's line handed over {handed} of {late} sections once alone");
    assert!(late >= 20, "client A made {late} sections once alone");
    assert!(
        handed * 4 >= late,
        "client A's line handed over {handed} of {late} sections once alone"
    );
}
