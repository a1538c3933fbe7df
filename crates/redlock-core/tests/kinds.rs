//! The lock kinds beyond the mutex (docs/kinds.md) driven through a `Client` with scripted
//! replies: the commands each kind sends (its scripts, keys and arguments), the quorum per
//! kind (the semaphore's raised one), the semaphore's `-PERMITS` refusal, the cleanup of a
//! failed attempt on every node, a writer's abandon after giving up, the local line's
//! policy for shared kinds, and the option errors.

mod support;

use std::time::Duration;

use redlock_core::{
    AcquireFailure, Config, ConfigBuilder, EXTEND_SCRIPT, Event, LockKind, LockOptions,
    MULTI_ACQUIRE_SCRIPT, MULTI_EXTEND_SCRIPT, MULTI_RELEASE_SCRIPT, OpId, QUEUE_ACQUIRE_SCRIPT,
    READ_ACQUIRE_SCRIPT, READ_EXTEND_SCRIPT, READ_RELEASE_SCRIPT, RELEASE_SCRIPT, ReleaseOutcome,
    Resource, RetryPolicy, SEM_ACQUIRE_SCRIPT, SEM_EXTEND_SCRIPT, SEM_RELEASE_SCRIPT, Script,
    UsageError, WRITE_ABANDON_SCRIPT, WRITE_ACQUIRE_SCRIPT, WRITE_RELEASE_SCRIPT,
};
use support::{Drained, Harness, acquired};

const MS: Duration = Duration::from_millis(1);
const YES: &[u8] = b":1\r\n";
const NO: &[u8] = b":0\r\n";

fn builder(n: usize, attempts: u32) -> ConfigBuilder {
    support::builder(n)
        .ttl(Duration::from_millis(10_000))
        .retry(RetryPolicy {
            max_attempts: Some(attempts),
            max_wait: None,
            delay_min: MS,
            delay_max: MS,
        })
}

fn harness(n: usize, attempts: u32) -> Harness {
    Harness::connected(builder(n, attempts).build().expect("valid config"))
}

/// The commands in `bytes` (RESP arrays of bulk strings), each as its arguments, with any
/// 40-hex-digit argument but an `EVALSHA`'s SHA1 (a token) shown as `*`.
fn commands(bytes: &[u8]) -> Vec<Vec<String>> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.split("\r\n");
    let mut out = Vec::new();
    while let Some(head) = lines.next() {
        let Some(n) = head.strip_prefix('*') else {
            break;
        };
        let n: usize = n.parse().expect("an array");
        let args = (0..n)
            .map(|i| {
                lines.next();
                let arg = lines.next().expect("a bulk string").to_owned();
                let token = arg.len() == 40 && arg.bytes().all(|c| c.is_ascii_hexdigit());
                if token && i != 1 { "*".to_owned() } else { arg }
            })
            .collect();
        out.push(args);
    }
    out
}

/// The commands sent to `node` in `out`.
fn sent(out: &Drained, node: usize) -> Vec<Vec<String>> {
    commands(&out.sent_to(node))
}

/// `EVALSHA` of `script` with these keys and the rest of the arguments.
fn evalsha(script: &Script, keys: &[&str], rest: &[&str]) -> Vec<String> {
    let mut args = vec![
        "EVALSHA".to_owned(),
        script.sha1.to_owned(),
        keys.len().to_string(),
    ];
    args.extend(keys.iter().map(|k| (*k).to_owned()));
    args.extend(rest.iter().map(|a| (*a).to_owned()));
    args
}

/// Answers `replies[i]` on node i, collecting the events.
fn answer(h: &mut Harness, replies: &[&[u8]]) -> Vec<Event> {
    let mut events = Vec::new();
    for (i, reply) in replies.iter().enumerate() {
        events.extend(h.reply(i, reply).events);
    }
    events
}

fn failure(events: &[Event]) -> &AcquireFailure {
    match events {
        [Event::AcquireFailed { reason, .. }] => reason,
        other => panic!("expected one AcquireFailed, got {other:?}"),
    }
}

fn acquire(h: &mut Harness, key: &str, options: &LockOptions) -> (OpId, Drained) {
    let op = (h.client)
        .acquire_with(h.now, Resource::from(key), options)
        .expect("acquire");
    (op, h.drain())
}

