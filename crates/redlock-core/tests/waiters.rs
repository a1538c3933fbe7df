//! The waiters' queue (waiters.rs, lock/acquire.rs), scripted byte for byte: a contended
//! attempt takes a place at once with the nodes' wall clock as its ticket (then the largest
//! the nodes gave), a release wakes only the queue's head, a `next:` announcement makes a
//! waiter the head, a grant keeps the place until the release leaves it (QUEUE_RELEASE), and
//! the release of a contested line places its next call.

mod support;

use std::time::Duration;

use redlock_core::{
    Config, ConfigBuilder, ConnectionError, QUEUE_ACQUIRE_SCRIPT, QUEUE_LEAVE_SCRIPT,
    QUEUE_RELEASE_SCRIPT, RetryPolicy, WaiterQueue,
};
use support::{Drained, Harness, NODE_SECS, time_reply};

const NIL: &[u8] = b"_\r\n";
const CONFIRM: &str = ">3\r\n$9\r\nsubscribe\r\n$20\r\nredlock:released:res\r\n:1\r\n";
const RELEASED: &[u8] = b">3\r\n$7\r\nmessage\r\n$20\r\nredlock:released:res\r\n$0\r\n\r\n";
/// The node's answer to a waiter's announcement (notify.rs, `waiting_channel`): the number
/// of clients listening.
const ANNOUNCED: &str = ":0\r\n";
/// A line's subscription to its waiting channel (once a second call waits in it), and the
/// confirmation.
const LISTEN: &str = "*2\r\n$9\r\nSUBSCRIBE\r\n$19\r\nredlock:waiting:res\r\n";
const LISTENING: &str = ">3\r\n$9\r\nsubscribe\r\n$19\r\nredlock:waiting:res\r\n:2\r\n";

/// Three nodes, a retry delay of one second (an attempt within milliseconds comes from a
/// notification only), patience 900 ms, notifications on without jitter.
fn config() -> Config {
    builder().build().expect("valid config")
}

/// [`config`] before it is built.
fn builder() -> ConfigBuilder {
    Config::builder(3)
        .restart_quarantine(None)
        .clock_check(None)
        .ttl(Duration::from_secs(10))
        .retry(RetryPolicy {
            max_attempts: Some(3),
            max_wait: None,
            delay_min: Duration::from_secs(1),
            delay_max: Duration::from_secs(1),
        })
        .waiter_queue(Some(WaiterQueue {
            patience: Some(Duration::from_millis(900)),
        }))
}

/// A RESP3 `HELLO` reply naming Redis 7.0.15.
fn hello3() -> Vec<u8> {
    let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len());
    let mut out = String::from("%7\r\n");
    out += &(bulk("server") + &bulk("redis") + &bulk("version") + &bulk("7.0.15"));
    out += &(bulk("proto") + ":3\r\n" + &bulk("id") + ":3\r\n");
    out += &(bulk("mode") + &bulk("standalone") + &bulk("role") + &bulk("master"));
    out += &(bulk("modules") + "*0\r\n");
    out.into_bytes()
}

fn connected() -> Harness {
    connected_with(config(), true)
}

/// The bulk strings of the commands in `bytes`, in order.
fn words(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.split("\r\n").collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with('$') && i + 1 < lines.len() {
            out.push(lines[i + 1].to_string());
            i += 2;
        } else {
            i += 1;
        }
    }
    out
}

/// The `ARGV` of the queued attempt in what was sent to `node`: token, ttl, id, ticket,
/// patience; `None` if no queued attempt was sent.
fn queued_argv(out: &Drained, node: usize) -> Option<Vec<String>> {
    let w = words(&out.sent_to(node));
    let at = w.iter().position(|s| s == QUEUE_ACQUIRE_SCRIPT.sha1)?;
    assert_eq!(
        w[at + 1..at + 5],
        ["3", "res", "res:queue", "res:queue:until"]
    );
    Some(w[at + 5..at + 10].to_vec())
}

fn rank(rank: u64, ticket: u64) -> String {
    format!("*2\r\n:{rank}\r\n:{ticket}\r\n")
}

fn next(id: &str) -> Vec<u8> {
    release_channel_message(&format!("next:{id}"))
}

/// A RESP3 push of `payload` on the release channel of "res".
fn release_channel_message(payload: &str) -> Vec<u8> {
    format!(
        ">3\r\n$7\r\nmessage\r\n$20\r\nredlock:released:res\r\n${}\r\n{payload}\r\n",
        payload.len()
    )
    .into_bytes()
}

