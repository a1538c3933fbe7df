//! Connections as the client names them ([`ConnId`]: a node and a generation), why a node
//! failed ([`ConnectionError`] and the node's down cause), and what an acquisition reports
//! about itself ([`AcquireStats`]), through the public API on virtual time.

mod support;

use std::time::Duration;

use redlock_core::{
    AcquireFailure, AcquireOutcome, AcquireStats, Config, ConnId, ConnectionError, Event, Input,
    LockOptions, NodeFault, NodeId, NodeName, NodeSettings, Resource, RetryPolicy,
};
use support::{Drained, Harness, acquired, name, outcomes, stats_named};

const MS: Duration = Duration::from_millis(1);
const OK: &[u8] = b"+OK\r\n";
const NIL: &[u8] = b"$-1\r\n";

fn config(n: usize) -> Config {
    support::builder(n)
        .ttl(1000 * MS)
        .build()
        .expect("valid config")
}

/// A config for three nodes named `a`, `b` and `c`.
fn named(retry: RetryPolicy) -> Config {
    support::builder(3)
        .ttl(1000 * MS)
        .node_name(0, "a")
        .node_name(1, "b")
        .node_name(2, "c")
        .retry(retry)
        .build()
        .expect("valid config")
}

/// Retries `attempts` times (or until `max_wait`), always exactly `delay` apart.
fn retry(attempts: Option<u32>, max_wait: Option<Duration>, delay: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts: attempts,
        max_wait,
        delay_min: delay,
        delay_max: delay,
    }
}

/// The node's name in `config`.
fn node(config: &Config, i: usize) -> NodeName {
    config.node_names()[i].clone()
}

fn failed(events: &[Event]) -> (&AcquireFailure, &AcquireStats) {
    match events {
        [Event::AcquireFailed { reason, stats, .. }] => (reason, stats),
        other => panic!("expected one AcquireFailed, got {other:?}"),
    }
}

// ---- generations ----

/// After a disconnect and the reconnection (generation 1), input naming the old connection
/// (generation 0) is ignored, and so is input naming one never handed out: its bytes are
/// not matched to the new connection's requests, its close does not close the new
/// connection, and its `Connected` does not restart it. The new connection works.
///
/// If the client ignored generations (matching inputs by node, as it did before `ConnId`),
/// each stale input would do harm, and the test fails at each: the old connection's
/// `Connected` would bring the node up before the new socket is; its `+OK` would be read as
/// node 1's reply to the new connection's `SET`, giving the lock its quorum with node 0 (an
/// `Acquired` node 1 never granted); its `Disconnected` would take node 1 down and fail the
/// `SET`.
#[test]
fn input_from_a_replaced_connection_is_ignored() {
    let mut h = Harness::connected(config(3));
    let old = h.conn(1);
    assert_eq!(old, ConnId::new(NodeId::new(1), 0));
    let out = h.disconnect(1, ConnectionError::Closed);
    assert_eq!(h.client.connection(NodeId::new(1)), None);
    let out = h.timeout_at(out.timeout.expect("a reconnection is due"));
    let new = ConnId::new(NodeId::new(1), 1);
    assert_eq!(out.connects, vec![new]);
    assert_eq!(h.client.connection(NodeId::new(1)), Some(new));
    // While the new connection is being opened, the old one's `Connected` does not bring the
    // node up (it would then write to the new socket as if it were set up).
    let out = h.input(|now| Input::Connected { now, conn: old });
    assert!(out.transmits.is_empty(), "{out:?}");
    assert!(!h.client.is_up(NodeId::new(1)));
    h.connect(1);
    h.answer_preloads(1);

    let (_, out) = h.acquire("res");
    assert_eq!(out.nodes_sent(), vec![0, 1, 2]);
    let out = h.reply(0, OK);
    assert!(out.events.is_empty());

    // The old connection's reply: one more OK would be a quorum of 2 of 3.
    let out = h.reply_on(old, OK);
    assert!(
        out.events.is_empty() && out.disconnects.is_empty(),
        "the old connection's reply was read: {out:?}"
    );
    // Nor does a reply from a connection never handed out count.
    let out = h.reply_on(ConnId::new(NodeId::new(1), 2), OK);
    assert!(
        out.events.is_empty() && out.disconnects.is_empty(),
        "{out:?}"
    );

    // The old connection's close leaves the new one up, with its request in flight.
    let out = h.input(|now| Input::Disconnected {
        now,
        conn: old,
        reason: ConnectionError::Closed,
    });
    assert!(out.events.is_empty() && out.connects.is_empty(), "{out:?}");
    assert!(h.client.is_up(NodeId::new(1)));
    assert_eq!(h.client.connection(NodeId::new(1)), Some(new));

    // The old connection's `Connected` does nothing: no handshake or preload resent.
    let out = h.input(|now| Input::Connected { now, conn: old });
    assert!(
        out.transmits.is_empty() && out.disconnects.is_empty(),
        "{out:?}"
    );
    assert_eq!(h.client.connection(NodeId::new(1)), Some(new));

    // The new connection's reply is the one that counts.
    let out = h.reply_on(new, OK);
    let a = acquired(&out.events);
    assert_eq!(
        a.stats.nodes,
        outcomes(&[
            AcquireOutcome::Locked,
            AcquireOutcome::Locked,
            AcquireOutcome::Pending
        ])
    );
}