fn kind(kind: LockKind) -> LockOptions {
    LockOptions::default().kind(kind)
}

#[test]
fn a_multi_lock_sends_its_sorted_set_and_releases_it_by_script() {
    let mut h = harness(3, 1);
    let set = ["b", "a", "c", "a"].map(Resource::from);
    let op = h.client.acquire_all(h.now, set).expect("acquire_all");
    let out = h.drain();
    for n in 0..3 {
        let acquire = evalsha(&MULTI_ACQUIRE_SCRIPT, &["a", "b", "c"], &["*", "10000"]);
        assert_eq!(sent(&out, n), vec![acquire]);
    }
    let events = answer(&mut h, &[YES, YES, NO]);
    let held = acquired(&events);
    assert_eq!(
        held.resource,
        Resource::from("a"),
        "the first resource names it"
    );
    h.client.extend(h.now, op).unwrap();
    let out = h.drain();
    let extend = evalsha(&MULTI_EXTEND_SCRIPT, &["a", "b", "c"], &["*", "10000"]);
    assert_eq!(sent(&out, 0), vec![extend]);
    let events = answer(&mut h, &[YES, YES, YES]);
    assert!(matches!(events[..], [Event::Extended { .. }]), "{events:?}");
    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    let release = evalsha(&MULTI_RELEASE_SCRIPT, &["a", "b", "c"], &["*"]);
    assert_eq!(sent(&out, 2), vec![release]);
    // Decided at a quorum of answers: the third node's release goes on in the background.
    let events = answer(&mut h, &[b":2\r\n", b":-1\r\n", YES]);
    let Some(Event::Released { nodes, .. }) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(
        nodes[..],
        [
            ReleaseOutcome::Released,
            ReleaseOutcome::AlreadyExpired,
            ReleaseOutcome::Pending
        ]
    );
}

#[test]
fn the_cleanup_of_a_failed_multi_attempt_goes_to_all_n_nodes() {
    let mut h = harness(3, 1);
    h.client
        .try_acquire_all(h.now, ["x", "y"].map(Resource::from))
        .expect("try");
    h.drain();
    h.reply(0, YES);
    let out = h.reply(1, NO);
    assert!(out.events.is_empty());
    let out = h.reply(2, NO);
    assert!(matches!(
        failure(&out.events),
        AcquireFailure::Contended { .. }
    ));
    let release = evalsha(&MULTI_RELEASE_SCRIPT, &["x", "y"], &["*"]);
    for n in 0..3 {
        assert_eq!(sent(&out, n), vec![release.clone()], "node {n}");
    }
}

#[test]
fn a_reader_acquires_extends_and_releases_by_its_scripts() {
    let mut h = harness(3, 1);
    let (op, out) = acquire(&mut h, "r", &kind(LockKind::Read));
    let keys = ["r", "r:readers", "r:writer-waiting"];
    for n in 0..3 {
        assert_eq!(
            sent(&out, n),
            vec![evalsha(&READ_ACQUIRE_SCRIPT, &keys, &["*", "10000"])]
        );
    }
    acquired(&answer(&mut h, &[YES, YES, NO]));
    h.client.extend(h.now, op).unwrap();
    let out = h.drain();
    let extend = evalsha(&READ_EXTEND_SCRIPT, &["r:readers"], &["*", "10000"]);
    assert_eq!(sent(&out, 1), vec![extend]);
    answer(&mut h, &[YES, YES, YES]);
    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    assert_eq!(
        sent(&out, 0),
        vec![evalsha(&READ_RELEASE_SCRIPT, &keys, &["*"])]
    );
    // 2: the last reader left and a waiter heard it.
    let events = answer(&mut h, &[b":2\r\n", b":-1\r\n", YES]);
    let Some(Event::Released { nodes, .. }) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(nodes[0], ReleaseOutcome::Released);
    assert_eq!(nodes[1], ReleaseOutcome::AlreadyExpired);
}

