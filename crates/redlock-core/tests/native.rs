//! Native commands, chosen per node: the `HELLO` reply picks `DELIFEQ`, `DELEX … IFEQ` and
//! `SET … IFEQ … PX` where the server has them and the scripts elsewhere; a refusal of a
//! native command falls back to the script on that node, once; the configuration can force
//! scripts. Exact bytes, as in transcript.rs.

mod support;

use std::time::Duration;

use redlock_core::{
    CommandSource, Config, Event, ExtendCommand, FenceCommand, NodeCommands, NodeId,
    ReleaseCommand, ReleaseOutcome, ServerFamily, ServerVersion,
};
use support::{Harness, mask_tokens};

fn config(n: usize) -> Config {
    support::builder(n)
        .ttl(Duration::from_millis(1000))
        .build()
        .expect("valid config")
}

/// A harness whose nodes answer `HELLO` as the given servers (`None`: refused).
fn cluster(servers: &[Option<(&str, &str)>]) -> Harness {
    let mut h = Harness::new(config(servers.len()));
    h.drain();
    for (i, server) in servers.iter().enumerate() {
        h.connect(i);
        match server {
            Some((name, version)) => h.answer_hello(i, name, version),
            None => {
                let mut refused =
                    b"-NOPERM this user has no permissions to run the 'hello' command\r\n".to_vec();
                refused.extend_from_slice(&support::time_reply(support::NODE_SECS));
                let out = h.reply(i, &refused);
                assert!(out.events.is_empty() && out.disconnects.is_empty());
            }
        }
        // The preloads.
        h.reply(i, b"+OK\r\n+OK\r\n");
    }
    h
}

fn commands(h: &Harness, node: usize) -> NodeCommands {
    h.client.node_commands(NodeId::new(node)).expect("a node")
}

/// Acquires "res" with every node voting yes; returns the lock's id.
fn locked(h: &mut Harness) -> redlock_core::OpId {
    let (op, _) = h.acquire("res");
    let n = h.client.config().nodes();
    for i in 0..n {
        h.reply(i, b"+OK\r\n");
    }
    assert!(h.client.held(op).is_some());
    op
}

/// A held lock's native release is written with its announcement (the script announces
/// itself): the `PUBLISH`'s reply, the number of subscribers, tells whether another client
/// waits.
const DELIFEQ: &str = "*3\r\n$7\r\nDELIFEQ\r\n$3\r\nres\r\n$40\r\n*\r\n\
    *3\r\n$7\r\nPUBLISH\r\n$20\r\nredlock:released:res\r\n$0\r\n\r\n";
/// A failed attempt's cleanup release: not announced.
const DELIFEQ_ALONE: &str = "*3\r\n$7\r\nDELIFEQ\r\n$3\r\nres\r\n$40\r\n*\r\n";
const DELEX: &str = "*4\r\n$5\r\nDELEX\r\n$3\r\nres\r\n$4\r\nIFEQ\r\n$40\r\n*\r\n\
    *3\r\n$7\r\nPUBLISH\r\n$20\r\nredlock:released:res\r\n$0\r\n\r\n";

/// The release script's `EVALSHA` (its SHA1 masked like a token).
fn evalsha_release() -> String {
    "*5\r\n$7\r\nEVALSHA\r\n$40\r\n*\r\n$1\r\n1\r\n$3\r\nres\r\n$40\r\n*\r\n".into()
}

fn set_ifeq(ttl: u64) -> String {
    format!(
        "*7\r\n$3\r\nSET\r\n$3\r\nres\r\n$40\r\n*\r\n$4\r\nIFEQ\r\n$40\r\n*\r\n$2\r\nPX\r\n${}\r\n{ttl}\r\n",
        ttl.to_string().len()
    )
}

