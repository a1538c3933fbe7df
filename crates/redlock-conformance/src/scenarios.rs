//! The scenarios, one function each, generic over the [`Driver`] adapter. N = 5 nodes
//! unless stated. Assertions bound time from above only where a deadline is the point
//! ("gave up within the attempt timeout + 1 s"), never speed.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redlock_core::AutoExtend;
use redlock_testkit::{Cluster, Reply, refused_port, refused_ports};

use redlock_core::AcquireOutcome;

use crate::servers;
use crate::{
    AcquireFailure, Driver, Guard, LockError, LockOptions, ReleaseOutcome, RetryPolicy,
    assert_report,
};

const MS: Duration = Duration::from_millis(1);

/// 1. 16 threads x 50 critical sections on one resource: zero overlaps, all complete.
pub fn mutual_exclusion<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| {
        b.ttl(Duration::from_secs(5)).retry(fast_retry(100_000))
    })
    .unwrap();
    let holder = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let (d, holder, done) = (d.clone(), holder.clone(), done.clone());
            thread::spawn(move || {
                for _ in 0..50 {
                    let guard = d.lock("mutex").expect("lock");
                    assert!(!holder.swap(true, Ordering::SeqCst), "two holders at once");
                    thread::yield_now();
                    holder.store(false, Ordering::SeqCst);
                    guard.release().expect("release");
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker");
    }
    assert_eq!(done.load(Ordering::SeqCst), 800);
}

/// 2. Two of five nodes killed: locks succeed. Three killed: quorum unreachable within
///    (attempt timeout + retry delay) x attempts + 1 s, and nothing panics.
pub fn minority_down_works_majority_down_fails_in_bounded_time<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| b.ttl(2000 * MS)).unwrap();
    d.lock("warmup").unwrap().release().unwrap();
    c.node(0).kill().unwrap();
    c.node(1).kill().unwrap();
    for i in 0..5 {
        let g = d.lock(&format!("k{i}")).expect("lock with 3 of 5 up");
        g.release().unwrap();
    }
    c.node(2).kill().unwrap();
    let retry = *d.config().retry();
    let attempts = retry.max_attempts.unwrap();
    let bound =
        (d.config().attempt_timeout() + retry.delay_max) * attempts + Duration::from_secs(1);
    let start = Instant::now();
    let err = d.lock("k").err().expect("no quorum");
    assert!(
        matches!(
            err.acquire_failure(),
            Some(AcquireFailure::QuorumUnreachable { .. })
        ),
        "{err}"
    );
    assert!(
        start.elapsed() <= bound,
        "{:?} > {bound:?}",
        start.elapsed()
    );
}

/// 3. A paused node does not delay decisions; after resume its late replies change nothing
///    and it serves new locks.
pub fn paused_node_is_outwaited_and_rejoins<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| b.ttl(2000 * MS)).unwrap();
    d.lock("warm").unwrap().release().unwrap();
    c.node(4).pause().unwrap();
    let bound =
        d.config().attempt_timeout() + d.config().release_timeout() + Duration::from_secs(1);
    let start = Instant::now();
    let g = d.lock("p").unwrap();
    let report = g.release().unwrap();
    assert!(start.elapsed() <= bound, "took {:?}", start.elapsed());
    // Decided by the others; node 4's release waits for it in the background.
    assert_eq!(report[4], ReleaseOutcome::Pending);
    let released = (report[..4].iter()).filter(|o| **o == ReleaseOutcome::Released);
    assert!(released.count() >= 3, "{report:?}");
    c.node(4).resume().unwrap();
    // The late SET and then the release run in order on the resumed node.
    assert!(eventually(Duration::from_secs(1), || value_on(&c, 4, "p")
        == Reply::Nil));
    let g = d.lock("p2").unwrap();
    let token = Reply::bulk(&g.token());
    assert!(eventually(Duration::from_secs(1), || value_on(&c, 4, "p2") == token));
    g.release().unwrap();
}

/// 4. A node restarted on the same port is reconnected and used again.
pub fn restarted_node_is_reconnected<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.urls(), |b| b.ttl(2000 * MS)).unwrap();
    d.lock("a").unwrap().release().unwrap();
    c.node(1).kill().unwrap();
    c.node(1).restart_empty().unwrap();
    // Bounded: the reconnect backoff is at most 2 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let g = d.lock("b").unwrap();
        let token = Reply::bulk(&g.token());
        let used = eventually(200 * MS, || value_on(&c, 1, "b") == token);
        g.release().unwrap();
        if used {
            return;
        }
        assert!(Instant::now() < deadline, "node 1 never used again");
        thread::sleep(100 * MS);
    }
}

