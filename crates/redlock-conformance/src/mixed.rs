//! Clusters of mixed servers (docs/design.md, "Native commands"): five nodes, some Redis 7 and some Valkey 9,
//! started from both binaries whatever the default server is. Each node must be sent its
//! own server's commands (scripts to Redis 7, `DELIFEQ` and `SET … IFEQ` to Valkey 9), and
//! the servers' own counts (`INFO commandstats`) must show it. A missing second binary
//! fails the scenario with the test kit's sentence naming `REDLOCK_VALKEY_BIN`.

use std::thread;
use std::time::Duration;

use redlock_testkit::{Cluster, Node, Reply, ServerKind};

use crate::scenarios::{eventually, value_on};
use crate::servers::{self, calls};
use crate::{AcquireFailure, Driver, Guard, LockError, ReleaseOutcome, assert_report};

use ServerKind::{Redis, Valkey};

/// Long enough that no key expires on its own during the scenario on a loaded machine (with
/// 5 s, a key of `contend` once expired on a node before its extension reached it, under a
/// full CI run, and its release found it gone).
const TTL: Duration = Duration::from_secs(30);

/// Three Redis nodes and two Valkey nodes: the quorum (3) can be all Redis.
pub fn mixed_cluster_3_redis_2_valkey<D: Driver>() {
    mixed_cluster::<D>([Redis, Redis, Redis, Valkey, Valkey]);
}

/// Two Redis nodes and three Valkey nodes, interleaved: the quorum can be all Valkey.
pub fn mixed_cluster_2_redis_3_valkey<D: Driver>() {
    mixed_cluster::<D>([Valkey, Redis, Valkey, Redis, Valkey]);
}

/// Lock, extend and release on a cluster of `kinds`, then two clients contending, each
/// followed by the servers' counts of what they ran. Valkey nodes are 9 or later, whose
/// `DELIFEQ` and `SET … IFEQ` the counts expect.
fn mixed_cluster<D: Driver>(kinds: [ServerKind; 5]) {
    let c = Cluster::builder()
        .kinds(kinds)
        .min_version(Valkey, 9)
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    for (node, kind) in c.nodes().iter().zip(kinds) {
        assert_eq!(node.server().kind(), kind, "{}", node.server());
    }
    let d = D::build(&c.urls(), |b| b.ttl(TTL)).unwrap();
    let other = D::build(&c.urls(), |b| b.ttl(TTL)).unwrap();
    // Every connection up and its HELLO read, the scripts loaded on the Redis nodes: until
    // a node's HELLO reply is read, the core sends it scripts (a cleanup release of a
    // client's first attempt can be one, on Valkey too).
    for client in [&d, &other] {
        let warm = client.lock("mixed:warm").unwrap();
        warm.extend().unwrap();
        warm.release().unwrap();
    }
    // A release returns at a quorum and finishes on the other nodes in the background: an
    // inspection, queued behind it on every connection (each answers in order), is answered
    // only once it has run, so no warm-up command is counted below.
    for client in [&d, &other] {
        client.inspect("mixed:warm").unwrap();
    }
    c.nodes().iter().for_each(servers::reset_stats);
    lock_extend_release(&c, &d);
    for (i, node) in c.nodes().iter().enumerate() {
        let expected = match node.server().kind() {
            // SET NX (lock) and SET IFEQ (extension); DELIFEQ (release).
            Valkey => [("set", 2), ("delifeq", 1), ("evalsha", 0), ("eval", 0)],
            // SET NX (lock); the extension and release scripts.
            _ => [("set", 1), ("delifeq", 0), ("evalsha", 2), ("eval", 0)],
        };
        let seen = expected.map(|(command, _)| (command, calls(node, command)));
        assert_eq!(seen, expected, "node {i} ({})", node.server());
        assert_eq!(error_replies(node), 0, "node {i} ({})", node.server());
    }
    contend(&c, &d, &other);
    for (i, node) in c.nodes().iter().enumerate() {
        let (used, never) = match node.server().kind() {
            Valkey => ("delifeq", ["evalsha", "eval"]),
            _ => ("evalsha", ["delifeq", "eval"]),
        };
        assert!(
            calls(node, used) > 0,
            "node {i} ({}) never ran {used}",
            node.server()
        );
        for command in never {
            assert_eq!(
                calls(node, command),
                0,
                "node {i} ({}) ran {command}",
                node.server()
            );
        }
        assert_eq!(error_replies(node), 0, "node {i} ({})", node.server());
    }
}

/// One lock on every node, extended after a second (every node's expiry is set back to the
/// ttl), then released on every node.
fn lock_extend_release<D: Driver>(c: &Cluster, d: &D) {
    let g = d.lock("mixed").unwrap();
    let token = Reply::bulk(&g.token());
    for i in 0..c.len() {
        assert!(
            eventually(Duration::from_secs(1), || value_on(c, i, "mixed") == token),
            "node {i} never got the lock's key"
        );
    }
    thread::sleep(Duration::from_secs(1));
    g.extend().expect("extended on every server");
    // Unextended, at most the ttl less the second slept would be left.
    let unextended = i64::try_from((TTL - Duration::from_secs(1)).as_millis()).unwrap();
    for (i, node) in c.nodes().iter().enumerate() {
        let left = eventually(Duration::from_secs(1), || pttl(node, "mixed") > unextended);
        assert!(left, "node {i} ({}) was not extended", node.server());
    }
    assert_report(&g.release(), &ReleaseOutcome::Released, 5);
    for i in 0..c.len() {
        // A node still pending when the release returned is released in the background.
        let gone = eventually(Duration::from_secs(1), || {
            value_on(c, i, "mixed") == Reply::Nil
        });
        assert!(gone, "key left on node {i}");
    }
}

/// A second client cannot take a held lock, and takes it once it is released.
fn contend<D: Driver>(c: &Cluster, d: &D, other: &D) {
    let g = d.lock("mixed:contended").unwrap();
    // A quorum decided the lock: a node whose `SET` is still on its way could take the other
    // client's first (whose cleanup then deletes it), and the release would find nothing
    // there. Wait until every node has it.
    let token = Reply::bulk(&g.token());
    for i in 0..c.len() {
        let set = || value_on(c, i, "mixed:contended") == token;
        assert!(eventually(Duration::from_secs(1), set), "node {i}");
    }
    match other.try_lock("mixed:contended") {
        Err(LockError::Acquire {
            reason: AcquireFailure::Contended { .. },
            ..
        }) => {}
        Ok(_) => panic!("two holders on a mixed cluster"),
        Err(e) => panic!("the second client: {e}"),
    }
    g.extend().expect("extended");
    assert_report(&g.release(), &ReleaseOutcome::Released, 5);
    let theirs = other
        .try_lock("mixed:contended")
        .expect("free after the release");
    theirs.extend().expect("extended");
    assert_report(&theirs.release(), &ReleaseOutcome::Released, 5);
}

/// The key's ttl left on `node`, in ms (negative if it has none or is gone).
fn pttl(node: &Node, key: &str) -> i64 {
    node.command(&["PTTL", key]).unwrap().as_int().unwrap()
}

/// How many error replies `node` sent since its stats were reset (`total_error_replies`):
/// an unknown command or a refused one would show here.
fn error_replies(node: &Node) -> u64 {
    let info = node.command(&["INFO", "stats"]).expect("INFO stats");
    let info = info.as_str().expect("INFO is text");
    info.lines()
        .find_map(|l| l.strip_prefix("total_error_replies:"))
        .map(|n| n.trim().parse().expect("a count"))
        .expect("total_error_replies in INFO stats")
}