#[test]
fn a_waiter_queues_at_once_and_only_the_head_wakes_at_a_release() {
    let mut h = connected();
    let (op, _) = h.acquire("res");
    h.reply(0, NIL);
    let mut decided = h.reply(1, NIL);
    decided.transmits.extend(h.reply(2, NIL).transmits);
    // The contended attempt is followed at once by a queued one, on every node, with the
    // nodes' wall clock as its ticket (their `TIME` at the handshake and the time since: the
    // same number on every node) and the configured patience.
    let argv = queued_argv(&decided, 0).expect("a queued attempt");
    let id = argv[2].clone();
    assert_eq!((argv[1].as_str(), argv[4].as_str()), ("10000", "900"));
    let ticket: u64 = argv[3].parse().expect("a ticket");
    assert!((NODE_SECS * 1000..NODE_SECS * 1000 + 1000).contains(&ticket));
    for i in 1..3 {
        assert_eq!(
            queued_argv(&decided, i).unwrap()[3],
            argv[3],
            "one ticket everywhere"
        );
    }
    for i in 1..3 {
        assert_eq!(
            queued_argv(&decided, i).unwrap()[2],
            id,
            "one id on every node"
        );
    }
    // Each node: the subscription's confirmation, the announcement's reply, the cleanup
    // release (-1), the place.
    let places = [rank(1, ticket), rank(1, ticket + 5), rank(0, ticket)];
    for (i, place) in places.iter().enumerate() {
        let out = h.reply(i, format!("{CONFIRM}{ANNOUNCED}:-1\r\n{place}").as_bytes());
        // Every node answered with the call's place: no key of its to clean up.
        let sent = words(&out.sent_to(i));
        assert!(
            !sent.contains(&redlock_core::RELEASE_SCRIPT.sha1.to_string()),
            "{sent:?}"
        );
    }
    h.ms(3);
    // Not the head on a quorum: releases do not wake it.
    for i in 0..3 {
        let out = h.reply(i, RELEASED);
        assert!(
            queued_argv(&out, i).is_none(),
            "node {i} woke a waiter behind the head"
        );
    }
    // Announced the head on node 0: with node 2, which it headed all along, it heads a
    // quorum, and tries at once (the key may be free already: QUEUE_RELEASE announces the
    // head in the step that releases), with the largest ticket the nodes gave.
    let out = h.reply(0, &next(&id));
    for i in 0..3 {
        let argv = queued_argv(&out, i).expect("the head's attempt");
        assert_eq!(argv[2], id);
        assert_eq!(argv[3], (ticket + 5).to_string());
    }
    let token = queued_argv(&out, 0).expect("the head's attempt")[0].clone();
    // Granted on two nodes (a grant keeps the place), the third still held: the call holds
    // and keeps its place; nothing goes out for the queue.
    h.reply(0, b":1\r\n");
    let mut sent = h.reply(1, b":1\r\n");
    assert!(h.client.held(op).is_some());
    sent.transmits
        .extend(h.reply(2, rank(0, ticket + 5).as_bytes()).transmits);
    for i in 0..3 {
        let words = words(&sent.sent_to(i));
        assert!(
            !words.contains(&QUEUE_LEAVE_SCRIPT.sha1.to_string()),
            "{words:?}"
        );
    }
    // Its release leaves the place on every node, in the same script (QUEUE_RELEASE), and
    // places no next call (none waits in its line).
    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    for i in 0..3 {
        let release = words(&out.sent_to(i));
        let at = release.iter().position(|s| s == QUEUE_RELEASE_SCRIPT.sha1);
        let at = at.unwrap_or_else(|| panic!("no queue release to node {i}: {release:?}"));
        assert_eq!(
            release[at + 1..at + 10],
            [
                "3",
                "res",
                "res:queue",
                "res:queue:until",
                &token,
                &id,
                "",
                "0",
                "0"
            ]
        );
    }
}

/// The `ARGV` of the queue release in what was sent to `node`: token, holder's id, next
/// call's id, ticket, patience; `None` if none was sent.
fn release_argv(out: &Drained, node: usize) -> Option<Vec<String>> {
    let w = words(&out.sent_to(node));
    let at = w.iter().position(|s| s == QUEUE_RELEASE_SCRIPT.sha1)?;
    Some(w[at + 5..at + 10].to_vec())
}

