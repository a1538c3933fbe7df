//! An inspection's shared kinds (docs/kinds.md, "Inspection"): readers, a waiting writer's
//! mark, permit holders and the semaphore's k, read on every node by plain commands after
//! `GET` and `PTTL` of the resource, and what a quorum of nodes agrees on. Scores count on
//! each node's own `TIME`; caps bound what is read; hostile answers are that node's fault,
//! named, never a panic. Exact bytes in, as in inspection.rs.

mod support;

use std::time::Duration;

use bytes::Bytes;
use redlock_core::{
    Agreed, Event, HolderSet, Inspection, KeyState, MAX_INSPECTED_HOLDERS, NodeFault, Resource,
    SharedHolders,
};
use support::Harness;
use support::inspect::{NOTHING_SHARED, shared_reads};

/// The nodes' clock when they answer `TIME`, in ms ([`support::NODE_SECS`], 0 µs).
const NODE_MS: i64 = support::NODE_SECS as i64 * 1000;

/// `GET` and `PTTL` of the resource when no exclusive holder has it.
const NO_HOLDER: &[u8] = b"$-1\r\n:-2\r\n";

fn harness(n: usize) -> Harness {
    // Every byte is scripted: no clock samples, no notifications.
    let config = support::builder(n).ttl(Duration::from_secs(10)).build();
    Harness::connected(config.expect("valid config"))
}

