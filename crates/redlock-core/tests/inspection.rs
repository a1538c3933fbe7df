//! The two operations on a lock held by anyone: inspection (`GET` and `PTTL`, then the
//! shared kinds' reads, pipelined, on every node; the holder a quorum agrees on and its
//! validity) and release by a token the caller supplies (the release's own
//! compare-and-delete). Exact bytes, as in transcript.rs; hostile replies never panic and
//! count as that node's failure. The shared kinds' part of an inspection is
//! inspect_kinds.rs's.

mod support;

use std::time::Duration;

use redlock_core::{
    Config, Event, Inspection, KeyState, NodeFault, ReleaseOutcome, Resource, Token, UsageError,
};
use support::Harness;

fn harness(n: usize) -> Harness {
    // Every byte is scripted: no clock samples.
    let config = Config::builder(n)
        .restart_quarantine(None)
        .clock_check(None)
        .ttl(Duration::from_secs(10))
        .build()
        .expect("valid config");
    Harness::connected(config)
}

const GET_PTTL: &[u8] = b"*2\r\n$3\r\nGET\r\n$3\r\nres\r\n*2\r\n$4\r\nPTTL\r\n$3\r\nres\r\n";

/// A node's answers to `GET` and `PTTL` (`mutex`), then to the shared kinds' reads with
/// nothing there (inspect_kinds.rs, `NOTHING_SHARED`).
fn answer(mutex: &[u8]) -> Vec<u8> {
    [mutex, support::inspect::NOTHING_SHARED].concat()
}

fn inspected(events: &[Event]) -> &Inspection {
    match events {
        [Event::Inspected { inspection, .. }] => inspection,
        other => panic!("expected one Inspected event, got {other:?}"),
    }
}

fn held(value: &str, ms: u64) -> KeyState {
    KeyState::Held {
        value: bytes::Bytes::copy_from_slice(value.as_bytes()),
        ttl: Some(Duration::from_millis(ms)),
    }
}

#[test]
fn inspection_pipelines_get_and_pttl_to_every_node_and_reports_the_quorum_holder() {
    let mut h = harness(5);
    let t0 = h.now;
    let op = h.client.inspect(h.now, Resource::from("res")).unwrap();
    let out = h.drain();
    for i in 0..5 {
        assert_eq!(
            out.sent_to(i),
            [GET_PTTL, &support::inspect::shared_reads("res")].concat(),
            "node {i}: GET then PTTL, then the shared kinds' reads"
        );
    }
    assert!(out.events.is_empty());
    h.ms(4);
    let answers: [&[u8]; 5] = [
        b"$3\r\nabc\r\n:9000\r\n",
        b"$3\r\nabc\r\n:8000\r\n",
        b"$-1\r\n:-2\r\n",
        b"$3\r\nabc\r\n:7000\r\n",
        b"$3\r\nxyz\r\n:9999\r\n",
    ];
    for (i, mutex) in answers.iter().enumerate().take(4) {
        assert!(
            h.reply(i, &answer(mutex)).events.is_empty(),
            "waits for every node"
        );
    }
    let out = h.reply(4, &answer(answers[4]));
    assert_eq!(out.events[0].op(), Some(op));
    let i = inspected(&out.events);
    let nodes = [
        held("abc", 9000),
        held("abc", 8000),
        KeyState::Free,
        held("abc", 7000),
        held("xyz", 9999),
    ];
    assert_eq!(i.nodes, nodes);
    assert_eq!((i.quorum, i.agreeing), (3, 3));
    assert_eq!(i.holder.as_deref(), Some(&b"abc"[..]));
    // 3rd largest of 9000, 8000, 7000; drift of the configured 10 s is 102 ms.
    assert_eq!(i.deadline, Some(t0 + Duration::from_millis(7000 - 102)));
    assert_eq!(i.validity, Some(Duration::from_millis(7000 - 102 - 4)));
    assert_eq!(h.client.active_ops(), 0, "the operation is over");
}