/// A node that lost the reader's release script (it restarted empty, and the release's
/// round stopped waiting for it before its `-NOSCRIPT` came) still gets the release, as
/// `EVAL`: otherwise the reader's slot would keep writers out until its ttl.
#[test]
fn a_kind_release_refused_for_a_lost_script_after_the_release_returned_is_sent_as_eval() {
    let mut h = harness(3, 1);
    let (op, _) = acquire(&mut h, "r", &kind(LockKind::Read));
    acquired(&answer(&mut h, &[YES, YES, YES]));
    h.client.release(h.now, op).unwrap();
    h.drain();
    // Nodes 1 and 2 answer: the release is decided; node 0 is still pending.
    h.reply(1, YES);
    let out = h.reply(2, YES);
    assert!(
        matches!(out.events.last(), Some(Event::Released { .. })),
        "{:?}",
        out.events
    );
    // The release's background wait for node 0 ends at the release timeout.
    h.advance(Duration::from_secs(60));
    h.timeout();
    let out = h.reply(0, b"-NOSCRIPT No matching script.\r\n");
    let keys = ["r", "r:readers", "r:writer-waiting"];
    let mut eval = evalsha(&READ_RELEASE_SCRIPT, &keys, &["*"]);
    eval[0] = "EVAL".to_owned();
    eval[1] = READ_RELEASE_SCRIPT.body.to_owned();
    let sent = sent(&out, 0);
    assert_eq!(sent[0], eval);
    // And the node loads every script again, since it lost them (the kinds' among them).
    assert_reloaded(&sent[1..]);
    // Its reply waits for nobody.
    let out = h.reply(0, YES);
    assert!(out.events.is_empty() && out.disconnects.is_empty());
}

/// `commands` are a `SCRIPT LOAD` of each script the client sends: the mutex's, the fenced
/// ones and every kind's.
fn assert_reloaded(commands: &[Vec<String>]) {
    let bodies: Vec<&str> = commands
        .iter()
        .map(|c| match &c[..] {
            [script, load, body] if script == "SCRIPT" && load == "LOAD" => body.as_str(),
            other => panic!("not a SCRIPT LOAD: {other:?}"),
        })
        .collect();
    for script in [
        &READ_ACQUIRE_SCRIPT,
        &WRITE_RELEASE_SCRIPT,
        &SEM_EXTEND_SCRIPT,
        &RELEASE_SCRIPT,
        &QUEUE_ACQUIRE_SCRIPT,
    ] {
        assert!(bodies.contains(&script.body), "{} not loaded", script.sha1);
    }
    assert_eq!(bodies.len(), 19, "{bodies:?}");
}

/// A node whose answer to a kind's acquire comes after the others granted it, and is
/// `-NOSCRIPT` (its first use there): nothing resends the acquire (it would set keys nobody
/// holds), but the node loads the scripts, so that it takes part in the next lock; once per
/// connection.
#[test]
fn a_late_noscript_to_an_acquire_loads_the_scripts_once_and_resends_nothing() {
    let mut h = harness(3, 1);
    let noscript: &[u8] = b"-NOSCRIPT No matching script.\r\n";
    for round in 0..2 {
        let (op, _) = acquire(&mut h, "r", &kind(LockKind::Read));
        h.reply(1, YES);
        acquired(&h.reply(2, YES).events);
        let out = h.reply(0, noscript);
        let sent = sent(&out, 0);
        if round == 0 {
            assert_reloaded(&sent);
            // The loads' replies (their SHA1s) are not read.
            for _ in &sent {
                h.reply(0, b"+loaded\r\n");
            }
        } else {
            assert!(sent.is_empty(), "loaded twice: {sent:?}");
        }
        h.client.release(h.now, op).unwrap();
        h.drain();
        answer(&mut h, &[b":-1\r\n", YES, YES]);
    }
}

#[test]
fn a_kind_script_missing_from_a_nodes_cache_is_sent_again_as_eval() {
    let mut h = harness(3, 1);
    let (_, _) = acquire(&mut h, "r", &kind(LockKind::Read));
    let out = h.reply(0, b"-NOSCRIPT No matching script.\r\n");
    let keys = ["r", "r:readers", "r:writer-waiting"];
    let mut eval = evalsha(&READ_ACQUIRE_SCRIPT, &keys, &["*", "10000"]);
    eval[0] = "EVAL".to_owned();
    eval[1] = READ_ACQUIRE_SCRIPT.body.to_owned();
    assert_eq!(sent(&out, 0), vec![eval]);
    acquired(&answer(&mut h, &[YES, YES]));
}

