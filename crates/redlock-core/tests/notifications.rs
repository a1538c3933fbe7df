//! Release notifications (notify.rs, lock/wait.rs), scripted byte for byte: `HELLO 3`, the
//! subscription and `PTTL` probe after a contended attempt, a quorum of announcements
//! starting the next attempt long before the retry delay, the holder's expiry doing the
//! same, resubscription after a reconnection, and the fair hand-off of a contested line.

mod support;

use std::time::Duration;

use redlock_core::{Config, ConnectionError, Event, ReleaseNotifications, RetryPolicy};
use support::{Drained, Harness, NODE_SECS, time_reply};

const MS: Duration = Duration::from_millis(1);
const NIL: &[u8] = b"_\r\n";
const SUBSCRIBE: &str = "*2\r\n$9\r\nSUBSCRIBE\r\n$20\r\nredlock:released:res\r\n";
const UNSUBSCRIBE: &str = "*2\r\n$11\r\nUNSUBSCRIBE\r\n$20\r\nredlock:released:res\r\n";
const PTTL: &str = "*2\r\n$4\r\nPTTL\r\n$3\r\nres\r\n";
const MESSAGE: &[u8] = b">3\r\n$7\r\nmessage\r\n$20\r\nredlock:released:res\r\n$0\r\n\r\n";
/// RESP3's answers to `SUBSCRIBE` and `UNSUBSCRIBE`: push frames, in the order of replies.
const CONFIRM: &str = ">3\r\n$9\r\nsubscribe\r\n$20\r\nredlock:released:res\r\n:1\r\n";
const UNCONFIRM: &str = ">3\r\n$11\r\nunsubscribe\r\n$20\r\nredlock:released:res\r\n:0\r\n";
/// A waiter's announcement (notify.rs, `waiting_channel`), and the node's answer to it: the
/// number of clients listening.
const ANNOUNCE: &str = "*3\r\n$7\r\nPUBLISH\r\n$19\r\nredlock:waiting:res\r\n$0\r\n\r\n";
const ANNOUNCED: &str = ":0\r\n";
/// A line's subscription to its waiting channel (it listens for waiters of other clients
/// once a second call waits in it), and the confirmation.
const LISTEN: &str = "*2\r\n$9\r\nSUBSCRIBE\r\n$19\r\nredlock:waiting:res\r\n";
const LISTENING: &str = ">3\r\n$9\r\nsubscribe\r\n$19\r\nredlock:waiting:res\r\n:2\r\n";
/// The confirmation that a line stopped listening (contested, it does not hand over).
const UNLISTENING: &str = ">3\r\n$11\r\nunsubscribe\r\n$19\r\nredlock:waiting:res\r\n:1\r\n";

/// What a RESP3 node answers after a contended attempt: the subscription's confirmation,
/// the announcement's reply, the cleanup release's reply, the probe's reply.
fn cleanup_then_probe(cleanup: &str, probe: &str) -> Vec<u8> {
    format!("{CONFIRM}{ANNOUNCED}{cleanup}\r\n{probe}\r\n").into_bytes()
}

/// Three nodes, a retry delay of one second (so an attempt within milliseconds can only
/// come from a notification or the probe), no jitter (so its timing is exact), and no
/// waiters' queue (every waiter wakes; tests/waiters.rs scripts the queue's).
fn config(jitter: Duration) -> Config {
    Config::builder(3)
        .restart_quarantine(None)
        .clock_check(None)
        .waiter_queue(None)
        .ttl(Duration::from_secs(10))
        .retry(RetryPolicy {
            max_attempts: Some(3),
            max_wait: None,
            delay_min: Duration::from_secs(1),
            delay_max: Duration::from_secs(1),
        })
        .release_notifications(Some(ReleaseNotifications { jitter }))
        .build()
        .expect("valid config")
}

/// A RESP3 `HELLO` reply (a map) naming Redis 7, so that the node gets scripts.
fn hello3() -> Vec<u8> {
    hello3_of("redis", "7.0.15")
}

