//! Fencing tokens on real servers (docs/safety.md, "Fencing"): they grow with every
//! acquisition of a resource, from any client; a node whose counter is behind is raised
//! before the lock is granted, visibly in the statistics; and a node that restarts empty,
//! after more than the ttl and the counter's one-second floor step, does not take them back.

use std::thread;
use std::time::Duration;

use redlock_core::Fencing;
use redlock_testkit::{Cluster, Reply};

use crate::scenarios::cluster;
use crate::{AcquireFailure, Driver, Guard, LockError, LockOptions, RetryPolicy};

/// Acquisitions in [`fencing_tokens_grow_across_clients`], taken in turn by the clients.
const ACQUISITIONS: usize = 1_000;

/// Three clients take a fenced lock on one resource in turn, each hold released before the
/// next begins: every token is larger than the one before, whichever client held it.
pub fn fencing_tokens_grow_across_clients<D: Driver>() {
    let c = cluster(5);
    let clients: Vec<D> = (0..3)
        .map(|_| D::build(&c.urls(), |b| b.fencing(Fencing::every_lock())).expect("driver"))
        .collect();
    let mut last = 0u64;
    for i in 0..ACQUISITIONS {
        let guard = clients[i % clients.len()].lock("fenced").expect("free");
        let token = guard.fencing_token().expect("a fenced lock has a token");
        assert!(token > last, "acquisition {i}: token {token} after {last}");
        last = token;
        guard.release().expect("release");
    }
    // The counter is a key of its own that outlives the locks: member `n` of a sorted set.
    let counter = c.node(0).command(&["ZSCORE", "fenced:fence", "n"]).unwrap();
    let Reply::Bulk(score) = &counter else {
        panic!("{counter:?}");
    };
    let score: u64 = String::from_utf8_lossy(score)
        .parse()
        .expect("a whole number");
    assert!(score >= last, "{score} < {last}");
    // Unfenced locks of the same client have no token.
    let guard = clients[0]
        .lock_with("fenced", LockOptions::default().fenced(false))
        .expect("free");
    assert_eq!(guard.fencing_token(), None);
    guard.release().expect("release");
}

/// Two of five nodes miss some acquisitions (their proxies drop everything), then two others
/// go dark, so the quorum is the one node that saw them all and the two that did not: the
/// token is written back to the nodes behind before the lock is granted, and the statistics
/// name them. Within one second only: a new second's floor (docs/safety.md, "Fencing")
/// brings every counter to the same value, so each try starts just after a second begins
/// on the nodes' clock, and a try that crossed into the next second is made again.
///
/// Then a node is killed and, after more than the ttl and the floor's one-second step,
/// restarted empty: tokens keep growing.
pub fn a_counter_behind_is_written_back_and_an_empty_restart_keeps_tokens_growing<D: Driver>() {
    let c = cluster(5);
    let ttl = Duration::from_millis(1_000);
    let ms = Duration::from_millis;
    let d = D::build(&c.proxy_urls(), |b| {
        b.fencing(Fencing::every_lock())
            .ttl(ttl)
            .attempt_timeout(ms(50))
            .release_timeout(ms(50))
            .reconnect_backoff(ms(10), ms(20))
    })
    .expect("driver");
    let mut last = 0;
    let mut take = |what: &str| {
        let guard = d.lock("behind").expect("free");
        let token = guard.fencing_token().expect("token");
        assert!(token > last, "{what}: token {token} after {last}");
        last = token;
        let stats = guard.stats();
        guard.release().expect("release");
        stats
    };
    take("first");
    let mut written_back = None;
    for _ in 0..5 {
        start_of_a_second(&c);
        dark(&c, &[3, 4], true);
        for _ in 0..3 {
            take("nodes 3 and 4 dark");
        }
        dark(&c, &[3, 4], false);
        dark(&c, &[1, 2], true);
        let stats = take("nodes 1 and 2 dark");
        dark(&c, &[1, 2], false);
        if !stats.written_back.is_empty() {
            written_back = Some(stats);
            break;
        }
    }
    let stats = written_back.expect("a write-back in 5 tries, each within one second");
    let behind: Vec<String> = [3, 4]
        .iter()
        .map(|&i| c.proxy(i).addr().to_string())
        .collect();
    assert!(
        (stats.written_back.iter()).all(|n| behind.contains(&n.to_string())),
        "{stats}"
    );
    assert!(
        stats
            .to_string()
            .contains("fencing counter written back on"),
        "{stats}"
    );

    c.node(4).kill().expect("kill");
    thread::sleep(ttl + ms(1_100));
    c.node(4).restart_empty().expect("restart empty");
    for _ in 0..20 {
        take("after an empty restart");
    }
}