/// A second call waits in its line, which sends nothing but its subscription to the waiting
/// channel (the line listens for waiters of other clients: notify.rs), confirmed here.
fn listens(h: &mut Harness, queued: &Drained) {
    for i in 0..3 {
        let sent = String::from_utf8_lossy(&queued.sent_to(i)).into_owned();
        assert_eq!(sent, LISTEN, "node {i}: the second call waits in line");
        h.reply(i, LISTENING.as_bytes());
    }
}

/// The first call of a line found the lock held (so the line met another client), took
/// its place at the head, and was granted at a release; a second call waits in its line.
fn held_with_one_in_line(h: &mut Harness) -> (redlock_core::OpId, redlock_core::OpId) {
    let (first, _) = h.acquire("res");
    for i in 0..3 {
        h.reply(i, NIL);
    }
    // Found held: the place at once; the head on every node, it probes the holder's ttl.
    for i in 0..3 {
        let place = rank(0, NODE_SECS * 1000);
        h.reply(i, format!("{CONFIRM}{ANNOUNCED}:-1\r\n{place}").as_bytes());
    }
    for i in 0..3 {
        h.reply(i, b":5000\r\n");
    }
    let (second, queued) = h.acquire("res");
    // The line is contested: it does not listen for waiters (it hands off through the
    // nodes anyway).
    assert!(queued.transmits.is_empty(), "the second call waits in line");
    for i in 0..3 {
        h.reply(i, RELEASED);
    }
    let granted: Vec<_> = (0..3).flat_map(|i| h.reply(i, b":1\r\n").events).collect();
    assert!(h.client.held(first).is_some(), "{granted:?}");
    (first, second)
}

/// A contested line's release places its next call in the queue (QUEUE_RELEASE): the call
/// makes no place attempt of its own; behind another waiter, it waits its turn silently,
/// and the release that makes it the head wakes it for its one attempt, with the place's
/// id and ticket.
#[test]
fn a_contested_lines_release_places_its_next_call() {
    let mut h = connected();
    let (first, second) = held_with_one_in_line(&mut h);
    // The line met another client: the release leaves the holder's place and places the
    // next call, with the nodes' wall clock as its ticket.
    h.ms(2);
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    let argv = release_argv(&out, 0).expect("a queue release");
    let (holder, id) = (argv[1].clone(), argv[2].clone());
    assert!(!holder.is_empty() && !id.is_empty() && holder != id);
    let ticket: u64 = argv[3].parse().expect("a ticket");
    assert!((NODE_SECS * 1000..NODE_SECS * 1000 + 1000).contains(&ticket));
    assert_eq!(argv[4], "900");
    for i in 1..3 {
        assert_eq!(release_argv(&out, i), Some(argv.clone()), "node {i}");
    }
    // The next call listens from before the release that places it, so that no
    // announcement for its place is missed: on the release channel the holder kept since
    // it waited (client/locks.rs, `wants_channel`), which the next call takes over, so no
    // subscription changes on any connection.
    for i in 0..3 {
        let sent = words(&out.sent_to(i));
        assert!(
            !sent.iter().any(|w| w.ends_with("SUBSCRIBE")),
            "node {i}: {sent:?}"
        );
    }
    // Each node: the release's answer: released (someone was subscribed), the next call
    // second in the queue. The call sends no attempt, only its announcement that it waits.
    let (mut after, mut sent) = (Vec::new(), Drained::default());
    for i in 0..3 {
        let replies = "*2\r\n:2\r\n:1\r\n";
        let out = h.reply(i, replies.as_bytes());
        assert!(queued_argv(&out, i).is_none(), "node {i}: no place attempt");
        after.extend(out.events);
        sent.transmits.extend(out.transmits);
    }
    for i in 0..3 {
        let sent = words(&sent.sent_to(i));
        assert!(
            sent.contains(&"redlock:waiting:res".to_string()),
            "node {i}: {sent:?}"
        );
    }
    assert!(
        matches!(&after[..], [redlock_core::Event::Released { op, .. }] if *op == first),
        "{after:?}"
    );
    // The other client's holder releases: its release announces the next call as the head,
    // then itself, on two nodes; heading a quorum, the call attempts once, with its place's
    // id and ticket.
    for i in 0..3 {
        h.reply(i, ANNOUNCED.as_bytes());
    }
    h.reply(0, &next(&id));
    h.reply(0, RELEASED);
    assert!(
        queued_argv(&h.drain(), 0).is_none(),
        "one node is no quorum"
    );
    let out = h.reply(1, &next(&id));
    let attempt = queued_argv(&out, 0).expect("the head's attempt");
    assert_eq!((&attempt[2], &attempt[3]), (&id, &ticket.to_string()));
    let events: Vec<_> = (0..3).flat_map(|i| h.reply(i, b":1\r\n").events).collect();
    let acquired = support::acquired(&events[..1]);
    assert_eq!((acquired.op, acquired.stats.attempts), (second, 1));
}