/// A RESP3 `HELLO` reply (a map) naming `server` at `version`.
fn hello3_of(server: &str, version: &str) -> Vec<u8> {
    let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len());
    let mut out = String::from("%7\r\n");
    out += &(bulk("server") + &bulk(server) + &bulk("version") + &bulk(version));
    out += &(bulk("proto") + ":3\r\n" + &bulk("id") + ":3\r\n");
    out += &(bulk("mode") + &bulk("standalone") + &bulk("role") + &bulk("master"));
    out += &(bulk("modules") + "*0\r\n");
    out.into_bytes()
}

/// Brings node `i`'s current connection up and answers its handshake: `HELLO 3` with a map
/// (`resp3`) or a RESP2 array, `TIME`, the two preloads. What was sent after the handshake.
fn up(h: &mut Harness, i: usize, resp3: bool) -> Drained {
    let out = h.connect(i);
    let sent = String::from_utf8_lossy(&out.sent_to(i)).into_owned();
    assert!(
        sent.starts_with("*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"),
        "{sent}"
    );
    let mut replies = if resp3 {
        hello3()
    } else {
        support::hello_reply("redis", "7.0.15")
    };
    replies.extend_from_slice(&time_reply(NODE_SECS));
    for script in [&redlock_core::RELEASE_SCRIPT, &redlock_core::EXTEND_SCRIPT] {
        replies.extend_from_slice(format!("$40\r\n{}\r\n", script.sha1).as_bytes());
    }
    h.reply(i, &replies)
}

fn connected(config: Config, resp3: &[bool]) -> Harness {
    let mut h = Harness::new(config);
    h.drain();
    for (i, &r) in resp3.iter().enumerate() {
        up(&mut h, i, r);
    }
    h
}

/// Acquires "res", which every node says is held; answers the cleanup releases (nothing
/// of ours anywhere). What the decision sent.
fn contended(h: &mut Harness) -> (redlock_core::OpId, Drained) {
    let (op, _) = h.acquire("res");
    h.reply(0, NIL);
    let mut decided = h.reply(1, NIL);
    let rest = h.reply(2, NIL);
    decided.transmits.extend(rest.transmits);
    (op, decided)
}

/// Answers each node's cleanup release and probe with `replies`; everything sent meanwhile.
fn probe_all(h: &mut Harness, replies: &[u8]) -> Drained {
    let mut all = Drained::default();
    for i in 0..3 {
        let out = h.reply(i, replies);
        all.transmits.extend(out.transmits);
        all.events.extend(out.events);
    }
    all
}

/// With `held` holding "res" in a contested line, queues a third call behind it and releases
/// `held`: the release goes out alone (no `SET` right behind it). The third call.
fn release_into_a_contested_line(h: &mut Harness, held: redlock_core::OpId) -> redlock_core::OpId {
    let third = (h.client)
        .acquire(h.now, redlock_core::Resource::from("res"))
        .unwrap();
    h.drain();
    h.client.release(h.now, held).unwrap();
    let out = h.drain();
    assert!(!sent(&out, 0).contains("SET"), "{}", sent(&out, 0));
    third
}

fn sent(out: &Drained, node: usize) -> String {
    support::mask_tokens(&out.sent_to(node))
}

#[test]
fn a_contended_attempt_subscribes_then_probes_and_a_quorum_of_notices_retries_at_once() {
    let mut h = connected(config(Duration::ZERO), &[true, true, true]);
    let (op, out) = contended(&mut h);
    for i in 0..3 {
        // The subscription goes before the probe, so that the probe sees any release it
        // might have missed.
        // The announcement that the call waits follows the subscription (notify.rs).
        let s = sent(&out, i);
        let (sub, probe) = (s.find(SUBSCRIBE), s.find(PTTL));
        assert!(sub.is_some() && sub < probe, "node {i}: {s}");
        let announce = s.find(ANNOUNCE);
        assert!(sub < announce && announce < probe, "node {i}: {s}");
    }
    // The subscription's confirmation (a push; nothing answers to it), the announcement's
    // reply, the cleanup releases (-1: nothing there), then the probe: the holder has 9 s
    // left.
    for i in 0..3 {
        let out = h.reply(i, CONFIRM.as_bytes());
        assert!(out.transmits.is_empty() && out.disconnects.is_empty());
        h.reply(i, format!("{ANNOUNCED}:-1\r\n:9000\r\n").as_bytes());
    }
    h.ms(3);
    // One node's notice is not enough (a cleanup of a split vote, say) ...
    let out = h.reply(0, MESSAGE);
    assert!(out.transmits.is_empty());
    // ... and the same node twice counts once.
    let out = h.reply(0, MESSAGE);
    assert!(out.transmits.is_empty());
    // The second node's makes a quorum: the attempt starts at once, not in a second.
    let out = h.reply(1, MESSAGE);
    for i in 0..3 {
        assert!(
            sent(&out, i).contains("$3\r\nSET\r\n"),
            "node {i}: {}",
            sent(&out, i)
        );
    }
    for i in 0..3 {
        h.reply(i, b"+OK\r\n");
    }
    assert!(h.client.held(op).is_some());
}

