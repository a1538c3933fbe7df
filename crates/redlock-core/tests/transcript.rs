//! Transcript tests: scripted inputs, exact expected outputs, plus one
//! regression test per bug seen in peer Redlock clients.

mod support;

use std::time::Duration;

use redlock_core::{
    AcquireFailure, AcquireOutcome, Config, ConnId, ConnectionError, Event, Input, LostReason,
    NodeFault, NodeId, NodeSettings, ReleaseOutcome, Resource, RetryPolicy, UsageError,
};
use support::{Harness, acquired, mask_tokens, name, outcomes, set_nx_px, stats};

const MS: Duration = Duration::from_millis(1);

fn config(n: usize, ttl_ms: u64) -> Config {
    support::builder(n)
        .ttl(Duration::from_millis(ttl_ms))
        .build()
        .expect("valid config")
}

fn release_frame(key: &str) -> String {
    format!(
        "*5\r\n$7\r\nEVALSHA\r\n$40\r\n*\r\n$1\r\n1\r\n${}\r\n{key}\r\n$40\r\n*\r\n",
        key.len()
    )
}

#[test]
fn acquire_fans_out_then_decides_at_quorum() {
    let mut h = Harness::connected(config(3, 1000));
    let t0 = h.now;
    let (op, out) = h.acquire("res");
    // One SET per node, all at once, then the attempt deadline t0 + 5% of ttl.
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    for node in 0..3 {
        assert_eq!(mask_tokens(&out.sent_to(node)), set_nx_px("res", 1000));
    }
    assert!(out.events.is_empty());
    assert_eq!(out.timeout, Some(t0 + 50 * MS));

    h.ms(10);
    let out = h.reply(0, b"+OK\r\n");
    assert!(out.events.is_empty() && out.transmits.is_empty());
    h.ms(10);
    let out = h.reply(2, b"+OK\r\n");
    let a = acquired(&out.events);
    assert_eq!(a.op, op);
    assert_eq!(a.stats.attempts, 1);
    assert_eq!(a.stats.elapsed, 20 * MS);
    // drift = 1000 * 0.01 + 2 = 12 ms; validity = ttl - elapsed(20) - drift.
    assert_eq!(a.validity, 968 * MS);
    assert_eq!(a.deadline, t0 + 988 * MS);
    assert_eq!(
        a.stats.nodes,
        outcomes(&[
            AcquireOutcome::Locked,
            AcquireOutcome::Pending,
            AcquireOutcome::Locked
        ])
    );
    assert_eq!(out.timeout, Some(a.deadline));
    let token = a.token.clone();

    // A late reply from node 1 changes nothing.
    let out = h.reply(1, b"+OK\r\n");
    assert!(out.events.is_empty() && out.transmits.is_empty());

    // Release goes to all three nodes and reports each.
    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    let frame = String::from_utf8(out.sent_to(0)).unwrap();
    assert!(frame.contains(&token.to_string()));
    assert_eq!(mask_tokens(&out.sent_to(0)), release_frame("res"));
    h.reply(0, b":1\r\n");
    h.reply(1, b":-1\r\n");
    let out = h.reply(2, b":0\r\n");
    assert_eq!(
        out.events,
        vec![Event::Released {
            op,
            nodes: vec![
                ReleaseOutcome::Released,
                ReleaseOutcome::AlreadyExpired,
                ReleaseOutcome::NotHeld
            ]
        }]
    );
    assert_eq!(h.client.active_ops(), 0);
    assert_eq!(out.timeout, None);
}

/// Peer bug: no release after a failed attempt. A failed attempt releases on ALL nodes,
/// including the one that never answered (its SET may have succeeded).
#[test]
fn regression_failed_attempt_releases_on_all_nodes() {
    let mut h = Harness::connected(config(3, 1000));
    let t0 = h.now;
    let (op, _) = h.acquire("res");
    h.reply(0, b"$-1\r\n");
    let out = h.reply(1, b"$-1\r\n");
    // Two "held" votes out of three: no quorum possible. Cleanup goes to all 3 nodes.
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    for node in 0..3 {
        assert_eq!(mask_tokens(&out.sent_to(node)), release_frame("res"));
    }
    assert!(out.events.is_empty(), "retries follow, no event yet");
    for attempt in 2..=3 {
        // Nodes 0 and 1 answer the cleanup release; node 2 stays silent throughout.
        h.reply(0, b":1\r\n");
        h.reply(1, b":-1\r\n");
        let out = support::fire_until_transmit(&mut h);
        assert_eq!(
            out.nodes_sent(),
            vec![0, 1, 2],
            "attempt {attempt} fans out"
        );
        h.reply(0, b"$-1\r\n");
        let out = h.reply(1, b"$-1\r\n");
        assert_eq!(
            out.nodes_sent(),
            vec![0, 1, 2],
            "attempt {attempt} cleans up"
        );
        if attempt == 3 {
            assert_eq!(
                out.events,
                vec![Event::AcquireFailed {
                    op,
                    resource: Resource::from("res"),
                    reason: AcquireFailure::Contended {
                        nodes: vec![name(0), name(1)]
                    },
                    // The last attempt's answers; node 2 never said anything.
                    stats: stats(
                        3,
                        h.now - t0,
                        &[
                            AcquireOutcome::Held,
                            AcquireOutcome::Held,
                            AcquireOutcome::Pending
                        ]
                    ),
                }]
            );
        } else {
            assert!(out.events.is_empty());
        }
    }
}

