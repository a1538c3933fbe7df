//! Per-lock options as a user reads them.

mod support;

use std::time::Duration;

use redlock_core::{AcquireFailure, Config, Event, LockOptions, Resource, RetryPolicy};
use support::Harness;

const MS: Duration = Duration::from_millis(1);

/// Attempts of one contended acquisition until it gives up, answering every SET with nil
/// and every cleanup release with -1; returns the failure and when it came.
fn contend(options: &LockOptions, config: Config) -> (AcquireFailure, u32, Duration) {
    let mut h = Harness::connected(config);
    let t0 = h.now;
    h.client
        .acquire_with(h.now, Resource::from("res"), options)
        .unwrap();
    h.drain();
    for _ in 0..1_000 {
        let mut events = h.reply(0, b"$-1\r\n").events;
        let out = h.reply(0, b":-1\r\n");
        events.extend(out.events.iter().cloned());
        if let [Event::AcquireFailed { reason, stats, .. }] = &events[..] {
            return (reason.clone(), stats.attempts, h.now - t0);
        }
        let at = out.timeout.expect("a retry is scheduled");
        h.now = at;
        h.timeout();
    }
    panic!("still trying after 1,000 attempts");
}

/// "Wait up to 5 s" waits up to 5 s: the configured attempt count (3 by default) does not
/// end it after a few hundred milliseconds.
#[test]
fn max_wait_is_not_cut_short_by_the_default_attempt_count() {
    let config = Config::builder(1).ttl(1000 * MS).build().unwrap();
    assert_eq!(config.retry().max_attempts, Some(3));
    let options = LockOptions::default().max_wait(&config, Duration::from_secs(5));
    let (reason, attempts, waited) = contend(&options, config);
    // The wait ran out while the key was held elsewhere: the last attempt's reason is kept.
    assert!(
        matches!(
            &reason,
            AcquireFailure::WaitDeadline { last: Some(last) }
                if matches!(**last, AcquireFailure::Contended { .. })
        ),
        "{reason:?} after {attempts} attempts"
    );
    assert!(attempts > 3, "gave up after {attempts} attempts");
    // Retry delays are 50-250 ms by default: the last attempt starts within one of 5 s.
    assert!(
        waited > Duration::from_millis(4_700) && waited <= Duration::from_secs(5),
        "gave up after {waited:?}"
    );
}

/// A cap the caller sets on the options still applies.
#[test]
fn max_wait_keeps_an_attempt_cap_set_on_the_options() {
    let config = Config::builder(1).ttl(1000 * MS).build().unwrap();
    let capped = RetryPolicy {
        max_attempts: Some(2),
        ..*config.retry()
    };
    let options = LockOptions::default()
        .retry(capped)
        .max_wait(&config, Duration::from_secs(5));
    let (reason, attempts, _) = contend(&options, config);
    assert!(
        matches!(reason, AcquireFailure::Contended { .. }),
        "{reason:?}"
    );
    assert_eq!(attempts, 2);
}
