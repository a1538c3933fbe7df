//! Property tests of the core: decoding is split-invariant, no byte sequence or input order
//! panics the client, and every order and timing of node outcomes gives the decision a
//! reference count gives.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use redlock_core::{
    AcquireFailure, Config, ConnId, ConnectionError, Decoder, Event, Input, NodeId, OpId, Output,
    Reply, Resource, RetryPolicy,
};
use support::Harness;

const MS: Duration = Duration::from_millis(1);

fn reply_strategy() -> impl Strategy<Value = Reply> {
    prop_oneof![
        Just(Reply::Ok),
        Just(Reply::Nil),
        any::<i64>().prop_map(Reply::Integer),
        "[A-Z]{1,8}( [a-z .]{0,30})?".prop_map(|s| Reply::Error(Bytes::from(s))),
        "[A-Za-z]{1,10}"
            .prop_filter("OK decodes as Reply::Ok", |s| s != "OK")
            .prop_map(|s| Reply::Status(Bytes::from(s))),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(|b| Reply::Bulk(Bytes::from(b))),
    ]
}

fn encode_reply(r: &Reply, out: &mut Vec<u8>) {
    match r {
        Reply::Ok => out.extend_from_slice(b"+OK\r\n"),
        Reply::Status(s) => {
            out.push(b'+');
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Error(s) => {
            out.push(b'-');
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Integer(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
        Reply::Bulk(b) => {
            out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
        other => panic!("not generated: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The decoder yields the same replies for every way of splitting a valid stream.
    #[test]
    fn decoding_is_split_invariant(
        replies in proptest::collection::vec(reply_strategy(), 0..40),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let mut stream = Vec::new();
        for r in &replies {
            encode_reply(r, &mut stream);
        }
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
        points.push(0);
        points.push(stream.len());
        points.sort();
        let mut d = Decoder::new(64 * 1024, 1024 * 1024);
        let mut got = Vec::new();
        for w in points.windows(2) {
            d.push(&stream[w[0]..w[1]]);
            while let Some(r) = d.next_reply().expect("valid stream") {
                got.push(r);
            }
        }
        prop_assert_eq!(got, replies);
        prop_assert_eq!(d.buffered(), 0);
    }

    /// Arbitrary bytes into the decoder never panic; an error is final.
    #[test]
    fn decoder_survives_arbitrary_bytes(chunks in proptest::collection::vec(
        proptest::collection::vec(any::<u8>(), 0..64), 0..16)
    ) {
        let mut d = Decoder::new(256, 1024);
        'outer: for chunk in &chunks {
            d.push(chunk);
            loop {
                match d.next_reply() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => break 'outer,
                }
            }
            if d.check_buffer().is_err() {
                break;
            }
        }
    }
}

/// One input or mutation for the client fuzz property.
#[derive(Debug, Clone)]
enum Step {
    Bytes(usize, Gen, Vec<u8>),
    Replies(usize, Gen, Vec<u8>),
    Connected(usize, Gen),
    Disconnected(usize, Gen, ConnectionError),
    Advance(u64),
    Acquire(u8),
    Extend(usize),
    Release(usize),
    Cancel(usize),
}

/// Which connection of a node an input names.
#[derive(Debug, Clone, Copy)]
enum Gen {
    /// The node's current connection, or while it is down the last one handed out (stale).
    Current,
    /// The one before that: replaced, so stale.
    Previous,
    /// One the client has not handed out yet.
    Next,
}

impl Gen {
    fn conn(self, h: &Harness, node: NodeId, last: &[u32]) -> ConnId {
        let base = h
            .client
            .connection(node)
            .unwrap_or_else(|| ConnId::new(node, last[node.index()]));
        let generation = match self {
            Self::Current => base.generation(),
            Self::Previous => base.generation().wrapping_sub(1),
            Self::Next => base.generation().wrapping_add(1),
        };
        ConnId::new(node, generation)
    }
}

fn gen_strategy() -> impl Strategy<Value = Gen> {
    prop_oneof![
        4 => Just(Gen::Current),
        1 => Just(Gen::Previous),
        1 => Just(Gen::Next),
    ]
}

/// Drains, noting each node's last generation handed out.
fn drain(h: &mut Harness, last: &mut [u32]) -> support::Drained {
    let out = h.drain();
    for conn in &out.connects {
        last[conn.node().index()] = conn.generation();
    }
    out
}

fn reason_strategy() -> impl Strategy<Value = ConnectionError> {
    prop_oneof![
        Just(ConnectionError::Closed),
        Just(ConnectionError::Refused),
        Just(ConnectionError::ConnectTimeout(Duration::from_millis(200))),
        Just(ConnectionError::Io("connection reset by peer".into())),
    ]
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let reply_bytes = proptest::collection::vec(
        prop_oneof![
            Just(b"+OK\r\n".to_vec()),
            Just(b"$-1\r\n".to_vec()),
            Just(b":1\r\n".to_vec()),
            Just(b":0\r\n".to_vec()),
            Just(b":-1\r\n".to_vec()),
            Just(b"-NOSCRIPT No matching script\r\n".to_vec()),
            Just(b"-ERR x\r\n".to_vec()),
        ],
        1..4,
    )
    .prop_map(|v| v.concat());
    prop_oneof![
        1 => (0..8usize, gen_strategy(), proptest::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(n, g, b)| Step::Bytes(n, g, b)),
        4 => (0..8usize, gen_strategy(), reply_bytes).prop_map(|(n, g, b)| Step::Replies(n, g, b)),
        1 => (0..8usize, gen_strategy()).prop_map(|(n, g)| Step::Connected(n, g)),
        1 => (0..8usize, gen_strategy(), reason_strategy())
            .prop_map(|(n, g, r)| Step::Disconnected(n, g, r)),
        3 => (0..400u64).prop_map(Step::Advance),
        2 => any::<u8>().prop_map(Step::Acquire),
        1 => (0..8usize).prop_map(Step::Extend),
        1 => (0..8usize).prop_map(Step::Release),
        1 => (0..8usize).prop_map(Step::Cancel),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// No sequence of inputs, bytes and mutations panics the client; each acquisition is
    /// answered at most once, no validity exceeds ttl - drift, and nothing is reported for
    /// an operation after its `Released`.
    #[test]
    fn client_survives_arbitrary_inputs(
        n in 1usize..=7,
        steps in proptest::collection::vec(step_strategy(), 0..80),
    ) {
        let config = Config::builder(n).restart_quarantine(None)
            .ttl(300 * MS)
            .auto_extend(Some(redlock_core::AutoExtend::default()))
            .build()
            .unwrap();
        let max_validity = config.ttl() - config.drift();
        let mut h = Harness::new(config);
        let mut ops: Vec<OpId> = Vec::new();
        let mut answered: HashMap<OpId, u32> = HashMap::new();
        let mut released: Vec<OpId> = Vec::new();
        let mut check = |events: &[Event]| {
            for e in events {
                prop_assert!(
                    !e.op().is_some_and(|op| released.contains(&op)),
                    "event after release: {e:?}"
                );
                match e {
                    Event::Acquired(a) => {
                        prop_assert!(a.validity <= max_validity);
                        *answered.entry(a.op).or_default() += 1;
                    }
                    Event::AcquireFailed { op, .. } => *answered.entry(*op).or_default() += 1,
                    Event::Released { op, .. } => released.push(*op),
                    _ => {}
                }
            }
            prop_assert!(answered.values().all(|&c| c <= 1), "answered twice");
            Ok(())
        };
        // The last generation handed out to each node, from its `Connect` outputs.
        let mut last = vec![0u32; n];
        check(&drain(&mut h, &mut last).events)?;
        for step in steps {
            let node = |i: usize| NodeId::new(i % n);
            let now = h.now;
            let result = match &step {
                Step::Bytes(i, g, b) | Step::Replies(i, g, b) => {
                    let conn = g.conn(&h, node(*i), &last);
                    h.client.handle_input(Input::Received { now, conn, bytes: b })
                }
                Step::Connected(i, g) => {
                    let conn = g.conn(&h, node(*i), &last);
                    h.client.handle_input(Input::Connected { now, conn })
                }
                Step::Disconnected(i, g, reason) => {
                    let conn = g.conn(&h, node(*i), &last);
                    let reason = reason.clone();
                    h.client.handle_input(Input::Disconnected { now, conn, reason })
                }
                Step::Advance(ms) => {
                    h.now += Duration::from_millis(*ms);
                    h.client.handle_input(Input::Timeout(h.now))
                }
                Step::Acquire(k) => h
                    .client
                    .acquire(now, Resource::from(vec![b'k', *k % 4]))
                    .map(|op| ops.push(op)),
                Step::Extend(i) => h.client.extend(now, ops.get(*i).copied().unwrap_or(OpId::from_raw(99))),
                Step::Release(i) => h.client.release(now, ops.get(*i).copied().unwrap_or(OpId::from_raw(99))),
                Step::Cancel(i) => h.client.cancel(now, ops.get(*i).copied().unwrap_or(OpId::from_raw(99))),
            };
            // Usage errors are fine (unknown op, not held); NotDrained never happens here.
            prop_assert!(result != Err(redlock_core::UsageError::NotDrained));
            check(&drain(&mut h, &mut last).events)?;
        }
        // With every node silent from here on, all operations end within bounded time.
        for _ in 0..200 {
            if h.client.active_ops() == 0 {
                break;
            }
            h.now += Duration::from_secs(1);
            h.client.handle_input(Input::Timeout(h.now)).unwrap();
            // Keep nodes down so that nothing waits on them.
            check(&drain(&mut h, &mut last).events)?;
        }
        for op in &ops {
            prop_assert!(answered.get(op) == Some(&1), "{op} never answered");
        }
    }
}

/// One node's scripted answer to the acquire command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Answer {
    Ok,
    Held,
    Error,
    Silent,
}

fn answer_strategy() -> impl Strategy<Value = Answer> {
    prop_oneof![
        3 => Just(Answer::Ok),
        1 => Just(Answer::Held),
        1 => Just(Answer::Error),
        1 => Just(Answer::Silent),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// For every order and timing of N node outcomes, the decision (what, when, validity,
    /// reason) equals a reference count over the same timeline.
    #[test]
    fn decision_equals_reference_count(
        n in 1usize..=7,
        extra_quorum in 0usize..3,
        answers in proptest::collection::vec((answer_strategy(), 0u64..60), 7),
        order in Just(()).prop_perturb(|_, mut rng| {
            let mut v: Vec<usize> = (0..7).collect();
            for i in (1..v.len()).rev() {
                let j = (rng.next_u32() as usize) % (i + 1);
                v.swap(i, j);
            }
            v
        }),
    ) {
        let q = (n / 2 + 1 + extra_quorum).min(n);
        let ttl = 1000 * MS;
        let config = Config::builder(n).restart_quarantine(None)
            .ttl(ttl)
            .quorum(q)
            .retry(RetryPolicy::once())
            .build()
            .unwrap();
        let timeout = config.attempt_timeout(); // 50 ms
        let drift = config.drift();
        let mut h = Harness::connected(config);
        let t0 = h.now;
        let (op, _) = h.acquire("k");

        // Timeline: replies at their ms, ties broken by the random order; silent nodes and
        // replies at or after the attempt timeout never count.
        let mut timeline: Vec<(u64, usize, usize, Answer)> = (0..n)
            .map(|i| (answers[i].1, order.iter().position(|&o| o == i).unwrap(), i, answers[i].0))
            .filter(|(ms, _, _, a)| *a != Answer::Silent && Duration::from_millis(*ms) < timeout)
            .collect();
        timeline.sort();

        // Reference count.
        let (mut yes, mut other) = (0usize, 0usize);
        let mut expected = None;
        for (k, (ms, _, _, a)) in timeline.iter().enumerate() {
            if *a == Answer::Ok { yes += 1 } else { other += 1 }
            if yes >= q {
                expected = Some((k, true, *ms));
                break;
            }
            if other > n - q {
                expected = Some((k, false, *ms));
                break;
            }
        }

        let mut decided = None;
        for (k, (ms, _, node, a)) in timeline.iter().enumerate() {
            h.now = t0 + Duration::from_millis(*ms);
            let bytes: &[u8] = match a {
                Answer::Ok => b"+OK\r\n",
                Answer::Held => b"$-1\r\n",
                _ => b"-ERR failed\r\n",
            };
            let out = h.reply(*node, bytes);
            if let Some(e) = out.events.into_iter().next() {
                decided = Some((k, e));
                break;
            }
        }
        let at_deadline = decided.is_none();
        if at_deadline {
            let out = h.timeout_at(t0 + timeout);
            let e = out.events.into_iter().next().expect("decided at the deadline");
            decided = Some((timeline.len(), e));
        }
        let (k, event) = decided.unwrap();
        match (expected, &event) {
            (Some((ek, true, ms)), Event::Acquired(a)) => {
                prop_assert_eq!(k, ek);
                prop_assert_eq!(a.op, op);
                prop_assert_eq!(a.validity, ttl - Duration::from_millis(ms) - drift);
            }
            (Some((ek, false, _)), Event::AcquireFailed { reason, .. }) => {
                prop_assert_eq!(k, ek);
                let held = timeline[..=ek].iter().any(|t| t.3 == Answer::Held);
                prop_assert_eq!(held, matches!(reason, AcquireFailure::Contended { .. }));
            }
            (None, Event::AcquireFailed { .. }) => prop_assert!(at_deadline),
            (expected, event) => prop_assert!(false, "expected {:?}, got {:?}", expected, event),
        }
    }
}

#[test]
fn outputs_are_never_lost_when_draining_late() {
    // Poll order is stable: connects, then transmits, then events, then the timer.
    let mut h = Harness::new(Config::builder(2).restart_quarantine(None).build().unwrap());
    assert!(matches!(h.client.poll_output(), Output::Connect(_)));
    assert!(matches!(h.client.poll_output(), Output::Connect(_)));
    assert!(matches!(h.client.poll_output(), Output::Idle));
}