/// The client closes a connection by its id, and a reconnection hands out the next
/// generation each time, also after failed attempts.
#[test]
fn each_reconnection_is_the_next_generation() {
    let mut h = Harness::connected(config(1));
    // An unsolicited reply is a protocol fault: the client closes generation 0.
    let out = h.reply(0, OK);
    assert_eq!(out.disconnects, vec![ConnId::new(NodeId::new(0), 0)]);
    let mut at = out.timeout.expect("a reconnection is due");
    for generation in 1..=3 {
        let out = h.timeout_at(at);
        let conn = ConnId::new(NodeId::new(0), generation);
        assert_eq!(out.connects, vec![conn]);
        // The attempt fails: the node is down until the next one.
        let out = h.disconnect(0, ConnectionError::Refused);
        assert_eq!(h.client.connection(NodeId::new(0)), None);
        at = out.timeout.expect("a reconnection is due");
    }
    let out = h.timeout_at(at);
    assert_eq!(out.connects, vec![ConnId::new(NodeId::new(0), 4)]);
    h.connect(0);
    assert!(h.client.is_up(NodeId::new(0)));
}

// ---- reasons ----

/// Nodes that refuse the connection fail a request at once with that reason, by name, and
/// the failure prints it.
#[test]
fn refused_connections_are_the_reason_by_name() {
    let config = named(RetryPolicy::default());
    let (a, b) = (node(&config, 0), node(&config, 1));
    assert_eq!(a, NodeName::new(NodeId::new(0), "a"));
    let mut h = Harness::new(config);
    let first = h.drain();
    assert_eq!(first.connects.len(), 3);
    h.disconnect(0, ConnectionError::Refused);
    h.disconnect(1, ConnectionError::Refused);
    h.connect(2);
    h.answer_preloads(2);

    let op = h.client.try_acquire(h.now, Resource::from("res")).unwrap();
    let out = h.drain();
    // Decided at once: two refused nodes of three leave no quorum (2).
    let refused = NodeFault::Connection(ConnectionError::Refused);
    assert_eq!(
        out.events,
        vec![Event::AcquireFailed {
            op,
            resource: Resource::from("res"),
            reason: AcquireFailure::QuorumUnreachable {
                errors: vec![(a.clone(), refused.clone()), (b.clone(), refused.clone())]
            },
            stats: stats_named(
                h.client.config().node_names(),
                1,
                Duration::ZERO,
                &[
                    AcquireOutcome::Failed(refused.clone()),
                    AcquireOutcome::Failed(refused),
                    AcquireOutcome::Pending
                ]
            ),
        }]
    );
    let (reason, stats) = failed(&out.events);
    assert_eq!(
        reason.to_string(),
        "too many nodes failed: a: connection refused; b: connection refused"
    );
    assert_eq!(
        stats.to_string(),
        "1 attempt in 0ns (a: connection refused, b: connection refused, c: no answer yet)"
    );
}

/// The brief's example, with addresses for names: `a:1`, `b:2`.
#[test]
fn refused_connections_print_with_address_names() {
    let config = support::builder(3)
        .node_name(0, "a:1")
        .node_name(1, "b:2")
        .node_name(2, "c:3")
        .build()
        .unwrap();
    let mut h = Harness::new(config);
    h.drain();
    h.disconnect(0, ConnectionError::Refused);
    h.disconnect(1, ConnectionError::Refused);
    h.client.try_acquire(h.now, Resource::from("res")).unwrap();
    let out = h.drain();
    let (reason, _) = failed(&out.events);
    assert_eq!(
        reason.to_string(),
        "too many nodes failed: a:1: connection refused; b:2: connection refused"
    );
}

