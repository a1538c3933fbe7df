//! Per-lock options as a user reads them.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlock_core::{
    AcquireFailure, Config, DelayInput, Event, LockOptions, Resource, RetryDelay, RetryPolicy,
};
use support::Harness;

const MS: Duration = Duration::from_millis(1);

/// One contended acquisition, run until it gives up.
struct Contended {
    reason: AcquireFailure,
    attempts: u32,
    /// From the first attempt's start to the failure.
    waited: Duration,
    /// The start of each attempt after the first, from the first's.
    retries: Vec<Duration>,
}

/// Attempts of one contended acquisition until it gives up, answering every SET with nil
/// and every cleanup release with -1 (a one-node config).
fn contend(options: &LockOptions, config: Config) -> Contended {
    let mut h = Harness::connected(config);
    let t0 = h.now;
    h.client
        .acquire_with(h.now, Resource::from("res"), options)
        .unwrap();
    h.drain();
    let mut retries = Vec::new();
    for _ in 0..1_000 {
        let mut events = h.reply(0, b"$-1\r\n").events;
        let out = h.reply(0, b":-1\r\n");
        events.extend(out.events.iter().cloned());
        if let [Event::AcquireFailed { reason, stats, .. }] = &events[..] {
            let (reason, attempts, waited) = (reason.clone(), stats.attempts, h.now - t0);
            return Contended {
                reason,
                attempts,
                waited,
                retries,
            };
        }
        h.now = out.timeout.expect("a retry is scheduled");
        retries.push(h.now - t0);
        h.timeout();
    }
    panic!("still trying after 1,000 attempts");
}

/// "Wait up to 5 s" waits up to 5 s: the configured attempt count (3 by default) does not
/// end it after a few hundred milliseconds.
#[test]
fn max_wait_is_not_cut_short_by_the_default_attempt_count() {
    let config = support::builder(1).ttl(1000 * MS).build().unwrap();
    assert_eq!(config.retry().max_attempts, Some(3));
    let options = LockOptions::default().max_wait(&config, Duration::from_secs(5));
    let Contended {
        reason,
        attempts,
        waited,
        ..
    } = contend(&options, config);
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
    let config = support::builder(1).ttl(1000 * MS).build().unwrap();
    let capped = RetryPolicy {
        max_attempts: Some(2),
        ..*config.retry()
    };
    let options = LockOptions::default()
        .retry(capped)
        .max_wait(&config, Duration::from_secs(5));
    let Contended {
        reason, attempts, ..
    } = contend(&options, config);
    assert!(
        matches!(reason, AcquireFailure::Contended { .. }),
        "{reason:?}"
    );
    assert_eq!(attempts, 2);
}

/// A caller's delay function sets each retry's delay from the attempts made and the uniform
/// draw, which stays in `[delay_min, delay_max]`; the options' function overrides the
/// configuration's, and a delay under 1 ms is raised to 1 ms.
#[test]
fn a_retry_delay_function_sets_each_delay() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let linear = RetryDelay::new(move |d: DelayInput| {
        record.lock().unwrap().push(d);
        d.attempts * 100 * MS
    });
    let retry = RetryPolicy {
        max_attempts: Some(4),
        max_wait: None,
        delay_min: 10 * MS,
        delay_max: 20 * MS,
    };
    let config = || support::builder(1).ttl(1000 * MS).retry(retry);
    let starts = contend(
        &LockOptions::default(),
        config().retry_delay(linear.clone()).build().unwrap(),
    )
    .retries;
    // Replies take no time here: each attempt starts when the previous one's delay ends.
    assert_eq!(starts, [100 * MS, 300 * MS, 600 * MS]);
    let seen = seen.lock().unwrap().clone();
    let attempts: Vec<u32> = seen.iter().map(|d| d.attempts).collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert!(
        (seen.iter()).all(|d| (10 * MS..=20 * MS).contains(&d.jittered)),
        "{seen:?}"
    );

    // The options' function wins over the configuration's; zero becomes 1 ms.
    let zero = RetryDelay::new(|_| Duration::ZERO);
    let options = LockOptions::default().retry_delay(zero);
    let starts = contend(&options, config().retry_delay(linear).build().unwrap()).retries;
    assert_eq!(starts, [MS, 2 * MS, 3 * MS]);

    // Without one, the delay is the uniform draw itself.
    let starts = contend(&LockOptions::default(), config().build().unwrap()).retries;
    let mut last = Duration::ZERO;
    for start in starts {
        assert!((10 * MS..=20 * MS).contains(&(start - last)), "{start:?}");
        last = start;
    }
}
