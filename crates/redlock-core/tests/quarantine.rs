//! The restart quarantine (quarantine.rs, identity.rs), scripted byte for byte: the
//! handshake's `INFO server` and `CONFIG GET append*`, a node that comes back with a new run
//! id voting "no" for acquisitions until the window has passed since it started (its key
//! still released), a young node on first sight, an uptime the run id shows impossible, a
//! node that syncs every write, and one that refuses `INFO`.

mod support;

use std::time::{Duration, Instant};

use redlock_core::{
    AcquireFailure, Config, ConnectionError, Event, Fencing, NodeFault, QuarantineCause,
    QuarantineSkip, RestartQuarantine, RetryPolicy,
};
use support::{Drained, Harness, fire_until_connect, name};

const INFO_AND_CONFIG: &str =
    "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$7\r\nappend*\r\n";
const NO_AOF: &str =
    "*4\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n";
const AOF_ALWAYS: &str =
    "*4\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n";
const DAY: u64 = 86_400;
/// The restart quarantine, young nodes quarantined too.
const YOUNG_NODES_TOO: RestartQuarantine = RestartQuarantine {
    ttl: None,
    young_nodes: true,
};

/// 3 nodes, ttl 1 s, one attempt per lock; no `HELLO`, `TIME` (nor the clock check's) or
/// preloads, so that the handshake is `INFO` and `CONFIG GET` alone.
fn config(quarantine: bool) -> Config {
    Config::builder(3)
        .release_notifications(None)
        .clock_check(None)
        .native_commands(false)
        .preload_scripts(false)
        .restart_quarantine(quarantine.then(RestartQuarantine::default))
        .ttl(Duration::from_secs(1))
        .retry(RetryPolicy {
            max_attempts: Some(1),
            ..RetryPolicy::default()
        })
        .build()
        .expect("valid config")
}

/// [`config`] with the quarantine on, young nodes too (`RestartQuarantine::young_nodes`).
fn strict() -> Config {
    Config::builder(3)
        .release_notifications(None)
        .clock_check(None)
        .native_commands(false)
        .preload_scripts(false)
        .restart_quarantine(Some(YOUNG_NODES_TOO))
        .ttl(Duration::from_secs(1))
        .retry(RetryPolicy {
            max_attempts: Some(1),
            ..RetryPolicy::default()
        })
        .build()
        .expect("valid config")
}

/// The window for a ttl of 1 s: the ttl and its drift (1% and 2 ms).
const WINDOW: Duration = Duration::from_millis(1_012);

fn info(run_id: &str, uptime_secs: u64) -> String {
    let text = format!("# Server\r\nrun_id:{run_id}\r\nuptime_in_seconds:{uptime_secs}\r\n");
    format!("${}\r\n{text}\r\n", text.len())
}

/// Brings node `i`'s current connection up, checks that its handshake is `INFO` and
/// `CONFIG GET`, and answers them with `info` and `config`; the events that came of it.
fn up(h: &mut Harness, i: usize, info: &str, config: &str) -> Vec<Event> {
    let out = h.connect(i);
    assert_eq!(String::from_utf8_lossy(&out.sent_to(i)), INFO_AND_CONFIG);
    let out = h.reply(i, format!("{info}{config}").as_bytes());
    assert!(out.disconnects.is_empty(), "{out:?}");
    out.events
}

/// A client whose three nodes are up, each an old process (`a0`, `a1`, `a2`, up for a day).
fn old_cluster() -> Harness {
    let mut h = Harness::new(config(true));
    assert_eq!(h.drain().connects.len(), 3);
    for i in 0..3 {
        let events = up(&mut h, i, &info(&format!("a{i}"), DAY), NO_AOF);
        assert!(
            events.is_empty(),
            "an old node is not quarantined: {events:?}"
        );
    }
    h
}