/// 5. Held past its validity: extend reports lost and sends nothing, release fails on no
///    node, and another client's lock taken meanwhile is untouched.
pub fn expired_lock_reports_lost_and_leaves_the_next_holder_alone<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| b.ttl(500 * MS)).unwrap();
    let other = D::build(&c.urls(), |b| b.ttl(Duration::from_secs(5))).unwrap();
    let g = d.lock("exp").unwrap();
    thread::sleep(700 * MS);
    assert!(g.lost_reason().is_some());
    assert_eq!(g.validity(), Duration::ZERO);
    let theirs = other.lock("exp").unwrap();
    let err = g.extend().unwrap_err();
    assert!(matches!(err, LockError::Lost(_)), "{err}");
    // A node whose SET arrived late still held our key when the cleanup release went out
    // at t0 + ttl + drift, and compare-and-delete removed it there: `Released` is the
    // truthful answer for that node. What must never happen is a failed node or a
    // release that touches the next holder's key (checked below).
    // A gone key is `AlreadyExpired` to the script, `NotHeldOrExpired` to a native
    // compare-and-delete (Valkey 9), which cannot tell it from another token.
    let gone = servers::expired(c.server());
    let report = g.release().unwrap();
    assert!(
        report
            .iter()
            .all(|o| *o == gone || *o == ReleaseOutcome::Released || *o == ReleaseOutcome::Pending),
        "{report:?}"
    );
    for i in 0..5 {
        assert_eq!(value_on(&c, i, "exp"), Reply::bulk(&theirs.token()));
    }
    theirs.release().unwrap();
}

/// 6. Auto-extension holds a 1 s lock for 5 s against a contender, who gets it within one
///    retry delay after the release.
pub fn auto_extension_outlasts_a_contender<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| b.ttl(Duration::from_secs(1))).unwrap();
    let auto = AutoExtend {
        max_hold: Some(Duration::from_secs(30)),
        ..AutoExtend::default()
    };
    let g = d
        .lock_with("auto", LockOptions::default().auto_extend(Some(auto)))
        .unwrap();
    // Another client: calls of this one would wait in its own line, never on the nodes.
    let contender = D::build(&c.urls(), |b| b.ttl(Duration::from_secs(1))).unwrap();
    let started = Arc::new(Barrier::new(2));
    let go = started.clone();
    let waiter = thread::spawn(move || {
        let wait = LockOptions::default().retry(RetryPolicy {
            max_attempts: None,
            max_wait: Some(Duration::from_secs(20)),
            ..RetryPolicy::default()
        });
        go.wait();
        let got = contender.lock_with("auto", wait).unwrap();
        let at = Instant::now();
        got.release().unwrap();
        at
    });
    started.wait();
    thread::sleep(Duration::from_secs(5));
    assert!(g.lost_reason().is_none());
    assert!(!waiter.is_finished(), "the contender got a held lock");
    let released = Instant::now();
    g.release().unwrap();
    let got_at = waiter.join().unwrap();
    let waited = got_at.saturating_duration_since(released);
    let bound = d.config().retry().delay_max + d.config().attempt_timeout() + 200 * MS;
    assert!(
        waited <= bound,
        "the contender waited {waited:?} after the release"
    );
}

/// 7. Release never deletes a key that holds another token: `NotHeld` from the script,
///    `NotHeldOrExpired` from a native compare-and-delete (Valkey 9's `DELIFEQ`).
pub fn release_spares_another_token<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| b).unwrap();
    let g = d.lock("mine").unwrap();
    for i in 0..5 {
        c.node(i).command(&["SET", "mine", "someone-else"]).unwrap();
    }
    assert_report(&g.release(), &servers::not_held(c.server()), 5);
    for i in 0..5 {
        assert_eq!(value_on(&c, i, "mine"), Reply::bulk("someone-else"));
    }
}

