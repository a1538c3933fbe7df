//! The blocking driver against real servers (redis-server, or the binary named by
//! `REDLOCK_SERVER_BIN`), started, killed, paused, restarted and slowed by the test kit.
//!
//! Each scenario is a plain function of the cluster and a [`Make`] that builds the driver
//! under test, so the list can move into a shared conformance suite. Every loop is bounded in
//! count and time, every blocking call by the core's timeouts and retry policy; every process
//! is stopped by the kit's `Drop`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redlock_blocking::{
    AutoExtend, LockError, LockGuard, LockOptions, Redlock, ReleaseOutcome, RetryPolicy,
};
use redlock_core::ConfigBuilder;
use redlock_testkit::{Cluster, Reply};

const MS: Duration = Duration::from_millis(1);

/// A change to the default configuration.
type Tweak<'a> = &'a dyn Fn(ConfigBuilder) -> ConfigBuilder;

/// Builds the driver under test for these node URLs and configuration tweak.
type Make = fn(&[String], Tweak<'_>) -> Redlock;

fn make(urls: &[String], tweak: Tweak<'_>) -> Redlock {
    Redlock::builder(urls)
        .unwrap()
        .config(tweak)
        .build()
        .unwrap()
}

/// Starts `nodes` nodes, runs `scenario` against them, and stops them (also on panic).
fn run(nodes: usize, scenario: fn(&Cluster, Make)) {
    let cluster = Cluster::start(nodes).expect("start test nodes");
    scenario(&cluster, make);
}

#[test]
fn mutual_exclusion() {
    run(5, scenario_mutual_exclusion);
}

#[test]
fn minority_down_works_majority_down_fails_in_bounded_time() {
    run(5, scenario_minority_down_majority_down);
}

#[test]
fn paused_node_is_outwaited_and_rejoins() {
    run(5, scenario_paused_node);
}

#[test]
fn restarted_node_is_reconnected() {
    run(3, scenario_restarted_node);
}

#[test]
fn expired_lock_reports_lost_and_leaves_the_next_holder_alone() {
    run(5, scenario_expired_lock);
}

#[test]
fn auto_extension_outlasts_a_contender() {
    run(5, scenario_auto_extension);
}

#[test]
fn release_spares_another_token() {
    run(5, scenario_release_spares_another_token);
}

#[test]
fn release_survives_script_flush() {
    run(5, scenario_script_flush);
}

#[test]
fn abandoned_acquisition_leaves_no_key() {
    run(5, scenario_abandoned_acquisition);
}

#[test]
fn garbage_node_is_a_failed_vote() {
    run(2, scenario_garbage_node);
}

#[test]
fn thousand_auto_extended_locks() {
    run(5, scenario_thousand_locks);
}

#[test]
fn single_node() {
    run(1, scenario_single_node);
}

#[test]
fn driver_finishes_releases_then_closes_after_last_handle() {
    run(3, scenario_last_handle_dropped);
}

#[test]
fn bad_urls_and_configs_are_named() {
    let err = Redlock::new(["rediss://h:1"]).unwrap_err();
    assert!(err.to_string().contains("TLS"), "{err}");
    let err = Redlock::new(["nope"]).unwrap_err();
    assert!(matches!(err, LockError::Address(_)));
    let err = Redlock::new(["redis://u:hunter2@h:99999"]).unwrap_err();
    assert!(!err.to_string().contains("hunter2"), "{err}");
    let err = Redlock::builder(["127.0.0.1:1"])
        .unwrap()
        .config(|c| c.quorum(5))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("quorum"), "{err}");
    let err = Redlock::builder(["127.0.0.1:1"])
        .unwrap()
        .config(|c| c.ttl(Duration::ZERO))
        .build()
        .unwrap_err();
    assert!(matches!(err, LockError::Config(_)), "{err}");
    // Building succeeds with every node down; locking then fails cleanly and quickly.
    let r = Redlock::builder(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"])
        .unwrap()
        .config(|c| c.retry(RetryPolicy::once()))
        .connect_timeout(200 * MS)
        .build()
        .unwrap();
    let start = Instant::now();
    assert!(matches!(
        r.lock("x"),
        Err(LockError::QuorumUnreachable { .. })
    ));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    // A bad per-lock option is a configuration error, not a hang.
    let bad = LockOptions::default().retry(RetryPolicy {
        max_attempts: Some(0),
        ..RetryPolicy::default()
    });
    assert!(matches!(r.lock_with("x", bad), Err(LockError::Config(_))));
}

#[test]
fn handles_are_clone_send_sync() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    fn send<T: Send + Sync + 'static>() {}
    check::<Redlock>();
    check::<redlock_blocking::LockRef>();
    send::<LockGuard>();
}

