//! One test per rule of docs/algorithm.md that no other test pinned down: each fails if its
//! rule is taken out of the core (an outside audit removed each with every other test green).

mod support;

use std::time::Duration;

use redlock_core::{Event, Input, Resource, RetryPolicy};
use support::Harness;

const MS: Duration = Duration::from_millis(1);

/// The value a `SET` stores (its third argument).
fn set_value(sent: &[u8]) -> String {
    let text = String::from_utf8_lossy(sent).into_owned();
    let args: Vec<&str> = text.split("\r\n").skip(2).step_by(2).collect();
    assert_eq!(args.first(), Some(&"SET"), "{text:?}");
    args[2].to_owned()
}

fn retry(attempts: u32, min: Duration, max: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts: Some(attempts),
        max_wait: None,
        delay_min: min,
        delay_max: max,
    }
}

/// algorithm.md §5: every attempt draws a fresh token. With one token for all attempts, a
/// late release of attempt 1 would delete attempt 2's key.
#[test]
fn each_attempt_draws_a_fresh_token() {
    let config = support::builder(1)
        .ttl(1000 * MS)
        .retry(retry(3, MS, MS))
        .build()
        .unwrap();
    let mut h = Harness::connected(config);
    let (_, out) = h.acquire("res");
    let mut values = vec![set_value(&out.sent_to(0))];
    for _ in 0..2 {
        h.reply(0, b"$-1\r\n");
        h.reply(0, b":-1\r\n");
        h.ms(5);
        values.push(set_value(&h.timeout().sent_to(0)));
    }
    values.sort();
    values.dedup();
    assert_eq!(values.len(), 3, "attempts shared a token: {values:?}");
}

/// algorithm.md §7: the delay before a retry is drawn uniformly between its bounds, so
/// contending clients fall out of step; always the minimum would keep them in step.
#[test]
fn retry_delays_spread_over_their_bounds() {
    let config = support::builder(1)
        .ttl(1000 * MS)
        .retry(retry(31, 10 * MS, 50 * MS))
        .build()
        .unwrap();
    let mut h = Harness::connected(config);
    h.acquire("res");
    let mut delays = Vec::new();
    for _ in 0..30 {
        h.reply(0, b"$-1\r\n");
        // The cleanup release answered, the only timer left is the retry.
        let out = h.reply(0, b":-1\r\n");
        let at = out.timeout.expect("a retry is scheduled");
        delays.push(at - h.now);
        h.now = at;
        assert!(!h.timeout().sent_to(0).is_empty(), "the retry went out");
    }
    assert!(
        delays.iter().all(|d| (10 * MS..=50 * MS).contains(d)),
        "{delays:?}"
    );
    let (min, max) = (delays.iter().min().unwrap(), delays.iter().max().unwrap());
    assert!(*min < 20 * MS && *max > 40 * MS, "not spread: {delays:?}");
    delays.sort();
    delays.dedup();
    assert!(delays.len() >= 20, "too few distinct delays: {delays:?}");
}

/// algorithm.md §9: a failed extension is retried within the remaining validity, however
/// long the configured retry delay: a retry scheduled past the deadline would never run and
/// a healthy lock would be lost to one failed round.
#[test]
fn extension_retry_comes_before_the_deadline_whatever_the_delay() {
    let config = support::builder(1)
        .ttl(1000 * MS)
        .retry(retry(3, 5000 * MS, 5000 * MS))
        .build()
        .unwrap();
    let mut h = Harness::connected(config);
    let (op, _) = h.acquire("res");
    let out = h.reply(0, b"+OK\r\n");
    let deadline = match &out.events[..] {
        [Event::Acquired(a)] => a.deadline,
        other => panic!("{other:?}"),
    };
    h.ms(100);
    h.client.extend(h.now, op).unwrap();
    h.drain();
    let out = h.reply(0, b"-ERR busy\r\n");
    let retry_at = out.timeout.expect("a timer");
    assert!(retry_at < deadline, "retry at {retry_at:?} >= deadline");
    h.now = retry_at;
    let out = h.timeout();
    assert!(
        String::from_utf8_lossy(&out.sent_to(0)).contains(redlock_core::EXTEND_SCRIPT.sha1),
        "no extension retried before the deadline: {out:?}"
    );
}

/// algorithm.md §11: a `now` that goes backwards is clamped to the last one seen, so a reply
/// fed with an earlier time cannot make the validity longer than `ttl - drift`. Debug
/// builds also assert on it, to catch the driver bug.
#[test]
#[cfg_attr(debug_assertions, should_panic(expected = "now went backwards"))]
fn now_going_backwards_is_clamped() {
    let mut h = Harness::connected(support::builder(1).ttl(1000 * MS).build().unwrap());
    h.ms(500);
    h.client.acquire(h.now, Resource::from("res")).unwrap();
    h.drain();
    let earlier = h.now - 400 * MS;
    let input = Input::Received {
        now: earlier,
        conn: h.conn(0),
        bytes: b"+OK\r\n",
    };
    h.client.handle_input(input).unwrap();
    let out = h.drain();
    match &out.events[..] {
        // ttl 1000 ms minus the drift (1% + 2 ms): never more.
        [Event::Acquired(a)] => assert!(a.validity <= 988 * MS, "{:?}", a.validity),
        other => panic!("{other:?}"),
    }
}