#[test]
fn a_writer_waits_with_patience_releases_as_a_mutex_and_abandons_when_it_gives_up() {
    let mut h = harness(3, 2);
    let (_, out) = acquire(&mut h, "w", &kind(LockKind::Write));
    let keys = ["w", "w:readers", "w:writer-waiting"];
    // It may retry: its waiting mark lives for the ttl.
    let write = evalsha(&WRITE_ACQUIRE_SCRIPT, &keys, &["*", "10000", "10000"]);
    assert_eq!(sent(&out, 0), vec![write.clone()]);
    let out = {
        h.reply(0, NO);
        h.reply(1, NO)
    };
    // The failed attempt's cleanup is the mutex's release; the mark stays while it retries.
    assert_eq!(
        sent(&out, 0),
        vec![evalsha(&RELEASE_SCRIPT, &["w"], &["*"])]
    );
    h.reply(2, NO);
    answer(&mut h, &[b":-1\r\n", b":-1\r\n", b":-1\r\n"]);
    let out = support::fire_until_transmit(&mut h);
    assert_eq!(sent(&out, 1), vec![write]);
    h.reply(0, NO);
    let out = h.reply(1, NO);
    assert!(matches!(
        failure(&out.events),
        AcquireFailure::Contended { .. }
    ));
    // Given up: the release of the last attempt, then its mark's abandon, on every node.
    assert_released_and_abandoned(&out, "w");
}

/// Every one of 3 nodes got the release of the writer's last attempt on `key`, then the
/// abandon of its mark.
fn assert_released_and_abandoned(out: &Drained, key: &str) {
    let mark = format!("{key}:writer-waiting");
    let abandon = evalsha(&WRITE_ABANDON_SCRIPT, &[&mark], &["*"]);
    let release = evalsha(&RELEASE_SCRIPT, &[key], &["*"]);
    for n in 0..3 {
        assert_eq!(
            sent(out, n),
            vec![release.clone(), abandon.clone()],
            "node {n}"
        );
    }
}

#[test]
fn a_cancelled_writer_abandons_its_mark() {
    let mut h = harness(3, 5);
    let (op, _) = acquire(&mut h, "w", &kind(LockKind::Write));
    h.client.cancel(h.now, op).unwrap();
    let out = h.drain();
    assert!(matches!(failure(&out.events), AcquireFailure::Cancelled));
    assert_released_and_abandoned(&out, "w");
}

/// A writer granted by two nodes while the third refused it (a reader still there) left its
/// waiting mark on the third: its release, on every node, is WRITE_RELEASE, which deletes R
/// and the mark (docs/kinds.md, "Reader-writer lock").
#[test]
fn a_held_writer_releases_r_and_its_mark_on_every_node() {
    let mut h = harness(3, 2);
    let (op, _) = acquire(&mut h, "w", &kind(LockKind::Write));
    acquired(&answer(&mut h, &[YES, NO, YES]));
    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    let keys = ["w", "w:readers", "w:writer-waiting"];
    let release = evalsha(&WRITE_RELEASE_SCRIPT, &keys, &["*"]);
    for n in 0..3 {
        assert_eq!(sent(&out, n), vec![release.clone()], "node {n}");
    }
    let out = answer(&mut h, &[YES, b":-1\r\n", YES]);
    let released = out.iter().any(|e| matches!(e, Event::Released { .. }));
    assert!(released, "{out:?}");
}

#[test]
fn a_single_attempt_writer_leaves_no_mark_and_holds_as_a_mutex() {
    let mut h = harness(3, 1);
    let (op, out) = acquire(&mut h, "w", &kind(LockKind::Write));
    let keys = ["w", "w:readers", "w:writer-waiting"];
    let write = evalsha(&WRITE_ACQUIRE_SCRIPT, &keys, &["*", "10000", "0"]);
    assert_eq!(sent(&out, 2), vec![write]);
    acquired(&answer(&mut h, &[YES, YES, YES]));
    h.client.extend(h.now, op).unwrap();
    let out = h.drain();
    let extend = evalsha(&EXTEND_SCRIPT, &["w"], &["*", "10000"]);
    assert_eq!(sent(&out, 0), vec![extend]);
}