// ---- scenarios ----

/// 1. 16 threads x 50 critical sections on one resource: zero overlaps, all complete.
fn scenario_mutual_exclusion(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &|b| {
        b.ttl(Duration::from_secs(5)).retry(fast_retry(100_000))
    });
    let holder = AtomicBool::new(false);
    let done = AtomicUsize::new(0);
    thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| {
                for _ in 0..50 {
                    let guard = r.lock("mutex").expect("lock");
                    assert!(!holder.swap(true, Ordering::SeqCst), "two holders at once");
                    thread::yield_now();
                    holder.store(false, Ordering::SeqCst);
                    guard.release().expect("release");
                    done.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    assert_eq!(done.load(Ordering::SeqCst), 800);
}

/// 2. Two of five nodes killed: locks still succeed. Three killed: quorum unreachable,
///    within (attempt timeout + retry delay) x attempts + 1 s.
fn scenario_minority_down_majority_down(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &ttl(Duration::from_secs(2)));
    r.lock("warmup").unwrap().release().unwrap();
    c.node(0).kill().unwrap();
    c.node(1).kill().unwrap();
    for i in 0..5 {
        let g = r.lock(format!("k{i}")).expect("lock with 3 of 5 up");
        g.release().unwrap();
    }
    c.node(2).kill().unwrap();
    let config = r.config();
    let retry = config.retry();
    let attempts = retry.max_attempts.unwrap();
    let bound = (config.attempt_timeout() + retry.delay_max) * attempts + Duration::from_secs(1);
    let start = Instant::now();
    let err = r.lock("k").unwrap_err();
    assert!(matches!(err, LockError::QuorumUnreachable { .. }), "{err}");
    assert!(
        start.elapsed() <= bound,
        "{:?} > {bound:?}",
        start.elapsed()
    );
}

/// 3. A paused node does not delay decisions; after resume its late replies change nothing
///    and it serves new locks.
fn scenario_paused_node(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &ttl(Duration::from_secs(2)));
    r.lock("warm").unwrap().release().unwrap();
    c.node(4).pause().unwrap();
    let bound = r.config().attempt_timeout() + Duration::from_secs(1);
    let start = Instant::now();
    let g = r.lock("p").unwrap();
    let report = g.release().unwrap();
    assert!(start.elapsed() <= 2 * bound, "took {:?}", start.elapsed());
    assert!(matches!(report[4], ReleaseOutcome::Failed(_)));
    assert_eq!(&report[..4], &vec![ReleaseOutcome::Released; 4][..]);
    c.node(4).resume().unwrap();
    // Late SET then release on the resumed node: nothing stays behind.
    thread::sleep(200 * MS);
    assert_eq!(value_on(c, 4, "p"), Reply::Nil);
    let g = r.lock("p2").unwrap();
    let token = Reply::bulk(&g.token().to_string());
    assert!(eventually(Duration::from_secs(1), || value_on(c, 4, "p2") == token));
    g.release().unwrap();
}

/// 4. A node restarted on the same port is reconnected and used again.
fn scenario_restarted_node(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &ttl(Duration::from_secs(2)));
    r.lock("a").unwrap().release().unwrap();
    c.node(1).kill().unwrap();
    c.node(1).restart_empty().unwrap();
    // Bounded: reconnect backoff is at most 2 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let g = r.lock("b").unwrap();
        let token = Reply::bulk(&g.token().to_string());
        let used = eventually(200 * MS, || value_on(c, 1, "b") == token);
        g.release().unwrap();
        if used {
            break;
        }
        assert!(Instant::now() < deadline, "node 1 never used again");
        thread::sleep(100 * MS);
    }
}

/// 5. Held past its validity: extend reports lost and sends nothing, release reports
///    already expired, and another client's lock taken meanwhile is untouched.
fn scenario_expired_lock(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &ttl(500 * MS));
    let other = make(&c.urls(), &ttl(Duration::from_secs(5)));
    let start = Instant::now();
    let g = r.lock("exp").unwrap();
    assert_eq!(g.wait_lost(Duration::from_secs(2)), g.lost_reason());
    assert!(g.is_lost() && g.validity() == Duration::ZERO);
    // Past the ttl and the drift: the keys expired, and the core released them after the
    // loss, before anyone else took the resource.
    thread::sleep((start + 700 * MS).saturating_duration_since(Instant::now()));
    let theirs = other.lock("exp").unwrap();
    let err = g.extend().unwrap_err();
    assert!(matches!(err, LockError::Lost(_)), "{err}");
    let report = g.release().unwrap();
    assert_eq!(report, vec![ReleaseOutcome::AlreadyExpired; 5]);
    for i in 0..5 {
        assert_eq!(
            value_on(c, i, "exp"),
            Reply::bulk(&theirs.token().to_string())
        );
    }
    theirs.release().unwrap();
}

