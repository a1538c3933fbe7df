//! Blocking-driver specifics against real servers; the scenarios every driver shares are in
//! `tests/conformance.rs` (the `redlock-conformance` suite). Every loop is bounded in count
//! and time; every process is stopped by the kit's `Drop`.

use std::thread;
use std::time::{Duration, Instant};

use redlock_blocking::{LockGuard, LockOptions, LostReason, Redlock, ReleaseOutcome};
use redlock_conformance::scenarios::{eventually, value_on};
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
fn driver_finishes_releases_then_closes_after_last_handle() {
    run(3, scenario_last_handle_dropped);
}

#[test]
fn wait_lost_sees_a_loss_a_release_and_a_timeout() {
    run(3, scenario_wait_lost);
}

/// A host name works: `localhost` resolves from `/etc/hosts` (no DNS query) on a helper
/// thread, and if it names `::1` first, where nothing listens, the next address is tried.
#[test]
fn host_names_are_resolved() {
    let c = Cluster::start(3).expect("start test nodes");
    let urls: Vec<String> = (0..3)
        .map(|i| format!("localhost:{}", c.node(i).port()))
        .collect();
    let r = make(&urls, &ttl(Duration::from_secs(5)));
    let g = r.lock("named").unwrap();
    // A release returns once a quorum has answered; the rest finish in the background.
    let report = g.release().unwrap();
    let released = (report.iter()).filter(|o| **o == ReleaseOutcome::Released);
    assert!(released.count() >= 2, "{report:?}");
    let rest =
        (report.iter()).all(|o| matches!(o, ReleaseOutcome::Released | ReleaseOutcome::Pending));
    assert!(rest, "{report:?}");
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

/// Dropping the last handle and a guard at once: the driver still finishes the
/// background release over slow links, then closes every connection.
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

/// `wait_lost` returns the reason of a loss, `None` at its timeout, and `None` as soon as
/// another thread releases the lock.
fn scenario_wait_lost(c: &Cluster, make: Make) {
    let r = make(&c.urls(), &ttl(300 * MS));
    let g = r.lock("short").unwrap();
    assert!(!g.is_lost());
    let reason = g.wait_lost(Duration::from_secs(5));
    assert_eq!(reason, Some(LostReason::DeadlinePassed));
    assert!(g.is_lost());
    assert_eq!(g.validity(), Duration::ZERO);
    drop(g);

    let g = r
        .lock_with("long", LockOptions::default().ttl(Duration::from_secs(10)))
        .unwrap();
    let waited = Instant::now();
    assert_eq!(g.wait_lost(50 * MS), None);
    assert!(waited.elapsed() >= 50 * MS);
    let view = g.lock_ref();
    let waiter = thread::spawn(move || view.wait_lost(Duration::from_secs(30)));
    thread::sleep(50 * MS);
    let released = Instant::now();
    g.release().unwrap();
    assert_eq!(waiter.join().unwrap(), None);
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "waited for the timeout"
    );
}

// ---- helpers ----

fn ttl(ttl: Duration) -> impl Fn(ConfigBuilder) -> ConfigBuilder {
    move |c| c.ttl(ttl)
}