#[test]
fn each_node_gets_the_commands_its_server_has() {
    let mut h = cluster(&[
        Some(("redis", "7.0.15")),
        Some(("valkey", "9.1.2")),
        Some(("redis", "8.4.0")),
        Some(("valkey", "8.1.1")),
        None,
    ]);
    let valkey = ServerVersion {
        family: ServerFamily::Valkey,
        version: (9, 1, 2),
    };
    assert_eq!(commands(&h, 0).release, ReleaseCommand::Script);
    assert_eq!(
        commands(&h, 1),
        NodeCommands {
            release: ReleaseCommand::DelIfEq,
            extend: ExtendCommand::SetIfEq,
            fence: FenceCommand::Pipeline,
            source: CommandSource::Hello(valkey),
            fell_back: None,
        }
    );
    // Redis 7.0 (node 0) has `ZADD … GT`; a node that refused `HELLO` (4) is not trusted
    // with the pipeline.
    assert_eq!(commands(&h, 0).fence, FenceCommand::Pipeline);
    assert_eq!(commands(&h, 4).fence, FenceCommand::Script);
    assert_eq!(commands(&h, 2).release, ReleaseCommand::DelExIfEq);
    assert_eq!(
        (commands(&h, 3).release, commands(&h, 3).extend),
        (ReleaseCommand::Script, ExtendCommand::SetIfEq)
    );
    assert_eq!(commands(&h, 4).source, CommandSource::Probing);

    let op = locked(&mut h);
    h.client.extend(h.now, op).unwrap();
    let out = h.drain();
    let sent = |i: usize| mask_tokens(&out.sent_to(i));
    assert!(
        sent(0).starts_with("*6\r\n$7\r\nEVALSHA\r\n"),
        "{}",
        sent(0)
    );
    for i in 1..5 {
        assert_eq!(sent(i), set_ifeq(1000), "node {i}");
    }
    for i in 0..5 {
        let reply: &[u8] = if i == 0 { b":1\r\n" } else { b"+OK\r\n" };
        h.reply(i, reply);
    }
    assert!(h.client.held(op).is_some());

    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    let sent = |i: usize| mask_tokens(&out.sent_to(i));
    assert_eq!(sent(0), evalsha_release());
    assert_eq!(sent(1), DELIFEQ);
    assert_eq!(sent(2), DELEX);
    assert_eq!(sent(3), evalsha_release());
    assert_eq!(sent(4), DELIFEQ);
    // The script tells "not ours" from "gone"; the native commands answer 0 to both. Three
    // answers are a quorum: the release is decided, nodes 1 and 4 still pending.
    h.reply(0, b":-1\r\n");
    h.reply(2, b":0\r\n:0\r\n");
    let out = h.reply(3, b":0\r\n");
    let [Event::Released { nodes, .. }] = &out.events[..] else {
        panic!("{out:?}");
    };
    assert_eq!(
        nodes[..],
        [
            ReleaseOutcome::AlreadyExpired,
            ReleaseOutcome::Pending,
            ReleaseOutcome::NotHeldOrExpired,
            ReleaseOutcome::NotHeld,
            ReleaseOutcome::Pending,
        ]
    );
    for i in [1, 4] {
        assert!(h.reply(i, b":1\r\n:0\r\n").events.is_empty());
    }
    assert_eq!(h.client.active_ops(), 0);
    assert_eq!(
        ReleaseOutcome::NotHeldOrExpired.to_string(),
        "not held: another client's, or expired"
    );
}