/// Asks a semaphore of `permits` on 5 nodes and answers `yes` nodes yes, the rest no.
fn semaphore_with(permits: u32, yes: usize, config: Config) -> Vec<Event> {
    let mut h = Harness::connected(config);
    let (_, out) = acquire(&mut h, "s", &kind(LockKind::semaphore(permits)));
    let keys = ["s:permits", "s:permits:limit", "s"];
    let k = permits.to_string();
    let acquire = evalsha(&SEM_ACQUIRE_SCRIPT, &keys, &["*", "10000", &k]);
    assert_eq!(sent(&out, 4), vec![acquire]);
    let replies: Vec<&[u8]> = (0..5).map(|i| if i < yes { YES } else { NO }).collect();
    answer(&mut h, &replies)
}

fn semaphore(permits: u32, yes: usize) -> Vec<Event> {
    semaphore_with(permits, yes, builder(5, 1).build().expect("valid config"))
}

#[test]
fn the_semaphore_quorum_rises_with_its_permits() {
    // N = 5: k = 1 needs 3, k = 2 needs 4, k = 4 needs 5.
    acquired(&semaphore(1, 3));
    assert!(matches!(
        failure(&semaphore(2, 3)),
        AcquireFailure::Contended { .. }
    ));
    acquired(&semaphore(2, 4));
    assert!(matches!(
        failure(&semaphore(4, 4)),
        AcquireFailure::Contended { .. }
    ));
    acquired(&semaphore(4, 5));
}

#[test]
fn a_semaphore_releases_and_extends_by_its_scripts() {
    let mut h = harness(3, 1);
    let (op, _) = acquire(&mut h, "s", &kind(LockKind::semaphore(1)));
    acquired(&answer(&mut h, &[YES, YES, NO]));
    h.client.extend(h.now, op).unwrap();
    let out = h.drain();
    let extend = evalsha(
        &SEM_EXTEND_SCRIPT,
        &["s:permits", "s:permits:limit"],
        &["*", "10000"],
    );
    assert_eq!(sent(&out, 0), vec![extend]);
    answer(&mut h, &[YES, YES, YES]);
    h.client.release(h.now, op).unwrap();
    let out = h.drain();
    let keys = ["s:permits", "s:permits:limit", "s"];
    assert_eq!(
        sent(&out, 1),
        vec![evalsha(&SEM_RELEASE_SCRIPT, &keys, &["*"])]
    );
    let events = answer(&mut h, &[b":2\r\n", b":2\r\n", YES]);
    let Some(Event::Released { nodes, .. }) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(
        nodes[..2],
        [ReleaseOutcome::Released, ReleaseOutcome::Released]
    );
}

#[test]
fn a_quorum_of_permits_errors_fails_the_call_naming_both_numbers() {
    // Retries allowed, but a usage error is not retried.
    let mut h = harness(3, 5);
    let (_, _) = acquire(&mut h, "s", &kind(LockKind::semaphore(1)));
    let events = answer(&mut h, &[b"-PERMITS 3\r\n", b"-PERMITS 3\r\n"]);
    let reason = failure(&events);
    assert!(
        matches!(reason, AcquireFailure::PermitsMismatch { asked: 1, in_place: 3, nodes } if nodes.len() == 2),
        "{reason:?}"
    );
    assert!(reason.to_string().contains("1 permits"), "{reason}");
    assert!(reason.to_string().contains("one of 3 permits"), "{reason}");
}

#[test]
fn permits_errors_that_make_success_impossible_decide_once_most_of_the_nos() {
    // k = 2 on 3 nodes needs all 3: one PERMITS makes success impossible, and it is every
    // "no" so far.
    let mut h = harness(3, 5);
    let (_, _) = acquire(&mut h, "s", &kind(LockKind::semaphore(2)));
    let events = h.reply(0, b"-PERMITS 3\r\n").events;
    assert!(matches!(
        failure(&events),
        AcquireFailure::PermitsMismatch { asked: 2, .. }
    ));
}

#[test]
fn a_minority_of_permits_errors_is_a_no() {
    let mut h = harness(3, 1);
    let (_, _) = acquire(&mut h, "s", &kind(LockKind::semaphore(1)));
    // Quorum 2 of 3: one PERMITS, two no: contended, not a usage error.
    let events = answer(&mut h, &[b"-PERMITS 3\r\n", NO, NO]);
    assert!(matches!(failure(&events), AcquireFailure::Contended { .. }));
}

