//! Local queueing (docs/design.md, "Local queueing"): lock calls of one client for one resource wait in line, in
//! arrival order, and only the first contends on the nodes.

mod support;

use std::time::Duration;

use redlock_core::{AcquireFailure, Config, Event, LockOptions, OpId, Resource, RetryPolicy};
use support::{Drained, Harness, acquired, mask_tokens, set_nx_px};

const MS: Duration = Duration::from_millis(1);
const OK: &[u8] = b"+OK\r\n";
const NIL: &[u8] = b"$-1\r\n";
const DELETED: &[u8] = b":1\r\n";

fn harness() -> Harness {
    // The local line's own mechanics: without the waiters' queue, whose part in a line's
    // hand-offs tests/waiters.rs scripts.
    let config = Config::builder(3)
        .restart_quarantine(None)
        .clock_check(None)
        .waiter_queue(None)
        .ttl(Duration::from_secs(1))
        .build()
        .expect("valid config");
    Harness::connected(config)
}

/// Answers `bytes` on every node, returning every drain's events.
fn reply_all(h: &mut Harness, bytes: &[u8]) -> Vec<Event> {
    (0..3).flat_map(|n| h.reply(n, bytes).events).collect()
}

fn failure(events: &[Event]) -> (&OpId, &AcquireFailure, u32) {
    match events {
        [
            Event::AcquireFailed {
                op, reason, stats, ..
            },
        ] => (op, reason, stats.attempts),
        other => panic!("expected one AcquireFailed, got {other:?}"),
    }
}

/// Whether each node's bytes of `out` are, in this order, a release and then `SET NX`.
fn release_then_set(out: &Drained) -> bool {
    (0..3).all(|n| {
        let sent = mask_tokens(&out.sent_to(n));
        sent.starts_with("*5\r\n$7\r\nEVALSHA") && sent.ends_with(&set_nx_px("r", 1000))
    })
}

#[test]
fn a_second_call_waits_without_sending_and_goes_right_behind_the_release() {
    let mut h = harness();
    let (first, out) = h.acquire("r");
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    let (second, out) = h.acquire("r");
    assert!(out.transmits.is_empty(), "the second call must not contend");
    // Another resource has a line of its own.
    let (_, out) = h.acquire("other");
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    for n in 0..3 {
        h.reply(n, OK);
        h.reply(n, OK);
    }
    // 50 ms after the line last went to the nodes, it goes there again, to hear of waiters
    // of other clients (sooner, it hands the hold over: tests/hand_over.rs).
    h.ms(50);
    h.client.release(h.now, first).unwrap();
    // One drain: the release, then the next call's attempt, on each node's connection in
    // that order, so each node deletes the key before it runs the `SET NX`.
    let out = h.drain();
    assert!(release_then_set(&out), "{out:?}");
    h.ms(1);
    let events = reply_all(&mut h, DELETED);
    assert!(matches!(events[..], [Event::Released { op, .. }] if op == first));
    let events = reply_all(&mut h, OK);
    assert_eq!(acquired(&events).op, second);
    assert_eq!(acquired(&events).stats.attempts, 1);
}

#[test]
fn a_try_behind_a_call_of_this_client_fails_at_once_and_sends_nothing() {
    let mut h = harness();
    let (_first, _) = h.acquire("r");
    let op = h.client.try_acquire(h.now, Resource::from("r")).unwrap();
    let out = h.drain();
    assert!(out.transmits.is_empty());
    let (failed, reason, attempts) = failure(&out.events);
    assert_eq!(
        (*failed, reason, attempts),
        (op, &AcquireFailure::HeldLocally, 0)
    );
    assert_eq!(
        reason.to_string(),
        "another lock call of this client holds it (or is acquiring it)"
    );
}

