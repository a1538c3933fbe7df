//! The tokio driver against real servers (redis-server, or the binary named by
//! `REDLOCK_SERVER_BIN`), started, killed, paused, restarted and slowed by the test kit.
//! Every loop is bounded in count and time; every process is stopped by the kit's `Drop`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlock_testkit::{Cluster, Reply};
use redlock_tokio::{AutoExtend, LockError, LockOptions, Redlock, ReleaseOutcome, RetryPolicy};
use tokio::task::JoinSet;

const MS: Duration = Duration::from_millis(1);

fn cluster(n: usize) -> Cluster {
    Cluster::start(n).expect("start test nodes")
}

fn redlock(urls: &[String], ttl: Duration) -> Redlock {
    Redlock::builder(urls)
        .unwrap()
        .config(|c| c.ttl(ttl))
        .build()
        .unwrap()
}

fn fast_retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: Some(attempts),
        max_wait: Some(Duration::from_secs(30)),
        delay_min: MS,
        delay_max: 5 * MS,
    }
}

fn keys_on(cluster: &Cluster, i: usize) -> i64 {
    cluster
        .node(i)
        .command(&["DBSIZE"])
        .unwrap()
        .as_int()
        .unwrap()
}

fn value_on(cluster: &Cluster, i: usize, key: &str) -> Reply {
    cluster.node(i).command(&["GET", key]).unwrap()
}

/// Polls `check` every 10 ms for at most `limit`; a lock returns at quorum, so a slower
/// node may apply its command a moment later.
async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(10 * MS).await;
    }
}

/// 1. 16 tasks x 50 critical sections on one resource: zero overlaps, all complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion() {
    let c = cluster(5);
    let r = Redlock::builder(c.urls())
        .unwrap()
        .config(|b| b.ttl(Duration::from_secs(5)).retry(fast_retry(100_000)))
        .build()
        .unwrap();
    let holder = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..16 {
        let (r, holder, done) = (r.clone(), holder.clone(), done.clone());
        tasks.spawn(async move {
            for _ in 0..50 {
                let guard = r.lock("mutex").await.expect("lock");
                assert!(!holder.swap(true, Ordering::SeqCst), "two holders at once");
                tokio::task::yield_now().await;
                holder.store(false, Ordering::SeqCst);
                guard.release().await.expect("release");
                done.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    while let Some(result) = tasks.join_next().await {
        result.expect("task");
    }
    assert_eq!(done.load(Ordering::SeqCst), 800);
}

/// 2. Two of five nodes killed: locks still succeed. Three killed: quorum unreachable,
///    within (attempt timeout + retry delay) x attempts + 1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minority_down_works_majority_down_fails_in_bounded_time() {
    let c = cluster(5);
    let r = redlock(&c.urls(), Duration::from_secs(2));
    let first = r.lock("warmup").await.unwrap();
    first.release().await.unwrap();
    c.node(0).kill().unwrap();
    c.node(1).kill().unwrap();
    for i in 0..5 {
        let g = r.lock(format!("k{i}")).await.expect("lock with 3 of 5 up");
        g.release().await.unwrap();
    }
    c.node(2).kill().unwrap();
    let config = r.config();
    let retry = config.retry();
    let attempts = retry.max_attempts.unwrap();
    let bound = (config.attempt_timeout() + retry.delay_max) * attempts + Duration::from_secs(1);
    let start = Instant::now();
    let err = r.lock("k").await.unwrap_err();
    assert!(matches!(err, LockError::QuorumUnreachable { .. }), "{err}");
    assert!(
        start.elapsed() <= bound,
        "{:?} > {bound:?}",
        start.elapsed()
    );
}

/// 3. A paused node does not delay decisions; after resume its late replies change nothing
///    and it serves new locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_node_is_outwaited_and_rejoins() {
    let c = cluster(5);
    let r = redlock(&c.urls(), Duration::from_secs(2));
    r.lock("warm").await.unwrap().release().await.unwrap();
    c.node(4).pause().unwrap();
    let bound = r.config().attempt_timeout() + Duration::from_secs(1);
    let start = Instant::now();
    let g = r.lock("p").await.unwrap();
    let report = g.release().await.unwrap();
    assert!(start.elapsed() <= 2 * bound, "took {:?}", start.elapsed());
    assert!(matches!(report[4], ReleaseOutcome::Failed(_)));
    assert_eq!(&report[..4], &vec![ReleaseOutcome::Released; 4][..]);
    c.node(4).resume().unwrap();
    // Late SET then release on the resumed node: nothing stays behind.
    tokio::time::sleep(200 * MS).await;
    assert_eq!(value_on(&c, 4, "p"), Reply::Nil);
    let g = r.lock("p2").await.unwrap();
    let token = Reply::bulk(&g.token().to_string());
    assert!(eventually(Duration::from_secs(1), || value_on(&c, 4, "p2") == token).await);
    g.release().await.unwrap();
}

/// 4. A node restarted on the same port is reconnected and used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_node_is_reconnected() {
    let c = cluster(3);
    let r = redlock(&c.urls(), Duration::from_secs(2));
    r.lock("a").await.unwrap().release().await.unwrap();
    c.node(1).kill().unwrap();
    c.node(1).restart_empty().unwrap();
    // Bounded: reconnect backoff is at most 2 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let g = r.lock("b").await.unwrap();
        let token = Reply::bulk(&g.token().to_string());
        let used = eventually(200 * MS, || value_on(&c, 1, "b") == token).await;
        g.release().await.unwrap();
        if used {
            break;
        }
        assert!(Instant::now() < deadline, "node 1 never used again");
        tokio::time::sleep(100 * MS).await;
    }
}