/// Peer bug: validity counted from the quorum reply instead of the attempt start.
#[test]
fn regression_validity_counts_from_attempt_start() {
    let mut h = Harness::connected(config(3, 10_000));
    let t0 = h.now;
    h.acquire("res");
    h.ms(300);
    h.reply(0, b"+OK\r\n");
    let out = h.reply(1, b"+OK\r\n");
    let a = acquired(&out.events);
    // ttl 10 s, drift 102 ms, elapsed 300 ms.
    assert_eq!(a.validity, (10_000 - 300 - 102) * MS);
    assert_eq!(a.deadline, t0 + (10_000 - 102) * MS);
}

/// Peer bug: validity in unsigned integers wraps to a huge value when the quorum comes
/// late. Here it must be "exhausted", not a lock with an absurd lease.
#[test]
fn regression_late_quorum_is_validity_exhausted_not_underflow() {
    let config = support::builder(3)
        .ttl(1000 * MS)
        .min_validity(960 * MS)
        .retry(RetryPolicy::once())
        .build()
        .unwrap();
    let mut h = Harness::connected(config);
    let (op, _) = h.acquire("res");
    h.ms(30);
    h.reply(0, b"+OK\r\n");
    let out = h.reply(1, b"+OK\r\n");
    // validity = 1000 - 30 - 12 = 958 ms <= 960 ms minimum.
    assert_eq!(
        out.events,
        vec![Event::AcquireFailed {
            op,
            resource: Resource::from("res"),
            reason: AcquireFailure::ValidityExhausted,
            stats: stats(
                1,
                30 * MS,
                &[
                    AcquireOutcome::Locked,
                    AcquireOutcome::Locked,
                    AcquireOutcome::Pending
                ]
            ),
        }]
    );
    // And the keys it did set are released everywhere.
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
}

/// Peer bug: an extension that re-creates an expired key. Past the deadline, `extend`
/// sends no extension: the lock is reported lost and released.
#[test]
fn regression_extend_after_deadline_sends_nothing_and_reports_lost() {
    assert!(!redlock_core::EXTEND_SCRIPT.body.contains("SET"));
    let mut h = Harness::connected(config(3, 1000));
    let (op, _) = h.acquire("res");
    h.reply(0, b"+OK\r\n");
    let out = h.reply(1, b"+OK\r\n");
    let deadline = acquired(&out.events).deadline;
    h.reply(2, b"$-1\r\n");
    // The deadline timer fires: Lost, and nothing is sent (never an extension).
    let out = h.timeout_at(deadline);
    assert_eq!(
        out.events,
        vec![Event::Lost {
            op,
            reason: LostReason::DeadlinePassed
        }]
    );
    assert!(out.transmits.is_empty());
    // Once the keys should have expired (t0 + ttl + drift = deadline + 2 * drift), a
    // cleanup release goes to all nodes and reports what it found.
    assert_eq!(out.timeout, Some(deadline + 24 * MS));
    let out = h.timeout_at(deadline + 24 * MS);
    for node in 0..3 {
        assert_eq!(mask_tokens(&out.sent_to(node)), release_frame("res"));
    }
    assert_eq!(h.client.extend(h.now, op), Err(UsageError::NotHeld(op)));
    // Drained again after the refused call.
    assert!(h.drain().transmits.is_empty());
    h.reply(0, b":-1\r\n");
    h.reply(1, b":-1\r\n");
    let out = h.reply(2, b":-1\r\n");
    assert_eq!(
        out.events,
        vec![Event::Released {
            op,
            nodes: vec![ReleaseOutcome::AlreadyExpired; 3]
        }]
    );
}