/// 8. `SCRIPT FLUSH` on every node between acquire and release: release still works, both
///    when the script was loaded before the flush and when this release is the first use.
pub fn release_survives_script_flush<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| b).unwrap();
    // A first release loads the script on every node; the flush then takes it away again.
    d.lock("s0").unwrap().release().unwrap();
    let g = d.lock("s").unwrap();
    for i in 0..5 {
        c.node(i).command(&["SCRIPT", "FLUSH"]).unwrap();
    }
    assert_report(&g.release(), &ReleaseOutcome::Released, 5);
    for i in 0..5 {
        // A node still pending when the release returned is released in the background.
        assert!(eventually(Duration::from_secs(1), || keys_on(&c, i) == 0));
    }
}

/// 9. An acquisition abandoned while two nodes are slowed by the proxy leaves no key on
///    any node once the proxies deliver.
pub fn abandoned_acquisition_leaves_no_key<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.proxy_urls(), |b| b.ttl(Duration::from_secs(10))).unwrap();
    d.lock("warm").unwrap().release().unwrap();
    c.proxy(0).set_latency(300 * MS);
    c.proxy(1).set_latency(300 * MS);
    // Node 2 holds the key for someone else, so the lock needs a slow node: it is pending
    // when abandoned.
    c.node(2).command(&["SET", "slow", "blocker"]).unwrap();
    d.abandon_lock_after("slow", 100 * MS);
    thread::sleep(Duration::from_secs(1));
    assert_eq!(value_on(&c, 2, "slow"), Reply::bulk("blocker"));
    c.node(2).command(&["DEL", "slow"]).unwrap();
    for i in 0..5 {
        assert_eq!(value_on(&c, i, "slow"), Reply::Nil, "key left on node {i}");
    }
}

/// 10. A node that answers garbage is a failed vote, not a panic; others are unaffected.
pub fn garbage_node_is_a_failed_vote<D: Driver>() {
    let c = cluster(2);
    let fake = FakeNode::start(|mut s| {
        let mut buf = [0u8; 1024];
        if s.read(&mut buf).is_ok() {
            let _ = s.write_all(b"\x00\xffgarbage!!\r\n*-5\r\n");
        }
    });
    let mut urls = c.urls();
    urls.push(fake.url());
    let d = D::build(&urls, |b| b).unwrap();
    for i in 0..5 {
        let g = d.lock(&format!("g{i}")).expect("two good nodes of three");
        let report = g.release().unwrap();
        assert_eq!(&report[..2], &vec![ReleaseOutcome::Released; 2][..]);
        // The two good nodes decide it; the garbage may be read before or after.
        let garbage = &report[2];
        assert!(
            matches!(garbage, ReleaseOutcome::Failed(_) | ReleaseOutcome::Pending),
            "{garbage:?}"
        );
    }
}