#[test]
fn holding_keeps_the_channel_ignores_its_notices_and_the_release_gives_it_up() {
    let mut h = connected(config(Duration::ZERO), &[true, true, true]);
    let (op, _) = contended(&mut h);
    // Every key is gone already (the release came before the subscription was active):
    // the attempt starts as soon as the probe is read.
    let out = probe_all(&mut h, &cleanup_then_probe(":-1", ":-2"));
    assert!(sent(&out, 0).contains("SET"));
    h.reply(0, b"+OK\r\n");
    let decided = h.reply(1, b"+OK\r\n");
    h.reply(2, b"+OK\r\n");
    assert!(
        matches!(&decided.events[..], [Event::Acquired(a)] if a.op == op && a.stats.attempts == 2),
        "{decided:?}"
    );
    // Held: the channel stays (nobody else releases the key meanwhile, and a next call of
    // the line would watch it on), and nothing is sent.
    for i in 0..3 {
        assert_eq!(sent(&decided, i), "", "node {i}");
    }
    let out = h.reply(0, MESSAGE);
    assert!(out.transmits.is_empty() && out.events.is_empty());
    // Released, with nothing of the client's line waiting behind it: the channel goes ahead
    // of the release on every node, so that the release's count of listeners (2 when
    // someone heard it) is of other clients only.
    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    for i in 0..3 {
        let sent = sent(&out, i);
        assert!(
            sent.starts_with(UNSUBSCRIBE) && sent.len() > UNSUBSCRIBE.len(),
            "node {i}: {sent}"
        );
    }
    for i in 0..3 {
        let out = h.reply(i, format!("{UNCONFIRM}:1\r\n").as_bytes());
        assert!(out.transmits.is_empty(), "node {i}");
    }
    let out = h.reply(0, MESSAGE);
    assert!(out.transmits.is_empty() && out.events.is_empty());
}

#[test]
fn the_holders_expiry_read_by_the_probe_brings_the_attempt_forward() {
    let mut h = connected(config(Duration::ZERO), &[true, true, true]);
    contended(&mut h);
    let probed_at = h.now;
    // The keys expire in 50, 80 and 900 ms: a quorum is free after 80 ms, plus the drift
    // allowance of an 80 ms lock (2 ms floor + 1%: 2.8 ms).
    h.reply(0, &cleanup_then_probe(":-1", ":900"));
    h.reply(1, &cleanup_then_probe(":-1", ":50"));
    let out = h.reply(2, &cleanup_then_probe(":-1", ":80"));
    let due = probed_at + 80 * MS + Duration::from_micros(2800);
    assert_eq!(out.timeout, Some(due));
    let out = h.timeout_at(due);
    assert!(sent(&out, 1).contains("SET"));
}

#[test]
fn a_node_that_kept_resp2_is_never_subscribed_and_the_waiter_polls() {
    let mut h = connected(config(Duration::ZERO), &[false, false, false]);
    let (_, out) = contended(&mut h);
    for i in 0..3 {
        // The probe still reads the ttl; nothing subscribes, and nothing is announced (a
        // holder's client could not listen either).
        assert!(!sent(&out, i).contains("SUBSCRIBE") && !sent(&out, i).contains("PUBLISH"));
        assert!(sent(&out, i).contains(PTTL));
        h.reply(i, b":-1\r\n:9000\r\n");
    }
    // It cannot hear a release on any node: it tries again within 10 ms (waiters/mod.rs,
    // `UNHEARD_POLL_EVERY`), not at the retry delay (a second here).
    let out = h.drain();
    assert_eq!(
        out.timeout,
        Some(h.now + Duration::from_millis(10)),
        "it polls"
    );
}

