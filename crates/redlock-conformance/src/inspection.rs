//! The two operations on a lock held by anyone (`Lock::inspect`, `Lock::release_token`): inspection shows each node's
//! holder and ttl, the quorum's holder and its validity, also where an ACL denies scripts;
//! release by token frees exactly the named holder's keys and reports each node.

use std::time::Duration;

use redlock_core::KeyState;
use redlock_testkit::Cluster;

use crate::scenarios::cluster;
use crate::servers;
use crate::{Driver, Guard, LockOptions, ReleaseOutcome, RetryPolicy};

/// A held lock is seen on every node with its token and a ttl at most the lock's; the
/// quorum's validity is at most the guard's; a node killed is reported failed and the
/// holder still agreed on. A wrong token releases nothing; the right one frees every node,
/// and the next inspection finds the resource free.
pub fn inspection_shows_the_holder_and_release_by_token_frees_it<D: Driver>() {
    let c = cluster(5);
    let ttl = Duration::from_secs(10);
    let d = D::build(&c.urls(), |b| b.ttl(ttl).retry(RetryPolicy::once())).unwrap();
    let free = d.inspect("insp").expect("an inspection");
    assert_eq!(free.nodes, vec![KeyState::Free; 5]);
    assert_eq!((free.holder, free.agreeing, free.validity), (None, 0, None));

    let guard = d.lock_with("insp", LockOptions::default()).unwrap();
    let token = guard.token();
    c.node(4).kill().unwrap();
    let seen = d.inspect("insp").expect("an inspection");
    assert_eq!(seen.holder.as_deref(), Some(token.as_bytes()), "{seen:?}");
    assert_eq!((seen.quorum, seen.agreeing), (3, 4));
    for node in &seen.nodes[..4] {
        let KeyState::Held {
            value,
            ttl: Some(left),
        } = node
        else {
            panic!("not held with a ttl: {node:?}");
        };
        assert_eq!(value, token.as_bytes());
        assert!(*left <= ttl && *left > ttl / 2, "{left:?}");
    }
    assert!(
        matches!(seen.nodes[4], KeyState::Failed(_)),
        "{:?}",
        seen.nodes[4]
    );
    let validity = seen.validity.expect("time left");
    // The guard's validity was taken after the inspection's.
    assert!(
        validity + Duration::from_millis(50) >= guard.validity(),
        "{validity:?}"
    );
    assert!(validity < ttl);

    let bin = c.node(0).server();
    let wrong = d.release_token("insp", "not-the-holder").expect("a report");
    assert_eq!(&wrong[..4], &vec![servers::not_held(bin); 4][..]);
    assert!(matches!(wrong[4], ReleaseOutcome::Failed(_)), "{wrong:?}");
    let still = d.inspect("insp").unwrap();
    assert_eq!(still.holder.as_deref(), Some(token.as_bytes()));

    let report = d.release_token("insp", &token).expect("a report");
    assert_eq!(&report[..4], &vec![ReleaseOutcome::Released; 4][..]);
    let gone = d.inspect("insp").unwrap();
    assert_eq!(&gone.nodes[..4], &vec![KeyState::Free; 4][..]);
    assert_eq!(gone.holder, None);
    // The guard's own release finds nothing of its own left: a quorum says so, and no node
    // released anything (it reports at its quorum, so a slower node may still be pending).
    let after = guard.release().expect("a report");
    let expired = (after[..4].iter()).filter(|o| **o == servers::expired(bin));
    assert!(expired.count() >= 3, "{after:?}");
    assert!(
        (after[..4].iter()).all(|o| *o == servers::expired(bin) || *o == ReleaseOutcome::Pending),
        "{after:?}"
    );
}

/// Inspection is plain `GET` and `PTTL`: a user who may not run scripts sees the holder a
/// quorum agrees on, and an empty resource is a usage error before anything is sent.
pub fn inspection_works_where_scripts_are_denied<D: Driver>() {
    let c = Cluster::builder()
        .nodes(3)
        .user("locker", "pw")
        .deny(["eval", "evalsha", "script"])
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    for node in &c.nodes()[..2] {
        let set = node.command(&["SET", "insp:acl", "holder-7", "PX", "20000"]);
        assert_eq!(set.unwrap().as_str(), Some("OK"));
    }
    let urls: Vec<String> = c.nodes().iter().map(|n| n.client_url()).collect();
    let d = D::build(&urls, |b| b.ttl(Duration::from_secs(5))).unwrap();
    let seen = d.inspect("insp:acl").expect("an inspection");
    assert_eq!(seen.holder.as_deref(), Some(&b"holder-7"[..]), "{seen:?}");
    assert_eq!(seen.agreeing, 2);
    assert_eq!(seen.nodes[2], KeyState::Free);
    // 2nd largest ttl (about 20 s) less the drift of 20 s (202 ms).
    let validity = seen.validity.expect("time left");
    assert!(
        validity <= Duration::from_millis(20_000 - 202),
        "{validity:?}"
    );
    assert!(validity > Duration::from_secs(15), "{validity:?}");
    let empty = d.inspect("").expect_err("an empty resource");
    assert_eq!(empty.to_string(), d.try_lock("").err().unwrap().to_string());
}