/// 11. 1,000 distinct locks held at once with auto-extension for 3 s on a 2 s ttl, taken by
///     50 threads at once (50 acquisitions in flight on one driver).
pub fn thousand_auto_extended_locks<D: Driver>() {
    let c = cluster(5);
    // A renewal of 1,000 locks is 5,000 commands: give each round 200 ms rather than the
    // default 5% of the ttl, so a loaded test machine is not mistaken for a lost quorum.
    // A 2 s ttl leaves the renewals 667 ms; two rounds of them fall in the 3 s hold.
    let d = D::build(&c.urls(), |b| {
        b.ttl(Duration::from_secs(2))
            .attempt_timeout(200 * MS)
            .auto_extend(Some(AutoExtend::default()))
    })
    .unwrap();
    let threads: Vec<_> = (0..50)
        .map(|t| {
            let d = d.clone();
            thread::spawn(move || {
                (0..20)
                    .map(|i| d.lock(&format!("many:{t}:{i}")).expect("lock"))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let guards: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(guards.len(), 1000);
    thread::sleep(Duration::from_secs(3));
    let lost = guards.iter().filter(|g| g.lost_reason().is_some()).count();
    assert_eq!(lost, 0);
    for g in guards {
        g.release().unwrap();
    }
    for i in 0..5 {
        assert_eq!(keys_on(&c, i), 0);
    }
}

/// 12. One node: the plain single-instance lock.
pub fn single_node<D: Driver>() {
    let c = cluster(1);
    let d = D::build(&c.urls(), |b| b).unwrap();
    let g = d.lock("one").unwrap();
    let other = D::build(&c.urls(), |b| b).unwrap();
    assert!(matches!(
        other.try_lock("one"),
        Err(LockError::Acquire {
            reason: AcquireFailure::Contended { .. },
            ..
        })
    ));
    // The same client knows without asking the node.
    assert!(matches!(
        d.try_lock("one"),
        Err(LockError::Acquire {
            reason: AcquireFailure::HeldLocally,
            ..
        })
    ));
    assert_eq!(value_on(&c, 0, "one"), Reply::bulk(&g.token()));
    assert_eq!(g.release().unwrap(), vec![ReleaseOutcome::Released]);
    let validity = d.with_lock_holding("one", 10 * MS).unwrap();
    assert!(validity > Duration::ZERO);
    assert_eq!(keys_on(&c, 0), 0);
}

/// A node that accepts connections and never answers costs at most the attempt timeout.
pub fn silent_node_is_outwaited<D: Driver>() {
    let c = cluster(2);
    let silent = FakeNode::start(|mut s| {
        let mut buf = [0u8; 1024];
        // Read and never answer, until the client goes away.
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    });
    let mut urls = c.urls();
    urls.push(silent.url());
    let d = D::build(&urls, |b| b.quorum(3).retry(RetryPolicy::once())).unwrap();
    let start = Instant::now();
    let err = d
        .lock("quiet")
        .err()
        .expect("three votes needed, two possible");
    assert!(
        matches!(
            err.acquire_failure(),
            Some(AcquireFailure::QuorumUnreachable { .. })
        ),
        "{err}"
    );
    let bound = d.config().attempt_timeout() + Duration::from_secs(1);
    assert!(
        start.elapsed() <= bound,
        "{:?} > {bound:?}",
        start.elapsed()
    );
    // With the default quorum the silent node changes nothing.
    let d = D::build(&urls, |b| b).unwrap();
    d.lock("quiet").unwrap().release().unwrap();
}

/// Nodes that refuse connections fail the lock quickly and cleanly.
pub fn refused_connections_fail_fast<D: Driver>() {
    // Three different ports: a configuration naming one server twice is refused.
    let ports: Vec<String> = refused_ports(3)
        .expect("three free ports")
        .iter()
        .map(|addr| format!("redis://{addr}"))
        .collect();
    let d = D::build(&ports, |b| b.retry(RetryPolicy::once())).unwrap();
    let start = Instant::now();
    let err = d.lock("nobody").err().expect("no node");
    assert!(
        matches!(
            err.acquire_failure(),
            Some(AcquireFailure::QuorumUnreachable { .. })
        ),
        "{err}"
    );
    assert!(
        start.elapsed() <= Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

/// Bad URLs and configs are errors that name the problem.
pub fn bad_urls_and_configs_are_named<D: Driver>() {
    let err = D::build(&["rediss://h:1?ca=/nonexistent/ca.pem".into()], |b| b)
        .err()
        .unwrap();
    assert!(err.to_string().contains("TLS"), "{err}");
    let err = D::build(&["nope".into()], |b| b).err().unwrap();
    assert!(matches!(err, LockError::Address(_)), "{err}");
    let err = D::build(&["127.0.0.1:1".into()], |b| b.quorum(5))
        .err()
        .unwrap();
    assert!(err.to_string().contains("quorum"), "{err}");
    let err = D::build(&["127.0.0.1:1".into()], |b| b.ttl(Duration::ZERO))
        .err()
        .unwrap();
    assert!(err.to_string().contains("ttl"), "{err}");
    let err = D::build(&["redis://u:hunter2@h:99999".into()], |b| b)
        .err()
        .unwrap();
    for shown in [err.to_string(), format!("{err:?}")] {
        assert!(!shown.contains("hunter2"), "the password leaked: {shown}");
    }
    // A bad per-lock option is a configuration error, not a hang.
    let port = refused_port().expect("a free port");
    let d = D::build(&[format!("redis://{port}")], |b| b).unwrap();
    let bad = LockOptions::default().retry(RetryPolicy {
        max_attempts: Some(0),
        ..RetryPolicy::default()
    });
    let err = d.lock_with("x", bad).err().unwrap();
    assert!(matches!(err, LockError::Config(_)), "{err}");
}

/// No password in a driver handle's `Debug` (it reaches the configuration, every node's
/// settings and the builder's): `***` stands in for it. Nothing listens on the ports.
pub fn debug_output_hides_passwords<D: Driver>() {
    let ports = refused_ports(2).expect("two free ports");
    let urls = [
        format!("redis://app:hunter2@{}/2", ports[0]),
        format!("redis://hunter2@{}", ports[1]),
    ];
    let d = D::build(&urls, |b| b).unwrap();
    let shown = d.handle_debug();
    assert!(!shown.contains("hunter2"), "the password leaked: {shown}");
    assert!(shown.contains("***"), "{shown}");
}

// ---- helpers ----

/// The guard tells how the acquisition went (attempts, time, each node's answer, by the
/// address the user wrote), and so does every failure.
pub fn statistics_on_success_and_failure<D: Driver>() {
    let c = cluster(3);
    let names: Vec<String> = c.nodes().iter().map(|n| n.addr().to_string()).collect();
    // A quorum of 3: the decision waits for every node, so each outcome is known.
    let d = D::build(&c.urls(), |b| b.quorum(3).retry(fast_retry(3))).unwrap();
    let started = Instant::now();
    let guard = d.lock("stats").expect("free");
    let stats = guard.stats();
    assert_eq!(stats.attempts, 1, "{stats}");
    assert!(stats.elapsed <= started.elapsed(), "{stats}");
    let seen: Vec<(String, AcquireOutcome)> = (stats.nodes.iter())
        .map(|n| (n.node.to_string(), n.outcome.clone()))
        .collect();
    let locked: Vec<(String, AcquireOutcome)> = (names.iter())
        .map(|n| (n.clone(), AcquireOutcome::Locked))
        .collect();
    assert_eq!(seen, locked, "{stats}");

    // Contended (another client: this one's own calls queue behind its lock): every
    // attempt made, the last one's answers, on the error.
    let other = D::build(&c.urls(), |b| b.quorum(3).retry(fast_retry(3))).unwrap();
    let err = other.lock("stats").err().expect("held");
    // An early attempt (the place in the waiters' queue) bounds the call by the policy's
    // whole wait: on a loaded machine that can end it first, with the last reason kept.
    let (nodes, stats) = match &err {
        LockError::Acquire {
            reason: AcquireFailure::Contended { nodes },
            stats,
        } => (nodes, stats),
        LockError::Acquire {
            reason: AcquireFailure::WaitDeadline { last: Some(last) },
            stats,
        } => match last.as_ref() {
            AcquireFailure::Contended { nodes } => (nodes, stats),
            _ => panic!("{err}"),
        },
        _ => panic!("{err}"),
    };
    // Three counted, and early ones (docs/design.md, "The waiters' queue"): the place in
    // the waiters' queue taken at once after the first, and the agreed ticket sent at once
    // if the client had not read the nodes' clocks yet (a lock right after `build`); a wait
    // that ran out first made at least the first attempt and the place.
    let deadline = matches!(
        err.acquire_failure(),
        Some(AcquireFailure::WaitDeadline { .. })
    );
    let least = if deadline { 2 } else { 4 };
    assert!((least..=5).contains(&stats.attempts), "{err}");
    assert!(!nodes.is_empty(), "{err}");
    assert!(
        (stats.nodes.iter()).all(|n| names.contains(&n.node.to_string())
            && matches!(n.outcome, AcquireOutcome::Held | AcquireOutcome::Pending)),
        "{stats}"
    );
    assert_eq!(
        stats.count(|o| *o == AcquireOutcome::Held),
        nodes.len(),
        "{stats}"
    );
    assert_report(&guard.release(), &ReleaseOutcome::Released, 3);
}

pub(crate) fn cluster(n: usize) -> Cluster {
    Cluster::start(n).expect("start test nodes")
}

fn fast_retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: Some(attempts),
        max_wait: Some(Duration::from_secs(30)),
        delay_min: MS,
        delay_max: 5 * MS,
    }
}

/// How many keys node `i` holds.
pub fn keys_on(c: &Cluster, i: usize) -> i64 {
    c.node(i).command(&["DBSIZE"]).unwrap().as_int().unwrap()
}

/// The value of `key` on node `i`.
pub fn value_on(c: &Cluster, i: usize, key: &str) -> Reply {
    c.node(i).command(&["GET", key]).unwrap()
}

/// Polls `check` every 10 ms for at most `limit`: a lock returns at quorum, so a slower
/// node may apply its command a moment later.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(10 * MS);
    }
}

/// A fake node on loopback: each accepted connection is handed to `serve` on its own
/// thread. Stops accepting on drop; bounded to 30 s in any case.
pub(crate) struct FakeNode {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl FakeNode {
    pub(crate) fn start(serve: fn(std::net::TcpStream)) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !flag.load(Ordering::SeqCst) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                        thread::spawn(move || serve(s));
                    }
                    Err(_) => thread::sleep(10 * MS),
                }
            }
        });
        Self {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
