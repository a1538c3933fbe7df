//! Fenced acquisitions without a script (docs/safety.md, "Fencing"): on servers with
//! `ZADD … GT` (here Redis 7.0, the harness's default) whose `TIME` has been read, each node
//! gets `SET NX PX`, `ZADD fence GT floor n` and `ZINCRBY fence 1 n` together, the floor
//! being the node's clock as the client estimates it, low.

mod support;

use std::time::Duration;

use redlock_core::{
    AcquireFailure, Config, ConnectionError, Event, FenceCommand, Fencing, NodeFault, NodeId,
    RetryPolicy,
};
use support::{Harness, NODE_SECS, acquired, mask_tokens};

const MS: Duration = Duration::from_millis(1);

fn config(n: usize) -> Config {
    support::builder(n)
        .ttl(Duration::from_millis(10_000))
        .fencing(Fencing::every_lock())
        .retry(RetryPolicy {
            max_attempts: Some(2),
            max_wait: None,
            delay_min: MS,
            delay_max: MS,
        })
        .build()
        .expect("valid config")
}

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// The pipeline as sent for `key`, the token masked.
fn pipeline(key: &str, floor: u64) -> String {
    let fence = format!("{key}:fence");
    let (k, f, fl) = (bulk(key), bulk(&fence), bulk(&floor.to_string()));
    format!(
        "*6\r\n$3\r\nSET\r\n{k}$40\r\n*\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n10000\r\n\
         *5\r\n$4\r\nZADD\r\n{f}$2\r\nGT\r\n{fl}$1\r\nn\r\n\
         *4\r\n$7\r\nZINCRBY\r\n{f}$1\r\n1\r\n$1\r\nn\r\n"
    )
}

/// `TIME`, which follows a pipeline when the node's clock reading is over a second old.
const TIME: &str = "*1\r\n$4\r\nTIME\r\n";

/// A node's replies to the pipeline: locked (or not), and the counter.
fn replies(locked: bool, counter: u64) -> Vec<u8> {
    let set = if locked { "+OK\r\n" } else { "$-1\r\n" };
    format!("{set}:0\r\n{}", bulk(&counter.to_string())).into_bytes()
}

/// `replies` as bytes.
fn bytes(replies: &str) -> Vec<u8> {
    replies.as_bytes().to_vec()
}

const FLOOR: u64 = NODE_SECS << 20;

#[test]
fn agreeing_nodes_give_the_token_in_one_round_trip_without_a_script() {
    let mut h = Harness::connected(config(3));
    assert_eq!(
        h.client.node_commands(NodeId::new(0)).unwrap().fence,
        FenceCommand::Pipeline
    );
    let (_, out) = h.acquire("res");
    for i in 0..3 {
        assert_eq!(mask_tokens(&out.sent_to(i)), pipeline("res", FLOOR));
    }
    h.reply(0, &replies(true, FLOOR + 1));
    let out = h.reply(1, &replies(true, FLOOR + 1));
    let a = acquired(&out.events);
    assert_eq!(a.fencing_token, Some(FLOOR + 1));
    assert!(out.transmits.is_empty(), "no write-back");
}

/// The replies may arrive in pieces; the node's requests behind the pipeline still match.
#[test]
fn the_three_replies_are_read_as_one_wherever_they_split() {
    let mut h = Harness::connected(config(1));
    h.acquire("res");
    let all = replies(true, 42);
    for chunk in all.chunks(3) {
        let out = h.reply(0, chunk);
        if !out.events.is_empty() {
            assert_eq!(acquired(&out.events).fencing_token, Some(42));
            return;
        }
    }
    panic!("never granted");
}

#[test]
fn the_floor_follows_the_node_clock_low() {
    let mut h = Harness::connected(config(1));
    // 10 s later on our clock: the estimate counts 99% of it (drift factor 0.01), 9.9 s.
    h.ms(10_000);
    let (_, out) = h.acquire("res");
    // The reading is 10 s old: the node's clock is read again after the pipeline.
    assert_eq!(
        mask_tokens(&out.sent_to(0)),
        pipeline("res", (NODE_SECS + 9) << 20) + TIME
    );
}

