//! Hand-overs (docs/design.md, "Local queueing"): a held lock whose client has another call
//! in line for the resource passes its hold to that call without going to the nodes: the
//! same stored value, the same deadline (not refreshed), the validity left, its loss told
//! to the new holder. Contested lines, courtesy hand-offs, fenced locks and holds with too
//! little validity left still go through the nodes.

mod support;

use std::time::Duration;

use redlock_core::{
    Config, Event, Fencing, LockOptions, LostReason, OpId, ReleaseOutcome, Resource,
};
use support::{Drained, Harness, acquired, mask_tokens, set_nx_px};

const OK: &[u8] = b"+OK\r\n";
const DELETED: &[u8] = b":1\r\n";

fn harness(ttl_ms: u64) -> Harness {
    // The local line's own mechanics: without the waiters' queue, whose part in a line's
    // hand-offs tests/waiters.rs scripts.
    let config = Config::builder(3)
        .restart_quarantine(None)
        .clock_check(None)
        .waiter_queue(None)
        .ttl(Duration::from_millis(ttl_ms))
        .build()
        .expect("valid config");
    Harness::connected(config)
}

/// Answers `bytes` on every node, returning every drain's events.
fn reply_all(h: &mut Harness, bytes: &[u8]) -> Vec<Event> {
    (0..3).flat_map(|n| h.reply(n, bytes).events).collect()
}

/// The first call holds `r` (granted by every node); `more` calls wait behind it.
fn line(h: &mut Harness, more: usize) -> (OpId, Vec<OpId>) {
    let (first, _) = h.acquire("r");
    assert_eq!(acquired(&reply_all(h, OK)).op, first);
    let waiting = (0..more)
        .map(|_| {
            let (op, out) = h.acquire("r");
            assert!(out.transmits.is_empty(), "a call in line sends nothing");
            op
        })
        .collect();
    (first, waiting)
}

/// `out` is a hand-over from `from` to `to`: nothing sent, `to` acquired, then `from`
/// released with every node handed over (the new holder is told first).
fn handed_over(out: &Drained, from: OpId, to: OpId) -> redlock_core::Acquired {
    assert!(
        out.transmits.is_empty(),
        "a hand-over sends nothing: {out:?}"
    );
    match &out.events[..] {
        [Event::Acquired(a), Event::Released { op, nodes }] => {
            assert_eq!(*op, from);
            assert_eq!(nodes, &vec![ReleaseOutcome::HandedOver; 3]);
            assert_eq!(a.op, to);
            assert!(a.stats.handed_over && a.stats.attempts == 0 && a.stats.nodes.is_empty());
            a.clone()
        }
        other => panic!("expected Acquired then Released, got {other:?}"),
    }
}

/// Whether every node got a release and nothing else (no `SET` behind it).
fn release_alone(out: &Drained) -> bool {
    (0..3).all(|n| {
        let sent = mask_tokens(&out.sent_to(n));
        sent.starts_with("*5\r\n$7\r\nEVALSHA") && !sent.contains("SET")
    })
}

#[test]
fn a_line_of_three_hands_over_twice_with_no_node_traffic_and_the_deadline_carried() {
    let mut h = harness(10_000);
    let (first, waiting) = line(&mut h, 2);
    let (token, deadline) = {
        let (t, d) = h.client.held(first).expect("held");
        (t.clone(), d)
    };
    h.ms(5);
    h.client.release(h.now, first).unwrap();
    let second = handed_over(&h.drain(), first, waiting[0]);
    assert_eq!(second.token, token, "the same stored value");
    assert_eq!(
        second.deadline, deadline,
        "the deadline is carried, not refreshed"
    );
    assert_eq!(
        second.validity,
        deadline - h.now,
        "the validity left, never more"
    );
    assert_eq!(second.stats.elapsed, Duration::ZERO, "no attempt");
    assert!(h.client.held(first).is_none());
    assert_eq!(h.client.held(waiting[0]).map(|(_, d)| d), Some(deadline));
    h.ms(7);
    h.client.release(h.now, waiting[0]).unwrap();
    let third = handed_over(&h.drain(), waiting[0], waiting[1]);
    assert_eq!((third.token, third.deadline), (token, deadline));
    assert_eq!(third.validity, deadline - h.now);
    // The last call of the line releases on the nodes, the key that was set for the first.
    h.client.release(h.now, waiting[1]).unwrap();
    assert!(release_alone(&h.drain()));
    let events = reply_all(&mut h, DELETED);
    assert!(matches!(events[..], [Event::Released { op, .. }] if op == waiting[1]));
    assert_eq!(h.client.active_ops(), 0);
}

#[test]
fn a_hold_lost_after_a_hand_over_is_lost_for_the_new_holder() {
    let mut h = harness(10_000);
    let (first, waiting) = line(&mut h, 1);
    let (_, deadline) = h.client.held(first).expect("held");
    h.client.release(h.now, first).unwrap();
    handed_over(&h.drain(), first, waiting[0]);
    let out = h.timeout_at(deadline);
    match &out.events[..] {
        [Event::Lost { op, reason }] => {
            assert_eq!(*op, waiting[0]);
            assert_eq!(*reason, LostReason::DeadlinePassed);
        }
        other => panic!("expected the new holder's Lost, got {other:?}"),
    }
}

#[test]
fn a_contested_line_releases_on_the_nodes() {
    let mut h = harness(10_000);
    let (first, waiting) = line(&mut h, 2);
    // 50 ms on, the line goes to the nodes to hear of waiters; the release script answers 2
    // (someone is subscribed): another client waits.
    h.ms(50);
    h.client.release(h.now, first).unwrap();
    assert!(!h.drain().transmits.is_empty());
    reply_all(&mut h, b":2\r\n");
    assert_eq!(acquired(&reply_all(&mut h, OK)).op, waiting[0]);
    // Contested: no hand-over; the release goes out alone, and the next call waits for it.
    h.client.release(h.now, waiting[0]).unwrap();
    let out = h.drain();
    assert!(out.events.is_empty() && release_alone(&out), "{out:?}");
}