#[test]
fn a_reconnected_node_subscribes_again_while_the_lock_waits() {
    let mut h = connected(config(Duration::ZERO), &[true, true, true]);
    contended(&mut h);
    for i in 0..3 {
        h.reply(i, &cleanup_then_probe(":-1", ":9000"));
    }
    h.disconnect(2, ConnectionError::Closed);
    // Reconnect: the backoff fires, the node comes back and speaks RESP3 again.
    let out = support::fire_until_connect(&mut h);
    assert_eq!(out.connects.len(), 1);
    let out = up(&mut h, 2, true);
    assert_eq!(sent(&out, 2), SUBSCRIBE);
    // Its notices count again.
    h.reply(0, MESSAGE);
    let out = h.reply(2, MESSAGE);
    assert!(sent(&out, 1).contains("SET"), "{}", sent(&out, 1));
}

#[test]
fn early_attempts_do_not_use_up_the_attempts_but_the_wait_stays_bounded() {
    // Three attempts, a second apart at most: a wait of at most 2 s.
    let mut h = connected(config(Duration::ZERO), &[true, true, true]);
    let (op, _) = contended(&mut h);
    let mut early = 0;
    let give_up = h.now + Duration::from_secs(2);
    loop {
        for i in 0..3 {
            // Subscribed once, for the whole wait, and announced once.
            let confirm = if early == 0 {
                format!("{CONFIRM}{ANNOUNCED}")
            } else {
                String::new()
            };
            h.reply(i, format!("{confirm}:-1\r\n:9000\r\n").as_bytes());
        }
        h.ms(400);
        h.reply(0, MESSAGE);
        let out = h.reply(1, MESSAGE);
        assert!(sent(&out, 0).contains("SET"), "an early attempt");
        early += 1;
        h.reply(0, NIL);
        let out = h.reply(1, NIL);
        h.reply(2, NIL);
        if let [Event::AcquireFailed { reason, stats, .. }] = &out.events[..] {
            assert!(h.now >= give_up, "gave up only once the wait ran out");
            assert!(reason.to_string().contains("wait"), "{reason}");
            assert_eq!(stats.attempts, early + 1);
            break;
        }
        assert!(early < 10, "the wait must end");
    }
    assert!(
        early > 2,
        "more early attempts ({early}) than the policy's 3 attempts"
    );
    assert!(h.client.held(op).is_none());
}

#[test]
fn a_contested_line_hands_over_when_the_release_is_done() {
    let mut h = connected(config(Duration::ZERO), &[true, true, true]);
    // The first call meets another client's lock, then gets it.
    let (first, _) = contended(&mut h);
    let out = probe_all(&mut h, &cleanup_then_probe(":-1", ":-2"));
    assert!(sent(&out, 0).contains("SET"));
    for i in 0..3 {
        h.reply(i, b"+OK\r\n");
    }
    assert!(h.client.held(first).is_some());
    h.drain();
    // A second call of this client waits in line. The line is contested, so it does not
    // listen for waiters (it hands off through the nodes anyway).
    let second = h
        .client
        .acquire(h.now, redlock_core::Resource::from("res"))
        .unwrap();
    assert!(h.drain().transmits.is_empty());
    // The release goes out alone: no SET right behind it, as an uncontested line would.
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    for i in 0..3 {
        assert!(
            !sent(&out, i).contains("SET"),
            "node {i}: {}",
            sent(&out, i)
        );
    }
    // The release script answers 2: another client is subscribed, waiting (after the
    // confirmation of the unsubscription that went out ahead of the release: the first
    // call kept the channel while it held, and nothing of its line is placed behind it).
    h.reply(0, format!("{UNCONFIRM}:2\r\n").as_bytes());
    let out = h.reply(1, format!("{UNCONFIRM}:2\r\n").as_bytes());
    // Decided at the quorum: the next call starts a millisecond later, letting the other
    // client's waiter, told of the release now, go first.
    assert!(matches!(&out.events[..], [Event::Released { op, .. }] if *op == first));
    assert!(!sent(&out, 0).contains("SET"));
    h.reply(2, format!("{UNCONFIRM}:2\r\n").as_bytes());
    let out = h.timeout_at(h.now + MS);
    assert!(sent(&out, 0).contains("SET"));
    for i in 0..3 {
        h.reply(i, b"+OK\r\n");
    }
    assert!(h.client.held(second).is_some());
}

