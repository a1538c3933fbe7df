//! Fenced acquisitions, exact bytes (docs/safety.md, "Fencing"): each node sets the key and
//! returns its fencing counter, by a script (servers without `ZADD … GT`, here a Redis 6.0)
//! or by a pipeline of three commands (Redis 6.2 and later, Valkey); the token is the
//! largest counter of the quorum, final at once when a quorum already holds it, else after
//! the nodes behind are raised to it while they still hold our key. Validity still counts
//! from the attempt's start.

mod support;

use std::time::Duration;

use redlock_core::{
    AcquireFailure, Config, Event, Fencing, LockOptions, NodeFault, Resource, RetryPolicy,
};
use support::{Harness, acquired, mask_tokens, name};

const MS: Duration = Duration::from_millis(1);

fn config(n: usize, fenced: bool) -> Config {
    support::builder(n)
        .ttl(Duration::from_millis(10_000))
        .fencing(Fencing {
            by_default: fenced,
            ..Fencing::default()
        })
        .retry(RetryPolicy {
            max_attempts: Some(2),
            max_wait: None,
            delay_min: MS,
            delay_max: MS,
        })
        .build()
        .expect("valid config")
}

/// A harness whose nodes are Redis 6.0 servers: no `ZADD … GT`, so fenced acquisitions go
/// out as the script.
fn scripted(config: Config) -> Harness {
    let n = config.nodes();
    let mut h = Harness::new(config);
    h.drain();
    for i in 0..n {
        h.connect(i);
        h.answer_hello(i, "redis", "6.0.16");
        h.reply(i, b"+OK\r\n+OK\r\n");
    }
    h
}

/// The fenced acquire as sent, its script's SHA1 and the token masked.
fn fenced_acquire(key: &str, ttl: u64) -> String {
    let fence = format!("{key}:fence");
    format!(
        "*7\r\n$7\r\nEVALSHA\r\n$40\r\n*\r\n$1\r\n2\r\n${}\r\n{key}\r\n${}\r\n{fence}\r\n$40\r\n*\r\n${}\r\n{ttl}\r\n",
        key.len(),
        fence.len(),
        ttl.to_string().len()
    )
}

/// The write-back as sent.
fn raise_fence(key: &str, value: u64) -> String {
    let fence = format!("{key}:fence");
    format!(
        "*7\r\n$7\r\nEVALSHA\r\n$40\r\n*\r\n$1\r\n2\r\n${}\r\n{key}\r\n${}\r\n{fence}\r\n$40\r\n*\r\n${}\r\n{value}\r\n",
        key.len(),
        fence.len(),
        value.to_string().len()
    )
}

#[test]
fn agreeing_counters_give_the_token_in_one_round_trip() {
    let mut h = scripted(config(3, true));
    let t0 = h.now;
    let (_, out) = h.acquire("res");
    for i in 0..3 {
        assert_eq!(mask_tokens(&out.sent_to(i)), fenced_acquire("res", 10_000));
    }
    let sha = redlock_core::FENCED_ACQUIRE_SCRIPT.sha1;
    assert!(String::from_utf8_lossy(&out.sent_to(0)).contains(sha));
    h.ms(3);
    h.reply(0, b":1882844096888832\r\n");
    let out = h.reply(2, b":1882844096888832\r\n");
    let a = acquired(&out.events);
    assert_eq!(a.fencing_token, Some(1_882_844_096_888_832));
    assert!(a.stats.written_back.is_empty());
    assert!(out.transmits.is_empty(), "no write-back: {out:?}");
    assert_eq!(
        a.deadline,
        t0 + 10_000 * MS - Duration::from_micros(102_000)
    );
}

/// The counters disagree: the largest is the token, and the node behind is raised to it
/// (only while it still holds our key) before the lock is granted. The validity still
/// counts from the attempt's start, so the write-back's round trip comes out of it.
#[test]
fn a_counter_behind_is_written_back_before_the_lock_is_granted() {
    let mut h = scripted(config(3, true));
    let t0 = h.now;
    h.acquire("res");
    h.ms(2);
    h.reply(0, b":99\r\n");
    let out = h.reply(1, b":100\r\n");
    assert!(out.events.is_empty(), "not granted yet: {out:?}");
    assert_eq!(out.nodes_sent(), vec![0], "only the node behind");
    assert_eq!(mask_tokens(&out.sent_to(0)), raise_fence("res", 100));
    // Node 2's late counter (even a larger one) changes nothing now.
    let out = h.reply(2, b":101\r\n");
    assert!(out.events.is_empty() && out.transmits.is_empty());
    h.ms(2);
    let out = h.reply(0, b":1\r\n");
    let a = acquired(&out.events);
    assert_eq!(a.fencing_token, Some(100));
    assert_eq!(a.stats.written_back, vec![name(0)]);
    assert_eq!(
        a.deadline,
        t0 + 10_000 * MS - Duration::from_micros(102_000)
    );
    assert!(
        a.stats
            .to_string()
            .ends_with("; fencing counter written back on node#0"),
        "{}",
        a.stats
    );
}

