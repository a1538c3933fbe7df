//! Faults that cannot heal end an extension at once; faults that may heal are retried
//! within the validity (algorithm.md §9).

mod support;

use std::time::Duration;

use redlock_core::{ConnectionError, Event, LostReason, NodeFault, OpId, ReleaseOutcome};
use support::{Harness, name};

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
const NOPERM: &[u8] = b"-NOPERM this user has no permissions to run the 'evalsha' command\r\n";
const BUSY: &[u8] = b"-BUSY Redis is busy running a script.\r\n";

/// A lock held on all 3 nodes, with an extension sent.
fn extending() -> (Harness, OpId) {
    let config = support::builder(3)
        .ttl(Duration::from_secs(1))
        .build()
        .expect("valid config");
    let mut h = Harness::connected(config);
    let (op, _) = h.acquire("res");
    for n in 0..3 {
        h.reply(n, b"+OK\r\n");
    }
    h.client.extend(h.now, op).unwrap();
    h.drain();
    (h, op)
}

fn server(message: &[u8]) -> NodeFault {
    let text = std::str::from_utf8(&message[1..message.len() - 2]).unwrap();
    NodeFault::Server {
        command: "EVALSHA",
        message: text.to_owned(),
    }
}

#[test]
fn a_majority_refusing_for_good_loses_the_lock_at_once_and_releases_it() {
    let (mut h, op) = extending();
    h.reply(0, WRONGTYPE);
    let out = h.reply(1, NOPERM);
    let expected = LostReason::Refused {
        errors: vec![(name(0), server(WRONGTYPE)), (name(1), server(NOPERM))],
        not_ours: Vec::new(),
    };
    assert_eq!(
        out.events,
        vec![Event::Lost {
            op,
            reason: expected.clone()
        }]
    );
    assert_eq!(out.nodes_sent(), vec![0, 1, 2], "released at once");
    assert!(expected.to_string().starts_with(
        "extensions were refused for good on too many nodes: node#0: EVALSHA was refused: \
         WRONGTYPE"
    ));
}

#[test]
fn a_refusal_and_a_not_ours_answer_together_leave_no_quorum() {
    let (mut h, op) = extending();
    h.reply(0, b":0\r\n");
    let out = h.reply(1, WRONGTYPE);
    let expected = LostReason::Refused {
        errors: vec![(name(1), server(WRONGTYPE))],
        not_ours: vec![name(0)],
    };
    assert_eq!(
        out.events,
        vec![Event::Lost {
            op,
            reason: expected.clone()
        }]
    );
    assert!(
        expected
            .to_string()
            .ends_with("; our token is gone from node#0")
    );
}

#[test]
fn faults_that_may_heal_and_a_refusal_on_a_minority_are_retried() {
    for answers in [[BUSY, BUSY], [WRONGTYPE, BUSY]] {
        let (mut h, op) = extending();
        h.reply(0, answers[0]);
        let out = h.reply(1, answers[1]);
        assert!(out.events.is_empty(), "{:?}", out.events);
        assert!(h.client.held(op).is_some());
        // The retry goes out within the validity.
        let retry = support::fire_until_transmit(&mut h);
        assert!(!retry.transmits.is_empty());
    }
}

/// A lock held on all 3 nodes whose release is sent; node 2's connection breaks before
/// (`broken_first`) or after nodes 0 and 1 release. Returns the release's report.
fn releasing_with_node_2_broken(broken_first: bool) -> (Harness, OpId, Vec<ReleaseOutcome>) {
    let config = support::builder(3)
        .ttl(Duration::from_secs(10))
        .build()
        .expect("valid config");
    let mut h = Harness::connected(config);
    let (op, _) = h.acquire("res");
    for n in 0..3 {
        h.reply(n, b"+OK\r\n");
    }
    h.client.release(h.now, op).unwrap();
    h.drain();
    let mut events = Vec::new();
    if broken_first {
        events.extend(h.disconnect(2, ConnectionError::Closed).events);
    }
    events.extend(h.reply(0, b":1\r\n").events);
    // Nodes 0 and 1 are a quorum: the release is decided, whatever node 2 does.
    let out = h.reply(1, b":1\r\n");
    events.extend(out.events);
    let [
        Event::Released {
            op: released,
            nodes,
        },
    ] = &events[..]
    else {
        panic!("{events:?}");
    };
    assert_eq!(*released, op);
    if !broken_first {
        assert!(h.disconnect(2, ConnectionError::Closed).events.is_empty());
    }
    (h, op, nodes.clone())
}

#[test]
fn a_release_whose_connection_broke_is_reported_at_once_and_sent_again_on_the_next() {
    for broken_first in [true, false] {
        let (mut h, _, nodes) = releasing_with_node_2_broken(broken_first);
        let expected = match broken_first {
            true => ReleaseOutcome::Failed(NodeFault::closed()),
            false => ReleaseOutcome::Pending,
        };
        assert_eq!(nodes[2], expected);
        // The node comes back: the release goes out again on the new connection.
        let mut resent = false;
        for _ in 0..20 {
            let Some(at) = h.drain().timeout else { break };
            let out = h.timeout_at(at);
            if out.connects.iter().any(|c| c.node().index() == 2) {
                h.connect(2);
                h.answer_preloads(2);
            }
            let sent = support::mask_tokens(&out.sent_to(2));
            if sent.contains("EVALSHA") && sent.contains("res") {
                resent = true;
                break;
            }
        }
        assert!(resent, "the release was never sent again");
        assert_eq!(
            h.client.active_ops(),
            1,
            "the background release keeps the lock"
        );
        h.reply(2, b":1\r\n");
        assert_eq!(h.client.active_ops(), 0);
    }
}

#[test]
fn a_background_release_gives_up_at_the_release_deadline() {
    let (mut h, _, _) = releasing_with_node_2_broken(false);
    // Node 2 never comes back: resends fail at once until the deadline, then stop.
    let mut timers = 0;
    while let Some(at) = h.drain().timeout {
        h.timeout_at(at);
        timers += 1;
        if h.client.active_ops() == 0 {
            break;
        }
        assert!(timers < 100, "the background release never ended");
    }
    assert_eq!(h.client.active_ops(), 0);
}