#[test]
fn notifications_off_sends_plain_hello_no_probe_and_no_subscription() {
    let config = Config::builder(3)
        .restart_quarantine(None)
        .clock_check(None)
        .release_notifications(None)
        .build()
        .unwrap();
    let mut h = Harness::new(config);
    h.drain();
    let out = h.connect(0);
    assert!(String::from_utf8_lossy(&out.sent_to(0)).starts_with("*1\r\n$5\r\nHELLO\r\n"));
    let mut h = Harness::connected(
        Config::builder(3)
            .restart_quarantine(None)
            .clock_check(None)
            .release_notifications(None)
            .build()
            .unwrap(),
    );
    let (_, out) = contended(&mut h);
    for i in 0..3 {
        assert!(!sent(&out, i).contains("PTTL") && !sent(&out, i).contains("SUBSCRIBE"));
    }
}

#[test]
fn a_server_that_refuses_resp3_is_asked_again_in_resp2_and_polled() {
    let mut h = Harness::new(config(Duration::ZERO));
    h.drain();
    h.connect(0);
    let out = h.reply(0, b"-NOPROTO unsupported protocol version\r\n");
    assert_eq!(
        String::from_utf8_lossy(&out.sent_to(0)),
        "*1\r\n$5\r\nHELLO\r\n",
        "asked again, without the protocol"
    );
    // TIME, the preloads, then the second HELLO's answer: a Valkey 9 with its commands.
    let mut replies = time_reply(NODE_SECS);
    for script in [&redlock_core::RELEASE_SCRIPT, &redlock_core::EXTEND_SCRIPT] {
        replies.extend_from_slice(format!("$40\r\n{}\r\n", script.sha1).as_bytes());
    }
    replies.extend_from_slice(&support::hello_reply("valkey", "9.1.2"));
    let out = h.reply(0, &replies);
    assert!(out.disconnects.is_empty() && out.transmits.is_empty());
    let commands = h
        .client
        .node_commands(redlock_core::NodeId::new(0))
        .unwrap();
    assert_eq!(commands.fell_back, None);
    assert_eq!(commands.release, redlock_core::ReleaseCommand::DelIfEq);
}

#[test]
fn a_release_that_another_client_waits_for_makes_the_next_hand_off_fair() {
    let mut h = connected(config(Duration::ZERO), &[true, true, true]);
    let (first, _) = h.acquire("res");
    for i in 0..3 {
        h.reply(i, b"+OK\r\n");
    }
    let res = || redlock_core::Resource::from("res");
    let second = h.client.acquire(h.now, res()).unwrap();
    // A call waits behind the first of a line that met nobody: it may hand over, so it
    // listens for waiters of other clients.
    let out = h.drain();
    for i in 0..3 {
        assert_eq!(sent(&out, i), LISTEN, "node {i}");
    }
    // Nothing seen of another client yet, and the line last went to the nodes 50 ms ago (it
    // would hand the hold over otherwise: queue.rs, `HEAR_WAITERS_EVERY`): the next call's
    // SET follows the release.
    h.now += Duration::from_millis(50);
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    assert!(sent(&out, 0).contains("SET"), "{}", sent(&out, 0));
    // The line's subscription to its waiting channel is confirmed; the release script
    // answers 2: someone was subscribed to the release.
    for i in 0..3 {
        h.reply(i, format!("{LISTENING}:2\r\n+OK\r\n").as_bytes());
    }
    assert!(h.client.held(second).is_some());
    // Now the hand-off waits for the release to be done; nobody waits for this one (1 on
    // every node), so the next call then starts at once. Contested, the line stopped
    // listening.
    let third = release_into_a_contested_line(&mut h, second);
    h.reply(0, format!("{UNLISTENING}:1\r\n").as_bytes());
    let out = h.reply(1, format!("{UNLISTENING}:1\r\n").as_bytes());
    assert!(sent(&out, 0).contains("SET"), "{}", sent(&out, 0));
    h.reply(2, format!("{UNLISTENING}:1\r\n").as_bytes());
    for i in 0..3 {
        h.reply(i, b"+OK\r\n");
    }
    assert!(h.client.held(third).is_some());
}