/// 6. Auto-extension holds a 1 s lock for 5 s against a contender, who gets it within one
///    retry delay after the release.
fn scenario_auto_extension(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &ttl(Duration::from_secs(1)));
    let auto = AutoExtend {
        max_hold: Some(Duration::from_secs(30)),
        ..AutoExtend::default()
    };
    let g = r
        .lock_with("auto", LockOptions::default().auto_extend(Some(auto)))
        .unwrap();
    let first_deadline = g.deadline();
    let contender = r.clone();
    let task = thread::spawn(move || {
        let wait = LockOptions::default().retry(RetryPolicy {
            max_attempts: None,
            max_wait: Some(Duration::from_secs(20)),
            ..RetryPolicy::default()
        });
        let got = contender.lock_with("auto", wait).unwrap();
        let at = Instant::now();
        got.release().unwrap();
        at
    });
    assert_eq!(g.wait_lost(Duration::from_secs(5)), None);
    assert!(g.deadline() > first_deadline && g.validity() > Duration::ZERO);
    assert!(!task.is_finished(), "contender got a held lock");
    let released = Instant::now();
    g.release().unwrap();
    let got_at = task.join().unwrap();
    let delay = got_at.saturating_duration_since(released);
    let bound = r.config().retry().delay_max + r.config().attempt_timeout() + 200 * MS;
    assert!(delay <= bound, "contender waited {delay:?} after release");
}

/// 7. Release never deletes a key that holds another token.
fn scenario_release_spares_another_token(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &ttl(Duration::from_secs(5)));
    let g = r.lock("mine").unwrap();
    for i in 0..5 {
        c.node(i).command(&["SET", "mine", "someone-else"]).unwrap();
    }
    let report = g.release().unwrap();
    assert_eq!(report, vec![ReleaseOutcome::NotHeld; 5]);
    for i in 0..5 {
        assert_eq!(value_on(c, i, "mine"), Reply::bulk("someone-else"));
    }
}

/// 8. `SCRIPT FLUSH` between acquire and release: NOSCRIPT, then EVAL, still releases.
fn scenario_script_flush(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &ttl(Duration::from_secs(5)));
    // Load the script once, then flush it everywhere.
    r.lock("s0").unwrap().release().unwrap();
    let g = r.lock("s").unwrap();
    for i in 0..5 {
        c.node(i).command(&["SCRIPT", "FLUSH"]).unwrap();
    }
    let report = g.release().unwrap();
    assert_eq!(report, vec![ReleaseOutcome::Released; 5]);
    for i in 0..5 {
        assert_eq!(keys_on(c, i), 0);
    }
}

/// 9. An acquisition that gives up (its wait bound is shorter than two slow links' latency)
///    leaves no key once the slow links deliver. The blocking twin of a dropped `lock()`
///    future.
fn scenario_abandoned_acquisition(c: &Cluster, make: Make) {
    let r = make(&c.proxy_urls(), &ttl(Duration::from_secs(10)));
    r.lock("warm").unwrap().release().unwrap();
    let latency = 300 * MS;
    c.proxy(0).set_latency(latency);
    c.proxy(1).set_latency(latency);
    // Three fast nodes, one of them held by someone else, and two slow ones: the lock needs
    // a slow node, whose answer comes after the attempt timeout.
    c.node(2).command(&["SET", "slow", "blocker"]).unwrap();
    assert!(r.config().attempt_timeout() < 2 * latency);
    let wait = LockOptions::default().max_wait(r.config(), 200 * MS);
    let start = Instant::now();
    let err = r.lock_with("slow", wait).unwrap_err();
    assert!(matches!(err, LockError::WaitDeadline), "{err}");
    let bound = r.config().attempt_timeout() + Duration::from_secs(1);
    assert!(
        start.elapsed() <= bound,
        "gave up after {:?}",
        start.elapsed()
    );
    // The late SETs and the cleanup releases behind them: both through, one way each.
    thread::sleep(3 * latency + 100 * MS);
    c.node(2).command(&["DEL", "slow"]).unwrap();
    for i in 0..5 {
        assert_eq!(value_on(c, i, "slow"), Reply::Nil, "key left on node {i}");
    }
}