/// The first call of a line holds "res", granted by every node with a plain `SET NX` (the
/// line met nobody); a second call waits behind it, and the line listens for waiters.
fn held_uncontested_with_one_in_line() -> (Harness, redlock_core::OpId, redlock_core::OpId) {
    let mut h = connected();
    let (first, _) = h.acquire("res");
    let events: Vec<_> = (0..3).flat_map(|i| h.reply(i, b"+OK\r\n").events).collect();
    assert_eq!(support::acquired(&events).op, first);
    let (second, queued) = h.acquire("res");
    listens(&mut h, &queued);
    (h, first, second)
}

/// A line that has met no other client hands off through the nodes (every 50 ms) with its
/// next call's request right behind the release on each connection, as before; with the
/// queue on, that request is a waiter's attempt (QUEUE_ACQUIRE), so that a waiter of another
/// client that the line has not heard of yet keeps its turn. With none there, it is granted
/// at once, as a `SET NX` would be.
#[test]
fn a_lines_direct_hand_off_goes_through_the_queue() {
    let (mut h, first, second) = held_uncontested_with_one_in_line();
    h.ms(60);
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    for i in 0..3 {
        // The next call listens from its first attempt, in the queue: its subscription goes
        // ahead of it.
        let sent = words(&out.sent_to(i));
        let at = |name: &str| sent.iter().position(|s| s == name);
        let (release, attempt) = (
            at(redlock_core::RELEASE_SCRIPT.sha1),
            at(QUEUE_ACQUIRE_SCRIPT.sha1),
        );
        let subscribe = at("SUBSCRIBE");
        assert!(
            matches!((release, subscribe, attempt), (Some(r), Some(s), Some(a)) if r < s && s < a),
            "node {i}: the release, then the next call's place: {sent:?}"
        );
    }
    let events: Vec<_> = (0..3)
        .flat_map(|i| {
            h.reply(i, format!(":1\r\n{CONFIRM}:1\r\n").as_bytes())
                .events
        })
        .collect();
    let acquired = events.iter().find_map(|e| match e {
        redlock_core::Event::Acquired(a) => Some(a),
        _ => None,
    });
    let acquired = acquired.expect("the next call holds");
    assert_eq!((acquired.op, acquired.stats.attempts), (second, 1));
}

/// A call whose place the release of the call ahead took, and that gives up before it
/// started (cancelled while that release is in flight), leaves the place on every node
/// (QUEUE_LEAVE): it would otherwise hold up the queue until its patience lapsed.
#[test]
fn a_placed_call_that_gives_up_before_it_starts_leaves_its_place() {
    let mut h = connected();
    let (first, second) = held_with_one_in_line(&mut h);
    h.client.release(h.now, first).unwrap();
    let id = release_argv(&h.drain(), 0).expect("a queue release")[2].clone();
    h.client.cancel(h.now, second).unwrap();
    let out = h.drain();
    for i in 0..3 {
        let sent = words(&out.sent_to(i));
        let at = sent.iter().position(|s| s == QUEUE_LEAVE_SCRIPT.sha1);
        let at = at.unwrap_or_else(|| panic!("no leave to node {i}: {sent:?}"));
        assert_eq!(sent[at + 5], id, "node {i}");
    }
}