#[test]
fn a_call_in_line_waits_as_long_as_its_retries_could_have_and_no_longer() {
    let mut h = harness();
    let (first, _) = h.acquire("r");
    reply_all(&mut h, OK);
    assert!(h.client.held(first).is_some());
    let t0 = h.now;
    // An overall wait: the bound itself.
    let waits = LockOptions::default().max_wait(h.client.config(), Duration::from_millis(200));
    let by_wait = (h.client)
        .acquire_with(h.now, Resource::from("r"), &waits)
        .unwrap();
    h.drain();
    // Attempts only: every delay at its longest, 4 attempts = 3 delays of 100 ms.
    let policy = RetryPolicy {
        max_attempts: Some(4),
        max_wait: None,
        delay_min: 10 * MS,
        delay_max: 100 * MS,
    };
    let by_attempts = (h.client)
        .acquire_with(
            h.now,
            Resource::from("r"),
            &LockOptions::default().retry(policy),
        )
        .unwrap();
    assert!(h.drain().transmits.is_empty());
    for (at, op) in [(200, by_wait), (300, by_attempts)] {
        let out = h.timeout_at(t0 + (at - 1) * MS);
        assert!(out.events.is_empty(), "{:?}", out.events);
        let out = h.timeout_at(t0 + at * MS);
        let (failed, reason, attempts) = failure(&out.events);
        assert_eq!(
            (*failed, reason, attempts),
            (op, &AcquireFailure::HeldLocally, 0)
        );
        assert!(out.transmits.is_empty());
    }
    assert!(h.client.held(first).is_some());
}

#[test]
fn time_in_line_counts_against_the_overall_wait() {
    let mut h = harness();
    let (first, _) = h.acquire("r");
    reply_all(&mut h, OK);
    let waits = LockOptions::default().max_wait(h.client.config(), Duration::from_millis(300));
    let second = (h.client)
        .acquire_with(h.now, Resource::from("r"), &waits)
        .unwrap();
    h.drain();
    h.ms(250);
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    assert!(release_then_set(&out));
    reply_all(&mut h, DELETED);
    h.ms(1);
    // Held elsewhere: with 50 ms of its 300 left, the call gives up before its first retry
    // would start past the wait (retry delays default to at least 50 ms).
    let events = reply_all(&mut h, NIL);
    let (op, reason, attempts) = failure(&events);
    assert_eq!((*op, attempts), (second, 1));
    assert!(
        matches!(reason, AcquireFailure::WaitDeadline { .. }),
        "{reason:?}"
    );
}

#[test]
fn a_cancelled_call_leaves_its_place_and_the_first_to_give_up_hands_on() {
    let mut h = harness();
    let policy = RetryPolicy::once();
    let first = (h.client)
        .acquire_with(
            h.now,
            Resource::from("r"),
            &LockOptions::default().retry(policy),
        )
        .unwrap();
    h.drain();
    let (second, _) = h.acquire("r");
    let (third, _) = h.acquire("r");
    h.client.cancel(h.now, second).unwrap();
    let out = h.drain();
    let (op, reason, _) = failure(&out.events);
    assert_eq!((*op, reason), (second, &AcquireFailure::Cancelled));
    assert!(out.transmits.is_empty());
    // The first call finds the key held elsewhere and gives up: the third goes at once,
    // behind the first's cleanup release.
    let mut events = Vec::new();
    let mut sent = Vec::new();
    for n in 0..3 {
        let out = h.reply(n, NIL);
        events.extend(out.events);
        sent.extend(out.transmits);
    }
    assert_eq!(*failure(&events).0, first);
    assert!(
        !sent.is_empty(),
        "the third call contends once the first gave up"
    );
    let _ = third;
}

#[test]
fn a_hundred_calls_in_line_hold_the_lock_in_arrival_order() {
    let mut h = harness();
    let ops: Vec<OpId> = (0..100).map(|_| h.acquire("r").0).collect();
    // The next call's `Acquired`, when the hold was handed over to it (no node traffic).
    let mut handed: Option<Vec<Event>> = None;
    let mut hand_overs = 0;
    for (i, &op) in ops.iter().enumerate() {
        let events = handed.take().unwrap_or_else(|| reply_all(&mut h, OK));
        assert_eq!(acquired(&events).op, op, "call {i} out of order");
        h.ms(1);
        h.client.release(h.now, op).unwrap();
        let out = h.drain();
        let released = if out.transmits.is_empty() {
            // A hand-over: the next call is told first, then this one.
            hand_overs += 1;
            handed = Some(out.events[..1].to_vec());
            out.events[1..].to_vec()
        } else {
            reply_all(&mut h, DELETED)
        };
        assert!(matches!(released[0], Event::Released { op: o, .. } if o == op));
    }
    // Every 50 ms the line goes to the nodes once (queue.rs, `HEAR_WAITERS_EVERY`), and the
    // last call's release goes there.
    assert!(hand_overs >= 90, "{hand_overs} hand-overs");
    assert_eq!(h.client.active_ops(), 0);
}