/// A refused handshake takes the node down with the server's refusal, and the next
/// attempt's request to the (still down) node fails with that same fault, not a generic
/// "closed": the reason a node is down is the reason its requests fail.
#[test]
fn a_refused_handshake_is_the_reason_for_the_next_attempt() {
    let settings = NodeSettings {
        password: Some("secret".into()),
        ..NodeSettings::default()
    };
    let config = support::builder(1)
        .ttl(1000 * MS)
        .node(0, settings)
        .retry(retry(Some(2), None, 5 * MS))
        // The reconnection comes long after the retry: the node is down for attempt 2.
        .reconnect_backoff(Duration::from_secs(10), Duration::from_secs(20))
        .build()
        .unwrap();
    let mut h = Harness::new(config);
    h.drain();
    let t0 = h.now;
    let (op, out) = h.acquire("res");
    assert!(out.transmits.is_empty(), "waits for the first connection");
    let out = h.connect(0);
    assert!(String::from_utf8_lossy(&out.sent_to(0)).starts_with("*2\r\n$4\r\nAUTH\r\n"));
    let message = "WRONGPASS invalid username-password pair or user is disabled.";
    let out = h.reply(0, format!("-{message}\r\n").as_bytes());
    assert_eq!(out.disconnects, vec![ConnId::new(NodeId::new(0), 0)]);
    assert!(out.events.is_empty(), "attempt 2 follows: {out:?}");
    let retry_at = out.timeout.expect("the retry is due");
    assert_eq!(retry_at, t0 + 5 * MS);

    // Attempt 2, the node still down: its request fails at once, with the refusal.
    let out = h.timeout_at(retry_at);
    assert_eq!(h.client.connection(NodeId::new(0)), None);
    assert!(
        out.connects.is_empty() && out.transmits.is_empty(),
        "{out:?}"
    );
    let refusal = NodeFault::Handshake {
        command: "AUTH",
        message: message.into(),
    };
    assert_eq!(
        out.events,
        vec![Event::AcquireFailed {
            op,
            resource: Resource::from("res"),
            reason: AcquireFailure::QuorumUnreachable {
                errors: vec![(name(0), refusal.clone())]
            },
            stats: support::stats(2, 5 * MS, &[AcquireOutcome::Failed(refusal)]),
        }]
    );
    let (reason, _) = failed(&out.events);
    assert_eq!(
        reason.to_string(),
        format!("too many nodes failed: node#0: AUTH was refused: {message}")
    );
}

/// A connection that drops with a request in flight fails it with the driver's reason, and
/// later requests to the down node fail with the same reason.
#[test]
fn a_dropped_connection_fails_requests_with_its_reason() {
    let mut h = Harness::connected(
        support::builder(1)
            .ttl(1000 * MS)
            .retry(retry(Some(2), None, 5 * MS))
            .reconnect_backoff(Duration::from_secs(10), Duration::from_secs(20))
            .build()
            .unwrap(),
    );
    let reset = ConnectionError::Io("connection reset by peer".into());
    h.acquire("res");
    let out = h.disconnect(0, reset.clone());
    assert!(out.events.is_empty(), "attempt 2 follows: {out:?}");
    let out = h.timeout_at(out.timeout.expect("the retry is due"));
    let fault = NodeFault::Connection(reset);
    let (reason, stats) = failed(&out.events);
    assert_eq!(
        *reason,
        AcquireFailure::QuorumUnreachable {
            errors: vec![(name(0), fault.clone())]
        }
    );
    assert_eq!(stats.nodes, outcomes(&[AcquireOutcome::Failed(fault)]));
    assert_eq!(
        reason.to_string(),
        "too many nodes failed: node#0: connection failed: connection reset by peer"
    );
}

// ---- statistics ----

/// One attempt on the three named nodes in which `a` and `b` say the key is held, `c`
/// answering first with `c_says` (or staying silent); then the cleanup release is answered
/// everywhere it can be. Returns the drain in which the attempt was decided.
fn contended_attempt(h: &mut Harness, c_says: Option<&[u8]>) -> Drained {
    h.ms(2);
    if let Some(reply) = c_says {
        assert!(h.reply(2, reply).events.is_empty());
    }
    assert!(h.reply(0, NIL).events.is_empty());
    let decided = h.reply(1, NIL);
    // Cleanup of the failed attempt: a release on every node.
    assert_eq!(decided.nodes_sent(), vec![0, 1, 2]);
    h.reply(0, b":-1\r\n");
    h.reply(1, b":-1\r\n");
    if c_says.is_some() {
        h.reply(2, b":1\r\n");
    }
    decided
}

/// Fires the retry, which must be due at `at`.
fn retry_at(h: &mut Harness, at: std::time::Instant) {
    assert_eq!(h.drain().timeout, Some(at), "the retry is due then");
    let out = h.timeout_at(at);
    assert_eq!(out.nodes_sent(), vec![0, 1, 2], "the retry fans out");
}