/// After a loss at the deadline the caller may release at once.
#[test]
fn release_after_loss_is_accepted_and_reported() {
    let mut h = Harness::connected(config(1, 1000));
    let (op, _) = h.acquire("res");
    let out = h.reply(0, b"+OK\r\n");
    let deadline = acquired(&out.events).deadline;
    h.timeout_at(deadline);
    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    assert_eq!(mask_tokens(&out.sent_to(0)), release_frame("res"));
    let out = h.reply(0, b":1\r\n");
    assert!(matches!(out.events[..], [Event::Released { .. }]));
    assert_eq!(h.client.release(h.now, op), Err(UsageError::UnknownOp(op)));
}

/// `extend` called when the deadline has passed but before the timer fired.
#[test]
fn extend_past_deadline_before_timer_reports_lost_without_sending_extend() {
    let mut h = Harness::connected(config(3, 1000));
    let (op, _) = h.acquire("res");
    h.reply(0, b"+OK\r\n");
    h.reply(1, b"+OK\r\n");
    h.ms(2000);
    h.client.extend(h.now, op).unwrap();
    let out = h.drain();
    assert!(matches!(out.events[..], [Event::Lost { .. }]));
    assert!(!String::from_utf8_lossy(&out.sent_to(0)).contains(redlock_core::EXTEND_SCRIPT.sha1));
}

/// Peer bug: one failed extension deletes a healthy lock. A failed extension before the
/// deadline is retried and sends no release.
#[test]
fn regression_failed_extend_keeps_the_lock_and_retries() {
    let mut h = Harness::connected(config(3, 1000));
    let (op, _) = h.acquire("res");
    h.reply(0, b"+OK\r\n");
    let out = h.reply(1, b"+OK\r\n");
    let deadline = acquired(&out.events).deadline;
    h.reply(2, b"+OK\r\n");
    h.ms(100);
    h.client.extend(h.now, op).unwrap();
    let out = h.drain();
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    assert!(String::from_utf8_lossy(&out.sent_to(0)).contains(redlock_core::EXTEND_SCRIPT.sha1));
    // Two nodes fail, one says yes: no quorum, but nobody said "not ours".
    h.reply(0, b":1\r\n");
    h.reply(1, b"-ERR busy\r\n");
    let out = h.reply(2, b"-ERR busy\r\n");
    assert!(
        out.events.is_empty(),
        "no Lost, no Extended yet: {:?}",
        out.events
    );
    assert!(
        out.transmits.is_empty(),
        "no release after a failed extension"
    );
    assert!(out.timeout.unwrap() < deadline);
    // The retry succeeds and moves the deadline from its own t0.
    let out = support::fire_until_transmit(&mut h);
    assert!(h.now < deadline);
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    let t0 = h.now;
    h.ms(5);
    h.reply(0, b":1\r\n");
    let out = h.reply(1, b":1\r\n");
    assert_eq!(
        out.events,
        vec![Event::Extended {
            op,
            deadline: t0 + 988 * MS,
            validity: 983 * MS
        }]
    );
}

#[test]
fn extension_not_owned_by_a_majority_is_lost_and_released() {
    let mut h = Harness::connected(config(3, 1000));
    let (op, _) = h.acquire("res");
    h.reply(0, b"+OK\r\n");
    h.reply(1, b"+OK\r\n");
    h.reply(2, b"$-1\r\n");
    h.client.extend(h.now, op).unwrap();
    h.drain();
    h.reply(0, b":0\r\n");
    let out = h.reply(1, b":0\r\n");
    assert_eq!(
        out.events,
        vec![Event::Lost {
            op,
            reason: LostReason::NotOwned {
                nodes: vec![name(0), name(1)]
            }
        }]
    );
    // Node 2's extension reply is still due before the release's on its connection.
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    h.reply(2, b":1\r\n");
    h.reply(0, b":-1\r\n");
    h.reply(1, b":-1\r\n");
    let out = h.reply(2, b":1\r\n");
    assert!(matches!(out.events[..], [Event::Released { .. }]));
}

#[test]
fn noscript_is_retried_once_as_eval_on_that_node() {
    let mut h = Harness::connected(config(3, 1000));
    let (op, _) = h.acquire("res");
    h.reply(0, b"+OK\r\n");
    h.reply(1, b"+OK\r\n");
    h.reply(2, b"+OK\r\n");
    h.client.release(h.now, op).unwrap();
    h.drain();
    let out = h.reply(1, b"-NOSCRIPT No matching script. Please use EVAL.\r\n");
    assert_eq!(out.nodes_sent(), vec![1]);
    let eval = String::from_utf8(out.sent_to(1)).unwrap();
    assert!(eval.contains("$4\r\nEVAL\r\n"));
    assert!(eval.contains(redlock_core::RELEASE_SCRIPT.body));
    h.reply(0, b":1\r\n");
    h.reply(2, b":-1\r\n");
    let out = h.reply(1, b":1\r\n");
    let Event::Released { nodes, .. } = &out.events[0] else {
        panic!("{out:?}")
    };
    assert_eq!(nodes[1], ReleaseOutcome::Released);
}