/// Hearing of waiters (notify.rs; docs/design.md, "Hearing of waiters"): a line with a call
/// waiting behind its first listens on the resource's waiting channel. Its first hand-off
/// after it starts listening goes through the nodes (a waiter that announced itself before
/// is heard there); after that it hands the hold from call to call, sending nothing, until a
/// waiter of another client announces itself: then its next release goes through the nodes
/// as a contested line's does, placing its next call in the queue behind that waiter.
/// A line that listens for waiters on every node hears every waiter that announces itself,
/// so it goes through the nodes only every 250 ms, for a waiter that cannot announce
/// (`queue::HEAR_SILENT_WAITERS_EVERY`), not every 50 ms. With a node down it does not hear
/// everyone: every 50 ms again.
#[test]
fn a_line_that_hears_every_node_goes_through_the_nodes_less_often() {
    let (mut h, third) = handed_over_once_listening();
    // 200 ms since the line went to the nodes: still a hand-over.
    let (fourth, _) = h.acquire("res");
    h.ms(200);
    h.client.release(h.now, third).unwrap();
    let out = h.drain();
    assert!(out.transmits.is_empty(), "a hand-over: {out:?}");
    assert!(h.client.held(fourth).is_some());
    // 260 ms: through the nodes.
    let (fifth, _) = h.acquire("res");
    h.ms(60);
    h.client.release(h.now, fourth).unwrap();
    let out = h.drain();
    assert_eq!(
        out.nodes_sent(),
        vec![0, 1, 2],
        "through the nodes: {out:?}"
    );
    assert!(h.client.held(fifth).is_none());

    // Node 2 down: past 50 ms, the next hand-off goes through the nodes.
    let (mut h, third) = handed_over_once_listening();
    let (fourth, _) = h.acquire("res");
    h.disconnect(2, ConnectionError::Closed);
    h.ms(60);
    h.client.release(h.now, third).unwrap();
    let out = h.drain();
    assert_eq!(out.nodes_sent(), vec![0, 1], "through the nodes: {out:?}");
    assert!(h.client.held(fourth).is_none());
}

/// A node that comes back may have missed a waiter's announcement while it was away: once it
/// listens there again, the line's next hand-off goes through the nodes, whose release hears
/// such a waiter.
#[test]
fn a_line_goes_through_the_nodes_once_a_node_that_came_back_listens_again() {
    let (mut h, third) = handed_over_once_listening();
    h.disconnect(2, ConnectionError::Closed);
    support::fire_until_connect(&mut h);
    h.connect(2);
    let out = h.reply(2, &handshake(true));
    assert!(
        String::from_utf8_lossy(&out.sent_to(2)).contains(LISTEN),
        "it listens on node 2 again: {out:?}"
    );
    h.reply(2, LISTENING.as_bytes());
    let (fourth, _) = h.acquire("res");
    h.client.release(h.now, third).unwrap();
    let out = h.drain();
    assert_eq!(
        out.nodes_sent(),
        vec![0, 1, 2],
        "through the nodes: {out:?}"
    );
    assert!(h.client.held(fourth).is_none());
}

/// A line of "res" that listens for waiters on every node went through the nodes once since
/// (its first call's release, granting the second), then handed the hold over to a third
/// call, which holds it; nobody waits behind it.
fn handed_over_once_listening() -> (Harness, redlock_core::OpId) {
    let (mut h, first, second) = held_uncontested_with_one_in_line();
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    assert!(
        queued_argv(&out, 0).is_some(),
        "through the nodes once it listens"
    );
    let grant = format!(":1\r\n{CONFIRM}:1\r\n");
    let events: Vec<_> = (0..3)
        .flat_map(|i| h.reply(i, grant.as_bytes()).events)
        .collect();
    assert!(h.client.held(second).is_some(), "{events:?}");
    let (third, _) = h.acquire("res");
    h.client.release(h.now, second).unwrap();
    assert!(h.drain().transmits.is_empty(), "a hand-over");
    assert!(h.client.held(third).is_some());
    (h, third)
}