/// A node that refused `HELLO` is probed: an unknown command sends the script at once, and
/// the node keeps the script from then on, saying so.
#[test]
fn a_refused_native_command_falls_back_to_the_script_once() {
    let mut h = cluster(&[None, Some(("valkey", "9.1.2")), Some(("valkey", "9.1.2"))]);
    let op = locked(&mut h);
    h.client.extend(h.now, op).unwrap();
    let out = h.drain();
    assert_eq!(mask_tokens(&out.sent_to(0)), set_ifeq(1000));
    // An old server: SET does not know IFEQ.
    let out = h.reply(0, b"-ERR syntax error\r\n");
    assert!(mask_tokens(&out.sent_to(0)).starts_with("*6\r\n$7\r\nEVALSHA\r\n"));
    assert_eq!(commands(&h, 0).extend, ExtendCommand::Script);
    assert_eq!(commands(&h, 0).fell_back, Some("SET"));
    h.reply(0, b":1\r\n");
    h.reply(1, b"+OK\r\n");
    h.reply(2, b"+OK\r\n");
    assert!(h.client.held(op).is_some());

    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    assert_eq!(mask_tokens(&out.sent_to(0)), DELIFEQ);
    let out = h.reply(
        0,
        b"-ERR unknown command 'DELIFEQ', with args beginning with: 'res' \r\n:0\r\n",
    );
    assert_eq!(mask_tokens(&out.sent_to(0)), evalsha_release());
    assert_eq!(commands(&h, 0).release, ReleaseCommand::Script);
    assert_eq!(commands(&h, 0).fell_back, Some("DELIFEQ"));
    assert!(
        h.reply(0, b":1\r\n").transmits.is_empty(),
        "the script announced it"
    );
    let out = h.reply(1, b":1\r\n:0\r\n");
    assert!(out.transmits.is_empty(), "announced with the release");
    let [Event::Released { nodes, .. }] = &out.events[..] else {
        panic!("{out:?}");
    };
    let released = ReleaseOutcome::Released;
    assert_eq!(
        nodes[..],
        [released.clone(), released, ReleaseOutcome::Pending]
    );
    let out = h.reply(2, b":1\r\n:0\r\n");
    assert!(out.events.is_empty() && out.disconnects.is_empty() && out.transmits.is_empty());

    // The next lock sends node 0 the script first; the others keep their native commands.
    let op = locked(&mut h);
    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    assert_eq!(mask_tokens(&out.sent_to(0)), evalsha_release());
    assert_eq!(mask_tokens(&out.sent_to(1)), DELIFEQ);
}

/// A permission error on a native command is the node's answer, not a reason to fall back.
#[test]
fn other_errors_on_a_native_command_are_faults() {
    let mut h = cluster(&[Some(("valkey", "9.1.2"))]);
    let op = locked(&mut h);
    h.client.release(h.now, op).unwrap();
    h.drain();
    let out = h.reply(
        0,
        b"-NOPERM User u has no permissions to run the 'delifeq' command\r\n:0\r\n",
    );
    assert!(out.transmits.is_empty());
    let [Event::Released { nodes, .. }] = &out.events[..] else {
        panic!("{out:?}");
    };
    assert_eq!(
        nodes[0].to_string(),
        "DELIFEQ was refused: NOPERM User u has no permissions to run the 'delifeq' command"
    );
    assert_eq!(commands(&h, 0).release, ReleaseCommand::DelIfEq);
}

#[test]
fn native_commands_off_sends_no_hello_and_only_scripts() {
    let config = support::builder(1)
        .ttl(Duration::from_millis(1000))
        .native_commands(false)
        .preload_scripts(false)
        .build()
        .unwrap();
    assert!(!config.native_commands());
    let mut h = Harness::new(config);
    h.drain();
    let out = h.connect(0);
    assert!(out.transmits.is_empty(), "no handshake at all: {out:?}");
    let op = locked(&mut h);
    h.client.release(h.now, op).unwrap();
    assert_eq!(mask_tokens(&h.drain().sent_to(0)), evalsha_release());
    assert_eq!(commands(&h, 0), NodeCommands::SCRIPTS);
}