/// A waiter of another client that hears of no release (it cannot subscribe) tries on its
/// timer: a line that has handed over locally for a second yields once, for the retry
/// policy's longest delay, after its release is done.
#[test]
fn a_line_that_never_yielded_yields_once_for_a_waiter_that_hears_nothing() {
    let mut h = harness();
    let (mut holder, _) = h.acquire("r");
    let events = reply_all(&mut h, OK);
    assert_eq!(acquired(&events).op, holder);
    // Two direct hand-offs, 400 ms apart.
    for _ in 0..2 {
        let (next, out) = h.acquire("r");
        assert!(out.transmits.is_empty());
        h.ms(400);
        h.client.release(h.now, holder).unwrap();
        let out = h.drain();
        assert!(release_then_set(&out), "{out:?}");
        reply_all(&mut h, DELETED);
        let events = reply_all(&mut h, OK);
        assert_eq!(acquired(&events).op, next);
        holder = next;
    }
    // 1.2 s without yielding: the release goes out alone.
    let (next, _) = h.acquire("r");
    h.ms(400);
    h.client.release(h.now, holder).unwrap();
    let out = h.drain();
    assert!(
        !release_then_set(&out),
        "the release goes out alone: {out:?}"
    );
    let events = reply_all(&mut h, DELETED);
    assert!(matches!(events[..], [Event::Released { op, .. }] if op == holder));
    // The default policy's longest delay (250 ms) and a millisecond: nothing before it.
    let gap = Duration::from_millis(251);
    let released = h.now;
    assert!(h.timeout_at(released + gap - MS).transmits.is_empty());
    let out = h.timeout_at(released + gap);
    for n in 0..3 {
        assert_eq!(mask_tokens(&out.sent_to(n)), set_nx_px("r", 1000));
    }
    let events = reply_all(&mut h, OK);
    assert_eq!(acquired(&events).op, next);
    // The streak starts again: the next hand-off is direct.
    let (after, _) = h.acquire("r");
    h.client.release(h.now, next).unwrap();
    let out = h.drain();
    assert!(release_then_set(&out), "{out:?}");
    reply_all(&mut h, DELETED);
    let events = reply_all(&mut h, OK);
    assert_eq!(acquired(&events).op, after);
}

/// The line's policy for the kinds (docs/kinds.md, "The local line"): a writer takes the
/// same key as a mutex, so it waits in the mutex's line and goes right behind its release;
/// readers and permit holders may hold together, so they never wait in a line, even behind
/// a held lock of the same name.
#[test]
fn a_writer_waits_in_the_mutexs_line_and_a_reader_never_waits_in_one() {
    use redlock_core::LockKind;
    let mut h = harness();
    let (first, _) = h.acquire("r");
    reply_all(&mut h, OK);
    let write = LockOptions::default().kind(LockKind::Write);
    let writer = (h.client)
        .acquire_with(h.now, Resource::from("r"), &write)
        .unwrap();
    assert!(h.drain().transmits.is_empty(), "the writer waits in line");
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    for n in 0..3 {
        let sent = String::from_utf8_lossy(&out.sent_to(n)).into_owned();
        let write_acquire = redlock_core::WRITE_ACQUIRE_SCRIPT.sha1;
        assert!(sent.contains(write_acquire), "node {n}: {sent}");
    }
    reply_all(&mut h, DELETED);
    let events = reply_all(&mut h, b":1\r\n");
    assert_eq!(acquired(&events).op, writer);
    // A reader behind the held writer contends at once (and is kept out by the nodes).
    let read = LockOptions::default().kind(LockKind::Read);
    (h.client)
        .acquire_with(h.now, Resource::from("r"), &read)
        .unwrap();
    let out = h.drain();
    assert_eq!(out.nodes_sent(), vec![0, 1, 2], "a reader contends at once");
}