/// 10. A node that answers garbage is a failed node, not a panic; others are unaffected.
fn scenario_garbage_node(c: &Cluster, make: Make) {
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_addr = fake.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    fake.set_nonblocking(true).unwrap();
    let server = thread::spawn(move || {
        use std::io::{Read, Write};
        let deadline = Instant::now() + Duration::from_secs(20);
        while !stop2.load(Ordering::SeqCst) && Instant::now() < deadline {
            match fake.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(100 * MS)).unwrap();
                    let mut buf = [0u8; 1024];
                    if s.read(&mut buf).is_ok() {
                        let _ = s.write_all(b"\x00\xffgarbage!!\r\n*-5\r\n");
                    }
                }
                Err(_) => thread::sleep(10 * MS),
            }
        }
    });
    let mut urls = c.urls();
    urls.push(format!("redis://{fake_addr}"));
    let r = make(&urls, &ttl(Duration::from_secs(5)));
    for i in 0..5 {
        let g = r.lock(format!("g{i}")).expect("two good nodes of three");
        let report = g.release().unwrap();
        assert_eq!(&report[..2], &vec![ReleaseOutcome::Released; 2][..]);
        assert!(matches!(report[2], ReleaseOutcome::Failed(_)));
    }
    stop.store(true, Ordering::SeqCst);
    server.join().unwrap();
}

/// 11. 1,000 distinct locks held at once with auto-extension for 3 s on a 1 s ttl.
fn scenario_thousand_locks(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &|b| {
        b.ttl(Duration::from_secs(1))
            .auto_extend(Some(AutoExtend::default()))
    });
    let (threads, each) = (8, 125);
    let start = Barrier::new(threads);
    let guards: Vec<LockGuard> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (r, start) = (&r, &start);
                s.spawn(move || {
                    start.wait();
                    (0..each)
                        .map(|i| r.lock(format!("many:{t}:{i}")).expect("lock"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert_eq!(guards.len(), 1000);
    thread::sleep(Duration::from_secs(3));
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    assert_eq!(lost, 0);
    for g in guards {
        g.release().unwrap();
    }
    for i in 0..5 {
        assert_eq!(keys_on(c, i), 0);
    }
}

/// 12. One node: the plain single-instance lock.
fn scenario_single_node(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &ttl(Duration::from_secs(5)));
    let g = r.lock("one").unwrap();
    assert!(matches!(
        r.try_lock("one"),
        Err(LockError::Contended { .. })
    ));
    assert_eq!(value_on(c, 0, "one"), Reply::bulk(&g.token().to_string()));
    assert_eq!(g.release().unwrap(), vec![ReleaseOutcome::Released]);
    let value = r
        .with_lock("one", |lock| {
            assert!(lock.validity() > Duration::ZERO);
            Ok::<_, std::io::Error>(7)
        })
        .unwrap();
    assert_eq!(value, 7);
    let err = r
        .with_lock("one", |_| Err::<(), _>(std::io::Error::other("mine")))
        .unwrap_err();
    assert!(err.to_string().contains("mine"), "{err}");
    assert_eq!(keys_on(c, 0), 0);
}

/// 13. Dropping the last handle and a guard at once: the driver still finishes the
///     background release over slow links, then closes every connection.
fn scenario_last_handle_dropped(c: &Cluster, make: Make) {
    let r = make(&c.proxy_urls(), &ttl(Duration::from_secs(30)));
    let g = r.lock("last").unwrap();
    for i in 0..3 {
        c.proxy(i).set_latency(100 * MS);
    }
    let r2 = r.clone();
    drop((r, g));
    drop(r2);
    assert!(eventually(Duration::from_secs(5), || {
        (0..3).all(|i| value_on(c, i, "last") == Reply::Nil)
    }));
    let closed = || c.proxies().iter().all(|p| p.connections() == 0);
    assert!(
        eventually(Duration::from_secs(5), closed),
        "driver kept its sockets"
    );
}

// ---- helpers ----

fn ttl(ttl: Duration) -> impl Fn(ConfigBuilder) -> ConfigBuilder {
    move |c| c.ttl(ttl)
}

fn fast_retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: Some(attempts),
        max_wait: Some(Duration::from_secs(30)),
        delay_min: MS,
        delay_max: 5 * MS,
    }
}

fn keys_on(c: &Cluster, i: usize) -> i64 {
    c.node(i).command(&["DBSIZE"]).unwrap().as_int().unwrap()
}

fn value_on(c: &Cluster, i: usize, key: &str) -> Reply {
    c.node(i).command(&["GET", key]).unwrap()
}

/// Polls `check` every 10 ms for at most `limit`; a lock returns at quorum, so a slower
/// node may apply its command a moment later.
fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
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