/// Drops node `i` and brings it back on a new connection (answered by the caller).
fn reconnect(h: &mut Harness, i: usize) {
    h.disconnect(i, ConnectionError::Closed);
    fire_until_connect(h);
}

/// Acquires `res` with every node answering the `SET` with `+OK` (node 1 is down); the
/// outcome's events and what was sent.
fn acquire_all_grant(h: &mut Harness) -> (Vec<Event>, Drained) {
    let (_, out) = h.acquire("res");
    let mut events = out.events.clone();
    for i in out.nodes_sent() {
        events.extend(h.reply(i, b"+OK\r\n").events);
    }
    let cleanup = h.drain();
    (events, cleanup)
}

/// An acquisition with every node granting fails (node 1 is down, node 0's grant does not
/// count); the cleanup releases of nodes 0 and 2 are answered.
fn refused(h: &mut Harness) {
    let (events, _) = acquire_all_grant(h);
    assert!(
        matches!(&events[..], [Event::AcquireFailed { .. }]),
        "{events:?}"
    );
    h.reply(0, b":1\r\n");
    h.reply(2, b":1\r\n");
}

/// An acquisition with every node granting succeeds.
fn granted(h: &mut Harness) {
    let (events, _) = acquire_all_grant(h);
    assert!(matches!(&events[..], [Event::Acquired(_)]), "{events:?}");
}

fn quarantined(events: &[Event]) -> (Instant, QuarantineCause) {
    match events {
        [Event::NodeQuarantined { node, until, cause }] => {
            assert_eq!(*node, name(0));
            (*until, *cause)
        }
        other => panic!("expected one NodeQuarantined for node 0, got {other:?}"),
    }
}

#[test]
fn a_restarted_node_votes_no_for_acquisitions_until_the_window_has_passed() {
    let mut h = old_cluster();
    h.ms(500);
    reconnect(&mut h, 0);
    h.ms(5);
    // Back empty, 0 s up, with a new run id.
    let events = up(&mut h, 0, &info("b0", 0), NO_AOF);
    let (until, cause) = quarantined(&events);
    assert_eq!((until, cause), (h.now + WINDOW, QuarantineCause::Restarted));
    // Node 1 down: node 0's vote would decide.
    h.disconnect(1, ConnectionError::Closed);
    let (_, out) = h.acquire("res");
    assert_eq!(out.nodes_sent(), [0, 2]);
    // Its grant does not count: with node 1 down, no quorum is left, and the attempt fails
    // at once.
    let after = h.reply(0, b"+OK\r\n");
    let events = after.events.clone();
    let [Event::AcquireFailed { reason, .. }] = &events[..] else {
        panic!("expected the acquisition to fail: {events:?}");
    };
    let AcquireFailure::QuorumUnreachable { errors } = reason else {
        panic!("{reason:?}");
    };
    let fault = NodeFault::Quarantined { until, cause };
    assert!(errors.contains(&(name(0), fault)), "{errors:?}");
    // The key the quarantined node set is released with the attempt's others.
    let cleanup = String::from_utf8_lossy(&after.sent_to(0)).into_owned();
    assert!(
        cleanup.contains("EVALSHA"),
        "no release to node 0: {cleanup:?}"
    );
    h.reply(2, b"+OK\r\n");
    h.reply(0, b":1\r\n");
    h.reply(2, b":1\r\n");

    // Just before the end, still no; once it has passed, its vote counts.
    h.now = until - Duration::from_millis(1);
    refused(&mut h);
    h.now = until;
    granted(&mut h);
}

#[test]
fn with_the_quarantine_off_the_handshake_asks_nothing_and_a_restart_votes_at_once() {
    let mut h = Harness::new(config(false));
    h.drain();
    for i in 0..3 {
        let out = h.connect(i);
        assert!(out.transmits.is_empty(), "{out:?}");
    }
    reconnect(&mut h, 0);
    assert!(h.connect(0).transmits.is_empty());
    h.disconnect(1, ConnectionError::Closed);
    granted(&mut h);
}