#[test]
fn a_counter_behind_is_written_back_by_script() {
    let mut h = Harness::connected(config(3));
    h.acquire("res");
    h.reply(0, &replies(true, FLOOR + 1));
    let out = h.reply(1, &replies(true, FLOOR + 7));
    assert!(out.events.is_empty());
    let sent = mask_tokens(&out.sent_to(0));
    assert!(sent.starts_with("*7\r\n$7\r\nEVALSHA"), "{sent}");
    let out = h.reply(0, b":1\r\n");
    assert_eq!(acquired(&out.events).fencing_token, Some(FLOOR + 7));
}

#[test]
fn a_refused_set_is_a_no_vote_and_an_error_names_its_command() {
    let mut h = Harness::connected(config(3));
    h.acquire("res");
    h.reply(0, &replies(false, FLOOR + 1));
    h.reply(1, &replies(false, FLOOR + 1));
    // Node 2's key is another program's list: SET NX says no... here it says yes and the
    // counter is of the wrong type.
    let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    let out = h.reply(2, &bytes(&format!("+OK\r\n{wrongtype}{wrongtype}")));
    assert!(out.events.is_empty(), "decided by the first two: {out:?}");
    // The last attempt, the same answers: the failure names the held nodes.
    for i in 0..3 {
        h.reply(i, b":0\r\n");
    }
    support::fire_until_transmit(&mut h);
    h.reply(0, &replies(false, FLOOR + 2));
    let out = h.reply(1, &replies(false, FLOOR + 2));
    let [Event::AcquireFailed { reason, .. }] = &out.events[..] else {
        panic!("{out:?}");
    };
    assert!(matches!(reason, AcquireFailure::Contended { nodes } if nodes.len() == 2));
    // On one node, the error is the node's fault, named by its command.
    let mut h = Harness::connected(config(1));
    h.acquire("res");
    let out = h.reply(0, &bytes(&format!("+OK\r\n{wrongtype}{wrongtype}")));
    assert!(out.events.is_empty());
    h.reply(0, b":1\r\n");
    support::fire_until_transmit(&mut h);
    let out = h.reply(0, &bytes(&format!("+OK\r\n{wrongtype}{wrongtype}")));
    let [Event::AcquireFailed { reason, .. }] = &out.events[..] else {
        panic!("{out:?}");
    };
    let AcquireFailure::QuorumUnreachable { errors } = reason else {
        panic!("{reason:?}");
    };
    assert!(matches!(
        &errors[0].1,
        NodeFault::Server { command: "ZADD", message } if message.starts_with("WRONGTYPE")
    ));
}

/// Scores a node cannot mean as a counter are protocol faults, never a token.
#[test]
fn junk_scores_are_faults() {
    for junk in [
        "1.5",
        "nan",
        "inf",
        "-1",
        "0",
        "9007199254740993",
        "1e400",
        "x",
    ] {
        let mut h = Harness::connected(config(1));
        h.acquire("res");
        let reply = bytes(&format!("+OK\r\n:1\r\n{}", bulk(junk)));
        let out = h.reply(0, &reply);
        let text = format!("{:?}", out.events);
        assert!(!text.contains("Acquired"), "{junk}: {text}");
    }
    // A float that is a whole number is read as one.
    let mut h = Harness::connected(config(1));
    h.acquire("res");
    let out = h.reply(0, &bytes(&format!("+OK\r\n:1\r\n{}", bulk("1.5e3"))));
    assert_eq!(acquired(&out.events).fencing_token, Some(1500));
}

