//! The driver thread's lifetime, seen from `/proc`: it outlives the last handle while a guard
//! or a background release needs it, then exits; with nothing in flight it exits at once. A
//! test binary of its own, so no other test's driver thread is counted.

#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use async_io::Timer;
use redlock_async_std::Redlock;
use redlock_testkit::Cluster;

const MS: Duration = Duration::from_millis(1);

#[test]
fn driver_thread_ends_after_last_handle_guard_and_release() {
    let c = Cluster::start(3).expect("start test nodes");
    assert_eq!(driver_threads(), 0);
    // Under async-std: a guard outlives its handle, and a dropped guard's release is
    // finished in the background before the thread exits.
    let r = Redlock::builder(c.proxy_urls())
        .unwrap()
        .config(|b| b.ttl(Duration::from_secs(30)))
        .build()
        .unwrap();
    async_std::task::block_on(async {
        let g = r.lock("bye").await.unwrap();
        assert_eq!(driver_threads(), 1);
        drop(r);
        sleep(200 * MS).await;
        assert_eq!(driver_threads(), 1, "the guard still needs the driver");
        // A release round trip now takes at least 600 ms.
        for i in 0..3 {
            c.proxy(i).set_latency(300 * MS);
        }
        let dropped = Instant::now();
        drop(g);
        assert!(wait_for_no_driver(Duration::from_secs(10)).await);
        assert!(
            dropped.elapsed() >= 500 * MS,
            "exited before the release finished"
        );
        for i in 0..3 {
            assert_eq!(keys_on(&c, i), 0, "key left on node {i}");
            c.proxy(i).set_latency(Duration::ZERO);
        }
    });
    // Under smol: a handle that never locked, to nodes that are down, ends at once.
    smol::block_on(async {
        let r = Redlock::new(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]).unwrap();
        let r2 = r.clone();
        // The thread names itself once it runs.
        assert!(eventually(Duration::from_secs(1), || driver_threads() == 1).await);
        drop(r);
        sleep(100 * MS).await;
        assert_eq!(driver_threads(), 1, "a clone still needs the driver");
        drop(r2);
        assert!(wait_for_no_driver(Duration::from_secs(2)).await);
    });
}

async fn wait_for_no_driver(limit: Duration) -> bool {
    eventually(limit, || driver_threads() == 0).await
}

/// Polls `check` every 10 ms for at most `limit`.
async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !check() {
        if Instant::now() >= deadline {
            return false;
        }
        sleep(10 * MS).await;
    }
    true
}

async fn sleep(d: Duration) {
    Timer::after(d).await;
}

/// How many keys node `i` holds.
fn keys_on(c: &Cluster, i: usize) -> i64 {
    c.node(i).command(&["DBSIZE"]).unwrap().as_int().unwrap()
}

/// Threads of this process named like the driver thread.
fn driver_threads() -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").expect("read /proc/self/task");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "redlock-asyncio")
        .count()
}