/// A node whose key is no longer ours refuses the write-back: the token is not final, the
/// attempt fails, what it set is released everywhere, and the next attempt starts over.
#[test]
fn a_refused_write_back_fails_the_attempt() {
    let mut h = scripted(config(3, true));
    h.acquire("res");
    h.reply(0, b":7\r\n");
    h.reply(1, b":9\r\n");
    let out = h.reply(2, b"$-1\r\n");
    assert!(out.transmits.is_empty());
    let out = h.reply(0, b":0\r\n");
    assert!(out.events.is_empty(), "{out:?}");
    // The cleanup release goes to all three nodes.
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    for i in 0..3 {
        assert!(mask_tokens(&out.sent_to(i)).contains("EVALSHA"));
    }
    // The second (last) attempt: another fenced acquire after the retry delay.
    let out = support::fire_until_transmit(&mut h);
    assert!(mask_tokens(&out.sent_to(0)).ends_with(&fenced_acquire("res", 10_000)));
    for i in 0..3 {
        h.reply(i, b":0\r\n");
    }
    h.reply(0, b"$-1\r\n");
    let out = h.reply(1, b"$-1\r\n");
    let [Event::AcquireFailed { reason, .. }] = &out.events[..] else {
        panic!("{out:?}");
    };
    assert!(
        matches!(reason, AcquireFailure::Contended { .. }),
        "{reason:?}"
    );
}

#[test]
fn unfenced_locks_have_no_token_and_options_decide_per_lock() {
    let mut h = scripted(config(1, false));
    let (_, out) = h.acquire("res");
    assert!(mask_tokens(&out.sent_to(0)).starts_with("*6\r\n$3\r\nSET\r\n"));
    let out = h.reply(0, b"+OK\r\n");
    assert_eq!(acquired(&out.events).fencing_token, None);

    let op = h
        .client
        .acquire_with(
            h.now,
            Resource::from("other"),
            &LockOptions::default().fenced(true),
        )
        .unwrap();
    let out = h.drain();
    assert_eq!(
        mask_tokens(&out.sent_to(0)),
        fenced_acquire("other", 10_000)
    );
    let out = h.reply(0, b":5\r\n");
    let a = acquired(&out.events);
    assert_eq!((a.op, a.fencing_token), (op, Some(5)));
}

/// A fenced acquire needs scripting: where it is denied, the failure names the node and the
/// refused command, never an unfenced lock.
#[test]
fn a_fenced_lock_where_scripting_is_denied_fails_naming_the_refusal() {
    let mut h = scripted(config(1, true));
    h.acquire("res");
    let noperm = b"-NOPERM User locker has no permissions to run the 'evalsha' command\r\n";
    h.reply(0, noperm);
    // The cleanup release is refused the same way; then the last attempt.
    h.reply(0, noperm);
    let out = support::fire_until_transmit(&mut h);
    assert_eq!(mask_tokens(&out.sent_to(0)), fenced_acquire("res", 10_000));
    let out = h.reply(0, noperm);
    let [Event::AcquireFailed { reason, .. }] = &out.events[..] else {
        panic!("{out:?}");
    };
    let AcquireFailure::QuorumUnreachable { errors } = reason else {
        panic!("{reason:?}");
    };
    assert!(matches!(
        &errors[0].1,
        NodeFault::Server { command: "EVALSHA", message } if message.starts_with("NOPERM")
    ));
    assert_eq!(
        reason.to_string(),
        "too many nodes failed: node#0: EVALSHA was refused: NOPERM User locker has no permissions to run the 'evalsha' command"
    );
}

#[test]
fn an_empty_fence_suffix_is_refused() {
    let empty = Fencing {
        suffix: String::new(),
        ..Fencing::default()
    };
    let err = support::builder(1).fencing(empty).build().unwrap_err();
    assert_eq!(err.field(), "fencing.suffix");
    assert_eq!(
        err.to_string(),
        "invalid `fencing.suffix`: empty, but the fencing counter needs a key of its own"
    );
}