/// One node's keys of the shared kinds, to be answered as bytes ([`Keys::answer`]).
#[derive(Clone, Default)]
struct Keys {
    /// Readers: token and deadline relative to the node's clock (ms; ≤ 0 expired).
    readers: Vec<(&'static str, i64)>,
    /// `ZCARD` of the readers, if not their number.
    reader_count: Option<i64>,
    /// A waiting writer's mark and its ttl in ms.
    mark: Option<(&'static str, i64)>,
    /// Permit holders, as the readers.
    permits: Vec<(&'static str, i64)>,
    /// The permits' limit, as stored.
    limit: Option<&'static str>,
}

impl Keys {
    /// The node's answers to the shared reads (RESP2: flat member, score arrays).
    fn answer(&self) -> Vec<u8> {
        let mut out = support::time_reply(support::NODE_SECS);
        let set = |out: &mut Vec<u8>, members: &[(&str, i64)], count: Option<i64>| {
            out.extend(format!("*{}\r\n", members.len() * 2).bytes());
            for (token, at) in members {
                out.extend(bulk(token));
                out.extend(bulk(&(NODE_MS + at).to_string()));
            }
            let count = count.unwrap_or(members.len() as i64);
            out.extend(format!(":{count}\r\n").bytes());
        };
        set(&mut out, &self.readers, self.reader_count);
        match self.mark {
            Some((token, ttl)) => out.extend([bulk(token), format!(":{ttl}\r\n").into()].concat()),
            None => out.extend(b"$-1\r\n:-2\r\n"),
        }
        set(&mut out, &self.permits, None);
        match self.limit {
            Some(k) => out.extend(bulk(k)),
            None => out.extend(b"$-1\r\n"),
        }
        out
    }
}

fn bulk(s: &str) -> Vec<u8> {
    format!("${}\r\n{s}\r\n", s.len()).into_bytes()
}

/// Starts an inspection of `res` and answers every node `i` with `GET`/`PTTL` = `mutex[i]`
/// and the shared keys `keys[i]` (bytes of their own); the inspection.
fn inspect(h: &mut Harness, answers: &[(&[u8], Vec<u8>)]) -> Inspection {
    h.client.inspect(h.now, Resource::from("res")).unwrap();
    let out = h.drain();
    for i in 0..answers.len() {
        let sent = out.sent_to(i);
        assert!(sent.ends_with(&shared_reads("res")), "node {i}: {sent:?}");
    }
    let mut events = Vec::new();
    for (i, (mutex, shared)) in answers.iter().enumerate() {
        events = h.reply(i, &[mutex, &shared[..]].concat()).events;
        assert!(
            i + 1 == answers.len() || events.is_empty(),
            "waits for every node"
        );
    }
    match events.as_slice() {
        [Event::Inspected { inspection, .. }] => inspection.clone(),
        other => panic!("expected one Inspected event, got {other:?}"),
    }
}

fn tokens(agreed: &[Agreed]) -> Vec<(&[u8], usize)> {
    agreed.iter().map(|a| (&a.token[..], a.nodes)).collect()
}

fn set_tokens(set: &HolderSet) -> Vec<(&[u8], u128)> {
    (set.holders().iter())
        .map(|h| (&h.token[..], h.remaining.as_millis()))
        .collect()
}

fn fault(set: &HolderSet) -> String {
    match set {
        HolderSet::Failed(fault) => fault.to_string(),
        other => panic!("expected a failed set, got {other:?}"),
    }
}

#[test]
fn two_readers_on_a_quorum_hold_and_one_on_a_minority_does_not() {
    let mut h = harness(3);
    let both = Keys {
        readers: vec![("r1", 8_000), ("r2", 6_000)],
        ..Keys::default()
    };
    let stray = Keys {
        readers: vec![("r3", 9_000), ("r2", 5_000), ("edge", 0), ("gone", -1)],
        ..Keys::default()
    };
    let seen = inspect(
        &mut h,
        &[
            (NO_HOLDER, both.answer()),
            (NO_HOLDER, both.answer()),
            (NO_HOLDER, stray.answer()),
        ],
    );
    assert_eq!((seen.holder.clone(), seen.agreeing), (None, 0), "no writer");
    let shared: &SharedHolders = &seen.shared;
    // r2 on all 3, r1 on 2 (the quorum), r3 on 1: not a holder.
    assert_eq!(tokens(&shared.readers), [(&b"r2"[..], 3), (&b"r1"[..], 2)]);
    // r1: 2nd largest of 8000, 8000 less the 10 s ttl's drift (102 ms), from t0.
    assert_eq!(
        shared.readers[1].validity,
        Some(Duration::from_millis(8_000 - 102))
    );
    // An expired member (score at or before the node's TIME) is nothing.
    assert_eq!(
        set_tokens(&shared.nodes[2].readers),
        [(&b"r3"[..], 9_000), (&b"r2"[..], 5_000)]
    );
    assert_eq!(shared.nodes[2].writer_waiting, KeyState::Free);
    assert!(shared.permits.is_empty() && shared.writer_waiting.is_none());
}

#[test]
fn a_waiting_writers_mark_is_shown_with_on_how_many_nodes() {
    let mut h = harness(3);
    let marked = Keys {
        readers: vec![("r1", 3_000)],
        mark: Some(("w", 4_000)),
        ..Keys::default()
    };
    let unmarked = Keys {
        readers: vec![("r1", 3_000)],
        ..Keys::default()
    };
    let seen = inspect(
        &mut h,
        &[
            (NO_HOLDER, marked.answer()),
            (NO_HOLDER, unmarked.answer()),
            (NO_HOLDER, marked.answer()),
        ],
    );
    let mark = seen.shared.writer_waiting.clone().expect("a mark");
    assert_eq!((&mark.token[..], mark.nodes), (&b"w"[..], 2));
    assert_eq!(mark.validity, Some(Duration::from_millis(4_000 - 102)));
    let held = KeyState::Held {
        value: Bytes::from_static(b"w"),
        ttl: Some(Duration::from_millis(4_000)),
    };
    assert_eq!(seen.shared.nodes[0].writer_waiting, held);
    assert_eq!(tokens(&seen.shared.readers), [(&b"r1"[..], 3)]);
}

#[test]
fn permit_holders_need_the_semaphores_quorum_for_k() {
    // k = 2 on 5 nodes: 4 nodes (floor(10/3) + 1).
    let mut h = harness(5);
    let node = |permits: Vec<(&'static str, i64)>| Keys {
        permits,
        limit: Some("2"),
        ..Keys::default()
    };
    let two = node(vec![("p", 7_000), ("q", 6_000)]);
    let only_p = node(vec![("p", 7_000)]);
    let answers: Vec<(&[u8], Vec<u8>)> = vec![
        (NO_HOLDER, two.answer()),
        (NO_HOLDER, two.answer()),
        (NO_HOLDER, two.answer()),
        (NO_HOLDER, only_p.answer()),
        (NO_HOLDER, NOTHING_SHARED.to_vec()),
    ];
    let seen = inspect(&mut h, &answers);
    let shared = &seen.shared;
    assert_eq!((shared.permits_limit, shared.permits_quorum), (Some(2), 4));
    // q is on 3 nodes: below the semaphore's quorum though a majority.
    assert_eq!(tokens(&shared.permits), [(&b"p"[..], 4)]);
    assert_eq!(shared.nodes[4].permits_limit, None);
    assert!(shared.nodes[4].permits.is_empty());
    assert!(shared.readers.is_empty());
}

#[test]
fn at_most_the_cap_is_read_and_the_rest_is_counted() {
    let mut h = harness(1);
    let live: Vec<(&'static str, i64)> = vec![("a", 5_000); MAX_INSPECTED_HOLDERS];
    let many = Keys {
        readers: live,
        reader_count: Some(1_000),
        ..Keys::default()
    };
    let seen = inspect(&mut h, &[(NO_HOLDER, many.answer())]);
    let HolderSet::Read { holders, more } = &seen.shared.nodes[0].readers else {
        panic!("{:?}", seen.shared.nodes[0]);
    };
    assert_eq!((holders.len(), *more), (MAX_INSPECTED_HOLDERS, 900));
    // Past an expired member every unread one has expired too.
    let mut h = harness(1);
    let expired_last = Keys {
        readers: vec![("a", 5_000), ("b", -5)],
        reader_count: Some(1_000),
        ..Keys::default()
    };
    let seen = inspect(&mut h, &[(NO_HOLDER, expired_last.answer())]);
    let want = HolderSet::Read {
        holders: seen.shared.nodes[0].readers.holders().to_vec(),
        more: 0,
    };
    assert_eq!(seen.shared.nodes[0].readers, want);
    assert_eq!(set_tokens(&want), [(&b"a"[..], 5_000)]);
    // A node that sends more than asked fails the set.
    let mut h = harness(1);
    let too_many = Keys {
        readers: vec![("a", 5_000); MAX_INSPECTED_HOLDERS + 1],
        ..Keys::default()
    };
    let seen = inspect(&mut h, &[(NO_HOLDER, too_many.answer())]);
    assert!(fault(&seen.shared.nodes[0].readers).contains("more than the 100 asked"));
}

#[test]
fn resp3_score_pairs_read_as_resp2_ones() {
    let mut h = harness(1);
    let score = (NODE_MS + 2_500).to_string();
    let mut shared = support::time_reply(support::NODE_SECS);
    // RESP3 after HELLO 3: an array of [member, double] pairs; a double in exponent form.
    shared.extend(
        format!("*2\r\n*2\r\n$1\r\na\r\n,{score}\r\n*2\r\n$1\r\nb\r\n,1.7e12\r\n:2\r\n").bytes(),
    );
    // No mark, no permits, no limit.
    shared.extend(b"$-1\r\n:-2\r\n*0\r\n:0\r\n$-1\r\n");
    let seen = inspect(&mut h, &[(NO_HOLDER, shared)]);
    // 1.7e12 ms is 2023: long expired.
    assert_eq!(
        set_tokens(&seen.shared.nodes[0].readers),
        [(&b"a"[..], 2_500)]
    );
}

#[test]
fn hostile_or_refused_answers_fail_that_part_of_that_node_only() {
    let mut h = harness(3);
    let held = b"$1\r\nw\r\n:9000\r\n";
    // Node 0: a score that is not a number, a limit that is not k.
    let mut bad_score = support::time_reply(support::NODE_SECS);
    bad_score
        .extend(b"*2\r\n$1\r\na\r\n$4\r\nsoon\r\n:1\r\n$-1\r\n:-2\r\n*0\r\n:0\r\n$3\r\nabc\r\n");
    // Node 1: a negative clock, and an ACL that refuses the sorted-set reads.
    let mut refused = b"*2\r\n$2\r\n-5\r\n$1\r\n0\r\n".to_vec();
    let noperm = b"-NOPERM User may not run 'zrevrange'\r\n";
    refused.extend(
        [
            &noperm[..],
            b":0\r\n$-1\r\n:-2\r\n",
            noperm,
            b":0\r\n$-1\r\n",
        ]
        .concat(),
    );
    // Node 2: the wrong type where a sorted set belongs.
    let mut wrong = support::time_reply(support::NODE_SECS);
    let wrongtype = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    wrong.extend(
        [
            &wrongtype[..],
            wrongtype,
            b"$-1\r\n:-2\r\n*0\r\n:0\r\n$-1\r\n",
        ]
        .concat(),
    );
    let seen = inspect(&mut h, &[(held, bad_score), (held, refused), (held, wrong)]);
    // The exclusive holder is read as ever.
    assert_eq!(
        (seen.holder.as_deref(), seen.agreeing),
        (Some(&b"w"[..]), 3)
    );
    let nodes = &seen.shared.nodes;
    assert!(fault(&nodes[0].readers).contains("score that is not a deadline"));
    let limit = fault(&nodes[0].permits);
    assert!(limit.contains("limit holds \"abc\""), "{limit}");
    assert_eq!(nodes[0].permits_limit, None);
    assert!(fault(&nodes[1].readers).contains("TIME answered something that is not a clock"));
    assert!(fault(&nodes[1].permits).contains("not a clock"));
    assert!(fault(&nodes[2].readers).starts_with("ZREVRANGE was refused: WRONGTYPE"));
    assert!(nodes[2].permits.is_empty());
    assert!(seen.shared.readers.is_empty());
}

#[test]
fn an_array_nested_too_deep_drops_the_connection_and_fails_the_node() {
    let mut h = harness(3);
    h.client.inspect(h.now, Resource::from("res")).unwrap();
    h.drain();
    let ok = [NO_HOLDER, NOTHING_SHARED].concat();
    h.reply(0, &ok);
    h.reply(1, &ok);
    let mut hostile = NO_HOLDER.to_vec();
    hostile.extend(support::time_reply(support::NODE_SECS));
    hostile.extend(b"*1\r\n*1\r\n*1\r\n:1\r\n");
    let out = h.reply(2, &hostile);
    assert_eq!(
        out.disconnects.len(),
        1,
        "a protocol error ends the connection"
    );
    let [Event::Inspected { inspection, .. }] = out.events.as_slice() else {
        panic!("{:?}", out.events);
    };
    // The answers read before the bad one stand; the rest failed with the connection.
    assert_eq!(inspection.nodes[2], KeyState::Free);
    assert!(matches!(
        &inspection.shared.nodes[2].readers,
        HolderSet::Failed(NodeFault::Protocol(m)) if m.contains("nested too deep")
    ));
    assert!(matches!(
        inspection.shared.nodes[2].writer_waiting,
        KeyState::Failed(_)
    ));
    assert!(inspection.shared.nodes[0].readers.is_empty());
}