/// Turns the proxies of `nodes` dark (dropping every byte) or back on; back on, their
/// connections are cut, since a blackhole loses bytes mid-stream, and the client reconnects.
fn dark(c: &Cluster, nodes: &[usize], on: bool) {
    for &i in nodes {
        c.proxy(i).blackhole(on);
        if !on {
            c.proxy(i).cut();
        }
    }
    if !on {
        // The reconnect backoff is 10-20 ms.
        thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until node 0's clock is 150 to 300 ms into a second (bounded: one second): clear
/// of the boundary, where a node whose clock was read just now (a reconnected one) may
/// already count the new second while the others' readings, lowered by the drift factor
/// for their age, still count the old one, and early enough that the tries end within it.
fn start_of_a_second(c: &Cluster) {
    for _ in 0..200 {
        let Ok(Reply::Array(time)) = c.node(0).command(&["TIME"]) else {
            return;
        };
        let micros = match time.get(1) {
            Some(Reply::Bulk(b)) => String::from_utf8_lossy(b).parse::<u64>().unwrap_or(0),
            _ => 0,
        };
        if (150_000..300_000).contains(&micros) {
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Where the ACL denies scripting, fenced locks still work on servers with `ZADD … GT`
/// (the pipeline needs no script) while the nodes' counters agree; when a counter is behind,
/// its write-back is a script, and the lock fails naming the nodes and the refused command,
/// never granted with a token a quorum has not confirmed, never unfenced. Denied `EVALSHA`,
/// the refusal names it; allowed `EVALSHA` but neither `SCRIPT LOAD` nor `EVAL`, the node
/// answers `-NOSCRIPT`, the resend is refused, and the refusal names `EVAL`
/// (docs/errors.md).
pub fn a_fenced_lock_without_scripting_permission_fails_naming_each_node<D: Driver>() {
    // Its nodes are stopped here, before the second cluster starts.
    fenced_lock_refused::<D>(&["eval", "script"], "EVAL was refused: NOPERM");
    fenced_lock_refused::<D>(
        &["eval", "evalsha", "script"],
        "EVALSHA was refused: NOPERM",
    );
}

/// Starts 3 nodes whose client user may not run `deny`: a fenced lock on agreeing counters
/// is granted; with two counters ahead and apart, the write-back is refused, and the lock
/// fails naming the nodes with a fault that starts with `refusal`.
fn fenced_lock_refused<D: Driver>(deny: &[&str], refusal: &str) {
    let c = Cluster::builder()
        .nodes(3)
        .user("locker", "pw")
        .deny(deny.iter().copied())
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    let urls: Vec<String> = c.nodes().iter().map(|n| n.client_url()).collect();
    let d = D::build(&urls, |b| b.retry(RetryPolicy::once())).expect("driver");
    // An unfenced lock first: once it is answered, so are the handshake's `HELLO` and
    // `TIME` before it, and every node has a clock reading. (Before that, a fenced lock
    // goes out as the script, which this user may not run.)
    d.lock("warm-up").expect("SET NX needs no script");
    let fenced = || LockOptions::default().fenced(true);
    let guard = d.lock_with("agreeing", fenced()).expect("no script needed");
    assert!(guard.fencing_token().is_some());
    // Nodes 0 and 1 far ahead (below 2^53) and apart: whichever two nodes answer first,
    // their counters differ, and one of them must be raised.
    for (i, ahead) in [(0, 1u64 << 52), (1, (1u64 << 52) + 1_000)] {
        c.node(i)
            .command(&["ZADD", "behind:fence", &ahead.to_string(), "n"])
            .expect("ZADD");
    }
    let err = d
        .lock_with("behind", fenced())
        .err()
        .expect("the write-back is refused");
    let LockError::Acquire {
        reason: AcquireFailure::QuorumUnreachable { errors },
        ..
    } = &err
    else {
        panic!("{err}");
    };
    let addrs: Vec<String> = c.nodes().iter().map(|n| n.addr().to_string()).collect();
    assert!(!errors.is_empty(), "{err}");
    for (node, fault) in errors {
        assert!(addrs.contains(&node.to_string()), "{err}");
        assert!(fault.to_string().starts_with(refusal), "{err}");
    }
}
