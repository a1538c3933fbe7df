//! Scenarios for rules of docs/algorithm.md that only a real server can show, one function
//! each, generic over the [`Driver`] adapter.

use std::time::Duration;

use redlock_testkit::Reply;

use crate::scenarios::{cluster, eventually, value_on};
use crate::servers;
use crate::{Driver, Guard, LockError, LostReason};

/// algorithm.md §8: the extend script compares the token before it refreshes the expiry.
/// A holder whose keys were replaced by another program's must learn that it lost the
/// lock, and the other keys' expiry must stay as their owner set it: without the check
/// the holder would extend them and believe it still held the lock.
pub fn extension_spares_another_token<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.urls(), |b| b.ttl(Duration::from_secs(5))).unwrap();
    let g = d.lock("ext").unwrap();
    for i in 0..3 {
        let reply = c.node(i).command(&["SET", "ext", "theirs", "PX", "60000"]);
        assert_eq!(reply.unwrap(), Reply::simple("OK"));
    }
    let err = g.extend().expect_err("extended keys that are not ours");
    assert!(
        matches!(err, LockError::Lost(LostReason::NotOwned { .. })),
        "{err}"
    );
    for i in 0..3 {
        assert_eq!(value_on(&c, i, "ext"), Reply::bulk("theirs"));
        let ttl = c
            .node(i)
            .command(&["PTTL", "ext"])
            .unwrap()
            .as_int()
            .unwrap();
        assert!(
            ttl > 30_000,
            "node {i}: another client's expiry was reset to {ttl} ms"
        );
    }
}

/// algorithm.md §8, and the native `SET … IFEQ` (Valkey 9): an extension never creates a
/// key. The lock's keys vanish from every node while it is held (as they do when they
/// expire there, or a node restarts empty); the extension must fail and leave no key, by
/// the script (Redis 7) or by `SET … IFEQ` (Valkey 9, checked from the servers' side: no
/// script ran).
pub fn extension_never_recreates_a_missing_key<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.urls(), |b| b.ttl(Duration::from_secs(5))).unwrap();
    // Connections up and their HELLO read before the count starts.
    d.lock("gone:warm").unwrap().release().unwrap();
    let g = d.lock("gone").unwrap();
    let token = Reply::bulk(&g.token());
    for (i, node) in c.nodes().iter().enumerate() {
        // A lock returns at quorum: the last node's SET may land a moment later.
        let set = eventually(Duration::from_secs(1), || value_on(&c, i, "gone") == token);
        assert!(set, "node {i} never got the lock's key");
        servers::reset_stats(node);
        assert_eq!(node.command(&["DEL", "gone"]).unwrap(), Reply::Int(1));
    }
    let err = g.extend().expect_err("extended keys that are gone");
    assert!(matches!(err, LockError::Lost(_)), "{err}");
    for (i, node) in c.nodes().iter().enumerate() {
        assert_eq!(
            value_on(&c, i, "gone"),
            Reply::Nil,
            "node {i}: key recreated"
        );
        if servers::extend_command(node.server()) == "SET" {
            assert_eq!(servers::calls(node, "evalsha"), 0, "node {i}");
            assert_eq!(servers::calls(node, "eval"), 0, "node {i}");
            assert!(servers::calls(node, "set") > 0, "node {i}: no SET IFEQ");
        } else {
            assert!(servers::calls(node, "evalsha") > 0, "node {i}: no script");
        }
    }
}