#[test]
fn a_line_that_owes_a_courtesy_hand_off_goes_through_the_nodes() {
    let mut h = harness(10_000);
    let (mut holder, _) = line(&mut h, 0);
    // Hand over every 10 ms for a second; every 50 ms one hand-off goes through the nodes.
    let (mut hand_overs, mut through_nodes) = (0, 0);
    for _ in 0..100 {
        let (next, _) = h.acquire("r");
        h.ms(10);
        h.client.release(h.now, holder).unwrap();
        let out = h.drain();
        if out.transmits.is_empty() {
            handed_over(&out, holder, next);
            hand_overs += 1;
        } else if release_alone(&out) {
            // A second of local hand-offs: the courtesy one.
            break;
        } else {
            through_nodes += 1;
            reply_all(&mut h, DELETED);
            assert_eq!(acquired(&reply_all(&mut h, OK)).op, next);
        }
        holder = next;
    }
    assert!(hand_overs >= 70, "{hand_overs} hand-overs");
    assert!(
        (15..=25).contains(&through_nodes),
        "{through_nodes} through the nodes"
    );
    assert!(hand_overs + through_nodes < 100, "a courtesy hand-off came");
}

#[test]
fn too_little_validity_left_releases_and_acquires_on_the_nodes() {
    let mut h = harness(1_000);
    let (first, waiting) = line(&mut h, 1);
    let (_, deadline) = h.client.held(first).expect("held");
    // Under half of `ttl - drift` (988 ms) is left: the next call takes a fresh hold.
    h.now = deadline - Duration::from_millis(480);
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    assert!(out.events.is_empty(), "{out:?}");
    for n in 0..3 {
        let sent = mask_tokens(&out.sent_to(n));
        assert!(sent.starts_with("*5\r\n$7\r\nEVALSHA"), "{sent}");
        assert!(sent.ends_with(&set_nx_px("r", 1_000)), "{sent}");
    }
    reply_all(&mut h, DELETED);
    let next = acquired(&reply_all(&mut h, OK)).clone();
    assert_eq!(next.op, waiting[0]);
    assert!(!next.stats.handed_over && next.deadline > deadline);
}

/// A fenced lock needs a new, larger fencing token for each holder, which only the nodes
/// hand out: its line releases and acquires there, as before.
#[test]
fn a_fenced_line_gets_a_new_larger_token_from_the_nodes() {
    let config = support::builder(3)
        .ttl(Duration::from_millis(10_000))
        .fencing(Fencing {
            by_default: true,
            ..Fencing::default()
        })
        .build()
        .expect("valid config");
    let mut h = Harness::new(config);
    h.drain();
    // Redis 6.0: fenced acquisitions go out as the script, whose answer is the counter.
    for i in 0..3 {
        h.connect(i);
        h.answer_hello(i, "redis", "6.0.16");
        h.reply(i, b"+OK\r\n+OK\r\n");
    }
    let (first, _) = h.acquire("r");
    let held = acquired(&reply_all(&mut h, b":5\r\n")).clone();
    assert_eq!((held.op, held.fencing_token), (first, Some(5)));
    let (second, _) = h.acquire("r");
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    assert!(out.events.is_empty(), "no hand-over: {out:?}");
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    let events = reply_all(&mut h, b":1\r\n:6\r\n");
    let next = match &events[..] {
        [Event::Released { op, .. }, Event::Acquired(a)] if *op == first => a,
        other => panic!("expected Acquired then Released, got {other:?}"),
    };
    assert_eq!((next.op, next.fencing_token), (second, Some(6)));
    assert!(!next.stats.handed_over && next.token != held.token);
}

/// Locks that cannot share a hold never hand over: a call with another supplied value, or
/// of another kind (a writer behind a mutex).
#[test]
fn calls_that_cannot_share_the_hold_acquire_on_the_nodes() {
    use redlock_core::{LockKind, Token};
    let mut h = harness(10_000);
    let (first, _) = line(&mut h, 0);
    let alice = LockOptions::default().token(Token::new("alice").expect("a valid value"));
    let writer = LockOptions::default().kind(LockKind::Write);
    for options in [alice, writer] {
        let _ = (h.client)
            .acquire_with(h.now, Resource::from("r"), &options)
            .unwrap();
        h.drain();
    }
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    assert!(
        out.events.is_empty() && !out.transmits.is_empty(),
        "{out:?}"
    );
}

/// A call that asked for a shorter ttl than the holder's is never told more validity than
/// its own ttl could give it: the hold is handed over with its deadline brought forward to
/// `now + ttl - drift` (the keys live on to the old deadline, as they would have for the
/// holder).
#[test]
fn a_call_with_a_shorter_ttl_takes_the_hold_until_its_own_ttl() {
    let mut h = harness(10_000);
    let (first, _) = line(&mut h, 0);
    let (_, old_deadline) = h.client.held(first).expect("held");
    let short = LockOptions::default().ttl(Duration::from_millis(1_000));
    let second = (h.client)
        .acquire_with(h.now, Resource::from("r"), &short)
        .unwrap();
    h.drain();
    h.ms(5);
    h.client.release(h.now, first).unwrap();
    let next = handed_over(&h.drain(), first, second);
    // 1000 ms less the drift: 1% and the 2 ms floor.
    assert_eq!(next.validity, Duration::from_millis(988));
    assert!(next.deadline < old_deadline);
    assert_eq!(h.client.held(second).map(|(_, d)| d), Some(next.deadline));
}