#[test]
fn a_line_that_hears_a_waiter_stops_handing_over() {
    let (mut h, first, second) = held_uncontested_with_one_in_line();
    // Through the nodes: the release, the next call's place behind it.
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    assert!(queued_argv(&out, 0).is_some(), "through the nodes");
    // The release, the next call's subscription (it listens from its first attempt, in the
    // queue), its grant.
    let events: Vec<_> = (0..3)
        .flat_map(|i| {
            h.reply(i, format!(":1\r\n{CONFIRM}:1\r\n").as_bytes())
                .events
        })
        .collect();
    assert!(h.client.held(second).is_some(), "{events:?}");
    // Nothing heard: the line hands over, sending nothing (not even a subscription: it
    // listens already).
    let (third, queued) = h.acquire("res");
    assert!(queued.transmits.is_empty());
    h.client.release(h.now, second).unwrap();
    let out = h.drain();
    assert!(out.transmits.is_empty(), "a hand-over: {out:?}");
    assert!(h.client.held(third).is_some());
    // A waiter of another client announces itself on one node: the line is contested, and
    // the release of its holder places its next call (QUEUE_RELEASE).
    let (fourth, _) = h.acquire("res");
    let announcement = b">3\r\n$7\r\nmessage\r\n$19\r\nredlock:waiting:res\r\n$0\r\n\r\n";
    let out = h.reply(2, announcement);
    assert!(out.events.is_empty());
    // Contested, the line does not hand over, so it stops listening.
    let unlisten = "*2\r\n$11\r\nUNSUBSCRIBE\r\n$19\r\nredlock:waiting:res\r\n";
    for i in 0..3 {
        let sent = String::from_utf8_lossy(&out.sent_to(i)).into_owned();
        assert_eq!(sent, unlisten, "node {i}");
    }
    h.client.release(h.now, third).unwrap();
    let out = h.drain();
    for i in 0..3 {
        let argv = release_argv(&out, i).unwrap_or_else(|| panic!("node {i}: {out:?}"));
        assert!(!argv[2].is_empty(), "node {i}: the next call is placed");
    }
    assert!(h.client.held(fourth).is_none());
}

/// Connected to three nodes with `config`, each answering `HELLO` in RESP3 if `resp3`, else
/// refusing it (the connection stays on RESP2).
fn connected_with(config: Config, resp3: bool) -> Harness {
    let mut h = Harness::new(config);
    h.drain();
    for i in 0..3 {
        h.connect(i);
        h.reply(i, &handshake(resp3));
    }
    h
}

/// A node's replies to the handshake: `HELLO` answered in RESP3 if `resp3`, else refused (the
/// connection stays on RESP2), then `TIME` and the scripts' loads.
fn handshake(resp3: bool) -> Vec<u8> {
    let mut replies = match resp3 {
        true => hello3(),
        false => b"-NOPERM User default has no permissions to run the 'hello' command\r\n".to_vec(),
    };
    replies.extend_from_slice(&time_reply(NODE_SECS));
    let scripts = [
        &redlock_core::RELEASE_SCRIPT,
        &redlock_core::EXTEND_SCRIPT,
        &QUEUE_ACQUIRE_SCRIPT,
        &QUEUE_LEAVE_SCRIPT,
        &QUEUE_RELEASE_SCRIPT,
    ];
    for script in scripts {
        replies.extend_from_slice(format!("$40\r\n{}\r\n", script.sha1).as_bytes());
    }
    replies
}

/// A waiter behind the queue's head whose client cannot hear its turn (`resp3` false: every
/// node refused `HELLO`, so no subscription; or notifications off) polls every 10 ms
/// (waiters.rs, `UNHEARD_POLL_EVERY`), where one that hears renews its place only at a third
/// of its patience (300 ms here) and is woken by the nodes' announcements.
fn polls(config: Config, resp3: bool) -> bool {
    let mut h = connected_with(config, resp3);
    let nil: &[u8] = if resp3 { NIL } else { b"$-1\r\n" };
    h.acquire("res");
    h.reply(0, nil);
    let mut decided = h.reply(1, nil);
    decided.transmits.extend(h.reply(2, nil).transmits);
    let ticket: u64 = queued_argv(&decided, 0).expect("a queued attempt")[3]
        .parse()
        .expect("a ticket");
    // Each node: what a listening client's subscription and announcement get back (nothing
    // on RESP2), the cleanup release (-1), the place, second in the queue.
    let before = if resp3 && h.client.config().release_notifications().is_some() {
        format!("{CONFIRM}{ANNOUNCED}")
    } else {
        String::new()
    };
    for i in 0..3 {
        h.reply(i, format!("{before}:-1\r\n{}", rank(1, ticket)).as_bytes());
    }
    h.ms(11);
    let out = h.timeout();
    (0..3).all(|i| queued_argv(&out, i).is_some())
}

#[test]
fn a_waiter_that_cannot_hear_its_turn_polls() {
    assert!(polls(config(), false), "RESP2 on every node: it polls");
    let quiet = builder().release_notifications(None).build();
    let quiet = quiet.expect("valid config");
    assert!(polls(quiet, true), "notifications off: it polls");
    assert!(!polls(config(), true), "a waiter that hears does not poll");
}