#[test]
fn readers_and_permit_holders_of_one_client_do_not_wait_in_its_line() {
    let mut h = harness(3, 1);
    let (_, first) = acquire(&mut h, "r", &kind(LockKind::Read));
    let (_, second) = acquire(&mut h, "r", &kind(LockKind::Read));
    assert_eq!(first.nodes_sent(), vec![0, 1, 2]);
    assert_eq!(
        second.nodes_sent(),
        vec![0, 1, 2],
        "a second reader contends at once"
    );
    let (_, third) = acquire(&mut h, "s", &kind(LockKind::semaphore(2)));
    let (_, fourth) = acquire(&mut h, "s", &kind(LockKind::semaphore(2)));
    assert_eq!(third.nodes_sent(), vec![0, 1, 2]);
    assert_eq!(fourth.nodes_sent(), vec![0, 1, 2]);
    // Writers are exclusive: the second waits in line.
    let (_, w1) = acquire(&mut h, "w", &kind(LockKind::Write));
    let (_, w2) = acquire(&mut h, "w", &kind(LockKind::Write));
    assert_eq!(w1.nodes_sent(), vec![0, 1, 2]);
    assert!(w2.transmits.is_empty(), "a second writer waits in line");
}

#[test]
fn bad_kinds_and_sets_are_refused_naming_the_problem() {
    let mut h = harness(3, 1);
    let now = h.now;
    let none: [Resource; 0] = [];
    assert_eq!(
        h.client.acquire_all(now, none),
        Err(UsageError::NoResources)
    );
    assert_eq!(
        h.client.acquire_all(now, ["a", "a"].map(Resource::from)),
        Err(UsageError::OneResourceRepeated { times: 2 })
    );
    let zero = kind(LockKind::semaphore(0));
    let Err(UsageError::InvalidOption(e)) = h.client.acquire_with(now, "s".into(), &zero) else {
        panic!("zero permits must be refused");
    };
    assert_eq!(e.field(), "kind");
    let fenced = kind(LockKind::Read).fenced(true);
    let Err(UsageError::InvalidOption(e)) = h.client.acquire_with(now, "r".into(), &fenced) else {
        panic!("a fenced reader must be refused");
    };
    assert_eq!(e.field(), "fenced");
    let set = ["a", "b"].map(Resource::from);
    let read = kind(LockKind::Read);
    let Err(UsageError::InvalidOption(e)) = h.client.acquire_all_with(now, set.clone(), &read)
    else {
        panic!("a multi-reader must be refused");
    };
    assert_eq!(e.field(), "kind");
    let fenced = LockOptions::default().fenced(true);
    let Err(UsageError::InvalidOption(e)) = h.client.acquire_all_with(now, set, &fenced) else {
        panic!("a fenced multi-lock must be refused");
    };
    assert_eq!(e.field(), "fenced");
}

#[cfg(feature = "_mutants")]
mod mutants {
    use redlock_core::Mutant;

    use super::*;

    fn with(mutant: Mutant) -> Config {
        builder(5, 1).mutant(mutant).build().expect("valid config")
    }

    #[test]
    fn the_majority_semaphore_takes_two_permits_on_three_of_five() {
        acquired(&semaphore_with(2, 3, with(Mutant::SemaphoreMajority)));
    }

    #[test]
    fn the_script_mutants_go_out_under_their_own_sha1() {
        let cases = [
            (
                Mutant::SemAcquireOffByOne,
                LockKind::semaphore(2),
                redlock_core::SEM_ACQUIRE_OFF_BY_ONE_SCRIPT.sha1,
            ),
            (
                Mutant::WriteAcquireIgnoresReaders,
                LockKind::Write,
                redlock_core::WRITE_ACQUIRE_IGNORES_READERS_SCRIPT.sha1,
            ),
        ];
        for (mutant, kind_of_lock, sha1) in cases {
            let mut h = Harness::connected(with(mutant));
            let (_, out) = acquire(&mut h, "k", &kind(kind_of_lock));
            assert_eq!(sent(&out, 0)[0][1], sha1, "{mutant:?}");
        }
        let mut h = Harness::connected(with(Mutant::ReadExtendResurrects));
        let (op, _) = acquire(&mut h, "k", &kind(LockKind::Read));
        let yes: Vec<&[u8]> = vec![YES; 5];
        acquired(&answer(&mut h, &yes));
        h.client.extend(h.now, op).unwrap();
        let out = h.drain();
        let sha1 = redlock_core::READ_EXTEND_RESURRECTS_SCRIPT.sha1;
        assert_eq!(sent(&out, 0)[0][1], sha1);
    }