#[test]
fn a_young_node_is_quarantined_on_first_sight_and_again_on_reconnection() {
    // Only when asked: by default a node not known to have restarted is trusted.
    let mut h = Harness::new(config(true));
    h.drain();
    assert!(up(&mut h, 0, &info("a0", 0), NO_AOF).is_empty());
    let mut h = Harness::new(strict());
    h.drain();
    // Up for 0 s (the server rounds down): quarantined from now.
    let (until, cause) = quarantined(&up(&mut h, 0, &info("a0", 0), NO_AOF));
    assert_eq!((until, cause), (h.now + WINDOW, QuarantineCause::Young));
    for i in 1..3 {
        assert!(up(&mut h, i, &info(&format!("a{i}"), DAY), NO_AOF).is_empty());
    }
    // The same process after 300 ms, still saying 0 s: the same end (never shortened, and
    // the uptime's rounding only lengthens it).
    h.ms(300);
    reconnect(&mut h, 0);
    let (again, cause) = quarantined(&up(&mut h, 0, &info("a0", 0), NO_AOF));
    assert_eq!(cause, QuarantineCause::Young);
    assert!(again >= until, "{again:?} < {until:?}");
}

#[test]
fn a_new_run_id_with_an_uptime_from_before_the_last_sighting_counts_from_now() {
    let mut h = old_cluster();
    h.ms(200);
    reconnect(&mut h, 0);
    // Its wall clock was stepped: it claims a day up, but it is a new process.
    let (until, cause) = quarantined(&up(&mut h, 0, &info("b0", DAY + 1), NO_AOF));
    assert_eq!((until, cause), (h.now + WINDOW, QuarantineCause::Restarted));
}

#[test]
fn a_node_that_syncs_every_write_is_not_quarantined_and_says_why() {
    let mut h = old_cluster();
    reconnect(&mut h, 0);
    let events = up(&mut h, 0, &info("b0", 0), AOF_ALWAYS);
    let [Event::QuarantineSkipped { node, reason }] = &events[..] else {
        panic!("{events:?}");
    };
    assert_eq!(*node, name(0));
    assert_eq!(*reason, QuarantineSkip::Durable(QuarantineCause::Restarted));
    h.disconnect(1, ConnectionError::Closed);
    granted(&mut h);
}

#[test]
fn a_node_that_refuses_info_is_told_and_votes_as_without_quarantine() {
    let mut h = Harness::new(config(true));
    h.drain();
    let refused = "-NOPERM User locker has no permissions to run the 'info' command\r\n";
    let events = up(&mut h, 0, refused, "-NOPERM no config\r\n");
    let [Event::QuarantineSkipped { node, reason }] = &events[..] else {
        panic!("{events:?}");
    };
    assert_eq!(*node, name(0));
    assert!(
        matches!(reason, QuarantineSkip::InfoRefused(m) if m.starts_with("NOPERM")),
        "{reason:?}"
    );
    // Unreadable: neither field.
    let events = up(&mut h, 1, "$5\r\nhello\r\n", "*0\r\n");
    assert!(
        matches!(
            &events[..],
            [Event::QuarantineSkipped {
                reason: QuarantineSkip::InfoUnreadable,
                ..
            }]
        ),
        "{events:?}"
    );
    assert!(up(&mut h, 2, &info("a2", DAY), NO_AOF).is_empty());
    granted(&mut h);
}