/// A release's grant of the key to `id` on the release channel (grant.rs).
fn grant(id: &str) -> Vec<u8> {
    release_channel_message(&format!("grant:{id}"))
}

/// A contested line's release placed its next call second in the queue on every node: the
/// harness, the call, its id (the release's third argument) and the moment the release,
/// after which the place was drawn, went out.
fn placed_behind() -> (Harness, redlock_core::OpId, String, std::time::Instant) {
    let mut h = connected();
    let (first, second) = held_with_one_in_line(&mut h);
    h.ms(2);
    let released_at = h.now;
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    let id = release_argv(&out, 0).expect("a queue release")[2].clone();
    for i in 0..3 {
        h.reply(i, b"*2\r\n:2\r\n:1\r\n");
    }
    for i in 0..3 {
        h.reply(i, ANNOUNCED.as_bytes());
    }
    (h, second, id, released_at)
}

#[test]
fn a_placed_call_granted_by_a_quorum_holds_with_its_id_and_tops_up_to_its_ttl_by_half_its_hold() {
    let (mut h, op, id, drawn) = placed_behind();
    // The id carries the call's ttl, which a granting node reads.
    assert!(id.ends_with("~10000"), "{id}");
    h.ms(40);
    let out = h.reply(0, &grant(&id));
    assert!(h.client.held(op).is_none() && queued_argv(&out, 0).is_none());
    // The second grant is a quorum: held at once, no attempt, its value the id.
    let out = h.reply(2, &grant(&id));
    let acquired = support::acquired(&out.events);
    assert_eq!((acquired.op, acquired.stats.attempts), (op, 0));
    assert_eq!(acquired.token.as_bytes(), id.as_bytes());
    // The nodes set the key for the place's patience at the least (900 ms, shorter than the
    // ttl), counted from when the place was drawn (the release that placed it was built
    // then): the deadline is that less the ttl's drift (100 ms and 2 ms).
    let (_, deadline) = h.client.held(op).expect("held");
    assert_eq!(deadline, drawn + Duration::from_millis(798));
    // Nothing is sent at once: a section shorter than half of that needs no extension.
    for i in 0..3 {
        assert!(
            out.sent_to(i).is_empty(),
            "node {i}: {:?}",
            words(&out.sent_to(i))
        );
    }
    // Half of what was left at the hold, it extends to its ttl, with the id, on every node.
    let half = h.now + (deadline - h.now) / 2;
    let out = h.timeout_at(half - Duration::from_millis(1));
    assert!(out.transmits.is_empty(), "{out:?}");
    let out = h.timeout_at(half);
    for i in 0..3 {
        let sent = words(&out.sent_to(i));
        assert!(
            sent.contains(&id) && sent.contains(&"10000".to_string()),
            "{sent:?}"
        );
        assert!(queued_argv(&out, i).is_none());
    }
}

#[test]
fn a_call_that_attempted_takes_its_grants_by_an_attempt() {
    let (mut h, op, id, _) = placed_behind();
    // Heading the queue on two nodes by `next:`, the call tries at once.
    h.reply(0, &next(&id));
    let out = h.reply(1, &next(&id));
    assert!(queued_argv(&out, 0).is_some(), "the head's attempt");
    // Grants on every node: not counted (the attempt may have taken each as its own hold,
    // and a cleanup deleted it).
    for i in 0..3 {
        let out = h.reply(i, &grant(&id));
        assert!(out.events.is_empty() && queued_argv(&out, i).is_none());
    }
    assert!(h.client.held(op).is_none());
    // Its attempt, granted (turned the grants into its own hold): held as any attempt.
    let events: Vec<_> = (0..3).flat_map(|i| h.reply(i, b":1\r\n").events).collect();
    let acquired = support::acquired(&events);
    assert_eq!(acquired.stats.attempts, 1);
    assert_ne!(acquired.token.as_bytes(), id.as_bytes());
}

#[test]
fn a_grant_to_another_waiter_makes_it_the_head_not_this_call() {
    let (mut h, op, id, _) = placed_behind();
    for i in 0..3 {
        let out = h.reply(i, &grant("other~10000"));
        assert!(queued_argv(&out, i).is_none() && out.events.is_empty());
    }
    assert!(h.client.held(op).is_none());
    // Its own grants still count.
    h.reply(0, &grant(&id));
    let out = h.reply(1, &grant(&id));
    assert_eq!(
        support::acquired(&out.events).token.as_bytes(),
        id.as_bytes()
    );
}