/// The `HELLO` reply may come in pieces, and anything but an array or an error is read as
/// "no native commands"; a malformed one drops the connection like any bad reply.
#[test]
fn hello_replies_in_pieces_and_malformed() {
    let mut h = Harness::new(config(2));
    h.drain();
    h.connect(0);
    h.connect(1);
    let reply = support::hello_reply("valkey", "9.1.2");
    for chunk in reply.chunks(7) {
        let out = h.reply(0, chunk);
        assert!(out.disconnects.is_empty());
    }
    assert_eq!(commands(&h, 0).release, ReleaseCommand::DelIfEq);
    let dropped = h.conn(1);
    let out = h.reply(1, b"*2\r\n$6\r\nserver\r\n&1\r\n");
    assert_eq!(out.disconnects, vec![dropped]);
    // Nothing learned: still probed.
    assert_eq!(commands(&h, 1), NodeCommands::probing());
}

/// A request can go out before the node's `HELLO` reply is read: here the cleanup release
/// of an attempt that the two fast nodes decided. It probes with the native command, so it
/// works where scripting is denied (as a script it would fail with NOPERM on such a Valkey
/// node, and the slow node's key would stay until its ttl).
#[test]
fn a_release_before_the_hello_reply_probes() {
    let mut h = Harness::new(config(3));
    h.drain();
    for i in 0..3 {
        h.connect(i);
    }
    for i in 0..2 {
        h.answer_hello(i, "valkey", "9.1.2");
        h.reply(i, b"+OK\r\n+OK\r\n");
    }
    let op = h
        .client
        .try_acquire(h.now, redlock_core::Resource::from("res"))
        .unwrap();
    h.drain();
    h.reply(0, b"$-1\r\n");
    let out = h.reply(1, b"$-1\r\n");
    assert!(matches!(&out.events[..], [Event::AcquireFailed { op: o, .. }] if *o == op));
    // A failed attempt's cleanup is not announced (it most often deletes nothing).
    assert_eq!(mask_tokens(&out.sent_to(2)), DELIFEQ_ALONE);
    // Node 2 answers everything at once: its HELLO, preloads, the SET and the release.
    let mut replies = support::hello_reply("valkey", "9.1.2");
    replies.extend_from_slice(&support::time_reply(support::NODE_SECS));
    replies.extend_from_slice(b"+OK\r\n+OK\r\n+OK\r\n:1\r\n");
    let out = h.reply(2, &replies);
    assert!(out.disconnects.is_empty() && out.transmits.is_empty());
    assert_eq!(commands(&h, 2).fell_back, None);
    // The fast nodes' cleanup releases (nothing of ours there).
    h.reply(0, b":0\r\n");
    h.reply(1, b":0\r\n");
    assert_eq!(h.client.active_ops(), 0);
}

/// A reconnection keeps what the node's last connection learned until its new `HELLO`
/// reply is read.
#[test]
fn a_reconnection_asks_again() {
    let mut h = cluster(&[Some(("valkey", "9.1.2"))]);
    h.disconnect(0, redlock_core::ConnectionError::Closed);
    assert_eq!(commands(&h, 0).release, ReleaseCommand::DelIfEq);
    h.ms(2_000);
    let out = h.timeout();
    assert_eq!(out.connects.len(), 1);
    let out = h.connect(0);
    assert!(String::from_utf8_lossy(&out.sent_to(0)).starts_with("*1\r\n$5\r\nHELLO\r\n"));
    h.answer_hello(0, "redis", "7.2.4");
    assert_eq!(commands(&h, 0).release, ReleaseCommand::Script);
}

