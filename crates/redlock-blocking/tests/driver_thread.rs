//! The driver thread's lifetime, seen from `/proc`: it outlives the last handle while a
//! background release is in flight, then exits. A test binary of its own, so no other test's
//! driver thread is counted.

#![cfg(target_os = "linux")]

use std::thread;
use std::time::{Duration, Instant};

use redlock_blocking::Redlock;
use redlock_testkit::{Cluster, Reply};

const MS: Duration = Duration::from_millis(1);

#[test]
fn driver_thread_ends_after_last_handle_and_release() {
    let c = Cluster::start(3).expect("start test nodes");
    assert_eq!(driver_threads(), 0);
    let r = Redlock::builder(c.proxy_urls())
        .unwrap()
        .config(|b| b.ttl(Duration::from_secs(30)))
        .build()
        .unwrap();
    let g = r.lock("bye").unwrap();
    assert_eq!(driver_threads(), 1);
    // A release round trip now takes at least 600 ms.
    for i in 0..3 {
        c.proxy(i).set_latency(300 * MS);
    }
    let dropped = Instant::now();
    drop(g);
    drop(r);
    thread::sleep(100 * MS);
    assert_eq!(driver_threads(), 1, "exited before its release finished");
    let deadline = dropped + Duration::from_secs(5);
    while driver_threads() > 0 {
        assert!(Instant::now() < deadline, "driver thread still running");
        thread::sleep(10 * MS);
    }
    assert!(
        dropped.elapsed() >= 600 * MS,
        "exited after {:?}",
        dropped.elapsed()
    );
    for i in 0..3 {
        assert_eq!(c.node(i).command(&["GET", "bye"]).unwrap(), Reply::Nil);
    }
}

/// Threads of this process named like the driver's.
fn driver_threads() -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").expect("procfs");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "redlock-driver")
        .count()
}