#[test]
fn server_errors_keep_their_message() {
    let mut h = Harness::connected(
        support::builder(1)
            .retry(RetryPolicy::once())
            .build()
            .unwrap(),
    );
    let (_, _) = h.acquire("res");
    let out = h.reply(0, b"-NOPERM this user has no permissions\r\n");
    let Event::AcquireFailed { reason, .. } = &out.events[0] else {
        panic!("{out:?}")
    };
    assert_eq!(
        *reason,
        AcquireFailure::QuorumUnreachable {
            errors: vec![(
                name(0),
                NodeFault::Server {
                    command: "SET",
                    message: "NOPERM this user has no permissions".into()
                }
            )]
        }
    );
}

#[test]
fn down_node_fails_at_once_and_disconnect_fails_in_flight() {
    let mut h = Harness::connected(config(5, 1000));
    for node in [3, 4] {
        h.disconnect(node, ConnectionError::Closed);
    }
    let t0 = h.now;
    let (op, out) = h.acquire("res");
    assert_eq!(out.nodes_sent(), vec![0, 1, 2], "down nodes get nothing");
    // Node 2 drops with the request in flight: with 3 and 4 already failed, that is three
    // non-OK votes of five, so the attempt fails now, not at the attempt deadline.
    let out = h.disconnect(2, ConnectionError::Closed);
    assert!(out.events.is_empty(), "a retry follows");
    assert_eq!(
        out.nodes_sent(),
        vec![0, 1],
        "cleanup release to the live nodes"
    );
    assert!(
        out.timeout.is_some_and(|t| t > t0),
        "retry and reconnects are timed"
    );
    // Cancelled now, the attempt reports how each node failed: the down nodes with the
    // reason they went down with, node 2 with the reason its connection dropped.
    h.client.cancel(h.now, op).unwrap();
    let out = h.drain();
    let closed = AcquireOutcome::Failed(NodeFault::Connection(ConnectionError::Closed));
    match &out.events[..] {
        [Event::AcquireFailed { stats: s, .. }] => assert_eq!(
            s.nodes,
            outcomes(&[
                AcquireOutcome::Pending,
                AcquireOutcome::Pending,
                closed.clone(),
                closed.clone(),
                closed
            ])
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn dead_minority_does_not_delay_success() {
    let mut h = Harness::connected(config(5, 1000));
    let reset = ConnectionError::Io("connection reset by peer".into());
    h.disconnect(3, reset.clone());
    h.disconnect(4, ConnectionError::Closed);
    let t0 = h.now;
    h.acquire("res");
    h.ms(1);
    h.reply(0, b"+OK\r\n");
    h.reply(1, b"+OK\r\n");
    let out = h.reply(2, b"+OK\r\n");
    let a = acquired(&out.events);
    assert_eq!(a.validity, (1000 - 1 - 12) * MS);
    assert_eq!(a.deadline, t0 + 988 * MS);
    // Each down node's request failed with the reason that node went down with.
    assert_eq!(
        a.stats.nodes[3].outcome,
        AcquireOutcome::Failed(NodeFault::Connection(reset))
    );
    assert_eq!(
        a.stats.nodes[4].outcome,
        AcquireOutcome::Failed(NodeFault::Connection(ConnectionError::Closed))
    );
}

#[test]
fn reconnect_is_requested_with_backoff() {
    let mut h = Harness::connected(config(3, 1000));
    let out = h.disconnect(1, ConnectionError::Closed);
    let at = out.timeout.expect("reconnect timer");
    assert!(
        at >= h.now + 25 * MS && at <= h.now + 75 * MS,
        "first backoff ~50 ms"
    );
    let out = h.timeout_at(at);
    // The reconnection is the node's second connection: generation 1.
    assert_eq!(out.connects, vec![ConnId::new(NodeId::new(1), 1)]);
    // Refused: the next delay doubles.
    let out = h.disconnect(1, ConnectionError::Refused);
    let at2 = out.timeout.unwrap();
    assert!(at2 >= h.now + 50 * MS && at2 <= h.now + 150 * MS);
}

/// Found by fuzzing: a second `Connected` without a `Disconnected` (then read as "the old
/// stream is gone") scheduled a reconnection and left it armed, so later the client asked
/// the driver to connect a node that was up. Now a stream is replaced only through an
/// `Output::Connect` that hands out a new generation: a repeated `Connected` for the current,
/// up connection is moot (nothing closed, nothing resent, no reconnection armed), and one
/// for a connection the client replaced does nothing either.
#[test]
fn regression_a_second_connected_changes_nothing() {
    let mut h = Harness::connected(config(3, 1000));
    let out = h.connect(0);
    assert!(
        out.transmits.is_empty() && out.connects.is_empty() && out.disconnects.is_empty(),
        "a repeated Connected restarted the connection: {out:?}"
    );
    assert_eq!(out.timeout, None, "a timer is armed: {out:?}");
    h.ms(10_000);
    let out = h.timeout();
    assert!(
        out.connects.is_empty(),
        "asked to connect an up node: {out:?}"
    );
    // The stream is the same one: no handshake or preload precedes the SET (on a restarted
    // connection the preloads would go first and take the next replies).
    let (op, out) = h.acquire("res");
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    assert_eq!(mask_tokens(&out.sent_to(0)), set_nx_px("res", 1000));
    h.reply(0, b"+OK\r\n");
    let out = h.reply(1, b"+OK\r\n");
    assert_eq!(
        acquired(&out.events).stats.nodes[0].outcome,
        AcquireOutcome::Locked
    );
    h.reply(2, b"+OK\r\n");
    h.client.release(h.now, op).unwrap();
    h.drain();
    let mut released = Vec::new();
    for node in 0..3 {
        released.extend(h.reply(node, b":1\r\n").events);
    }
    assert!(
        matches!(released[..], [Event::Released { .. }]),
        "{released:?}"
    );

    // The way to a new stream: the old one goes, and the reconnection is generation 1.
    let old = h.conn(0);
    let out = h.disconnect(0, ConnectionError::Closed);
    let out = h.timeout_at(out.timeout.expect("reconnect timer"));
    let new = ConnId::new(NodeId::new(0), 1);
    assert_eq!(out.connects, vec![new]);
    // A Connected for the replaced connection (generation 0) is ignored: the node stays
    // down-and-connecting, nothing is written.
    let out = h.input(|now| Input::Connected { now, conn: old });
    assert!(out.transmits.is_empty(), "{out:?}");
    assert!(!h.client.is_up(NodeId::new(0)));
    // The new one comes up and starts clean, with its preloads.
    let out = h.connect(0);
    assert!(h.client.is_up(NodeId::new(0)));
    assert!(
        String::from_utf8_lossy(&out.sent_to(0)).contains("SCRIPT"),
        "{out:?}"
    );
}

#[test]
fn handshake_goes_first_and_a_refusal_drops_the_node() {
    let settings = NodeSettings {
        username: Some("app".into()),
        password: Some("secret".into()),
        db: 3,
    };
    let config = support::builder(1)
        .node(0, settings)
        .retry(RetryPolicy::once())
        .build()
        .unwrap();
    let mut h = Harness::new(config);
    let first = ConnId::new(NodeId::new(0), 0);
    assert_eq!(h.drain().connects, vec![first]);
    // A lock requested before the first connection waits for it.
    let (op, out) = h.acquire("res");
    assert!(out.transmits.is_empty());
    let out = h.connect(0);
    let sent = mask_tokens(&out.sent_to(0));
    let auth = "*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$6\r\nsecret\r\n";
    let select = "*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n";
    let load = |body: &str| {
        format!(
            "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n${}\r\n{body}\r\n",
            body.len()
        )
    };
    let hello = "*1\r\n$5\r\nHELLO\r\n*1\r\n$4\r\nTIME\r\n";
    let preload = load(redlock_core::RELEASE_SCRIPT.body) + &load(redlock_core::EXTEND_SCRIPT.body);
    assert_eq!(
        sent,
        format!("{auth}{select}{hello}{preload}{}", set_nx_px("res", 10_000))
    );
    let out = h.reply(0, b"-WRONGPASS invalid username-password pair\r\n");
    assert_eq!(out.disconnects, vec![first]);
    let refused = NodeFault::Handshake {
        command: "AUTH",
        message: "WRONGPASS invalid username-password pair".into(),
    };
    assert_eq!(
        out.events,
        vec![Event::AcquireFailed {
            op,
            resource: Resource::from("res"),
            reason: AcquireFailure::QuorumUnreachable {
                errors: vec![(name(0), refused.clone())]
            },
            stats: stats(1, Duration::ZERO, &[AcquireOutcome::Failed(refused)]),
        }]
    );
}

#[test]
fn garbage_from_a_node_is_a_fault_not_a_panic() {
    let mut h = Harness::connected(config(3, 1000));
    h.acquire("res");
    let dropped = h.conn(2);
    let out = h.reply(2, b"HTTP/1.1 400 Bad Request\r\n\r\n");
    assert_eq!(out.disconnects, vec![dropped]);
    h.reply(0, b"+OK\r\n");
    let out = h.reply(1, b"+OK\r\n");
    let a = acquired(&out.events);
    assert!(matches!(
        a.stats.nodes[2].outcome,
        AcquireOutcome::Failed(NodeFault::Protocol(_))
    ));
    // Bytes from the dropped connection are ignored: node 2 is down, so `dropped` (its
    // generation 0) is no longer its current connection.
    assert_eq!(h.client.connection(NodeId::new(2)), None);
    let out = h.reply_on(dropped, b"+OK\r\n");
    assert!(out.events.is_empty() && out.disconnects.is_empty());
}

#[test]
fn unsolicited_reply_drops_the_connection() {
    let mut h = Harness::connected(config(3, 1000));
    let out = h.reply(0, b"+OK\r\n");
    assert_eq!(out.disconnects, vec![ConnId::new(NodeId::new(0), 0)]);
}

#[test]
fn paused_node_times_out_and_its_late_replies_are_swallowed() {
    let mut h = Harness::connected(config(3, 1000));
    let t0 = h.now;
    let (op, _) = h.acquire("res");
    h.reply(0, b"+OK\r\n");
    let out = h.timeout_at(t0 + 50 * MS);
    // One OK, two timeouts: failed; cleanup release to all, retry later.
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    // The paused nodes wake up: their SET replies, then their release replies.
    h.reply(1, b"+OK\r\n");
    h.reply(2, b"+OK\r\n");
    h.reply(0, b":1\r\n");
    h.reply(1, b":1\r\n");
    let out = h.reply(2, b":1\r\n");
    assert!(out.events.is_empty(), "late replies change nothing");
    // The retry works with all three.
    let out = h.timeout_at(out.timeout.unwrap());
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    h.reply(1, b"+OK\r\n");
    let out = h.reply(2, b"+OK\r\n");
    let a = acquired(&out.events);
    assert_eq!((a.op, a.stats.attempts), (op, 2));
}

#[test]
fn cancel_mid_attempt_releases_everywhere() {
    let mut h = Harness::connected(config(3, 1000));
    let (op, _) = h.acquire("res");
    h.reply(0, b"+OK\r\n");
    h.client.cancel(h.now, op).unwrap();
    let out = h.drain();
    assert_eq!(
        out.events,
        vec![Event::AcquireFailed {
            op,
            resource: Resource::from("res"),
            reason: AcquireFailure::Cancelled,
            // The attempt cut short: its answers so far.
            stats: stats(
                1,
                Duration::ZERO,
                &[
                    AcquireOutcome::Locked,
                    AcquireOutcome::Pending,
                    AcquireOutcome::Pending
                ]
            ),
        }]
    );
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
}

#[test]
fn inputs_before_draining_are_refused() {
    let mut h = Harness::new(config(1, 1000));
    let r = h.client.acquire(h.now, Resource::from("x"));
    assert_eq!(r, Err(UsageError::NotDrained));
    h.drain();
    assert_eq!(
        h.client.acquire(h.now, Resource::from("")),
        Err(UsageError::EmptyResource)
    );
    assert!(h.client.acquire(h.now, Resource::from("x")).is_ok());
    assert_eq!(
        h.client.handle_input(Input::Timeout(h.now)),
        Err(UsageError::NotDrained)
    );
    assert_eq!(
        h.client.handle_input(Input::Connected {
            now: h.now,
            conn: ConnId::new(NodeId::new(5), 0)
        }),
        Err(UsageError::UnknownNode(NodeId::new(5)))
    );
}

#[test]
fn auto_extension_renews_at_one_third_and_stops_at_its_bound() {
    let auto = redlock_core::AutoExtend {
        max_renewals: Some(2),
        max_hold: None,
        ..Default::default()
    };
    let config = support::builder(1)
        .ttl(900 * MS)
        .auto_extend(Some(auto))
        .build()
        .unwrap();
    let mut h = Harness::connected(config);
    let t0 = h.now;
    let (op, _) = h.acquire("res");
    let out = h.reply(0, b"+OK\r\n");
    // drift = 9 + 2 = 11 ms: deadline t0 + 889; renew at deadline - 300.
    assert_eq!(out.timeout, Some(t0 + 589 * MS));
    for round in 1..=2u32 {
        let at = h.drain().timeout.unwrap_or(h.now);
        let out = h.timeout_at(at);
        assert_eq!(out.nodes_sent(), vec![0], "renewal {round}");
        let t_ext = h.now;
        let out = h.reply(0, b":1\r\n");
        assert_eq!(
            out.events,
            vec![Event::Extended {
                op,
                deadline: t_ext + 889 * MS,
                validity: 889 * MS
            }]
        );
    }
    // Bound reached: the next timer is the deadline, and then the lock is lost.
    let out = h.drain();
    let deadline = out.timeout.unwrap();
    let out = h.timeout_at(deadline);
    assert!(matches!(
        out.events[..],
        [Event::Lost {
            reason: LostReason::DeadlinePassed,
            ..
        }]
    ));
}

/// A driver that reads a reply after a deadline without having fed the timeout first
/// cannot make the vote count: the deadline is handled first.
#[test]
fn votes_after_a_deadline_do_not_count_even_if_the_timer_was_not_fed() {
    // The extension's replies arrive 10 ms past the lock's deadline (t0 + 988 ms).
    let mut h = Harness::connected(config(3, 1000));
    let t0 = h.now;
    let (op, _) = h.acquire("res");
    for node in 0..3 {
        h.reply(node, b"+OK\r\n");
    }
    h.now = t0 + 978 * MS;
    h.client.extend(h.now, op).unwrap();
    h.drain();
    h.now = t0 + 998 * MS;
    let out = h.reply(0, b":1\r\n");
    assert_eq!(
        out.events,
        vec![Event::Lost {
            op,
            reason: LostReason::DeadlinePassed
        }]
    );
    let out = h.reply(1, b":1\r\n");
    assert!(out.events.is_empty());
}

/// Preload replies are not votes, whatever they say; NOSCRIPT handling stays in place for
/// servers that refuse or later flush scripts.
#[test]
fn preload_replies_are_ignored_even_errors() {
    let mut h = Harness::new(config(1, 1000));
    h.drain();
    h.connect(0);
    // HELLO and TIME refused (the node is then probed, and has no clock), and both
    // preloads.
    let out = h.reply(
        0,
        b"-NOPERM no hello\r\n-NOPERM no time\r\n-NOPERM no scripts for you\r\n-ERR unknown command\r\n",
    );
    assert!(out.disconnects.is_empty() && out.events.is_empty());
    let (_, out) = h.acquire("res");
    assert_eq!(mask_tokens(&out.sent_to(0)), set_nx_px("res", 1000));
    let out = h.reply(0, b"+OK\r\n");
    assert!(matches!(out.events[..], [Event::Acquired(_)]));
}

/// S1 of the outside review (and the reused-value issue): with a supplied value, every
/// attempt used to store the same bytes, so an earlier attempt's release that reached the
/// node late (resent as EVAL, or held by a dead connection) deleted the next attempt's key
/// while the client counted it. Now each attempt stores the value stamped with its own
/// nonce; the next attempt goes out at once, and the earlier attempt's cleanup compares the
/// earlier value. (Before the fix both SETs carried `supplied` as is.)
#[test]
fn regression_each_attempt_stores_its_own_value_for_a_supplied_token() {
    let config = support::builder(1)
        .ttl(Duration::from_millis(1000))
        .retry(RetryPolicy {
            max_attempts: Some(2),
            max_wait: None,
            delay_min: MS,
            delay_max: MS,
        })
        .build()
        .unwrap();
    let mut h = Harness::connected(config);
    let token = redlock_core::Token::new("owner:7").unwrap();
    let options = redlock_core::LockOptions::default().token(token);
    h.client
        .acquire_with(h.now, Resource::from("res"), &options)
        .unwrap();
    let first = stored_value(&h.drain().sent_to(0), "SET");
    let out = h.reply(0, b"$-1\r\n");
    assert_eq!(
        stored_value(&out.sent_to(0), "EVALSHA"),
        first,
        "cleanup of attempt 1"
    );
    // The retry goes out while the cleanup is still unanswered, with a new value.
    let out = fire_until_timeout_passes(&mut h, 5);
    let second = stored_value(&out.sent_to(0), "SET");
    assert_ne!(first, second, "two attempts stored the same value");
    for value in [&first, &second] {
        assert!(value.starts_with("owner:7:"), "{value}");
        assert_eq!(value.len(), "owner:7".len() + redlock_core::STAMP_LEN);
    }
    // The late cleanup finds no key of its own (it compares the first value), then the
    // second attempt's SET succeeds.
    h.reply(0, b":-1\r\n");
    let out = h.reply(0, b"+OK\r\n");
    let a = acquired(&out.events);
    assert_eq!(a.token.as_bytes(), second.as_bytes());
    assert_eq!(a.token.supplied(), Some(&b"owner:7"[..]));
}

/// The value a command stores or compares: the third argument of `SET` (key, value), the
/// fifth of `EVALSHA`/`EVAL` (sha, 1, key, value).
fn stored_value(sent: &[u8], command: &str) -> String {
    let text = String::from_utf8_lossy(sent).into_owned();
    // A RESP array of bulk strings: every second line after the header is an argument.
    let args: Vec<&str> = text.split("\r\n").skip(2).step_by(2).collect();
    assert_eq!(args.first(), Some(&command), "{text:?}");
    let at = if command == "SET" { 2 } else { 4 };
    args[at].to_owned()
}

/// W1 of the outside review: a release that comes after the deadline, before the deadline
/// timer was fed, reports the loss before the release (it used to report only `Released`
/// with `AlreadyExpired` nodes). The same for a cancel.
#[test]
fn regression_release_or_cancel_after_the_deadline_reports_lost_first() {
    for cancel in [false, true] {
        let mut h = Harness::connected(config(1, 1000));
        let (op, _) = h.acquire("res");
        let out = h.reply(0, b"+OK\r\n");
        let deadline = acquired(&out.events).deadline;
        h.advance(deadline.duration_since(h.now) + 5 * MS);
        if cancel {
            h.client.cancel(h.now, op).unwrap();
        } else {
            h.client.release(h.now, op).unwrap();
        }
        let out = h.drain();
        assert_eq!(
            out.events,
            vec![Event::Lost {
                op,
                reason: LostReason::DeadlinePassed
            }],
            "cancel: {cancel}"
        );
        assert_eq!(mask_tokens(&out.sent_to(0)), release_frame("res"));
        let out = h.reply(0, b":-1\r\n");
        assert_eq!(
            out.events,
            vec![Event::Released {
                op,
                nodes: vec![ReleaseOutcome::AlreadyExpired]
            }]
        );
    }
}

/// Advances time by `ms` and fires the timers due then.
fn fire_until_timeout_passes(h: &mut Harness, ms: u64) -> support::Drained {
    h.ms(ms);
    h.timeout()
}

/// Peer bug: the order in which replies arrive changes the outcome. Every order of the same
/// five replies gives the same decision, at the same (third) OK.
#[test]
fn regression_reply_order_does_not_change_the_outcome() {
    let replies: [&[u8]; 5] = [
        b"+OK\r\n",
        b"$-1\r\n",
        b"+OK\r\n",
        b"-ERR x\r\n",
        b"+OK\r\n",
    ];
    let mut order: Vec<usize> = (0..5).collect();
    let mut seen = 0;
    // All 120 permutations (Heap's algorithm, iterative).
    let mut c = [0usize; 5];
    let check = |order: &[usize]| {
        let mut h = Harness::connected(config(5, 1000));
        h.acquire("res");
        let mut oks = 0;
        for &node in order {
            let out = h.reply(node, replies[node]);
            oks += usize::from(replies[node] == b"+OK\r\n");
            if oks == 3 {
                let a = acquired(&out.events);
                assert_eq!(a.validity, 988 * MS);
                return;
            }
            assert!(out.events.is_empty(), "decided early in order {order:?}");
        }
        panic!("no decision for {order:?}");
    };
    check(&order);
    seen += 1;
    let mut i = 0;
    while i < 5 {
        if c[i] < i {
            if i % 2 == 0 {
                order.swap(0, i);
            } else {
                order.swap(c[i], i);
            }
            check(&order);
            seen += 1;
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    assert_eq!(seen, 120);
}

/// Found by fuzzing: with a zero retry delay and every node down, an extension retried in
/// the same instant forever and the lock was never reported lost.
#[test]
fn regression_zero_retry_delay_with_nodes_down_still_loses_the_lock() {
    let config = support::builder(1)
        .ttl(Duration::from_millis(1000))
        .retry(RetryPolicy {
            max_attempts: Some(1),
            max_wait: None,
            delay_min: Duration::ZERO,
            delay_max: Duration::ZERO,
        })
        .build()
        .unwrap();
    let mut h = Harness::connected(config);
    let (op, _) = h.acquire("res");
    let out = h.reply(0, b"+OK\r\n");
    let deadline = acquired(&out.events).deadline;
    h.disconnect(0, ConnectionError::Closed);
    h.client.extend(h.now, op).unwrap();
    h.drain();
    // Bounded: fire timers until the loss is reported; a retry never lands in the past.
    let mut lost = false;
    for _ in 0..10_000 {
        let Some(at) = h.drain().timeout else { break };
        assert!(at > h.now || at == h.now && !lost);
        let out = h.timeout_at(at.max(h.now));
        for &conn in &out.connects {
            let reason = ConnectionError::Refused;
            h.input(|now| Input::Disconnected { now, conn, reason });
        }
        if out.events.iter().any(|e| matches!(e, Event::Lost { .. })) {
            lost = true;
            break;
        }
    }
    assert!(lost, "never reported lost");
    assert!(h.now >= deadline);
}