    #[test]
    fn the_first_key_vote_sets_keys_one_by_one_and_reads_the_first_reply() {
        let config = builder(3, 1)
            .mutant(Mutant::MultiFirstKeyVote)
            .build()
            .expect("valid config");
        let mut h = Harness::connected(config);
        h.client
            .acquire_all(h.now, ["b", "a"].map(Resource::from))
            .expect("acquire_all");
        let out = h.drain();
        let set = |key: &str| -> Vec<String> {
            ["SET", key, "*", "NX", "PX", "10000"]
                .map(str::to_owned)
                .to_vec()
        };
        assert_eq!(sent(&out, 0), vec![set("a"), set("b")]);
        // Every node had `b` taken by another client: the bug counts the first key alone.
        let events = answer(&mut h, &[b"+OK\r\n$-1\r\n", b"+OK\r\n$-1\r\n"]);
        acquired(&events);
    }
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// For every N, k and sequence of yes/no answers, a semaphore's attempt is decided
        /// as a reference count with q = max(majority, floor(kN/(k+1)) + 1) decides it: held
        /// at the q-th yes, failed once more than N - q said no; and q holders of k + 1 can
        /// never fit on N nodes of k slots each.
        /// Whatever the order and repeats of a multi-lock's resources, every node is sent
        /// one MULTI_ACQUIRE whose `KEYS` are the set sorted by bytes and deduplicated.
        #[test]
        fn a_multi_lock_sends_its_set_sorted_and_deduplicated(
            names in proptest::collection::vec("[a-c]{1,2}", 1..8),
        ) {
            let mut set: Vec<String> = names.clone();
            set.sort();
            set.dedup();
            let resources = names.iter().map(|n| Resource::from(n.as_str()));
            let mut h = harness(3, 1);
            match h.client.acquire_all(h.now, resources) {
                Err(UsageError::OneResourceRepeated { times }) => {
                    prop_assert_eq!((set.len(), times), (1, names.len()));
                    return Ok(());
                }
                other => prop_assert!(other.is_ok(), "{other:?}"),
            }
            let out = h.drain();
            let sent = sent(&out, 1);
            if set.len() == 1 {
                // One resource: the mutex's `SET NX PX`.
                prop_assert_eq!(&sent[0][..2], ["SET".to_owned(), set[0].clone()]);
                return Ok(());
            }
            let keys: Vec<&str> = set.iter().map(String::as_str).collect();
            prop_assert_eq!(&sent, &vec![evalsha(&MULTI_ACQUIRE_SCRIPT, &keys, &["*", "10000"])]);
        }

        #[test]
        fn a_semaphore_is_decided_by_its_raised_quorum(
            n in 1usize..=7,
            permits in 1u32..=8,
            yes in proptest::collection::vec(any::<bool>(), 7),
        ) {
            let k = permits as usize;
            let q = (k * n / (k + 1) + 1).max(n / 2 + 1);
            prop_assert!((k + 1) * q > k * n);
            let mut h = Harness::connected(builder(n, 1).build().expect("valid config"));
            let (_, _) = acquire(&mut h, "s", &kind(LockKind::semaphore(permits)));
            let (mut ayes, mut noes, mut decided) = (0, 0, None);
            for (i, &y) in yes.iter().enumerate().take(n) {
                let out = h.reply(i, if y { YES } else { NO });
                if y { ayes += 1 } else { noes += 1 }
                let expected = (ayes >= q).then_some(true).or((noes > n - q).then_some(false));
                match (&out.events[..], expected) {
                    ([], None) => {}
                    ([Event::Acquired(_)], Some(true)) | ([Event::AcquireFailed { .. }], Some(false)) => {
                        decided = Some(i);
                        break;
                    }
                    (events, expected) => prop_assert!(false, "{events:?} but expected {expected:?}"),
                }
            }
            prop_assert!(decided.is_some());
        }
    }
}