#[test]
fn the_quarantine_ttl_must_be_a_ttl() {
    let with_ttl = |ttl| {
        Config::builder(3).restart_quarantine(Some(RestartQuarantine {
            ttl: Some(ttl),
            ..RestartQuarantine::default()
        }))
    };
    for ttl in [Duration::ZERO, Duration::from_millis((1 << 50) + 1)] {
        let e = with_ttl(ttl).build().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid `restart_quarantine.ttl`: must be above zero and at most \
             1125899906842624 ms"
        );
    }
    let config = with_ttl(Duration::from_secs(30)).build().expect("a ttl");
    assert_eq!(
        config.restart_quarantine().and_then(|q| q.ttl),
        Some(Duration::from_secs(30))
    );
    let defaults = Config::builder(3).build().expect("the defaults");
    assert_eq!(
        defaults.restart_quarantine(),
        Some(&RestartQuarantine {
            ttl: None,
            young_nodes: false
        }),
        "on by default, young nodes trusted"
    );
    // Young nodes are a setting of the quarantine: off, there is nothing to set.
    let off = Config::builder(3).restart_quarantine(None).build();
    assert_eq!(off.expect("off").restart_quarantine(), None);
    // A node's INFO reply in parts must fit the read buffer.
    let e = Config::builder(3)
        .restart_quarantine(Some(RestartQuarantine::default()))
        .max_reply_size(1024)
        .max_read_buffer(4096)
        .build()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid `max_read_buffer`: must be at least 16384 bytes with restart_quarantine on"
    );
}

/// Other clients' longer ttls are set with `RestartQuarantine::ttl`; this client's own
/// longer per-lock ttls widen the window by themselves.
#[test]
fn the_window_is_the_longest_ttl_known_plus_its_drift() {
    let build = |b: redlock_core::ConfigBuilder| {
        (b.release_notifications(None).native_commands(false))
            .preload_scripts(false)
            .clock_check(None)
            .ttl(Duration::from_secs(1))
            .build()
            .expect("valid config")
    };
    let mut h = Harness::new(build(Config::builder(1).restart_quarantine(Some(
        RestartQuarantine {
            ttl: Some(Duration::from_secs(30)),
            young_nodes: true,
        },
    ))));
    h.drain();
    let (until, _) = quarantined(&up(&mut h, 0, &info("a0", 0), NO_AOF));
    // 30 s + 1% + 2 ms.
    assert_eq!(until, h.now + Duration::from_millis(30_302));

    let mut h = Harness::new(build(
        Config::builder(1).restart_quarantine(Some(YOUNG_NODES_TOO)),
    ));
    h.drain();
    let options = redlock_core::LockOptions::default().ttl(Duration::from_secs(5));
    h.client
        .acquire_with(h.now, "res".into(), &options)
        .expect("acquire");
    h.drain();
    // The lock's SET waits behind the handshake; the decision comes first.
    h.connect(0);
    let out = h.reply(0, format!("{}{NO_AOF}", info("a0", 0)).as_bytes());
    let (until, _) = quarantined(&out.events);
    // 5 s + 1% + 2 ms.
    assert_eq!(until, h.now + Duration::from_millis(5_052));
}

/// The stepped-uptime defence counts from the node's last reply, not from the moment its
/// connection read `INFO`: a connection two minutes old catches a step of one minute.
#[test]
fn a_stepped_uptime_is_caught_against_the_last_reply_on_an_old_connection() {
    let mut h = old_cluster();
    // Two minutes on the same connections, then a lock that every node answers.
    h.ms(120_000);
    let (events, cleanup) = acquire_all_grant(&mut h);
    let [Event::Acquired(a)] = &events[..] else {
        panic!("{events:?}");
    };
    assert!(cleanup.transmits.is_empty(), "{cleanup:?}");
    h.client.release(h.now, a.op).unwrap();
    h.drain();
    for i in 0..3 {
        h.reply(i, b":1\r\n");
    }
    // One second after its last reply, node 0 restarts empty; its new process's wall clock
    // was stepped 60 s forward, so its uptime claims it started 59 s before that reply.
    h.ms(1_000);
    reconnect(&mut h, 0);
    let (until, cause) = quarantined(&up(&mut h, 0, &info("b0", 60), NO_AOF));
    assert_eq!((until, cause), (h.now + WINDOW, QuarantineCause::Restarted));
    // Its grant does not decide a lock while node 1 is down.
    h.disconnect(1, ConnectionError::Closed);
    let (events, _) = acquire_all_grant(&mut h);
    assert!(
        matches!(&events[..], [Event::AcquireFailed { .. }]),
        "{events:?}"
    );
}

