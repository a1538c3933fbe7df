//! Scenarios for rules of docs/algorithm.md that only a real server can show, one function
//! each, generic over the [`Driver`] adapter.

use std::time::Duration;

use redlock_testkit::Reply;

use crate::scenarios::{cluster, value_on};
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