/// On success: the attempts made, the virtual time from the first attempt's start to the
/// quorum, and each node's answer in the successful attempt, by name.
#[test]
fn success_reports_attempts_elapsed_and_named_outcomes() {
    let mut h = Harness::connected(named(retry(Some(3), None, 10 * MS)));
    let t0 = h.now;
    h.acquire("res");
    let out = contended_attempt(&mut h, Some(OK));
    assert!(out.events.is_empty(), "a retry follows: {out:?}");
    // Decided at t0 + 2 ms; the retry 10 ms later.
    retry_at(&mut h, t0 + 12 * MS);
    h.ms(8);
    h.reply(0, OK);
    let out = h.reply(2, OK);
    let a = acquired(&out.events);
    let names = h.client.config().node_names();
    assert_eq!(
        a.stats,
        stats_named(
            names,
            2,
            20 * MS,
            &[
                AcquireOutcome::Locked,
                AcquireOutcome::Pending,
                AcquireOutcome::Locked
            ]
        )
    );
    assert_eq!(
        a.stats.to_string(),
        "2 attempts in 20ms (a: locked, b: no answer yet, c: locked)"
    );
    assert_eq!(a.stats.count(|o| *o == AcquireOutcome::Locked), 2);
    // Validity counts from the successful attempt's start (t0 + 12 ms), not the first's.
    assert_eq!(a.deadline, t0 + 12 * MS + 988 * MS);
}

/// On failure after every retry: `attempts` is the configured maximum, and the outcomes are
/// the last attempt's (here `c` said nothing in it, after locking in the earlier ones).
#[test]
fn contended_failure_reports_every_attempt_and_the_last_outcomes() {
    let mut h = Harness::connected(named(retry(Some(3), None, 10 * MS)));
    let t0 = h.now;
    let (op, _) = h.acquire("res");
    for k in 0..2 {
        let out = contended_attempt(&mut h, Some(OK));
        assert!(out.events.is_empty(), "attempt {} is not the last", k + 1);
        retry_at(&mut h, t0 + (12 * (k + 1)) * MS);
    }
    let out = contended_attempt(&mut h, None);
    let names = h.client.config().node_names().to_vec();
    assert_eq!(
        out.events,
        vec![Event::AcquireFailed {
            op,
            resource: Resource::from("res"),
            reason: AcquireFailure::Contended {
                nodes: vec![names[0].clone(), names[1].clone()]
            },
            stats: stats_named(
                &names,
                3,
                26 * MS,
                &[
                    AcquireOutcome::Held,
                    AcquireOutcome::Held,
                    AcquireOutcome::Pending
                ]
            ),
        }]
    );
    let (reason, _) = failed(&out.events);
    assert_eq!(reason.to_string(), "another client holds it on a, b");
}

/// When `max_wait` runs out under contention, the failure is `WaitDeadline` and keeps the
/// last attempt's reason.
#[test]
fn wait_deadline_keeps_the_last_attempts_reason() {
    // Attempts decide 2 ms after they start and retry 10 ms later: starts at 0, 12 and 24 ms
    // fit in 25 ms; the fourth (36 ms) would not.
    let mut h = Harness::connected(named(retry(None, Some(25 * MS), 10 * MS)));
    let t0 = h.now;
    let options = LockOptions::default();
    h.client
        .acquire_with(h.now, Resource::from("res"), &options)
        .unwrap();
    h.drain();
    for k in 0..2 {
        let out = contended_attempt(&mut h, Some(OK));
        assert!(out.events.is_empty(), "attempt {} is not the last", k + 1);
        retry_at(&mut h, t0 + (12 * (k + 1)) * MS);
    }
    let out = contended_attempt(&mut h, Some(OK));
    let (reason, stats) = failed(&out.events);
    let names = h.client.config().node_names();
    let contended = AcquireFailure::Contended {
        nodes: vec![names[0].clone(), names[1].clone()],
    };
    assert_eq!(
        *reason,
        AcquireFailure::WaitDeadline {
            last: Some(Box::new(contended))
        }
    );
    assert_eq!((stats.attempts, stats.elapsed), (3, 26 * MS));
    assert_eq!(
        stats.nodes.iter().map(|n| &n.outcome).collect::<Vec<_>>(),
        [
            &AcquireOutcome::Held,
            &AcquireOutcome::Held,
            &AcquireOutcome::Locked
        ]
    );
    assert_eq!(
        reason.to_string(),
        "the wait deadline passed; the last attempt: another client holds it on a, b"
    );
}