/// [`config`] with every lock fenced and a ttl of `ttl`.
fn fenced(ttl: Duration) -> Config {
    Config::builder(3)
        .release_notifications(None)
        .clock_check(None)
        .native_commands(false)
        .preload_scripts(false)
        .fencing(Fencing::every_lock())
        .ttl(ttl)
        .retry(RetryPolicy {
            max_attempts: Some(1),
            ..RetryPolicy::default()
        })
        .build()
        .expect("valid config")
}

/// The fencing floor moves once a second: a restarted node that lost its counter may hand
/// out a smaller number than it did before until its clock has passed every number issued
/// (docs/safety.md, "Restarts and lost writes"). A client that fences keeps the node out
/// that long, whatever its ttl: the floor's second and twice its drift (1% and 2 ms each).
#[test]
fn a_fencing_client_keeps_a_restarted_node_out_until_the_floor_has_passed() {
    let floor_window = Duration::from_millis(1_024);
    for (ttl, window) in [
        (Duration::from_millis(200), floor_window),
        (Duration::from_secs(5), Duration::from_millis(5_052)),
    ] {
        let mut h = Harness::new(fenced(ttl));
        assert_eq!(h.drain().connects.len(), 3);
        for i in 0..3 {
            assert!(up(&mut h, i, &info(&format!("a{i}"), DAY), NO_AOF).is_empty());
        }
        h.ms(500);
        reconnect(&mut h, 0);
        let (until, cause) = quarantined(&up(&mut h, 0, &info("b0", 0), NO_AOF));
        assert_eq!(
            (until, cause),
            (h.now + window, QuarantineCause::Restarted),
            "{ttl:?}"
        );
    }
    // Without fencing, the ttl's window.
    let mut h = Harness::new(config(true));
    h.drain();
    for i in 0..3 {
        up(&mut h, i, &info(&format!("a{i}"), DAY), NO_AOF);
    }
    reconnect(&mut h, 0);
    let (until, _) = quarantined(&up(&mut h, 0, &info("b0", 0), NO_AOF));
    assert_eq!(until, h.now + WINDOW);
}

/// A fresh client (every `redlock exec`) cannot have seen a node's restart, but the
/// handshakes tell it: a node that started more than a window after another one restarted,
/// and is quarantined until the window has passed since its start; its vote does not
/// count before its peers have told.
#[test]
fn a_fresh_client_quarantines_a_node_that_started_long_after_its_peers() {
    let mut h = Harness::new(config(true));
    h.drain();
    // Node 0 answers first: up for 0 s, nothing to compare with yet: no event, but its
    // vote does not count.
    assert!(up(&mut h, 0, &info("b0", 0), NO_AOF).is_empty());
    let started = h.now;
    h.ms(3);
    // Node 1 has run for a day: node 0 restarted.
    let events = up(&mut h, 1, &info("a1", DAY), NO_AOF);
    let (until, cause) = quarantined(&events);
    assert_eq!(
        (until, cause),
        (started + WINDOW, QuarantineCause::Restarted)
    );
    assert!(up(&mut h, 2, &info("a2", DAY), NO_AOF).is_empty());
    // With node 1 down, node 0's grant would decide: it does not count.
    h.disconnect(1, ConnectionError::Closed);
    refused(&mut h);
    h.now = until;
    granted(&mut h);
}