/// 5. Held past its validity: extend reports lost and sends nothing, release reports
///    already expired, and another client's lock taken meanwhile is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_lock_reports_lost_and_leaves_the_next_holder_alone() {
    let c = cluster(5);
    let r = redlock(&c.urls(), 500 * MS);
    let other = redlock(&c.urls(), Duration::from_secs(5));
    let g = r.lock("exp").await.unwrap();
    tokio::time::sleep(700 * MS).await;
    assert!(g.lost_reason().is_some());
    let theirs = other.lock("exp").await.unwrap();
    let err = g.extend().await.unwrap_err();
    assert!(matches!(err, LockError::Lost(_)), "{err}");
    let report = g.release().await.unwrap();
    assert_eq!(report, vec![ReleaseOutcome::AlreadyExpired; 5]);
    for i in 0..5 {
        assert_eq!(
            value_on(&c, i, "exp"),
            Reply::bulk(&theirs.token().to_string())
        );
    }
    theirs.release().await.unwrap();
}

/// 6. Auto-extension holds a 1 s lock for 5 s against a contender, who gets it within one
///    retry delay after the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_extension_outlasts_a_contender() {
    let c = cluster(5);
    let r = redlock(&c.urls(), Duration::from_secs(1));
    let auto = AutoExtend {
        max_hold: Some(Duration::from_secs(30)),
        ..AutoExtend::default()
    };
    let g = r
        .lock_with("auto", LockOptions::default().auto_extend(Some(auto)))
        .await
        .unwrap();
    let contender = r.clone();
    let released_at = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let task = tokio::spawn(async move {
        let wait = LockOptions::default().retry(RetryPolicy {
            max_attempts: None,
            max_wait: Some(Duration::from_secs(20)),
            ..RetryPolicy::default()
        });
        let got = contender.lock_with("auto", wait).await.unwrap();
        let at = Instant::now();
        got.release().await.unwrap();
        at
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(g.lost_reason().is_none());
    assert!(!task.is_finished(), "contender got a held lock");
    *released_at.lock().unwrap() = Some(Instant::now());
    g.release().await.unwrap();
    let got_at = task.await.unwrap();
    let released = released_at.lock().unwrap().unwrap();
    let delay = got_at.saturating_duration_since(released);
    let bound = r.config().retry().delay_max + r.config().attempt_timeout() + 200 * MS;
    assert!(delay <= bound, "contender waited {delay:?} after release");
}

/// 7. Release never deletes a key that holds another token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_spares_another_token() {
    let c = cluster(5);
    let r = redlock(&c.urls(), Duration::from_secs(5));
    let g = r.lock("mine").await.unwrap();
    for i in 0..5 {
        c.node(i).command(&["SET", "mine", "someone-else"]).unwrap();
    }
    let report = g.release().await.unwrap();
    assert_eq!(report, vec![ReleaseOutcome::NotHeld; 5]);
    for i in 0..5 {
        assert_eq!(value_on(&c, i, "mine"), Reply::bulk("someone-else"));
    }
}

/// 8. `SCRIPT FLUSH` between acquire and release: NOSCRIPT, then EVAL, still releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_survives_script_flush() {
    let c = cluster(5);
    let r = redlock(&c.urls(), Duration::from_secs(5));
    // Load the script once, then flush it everywhere.
    r.lock("s0").await.unwrap().release().await.unwrap();
    let g = r.lock("s").await.unwrap();
    for i in 0..5 {
        c.node(i).command(&["SCRIPT", "FLUSH"]).unwrap();
    }
    let report = g.release().await.unwrap();
    assert_eq!(report, vec![ReleaseOutcome::Released; 5]);
    for i in 0..5 {
        assert_eq!(keys_on(&c, i), 0);
    }
}