#[test]
fn an_announcement_of_the_locks_own_cleanup_does_not_start_an_attempt() {
    let mut h = connected(config(Duration::ZERO), &[true, true, true]);
    let (_, out) = contended(&mut h);
    assert!(sent(&out, 0).contains("EVALSHA"), "the cleanup release");
    // The cleanup deleted something of ours on nodes 0 and 1 and announced it; the
    // announcements come before the cleanup's replies, while it is still in flight there.
    h.reply(0, MESSAGE);
    let out = h.reply(1, MESSAGE);
    assert!(!sent(&out, 0).contains("SET"), "{}", sent(&out, 0));
    // The cleanup's replies and the probe (the holder has 9 s left): still no attempt.
    let out = probe_all(&mut h, &cleanup_then_probe(":1", ":9000"));
    assert!(!sent(&out, 0).contains("SET"), "{}", sent(&out, 0));
}

#[test]
fn a_node_that_refuses_the_subscription_stays_up_and_is_not_asked_again() {
    let mut h = connected(config(Duration::ZERO), &[true, true, true]);
    contended(&mut h);
    // Node 0's ACL denies the channel: `-NOPERM`, an ordinary reply where RESP3 confirms
    // with a push. It answers the subscription, and the announcement that went with it; the
    // cleanup and probe replies follow in step.
    let denied = "-NOPERM this user has no permissions to access one of the channels used \
                  as arguments\r\n";
    let refusal = format!("{denied}{denied}:-1\r\n:9000\r\n");
    let out = h.reply(0, refusal.as_bytes());
    assert!(out.disconnects.is_empty(), "{out:?}");
    for i in 1..3 {
        h.reply(i, &cleanup_then_probe(":-1", ":9000"));
    }
    // Another lock that waits subscribes on the two other nodes only.
    let (_, _) = h.acquire("two");
    let mut out = Drained::default();
    for i in 0..3 {
        out.transmits.extend(h.reply(i, NIL).transmits);
    }
    assert!(sent(&out, 0).contains("PTTL"), "{}", sent(&out, 0));
    assert!(!sent(&out, 0).contains("SUBSCRIBE"), "{}", sent(&out, 0));
    for i in 1..3 {
        assert!(
            sent(&out, i).contains("SUBSCRIBE"),
            "node {i}: {}",
            sent(&out, i)
        );
    }
    // Node 0 still answers in step: its cleanup and probe replies are read as theirs (no
    // announcement went there either).
    assert!(!sent(&out, 0).contains("PUBLISH"), "{}", sent(&out, 0));
    let out = h.reply(0, b":-1\r\n:9000\r\n");
    assert!(out.disconnects.is_empty(), "{out:?}");
    // The other nodes' notices still make a quorum for "res".
    h.reply(1, MESSAGE);
    let out = h.reply(2, MESSAGE);
    assert!(sent(&out, 0).contains("SET"), "{}", sent(&out, 0));
    // A new connection may subscribe again (the ACL may have changed).
    h.disconnect(0, ConnectionError::Closed);
    support::fire_until_connect(&mut h);
    let out = up(&mut h, 0, true);
    assert!(sent(&out, 0).contains("SUBSCRIBE"), "{}", sent(&out, 0));
}