/// Nodes that started together, a moment ago, are a new cluster: granted at once, as soon
/// as a quorum of them has told its start.
#[test]
fn a_fresh_client_trusts_a_cluster_started_together() {
    let mut h = Harness::new(config(true));
    h.drain();
    assert!(up(&mut h, 0, &info("a0", 1), NO_AOF).is_empty());
    h.ms(2);
    assert!(up(&mut h, 2, &info("a2", 0), NO_AOF).is_empty());
    // Node 1 never answers: the two others are a quorum, and decide.
    h.disconnect(1, ConnectionError::Closed);
    granted(&mut h);
}

/// A young node's grant that comes before any peer has told its start is kept, not
/// refused: it counts once the peers tell a new cluster, so a fresh client's first lock on
/// a cluster started a moment ago needs one attempt.
#[test]
fn a_young_nodes_grant_waits_for_its_peers_instead_of_failing_the_attempt() {
    let mut h = Harness::new(config(true));
    h.drain();
    assert!(up(&mut h, 0, &info("a0", 0), NO_AOF).is_empty());
    // Nodes 1 and 2 are still connecting: the SET waits for them; node 0 grants.
    let (op, out) = h.acquire("res");
    assert_eq!(out.nodes_sent(), [0]);
    let out = h.reply(0, b"+OK\r\n");
    assert!(out.events.is_empty() && out.transmits.is_empty(), "{out:?}");
    // Node 1 started with it: a new cluster. Its grant and node 0's make the quorum.
    let out = h.connect(1);
    let sent = String::from_utf8_lossy(&out.sent_to(1)).into_owned();
    assert!(
        sent.starts_with(INFO_AND_CONFIG) && sent.contains("SET"),
        "{sent}"
    );
    let out = h.reply(1, format!("{}{NO_AOF}+OK\r\n", info("a1", 1)).as_bytes());
    let [Event::Acquired(a)] = &out.events[..] else {
        panic!("{out:?}");
    };
    assert_eq!((a.op, a.stats.attempts), (op, 1));
}

/// Two nodes of the configuration whose handshakes report one run id are one server named
/// twice (an alias, or a unix socket and a port): the later one's grant does not count,
/// and the application is told; once its connection reports another run id, it votes.
#[test]
fn two_nodes_that_are_one_server_vote_once() {
    let mut h = Harness::new(config(true));
    h.drain();
    assert!(up(&mut h, 0, &info("a0", DAY), NO_AOF).is_empty());
    assert!(up(&mut h, 1, &info("a1", DAY), NO_AOF).is_empty());
    let events = up(&mut h, 2, &info("a0", DAY), NO_AOF);
    let [Event::NodeQuarantined { node, cause, .. }] = &events[..] else {
        panic!("{events:?}");
    };
    assert_eq!(
        (node.clone(), *cause),
        (name(2), QuarantineCause::SameServer)
    );
    // With node 1 down, nodes 0 and 2 would make a quorum of one server.
    h.disconnect(1, ConnectionError::Closed);
    let (events, _) = acquire_all_grant(&mut h);
    let [Event::AcquireFailed { reason, .. }] = &events[..] else {
        panic!("{events:?}");
    };
    assert!(
        reason
            .to_string()
            .contains("the same server as another node"),
        "{reason}"
    );
    h.reply(0, b":1\r\n");
    h.reply(2, b":1\r\n");
    // Node 1 back; node 2 turns out to be a server of its own after all: it votes.
    fire_until_connect(&mut h);
    assert!(up(&mut h, 1, &info("a1", DAY), NO_AOF).is_empty());
    reconnect(&mut h, 2);
    // Another run id than before: a restart to this client, quarantined for its window.
    let events = up(&mut h, 2, &info("c2", DAY), NO_AOF);
    let [Event::NodeQuarantined { until, cause, .. }] = &events[..] else {
        panic!("{events:?}");
    };
    assert_eq!(*cause, QuarantineCause::Restarted);
    h.now = *until;
    h.disconnect(1, ConnectionError::Closed);
    granted(&mut h);
}
