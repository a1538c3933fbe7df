//! Local queueing (docs/design.md, "Local queueing"): lock calls of one client for one resource wait in line and
//! only the first contends, so a hand-off inside a process costs no retry.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;
use std::time::Duration;

use crate::scenarios::cluster;
use crate::servers::{calls, reset_stats};
use crate::{Driver, Guard, LockOptions, ReleaseOutcome, RetryPolicy, assert_report};

const CALLS: u32 = 100;

/// 100 threads lock one resource through one client at once, with a retry delay of 1 s.
/// Every call gets the lock, never two at a time, and no call retries: each node runs
/// exactly one `SET` per call that did not take its hold by a hand-over (docs/design.md,
/// "Hand-over": the call ahead's release then reports it handed over, and nothing is sent),
/// which a waiter that contended instead of queueing could not (a refused attempt is a
/// `SET` too, and would then wait a second).
pub fn a_hundred_calls_of_one_client_take_turns_without_retrying<D: Driver>() {
    let c = cluster(3);
    let slow_retry = RetryPolicy {
        max_attempts: Some(20),
        max_wait: Some(Duration::from_secs(60)),
        delay_min: Duration::from_secs(1),
        delay_max: Duration::from_secs(1),
    };
    let d = D::build(&c.urls(), |b| b.retry(slow_retry)).unwrap();
    // Connected, and the handshake's commands out of the counts.
    d.lock("warm-up").unwrap().release().unwrap();
    for node in c.nodes() {
        reset_stats(node);
    }
    let holder = AtomicBool::new(false);
    let overlaps = AtomicU32::new(0);
    let handed_over = AtomicU32::new(0);
    thread::scope(|s| {
        for _ in 0..CALLS {
            s.spawn(|| {
                let g = d
                    .lock_with("line", LockOptions::default())
                    .expect("in turn");
                if holder.swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::Relaxed);
                }
                thread::sleep(Duration::from_millis(1));
                holder.store(false, Ordering::SeqCst);
                let report = g.release();
                if report == Ok(vec![ReleaseOutcome::HandedOver; 3]) {
                    handed_over.fetch_add(1, Ordering::Relaxed);
                } else {
                    assert_report(&report, &ReleaseOutcome::Released, 3);
                }
            });
        }
    });
    assert_eq!(overlaps.load(Ordering::Relaxed), 0);
    let set = CALLS - handed_over.load(Ordering::Relaxed);
    for node in c.nodes() {
        assert_eq!(calls(node, "set"), u64::from(set), "{}", node.addr());
    }
}
