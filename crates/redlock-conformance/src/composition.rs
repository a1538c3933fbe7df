//! Where the defaults meet, on real servers: fencing with the restart quarantine
//! (docs/safety.md, "Restarts and lost writes"), a client's local line with another client's
//! waiter (docs/safety.md, "Liveness"), and a native release probed before the node's
//! `HELLO` reply with a release decided at the quorum (server.rs's table: "probed"). Each
//! scenario runs with every default on except what it names, since each of these defects
//! showed only where two defaults composed.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlock_core::{Fencing, NodeFault, QuarantineCause, ReleaseNotifications};
use redlock_testkit::{Cluster, Node, Reply, ServerKind};

use crate::scenarios::{cluster, eventually};
use crate::{AcquireFailure, Driver, Guard, LockError, LockOptions};

/// Longer than any wait here takes on a loaded machine, far shorter than a hang.
const BOUND: Duration = Duration::from_secs(15);

// ---- Fencing tokens across an empty restart -------------------------------------------

/// The fenced scenario's ttl: a restart quarantine of the ttl alone ends long before the
/// fencing floor's one-second step.
const FENCED_TTL: Duration = Duration::from_millis(200);
/// Fenced locks the first holder takes on nodes A and B.
const FENCED_LOCKS: usize = 20;

/// Nodes A, B and C (3, all behind proxies), fenced locks of 200 ms. With C cut off, the
/// client takes 20 fenced locks on A and B within one wall second; A is killed and started
/// again empty, and once the client reports it quarantined, B is cut off and C comes back.
/// The first lock granted after that (by A and C: A's counter is gone, C's never saw the
/// 20) has a token larger than every earlier one: A's votes count again only once its
/// fencing floor has passed them, a second and the clocks' spread after its start
/// (docs/safety.md, "Restarts and lost writes"), not a ttl after it.
pub fn a_later_holder_never_gets_a_smaller_fencing_token_after_an_empty_restart<D: Driver>() {
    const R: &str = "fence-restart";
    let c = cluster(3);
    let d = D::build(&c.proxy_urls(), |b| {
        b.fencing(Fencing::every_lock()).ttl(FENCED_TTL)
    })
    .expect("driver");
    all_seen(&d, R);

    c.proxy(2).blackhole(true);
    early_in_a_second(c.node(0));
    let mut largest = 0;
    for i in 0..FENCED_LOCKS {
        let guard = lock_within_bound(&d, R, "a lock on A and B");
        let token = guard.fencing_token().expect("a fenced lock has a token");
        assert!(token > largest, "lock {i}: token {token} after {largest}");
        largest = token;
        guard.release().expect("a release report");
    }

    c.node(0)
        .restart_empty()
        .expect("kill -9 and restart A empty");
    let mut last = None;
    let seen = eventually(BOUND, || match d.try_lock(R) {
        Ok(g) => panic!(
            "granted before A was reported quarantined (token {:?}, largest before {largest})",
            g.fencing_token()
        ),
        Err(e) => {
            let found = quarantined(&e, 0);
            last = Some(e);
            found
        }
    });
    assert!(seen, "A was never reported quarantined: {last:?}");

    c.proxy(1).blackhole(true);
    c.proxy(2).blackhole(false);
    // C's connection lost bytes in the blackhole: a new one, as a healed partition gives.
    c.proxy(2).cut();
    let guard = lock_within_bound(&d, R, "a lock on A and C");
    let token = guard.fencing_token().expect("a fenced lock has a token");
    assert!(
        token > largest,
        "after A's empty restart, A and C granted token {token}, not above {largest} \
         (the largest before)"
    );
    guard.release().expect("a release report");
}

/// Waits until every node has answered on its connection (an inspection that none failed),
/// so its run id and clock are known: a restart is told by a run id that changed.
fn all_seen<D: Driver>(d: &D, resource: &str) {
    let mut last = None;
    let seen = eventually(BOUND, || match d.inspect(resource) {
        Ok(i)
            if !i
                .nodes
                .iter()
                .any(|n| matches!(n, redlock_core::KeyState::Failed(_))) =>
        {
            true
        }
        other => {
            last = Some(other);
            false
        }
    });
    assert!(seen, "not every node answered: {last:?}");
}