/// A server without `ZADD … GT` (its version said otherwise) answers a syntax error: the
/// node takes the script from then on, and the attempt is resent to it as the script.
#[test]
fn a_syntax_error_turns_the_node_over_to_the_script() {
    let mut h = Harness::connected(config(1));
    h.acquire("res");
    let out = h.reply(0, &bytes("+OK\r\n-ERR syntax error\r\n:5\r\n"));
    let sent = mask_tokens(&out.sent_to(0));
    assert!(sent.starts_with("*7\r\n$7\r\nEVALSHA"), "{sent}");
    let commands = h.client.node_commands(NodeId::new(0)).unwrap();
    assert_eq!(commands.fence, FenceCommand::Script);
    assert_eq!(commands.fell_back, Some("ZADD"));
}

/// Without a clock reading on the current connection (refused, or not read yet after a
/// reconnection) a node gets the script: a floor is never guessed.
#[test]
fn no_clock_no_pipeline() {
    let mut h = Harness::new(config(2));
    h.drain();
    for i in 0..2 {
        h.connect(i);
    }
    let mut refused = support::hello_reply("redis", "7.0.15");
    refused
        .extend_from_slice(b"-NOPERM this user has no permissions to run the 'time' command\r\n");
    refused.extend_from_slice(b"+OK\r\n+OK\r\n");
    h.reply(0, &refused);
    h.answer_hello(1, "redis", "7.0.15");
    h.reply(1, b"+OK\r\n+OK\r\n");
    let (_, out) = h.acquire("res");
    assert!(mask_tokens(&out.sent_to(0)).starts_with("*7\r\n$7\r\nEVALSHA"));
    assert_eq!(mask_tokens(&out.sent_to(1)), pipeline("res", FLOOR));
    h.reply(0, b":9\r\n");
    h.reply(1, &replies(true, 9));
    // Node 1 reconnects: until its new TIME is read, the script.
    h.disconnect(1, ConnectionError::Closed);
    h.ms(200);
    let out = h.timeout();
    assert_eq!(out.connects.len(), 1);
    h.connect(1);
    let (_, out) = h.acquire("other");
    let sent = mask_tokens(&out.sent_to(1));
    assert!(sent.contains("EVALSHA") && !sent.contains("ZADD"), "{sent}");
}

/// A pipeline reads the node's clock again once its reading is over a second old; the next
/// floor counts from the new reading. A fresh reading is not read again.
#[test]
fn a_pipeline_reads_a_stale_clock_again() {
    let mut h = Harness::connected(config(1));
    let (_, out) = h.acquire("fresh");
    assert!(!mask_tokens(&out.sent_to(0)).contains("TIME"));
    h.reply(0, &replies(true, FLOOR + 1));
    h.ms(1_500);
    let (op, out) = h.acquire("res");
    let floor = (NODE_SECS + 1) << 20;
    assert_eq!(mask_tokens(&out.sent_to(0)), pipeline("res", floor) + TIME);
    let mut answer = replies(true, floor + 1);
    answer.extend_from_slice(&support::time_reply(NODE_SECS + 100));
    let out = h.reply(0, &answer);
    assert_eq!(acquired(&out.events).op, op);
    let (_, out) = h.acquire("other");
    assert_eq!(
        mask_tokens(&out.sent_to(0)),
        pipeline("other", (NODE_SECS + 100) << 20)
    );
}

/// The reading's microseconds count: a reading 1 µs before a second ends puts the floor in
/// the next second a few ms later (a floor from whole seconds alone would lag by up to one).
#[test]
fn the_reading_counts_to_the_microsecond() {
    let mut h = Harness::new(config(1));
    h.drain();
    h.connect(0);
    let mut answers = support::hello_reply("redis", "7.0.15");
    answers.extend_from_slice(
        format!("*2\r\n{}$6\r\n999999\r\n", bulk(&NODE_SECS.to_string())).as_bytes(),
    );
    answers.extend_from_slice(b"+OK\r\n+OK\r\n");
    h.reply(0, &answers);
    h.ms(3);
    let (_, out) = h.acquire("res");
    assert_eq!(
        mask_tokens(&out.sent_to(0)),
        pipeline("res", (NODE_SECS + 1) << 20)
    );
}