#[test]
fn failed_and_silent_nodes_are_reported_and_never_block_the_report() {
    let mut h = harness(3);
    h.client.inspect(h.now, Resource::from("res")).unwrap();
    let out = h.drain();
    let deadline = out.timeout.expect("the reads have a deadline");
    h.reply(0, &answer(b"$3\r\nabc\r\n:-1\r\n"));
    // A wrong type, and an integer where a value belongs: that node's failure, no panic.
    h.reply(
        1,
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    let out = h.reply(1, &answer(b":-7\r\n"));
    assert!(out.events.is_empty() && out.disconnects.is_empty());
    // Node 2 never answers.
    let out = h.timeout_at(deadline);
    let i = inspected(&out.events);
    let no_expiry = KeyState::Held {
        value: bytes::Bytes::from_static(b"abc"),
        ttl: None,
    };
    assert_eq!(i.nodes[0], no_expiry);
    assert!(matches!(
        &i.nodes[1],
        KeyState::Failed(NodeFault::Server { command: "GET", message }) if message.starts_with("WRONGTYPE")
    ));
    assert_eq!(i.nodes[2], KeyState::Failed(NodeFault::Timeout));
    assert_eq!((i.holder.clone(), i.agreeing, i.validity), (None, 1, None));
}

#[test]
fn hostile_replies_are_node_failures() {
    let mut h = harness(3);
    h.client.inspect(h.now, Resource::from("res")).unwrap();
    h.drain();
    // A PTTL below -2 and a status where a value belongs.
    h.reply(0, &answer(b"$1\r\na\r\n:-3\r\n"));
    h.reply(1, &answer(b"+OK\r\n:5\r\n"));
    let out = h.reply(2, &answer(b"$1\r\na\r\n:5\r\n"));
    let i = inspected(&out.events);
    assert!(matches!(
        i.nodes[0],
        KeyState::Failed(NodeFault::Protocol(_))
    ));
    assert!(matches!(
        i.nodes[1],
        KeyState::Failed(NodeFault::Protocol(_))
    ));
    assert_eq!(i.nodes[2], held("a", 5));
}

#[test]
fn a_down_node_fails_its_reads_at_once() {
    let mut h = harness(3);
    h.disconnect(2, redlock_core::ConnectionError::Refused);
    h.client.inspect(h.now, Resource::from("res")).unwrap();
    let out = h.drain();
    assert_eq!(out.nodes_sent(), [0, 1]);
    h.reply(0, &answer(b"$1\r\nt\r\n:900\r\n"));
    let out = h.reply(1, &answer(b"$1\r\nt\r\n:800\r\n"));
    let i = inspected(&out.events);
    assert!(matches!(
        i.nodes[2],
        KeyState::Failed(NodeFault::Connection(_))
    ));
    assert_eq!(i.holder.as_deref(), Some(&b"t"[..]), "two of three agree");
}

#[test]
fn release_token_compares_and_deletes_with_the_given_token_and_reports_each_node() {
    let mut h = harness(3);
    let token = Token::new("abc").unwrap();
    let op = (h.client)
        .release_token(h.now, Resource::from("res"), &token)
        .unwrap();
    let out = h.drain();
    let sha = redlock_core::RELEASE_SCRIPT.sha1;
    let want =
        format!("*5\r\n$7\r\nEVALSHA\r\n$40\r\n{sha}\r\n$1\r\n1\r\n$3\r\nres\r\n$3\r\nabc\r\n");
    for i in 0..3 {
        assert_eq!(String::from_utf8_lossy(&out.sent_to(i)), want);
    }
    h.reply(0, b":1\r\n");
    h.reply(1, b":0\r\n");
    let out = h.reply(2, b":-1\r\n");
    let want = Event::Released {
        op,
        nodes: vec![
            ReleaseOutcome::Released,
            ReleaseOutcome::NotHeld,
            ReleaseOutcome::AlreadyExpired,
        ],
    };
    assert_eq!(out.events, [want]);
    assert_eq!(h.client.active_ops(), 0);
}

#[test]
fn an_empty_resource_is_a_usage_error_and_changes_nothing() {
    let mut h = harness(3);
    let empty = Resource::from("");
    assert_eq!(
        h.client.inspect(h.now, empty.clone()),
        Err(UsageError::EmptyResource)
    );
    assert!(h.drain().transmits.is_empty());
    let token = Token::new("t").unwrap();
    let err = h.client.release_token(h.now, empty, &token);
    assert_eq!(err, Err(UsageError::EmptyResource));
    assert!(h.drain().transmits.is_empty());
    assert_eq!(h.client.active_ops(), 0);
}