/// `d.lock(resource)` again until it is granted (bounded by [`BOUND`]); `what` for the
/// failure.
fn lock_within_bound<D: Driver>(d: &D, resource: &str, what: &str) -> D::Guard {
    let deadline = Instant::now() + BOUND;
    loop {
        match d.lock(resource) {
            Ok(guard) => return guard,
            Err(e) if Instant::now() >= deadline => panic!("{what} within {BOUND:?}: {e}"),
            Err(_) => {}
        }
    }
}

/// Whether `e` is an acquisition refused with node `i` quarantined after a restart.
fn quarantined(e: &LockError, i: usize) -> bool {
    let LockError::Acquire {
        reason: AcquireFailure::QuorumUnreachable { errors },
        ..
    } = e
    else {
        return false;
    };
    errors.iter().any(|(node, fault)| {
        node.id().index() == i
            && matches!(
                fault,
                NodeFault::Quarantined {
                    cause: QuarantineCause::Restarted,
                    ..
                }
            )
    })
}

/// Waits until `node`'s clock is at most 100 ms into a second (bounded: one second and a
/// bit), so that the locks, the restart and a quarantine of the ttl alone fit in the rest
/// of it: only there does the restarted node's floor not yet pass the earlier tokens.
fn early_in_a_second(node: &Node) {
    for _ in 0..250 {
        let Ok(Reply::Array(time)) = node.command(&["TIME"]) else {
            return;
        };
        let micros = match time.get(1) {
            Some(Reply::Bulk(b)) => String::from_utf8_lossy(b).parse::<u64>().unwrap_or(0),
            _ => 0,
        };
        if micros < 100_000 {
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

// ---- A waiter of another client and a busy line ---------------------------------------

/// The resource the line and the waiter share.
const LINE: &str = "busy-line";
/// Lock calls of the waiting client, one after the other.
const WAITER_CALLS: usize = 4;
/// Each holder's critical section.
const SECTION: Duration = Duration::from_millis(2);

/// Three Valkey 9 nodes (native release with its `PUBLISH`), defaults. Client H runs 3
/// threads that lock one resource, hold it 2 ms, release and lock again, for as long as
/// client W is busy; W calls `lock` 4 times, each waiting up to 2 s, each once H has handed
/// the lock over 20 times since the last. W gets the lock in every call: its subscription
/// makes each release's `PUBLISH` count one, so H's line is contested and hands over fairly
/// (docs/safety.md, "Liveness").
pub fn a_waiter_of_another_client_gets_the_lock_from_a_busy_line<D: Driver>() {
    busy_line::<D>(true, Duration::from_secs(2));
}

/// As [`a_waiter_of_another_client_gets_the_lock_from_a_busy_line`], with W's release
/// notifications off, so that no release tells H of it: H's line still yields once after
/// each second of local hand-offs (`queue::COURTESY_AFTER`, docs/safety.md, "Liveness"),
/// so W, trying on its retry timer and waiting up to 3 s, gets the lock in every call.
pub fn a_waiter_that_cannot_subscribe_gets_the_lock_from_a_busy_line<D: Driver>() {
    busy_line::<D>(false, Duration::from_secs(3));
}

/// H's three threads and W's calls, each started once H's line has handed over 20 times
/// since the last; W subscribes to release notifications with `notifications`, and each of
/// its calls waits up to `wait`.
fn busy_line<D: Driver>(notifications: bool, wait: Duration) {
    let c = (Cluster::builder().kinds([ServerKind::Valkey; 3]))
        .min_version(ServerKind::Valkey, 9)
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    let h = D::build(&c.urls(), |b| b).expect("driver H");
    let w = D::build(&c.urls(), |b| {
        b.release_notifications(notifications.then(ReleaseNotifications::default))
    })
    .expect("driver W");
    // Both connected and past their handshakes: W's calls measure the line, not a start.
    for client in [&h, &w] {
        lock_within_bound(client, "warm-up", "a warm-up lock")
            .release()
            .expect("release");
    }
    let stop = AtomicBool::new(false);
    let holding = AtomicBool::new(false);
    let overlaps = AtomicU32::new(0);
    let h_sections = AtomicU32::new(0);
    let h_failures = AtomicU32::new(0);
    // One critical section, by H or W: never two at once.
    let section = || {
        if holding.swap(true, Ordering::SeqCst) {
            overlaps.fetch_add(1, Ordering::Relaxed);
        }
        thread::sleep(SECTION);
        holding.store(false, Ordering::SeqCst);
    };
    let (outcomes, during) = thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                let end = Instant::now() + BOUND;
                while !stop.load(Ordering::SeqCst) && Instant::now() < end {
                    match h.lock(LINE) {
                        Ok(g) => {
                            section();
                            h_sections.fetch_add(1, Ordering::Relaxed);
                            g.release().expect("a release report");
                        }
                        // A call of H may run out of attempts while W holds the lock.
                        Err(_) => {
                            h_failures.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        let mut idle = 0;
        let before = h_sections.load(Ordering::Relaxed);
        let outcomes: Vec<Result<Duration, String>> = (0..WAITER_CALLS)
            .map(|_| {
                // Each call meets a busy line: H has handed the lock over 20 times since W's
                // last call (bounded: a hand-off takes milliseconds).
                let from = h_sections.load(Ordering::Relaxed);
                if !eventually(Duration::from_secs(5), || {
                    h_sections.load(Ordering::Relaxed) >= from + 20
                }) {
                    idle += 1;
                }
                waiter_call(&w, wait, section)
            })
            .collect();
        let during = h_sections.load(Ordering::Relaxed) - before;
        stop.store(true, Ordering::SeqCst);
        assert_eq!(idle, 0, "H's line was not busy before {idle} of W's calls");
        (outcomes, during)
    });
    assert_eq!(overlaps.load(Ordering::Relaxed), 0, "two holders at once");
    let got = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(
        got,
        WAITER_CALLS,
        "W got the lock in {got} of {WAITER_CALLS} calls of up to {wait:?} while H held it \
         {during} times ({} of H's calls failed): {outcomes:?}",
        h_failures.load(Ordering::Relaxed)
    );
}

/// One call of W: how long it took to get the lock (its section then run and the lock
/// released), or why it did not.
fn waiter_call<D: Driver>(w: &D, wait: Duration, section: impl Fn()) -> Result<Duration, String> {
    let start = Instant::now();
    match w.lock_with(LINE, LockOptions::default().max_wait(w.config(), wait)) {
        Ok(g) => {
            let got = start.elapsed();
            section();
            g.release().expect("a release report");
            Ok(got)
        }
        Err(e) => Err(format!("{e} after {:?}", start.elapsed())),
    }
}

// ---- Releases refused late ------------------------------------------------------------

/// Lock, extend and release cycles.
const CYCLES: usize = 60;
/// Cycles per client: each client's first `HELLO` replies from the slow nodes are still on
/// their way while its releases go out.
const CYCLES_PER_CLIENT: usize = 5;
/// The slow nodes' proxies' delay each way: the `HELLO` reply is read more than twice this
/// after the connection opens, long after a client's cycles.
const SLOW: Duration = Duration::from_millis(300);
/// How long the background resends may take once the last release returned: the refusal's
/// and the resend's trips to a slow node and back, many times over, and well within the
/// default ttl (10 s), after which a key dropped by the client would be gone anyway.
const SETTLE: Duration = Duration::from_secs(4);

/// Five Redis 7 nodes (no `DELIFEQ`), two of them behind proxies that delay every byte by
/// 300 ms each way, defaults (native commands on). Lock, extend and release 60 times, on a
/// new client every 5 cycles: each release goes to the slow nodes as the probed `DELIFEQ`
/// before their `HELLO` reply is read, returns once the 3 fast nodes answered, and the slow
/// nodes refuse it later, as an unknown command. The client sends those releases again as
/// the script (server.rs's table: "probed"), so once the background work has settled no
/// lock key is left on any node.
pub fn releases_refused_late_leave_no_key<D: Driver>() {
    let c = Cluster::builder()
        .kinds([ServerKind::Redis; 5])
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    let slow = [3, 4];
    for &i in &slow {
        c.proxy(i).set_latency(SLOW);
    }
    let urls: Vec<String> = (0..c.len())
        .map(|i| match slow.contains(&i) {
            true => c.proxy(i).url(),
            false => c.node(i).url(),
        })
        .collect();
    let started = Instant::now();
    // Every client lives until the end: its background resends are the point.
    let mut clients: Vec<D> = Vec::new();
    for cycle in 0..CYCLES {
        if cycle % CYCLES_PER_CLIENT == 0 {
            clients.push(D::build(&urls, |b| b).expect("driver"));
        }
        let d = clients.last().expect("one built above");
        let guard = lock_within_bound(d, &format!("{LATE}{cycle}"), "a lock on 3 fast nodes");
        guard.extend().expect("an extension by the 3 fast nodes");
        guard.release().expect("a release report");
    }
    let cycles = started.elapsed();
    let left = || -> Vec<(usize, usize)> {
        (c.nodes().iter().enumerate())
            .map(|(i, n)| (i, late_keys(n).len()))
            .filter(|(_, k)| *k > 0)
            .collect()
    };
    // Every acquisition has reached the slow nodes (so a key not yet there is not taken for
    // one released), and no lock key is left anywhere.
    let arrived = || {
        slow.iter()
            .all(|&i| succeeded(c.node(i), "set") >= CYCLES as u64)
    };
    let settled = eventually(SETTLE, || arrived() && left().is_empty());
    let left = left();
    let sets: Vec<u64> = slow.iter().map(|&i| succeeded(c.node(i), "set")).collect();
    let ttl = (left.first())
        .and_then(|(i, _)| late_keys(c.node(*i)).first().cloned())
        .map(|k| c.node(left[0].0).command(&["PTTL", &k]));
    assert!(
        settled,
        "{SETTLE:?} after {CYCLES} cycles ({cycles:?}), lock keys left (node, keys): {left:?}; \
         one key's PTTL: {ttl:?}; acquisitions run by the slow nodes: {sets:?}"
    );
    drop(clients);
}

/// The prefix of the late-refusal scenario's resources.
const LATE: &str = "late-refusal:";

/// The late-refusal scenario's lock keys on `node`.
fn late_keys(node: &Node) -> Vec<String> {
    match node.command(&["KEYS", &format!("{LATE}*")]) {
        Ok(Reply::Array(keys)) => keys
            .iter()
            .filter_map(|k| match k {
                Reply::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect(),
        other => panic!("KEYS: {other:?}"),
    }
}

/// How many times `node` ran `command` (lowercase) and did not answer an error, by its
/// `INFO commandstats` (`calls` less `failed_calls`); 0 if it never ran it.
fn succeeded(node: &Node, command: &str) -> u64 {
    let info = node.command(&["INFO", "commandstats"]).expect("INFO");
    let info = info.as_str().expect("INFO is text");
    let prefix = format!("cmdstat_{command}:");
    let Some(stats) = info.lines().find_map(|l| l.strip_prefix(prefix.as_str())) else {
        return 0;
    };
    let field = |name: &str| -> u64 {
        (stats.split(','))
            .find_map(|f| f.trim().strip_prefix(name)?.strip_prefix('='))
            .map_or(0, |n| n.parse().expect("a count"))
    };
    field("calls").saturating_sub(field("failed_calls"))
}