/// 9. A dropped `lock()` future while two nodes are slow leaves no key once the slow
///    links deliver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_lock_future_leaves_no_key() {
    let c = cluster(5);
    let r = redlock(&c.proxy_urls(), Duration::from_secs(10));
    r.lock("warm").await.unwrap().release().await.unwrap();
    c.proxy(0).set_latency(300 * MS);
    c.proxy(1).set_latency(300 * MS);
    // Three fast nodes and two slow ones: the lock needs a slow node, so it is pending.
    c.node(2).command(&["SET", "slow", "blocker"]).unwrap();
    let attempt = tokio::time::timeout(100 * MS, r.lock("slow")).await;
    assert!(attempt.is_err(), "should still be pending");
    tokio::time::sleep(Duration::from_secs(1)).await;
    c.node(2).command(&["DEL", "slow"]).unwrap();
    for i in 0..5 {
        assert_eq!(value_on(&c, i, "slow"), Reply::Nil, "key left on node {i}");
    }
}

/// 10. A node that answers garbage is a failed node, not a panic; others are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_node_is_a_failed_vote() {
    let c = cluster(2);
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_addr = fake.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    fake.set_nonblocking(true).unwrap();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let deadline = Instant::now() + Duration::from_secs(20);
        while !stop2.load(Ordering::SeqCst) && Instant::now() < deadline {
            match fake.accept() {
                Ok((mut s, _)) => {
                    s.set_read_timeout(Some(100 * MS)).unwrap();
                    let mut buf = [0u8; 1024];
                    if s.read(&mut buf).is_ok() {
                        let _ = s.write_all(b"\x00\xffgarbage!!\r\n*-5\r\n");
                    }
                }
                Err(_) => std::thread::sleep(10 * MS),
            }
        }
    });
    let mut urls = c.urls();
    urls.push(format!("redis://{fake_addr}"));
    let r = redlock(&urls, Duration::from_secs(5));
    for i in 0..5 {
        let g = r
            .lock(format!("g{i}"))
            .await
            .expect("two good nodes of three");
        let report = g.release().await.unwrap();
        assert_eq!(&report[..2], &vec![ReleaseOutcome::Released; 2][..]);
        assert!(matches!(report[2], ReleaseOutcome::Failed(_)));
    }
    stop.store(true, Ordering::SeqCst);
    server.join().unwrap();
}

/// 11. 1,000 distinct locks held at once with auto-extension for 3 s on a 1 s ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_auto_extended_locks() {
    let c = cluster(5);
    let r = Redlock::builder(c.urls())
        .unwrap()
        .config(|b| {
            b.ttl(Duration::from_secs(1))
                .auto_extend(Some(AutoExtend::default()))
        })
        .build()
        .unwrap();
    let mut tasks = JoinSet::new();
    for i in 0..1000 {
        let r = r.clone();
        tasks.spawn(async move { r.lock(format!("many:{i}")).await });
    }
    let mut guards = Vec::new();
    while let Some(result) = tasks.join_next().await {
        guards.push(result.unwrap().expect("lock"));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let lost = guards.iter().filter(|g| g.lost_reason().is_some()).count();
    assert_eq!(lost, 0);
    for g in guards {
        g.release().await.unwrap();
    }
    for i in 0..5 {
        assert_eq!(keys_on(&c, i), 0);
    }
}

/// 12. One node: the plain single-instance lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node() {
    let c = cluster(1);
    let r = redlock(&c.urls(), Duration::from_secs(5));
    let g = r.lock("one").await.unwrap();
    assert!(matches!(
        r.try_lock("one").await,
        Err(LockError::Contended { .. })
    ));
    assert_eq!(value_on(&c, 0, "one"), Reply::bulk(&g.token().to_string()));
    assert_eq!(g.release().await.unwrap(), vec![ReleaseOutcome::Released]);
    let value = r
        .with_lock("one", |lock| async move {
            assert!(lock.validity() > Duration::ZERO);
            Ok::<_, std::io::Error>(7)
        })
        .await
        .unwrap();
    assert_eq!(value, 7);
}

#[tokio::test]
async fn bad_urls_and_configs_are_named() {
    let err = Redlock::new(["rediss://h:1"]).unwrap_err();
    assert!(err.to_string().contains("TLS"), "{err}");
    let err = Redlock::new(["nope"]).unwrap_err();
    assert!(matches!(err, LockError::Address(_)));
    let err = Redlock::builder(["127.0.0.1:1"])
        .unwrap()
        .config(|c| c.quorum(5))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("quorum"), "{err}");
    // Building succeeds with every node down; locking then fails cleanly.
    let r = Redlock::builder(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"])
        .unwrap()
        .config(|c| c.retry(RetryPolicy::once()))
        .build()
        .unwrap();
    assert!(matches!(
        r.lock("x").await,
        Err(LockError::QuorumUnreachable { .. })
    ));
}

#[test]
fn handles_are_clone_send_sync() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    fn send<T: Send + 'static>() {}
    check::<Redlock>();
    check::<redlock_tokio::LockRef>();
    send::<redlock_tokio::LockGuard>();
}