/// A release that went out as `DELIFEQ` before a slow node's `HELLO` reply was read, and
/// that the node refuses only after the release has returned and its background round has
/// ended: the script form goes out in its place, so the key does not live until its ttl.
#[test]
fn a_probed_release_refused_after_its_lock_ended_is_sent_again_as_the_script() {
    let mut h = Harness::new(config(3));
    h.drain();
    for i in 0..3 {
        h.connect(i);
    }
    for i in 0..2 {
        h.answer_hello(i, "redis", "7.0.15");
        h.reply(i, b"+OK\r\n+OK\r\n");
    }
    let (op, _) = h.acquire("res");
    h.reply(0, b"+OK\r\n");
    h.reply(1, b"+OK\r\n");
    assert!(h.client.held(op).is_some());
    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    assert_eq!(mask_tokens(&out.sent_to(2)), DELIFEQ, "probed");
    h.reply(0, b":1\r\n");
    let out = h.reply(1, b":1\r\n");
    assert!(
        matches!(&out.events[..], [Event::Released { .. }]),
        "{out:?}"
    );
    // The background round for node 2 ends with the release timeout; the lock is gone.
    for _ in 0..5 {
        if h.client.active_ops() == 0 {
            break;
        }
        let at = h.drain().timeout.expect("the background round's deadline");
        h.timeout_at(at);
    }
    assert_eq!(h.client.active_ops(), 0);
    // Node 2 answers at last, as a Redis 7: its handshake, the SET, then the refusal of
    // DELIFEQ and the announcement's count.
    let mut replies = support::hello_reply("redis", "7.0.15");
    replies.extend_from_slice(&support::time_reply(support::NODE_SECS));
    replies.extend_from_slice(b"+OK\r\n+OK\r\n+OK\r\n");
    replies.extend_from_slice(
        b"-ERR unknown command 'DELIFEQ', with args beginning with: 'res' \r\n:0\r\n",
    );
    let out = h.reply(2, &replies);
    assert!(
        out.disconnects.is_empty() && out.events.is_empty(),
        "{out:?}"
    );
    let sent = mask_tokens(&out.sent_to(2));
    assert!(
        sent.starts_with("*5\r\n$4\r\nEVAL\r\n") && sent.ends_with("$3\r\nres\r\n$40\r\n*\r\n"),
        "the release script in full: {sent}"
    );
    assert_eq!(commands(&h, 2).release, ReleaseCommand::Script);
    // Its reply is read and dropped.
    let out = h.reply(2, b":1\r\n");
    assert!(out.events.is_empty() && out.disconnects.is_empty() && out.transmits.is_empty());
}

/// The lock kinds on a server with native commands (docs/kinds.md, "Commands per kind and
/// server"): a writer holds R as a mutex does, so it extends by `SET … IFEQ`, and releases by
/// its script (WRITE_RELEASE: R and the waiting mark it may have left); a reader's scripts
/// have no native twin and go out as scripts.
#[test]
fn a_writer_extends_natively_and_releases_by_its_script_as_a_reader_does() {
    use redlock_core::{LockKind, LockOptions, Resource, WRITE_RELEASE_SCRIPT};
    let mut h = cluster(&[Some(("valkey", "9.0.0")), Some(("valkey", "9.0.0"))]);
    for (kind, native) in [(LockKind::Write, true), (LockKind::Read, false)] {
        let options = LockOptions::default().kind(kind);
        let op = (h.client)
            .acquire_with(h.now, Resource::from("res"), &options)
            .unwrap();
        h.drain();
        for i in 0..2 {
            h.reply(i, b":1\r\n");
        }
        assert!(h.client.held(op).is_some(), "{kind:?}");
        h.client.extend(h.now, op).unwrap();
        let sent = mask_tokens(&h.drain().sent_to(0));
        assert_eq!(sent.contains("IFEQ"), native, "{kind:?}: {sent}");
        for i in 0..2 {
            h.reply(i, if native { b"+OK\r\n" } else { b":1\r\n" });
        }
        h.client.release(h.now, op).unwrap();
        let raw = String::from_utf8_lossy(&h.drain().sent_to(0)).into_owned();
        let sent = mask_tokens(raw.as_bytes());
        assert!(!sent.contains("DELIFEQ"), "{kind:?}: {sent}");
        assert!(sent.contains("EVALSHA"), "{kind:?}: {sent}");
        let writer = raw.contains(WRITE_RELEASE_SCRIPT.sha1);
        assert_eq!(writer, kind == LockKind::Write, "{kind:?}: {sent}");
        for i in 0..2 {
            h.reply(i, b":1\r\n");
        }
        assert!(h.client.held(op).is_none(), "{kind:?}");
    }
}