/// On a node with `DELIFEQ`, the release's announcement rides with it and its reply, the
/// number of subscribers, is read with the delete's: someone waiting makes the next
/// hand-off of the line fair, as the release script's 2 does.
#[test]
fn a_native_release_that_another_client_waits_for_makes_the_next_hand_off_fair() {
    let mut h = Harness::new(config(Duration::ZERO));
    h.drain();
    for i in 0..3 {
        h.connect(i);
        let mut replies = hello3_of("valkey", "9.1.2");
        replies.extend_from_slice(&time_reply(NODE_SECS));
        replies.extend_from_slice(b"+OK\r\n+OK\r\n");
        h.reply(i, &replies);
    }
    let (first, _) = h.acquire("res");
    for i in 0..3 {
        h.reply(i, b"+OK\r\n");
    }
    let res = || redlock_core::Resource::from("res");
    let second = h.client.acquire(h.now, res()).unwrap();
    h.drain();
    // The line last went to the nodes 50 ms ago: this hand-off goes there (queue.rs,
    // `HEAR_WAITERS_EVERY`).
    h.now += Duration::from_millis(50);
    h.client.release(h.now, first).unwrap();
    let out = h.drain();
    let publish = "*3\r\n$7\r\nPUBLISH\r\n$20\r\nredlock:released:res\r\n$0\r\n\r\n";
    for i in 0..3 {
        let sent = sent(&out, i);
        assert!(
            sent.starts_with("*3\r\n$7\r\nDELIFEQ") && sent.contains(publish),
            "node {i}: {sent}"
        );
        assert!(sent.ends_with(&support::set_nx_px("res", 10_000)), "{sent}");
    }
    // The line listens; deleted, and one subscriber on every node: another client waits.
    for i in 0..3 {
        h.reply(i, format!("{LISTENING}:1\r\n:1\r\n+OK\r\n").as_bytes());
    }
    assert!(h.client.held(second).is_some());
    // The line is contested now: the hand-off waits for the release to be done, and the
    // next call starts a millisecond after it, letting the waiter go first.
    let third = release_into_a_contested_line(&mut h, second);
    for i in 0..3 {
        h.reply(i, format!("{UNLISTENING}:1\r\n:1\r\n").as_bytes());
    }
    assert!(h.drain().transmits.is_empty());
    let out = h.timeout_at(h.now + MS);
    assert!(sent(&out, 0).contains("SET"), "{}", sent(&out, 0));
    for i in 0..3 {
        h.reply(i, b"+OK\r\n");
    }
    assert!(h.client.held(third).is_some());
}

/// A reader kept out (every node answers 0: a writer holds or waits) listens on the
/// resource's channel like a mutex, but sends no `PTTL` probe: a writer's mark or the
/// readers a writer waits for are not the key the probe reads (docs/kinds.md, "Waiting").
/// A quorum of notices starts its next attempt at once.
#[test]
fn a_waiting_reader_listens_without_a_probe_and_a_quorum_of_notices_retries_it() {
    let mut h = connected(config(Duration::ZERO), &[true, true, true]);
    let options = redlock_core::LockOptions::default().kind(redlock_core::LockKind::Read);
    let resource = redlock_core::Resource::from("res");
    let op = (h.client).acquire_with(h.now, resource, &options).unwrap();
    h.drain();
    let mut out = h.reply(0, b":0\r\n");
    out.transmits.extend(h.reply(1, b":0\r\n").transmits);
    out.transmits.extend(h.reply(2, b":0\r\n").transmits);
    for i in 0..3 {
        let s = sent(&out, i);
        assert!(s.contains(SUBSCRIBE), "node {i}: {s}");
        assert!(!s.contains(PTTL), "node {i}: {s}");
        let cleanup = String::from_utf8_lossy(&out.sent_to(i)).into_owned();
        let release = redlock_core::READ_RELEASE_SCRIPT.sha1;
        assert!(cleanup.contains(release), "node {i}: {cleanup}");
    }
    // The confirmation, then the cleanup's reply (-1: no slot of ours).
    for i in 0..3 {
        h.reply(i, format!("{CONFIRM}:-1\r\n").as_bytes());
    }
    h.ms(3);
    h.reply(0, MESSAGE);
    let out = h.reply(1, MESSAGE);
    for i in 0..3 {
        let s = String::from_utf8_lossy(&out.sent_to(i)).into_owned();
        assert!(
            s.contains(redlock_core::READ_ACQUIRE_SCRIPT.sha1),
            "node {i}: {s}"
        );
    }
    for i in 0..3 {
        h.reply(i, b":1\r\n");
    }
    assert!(h.client.held(op).is_some());
}
