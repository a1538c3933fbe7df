//! What every kind leaves behind on real servers (docs/kinds.md, "Commands per kind and
//! server", the failed-attempt cleanup column): an acquisition cancelled while it waits for
//! slow nodes leaves no key, member or mark on any node; a hold whose node was killed is
//! still released on the others.

use std::time::Duration;

use redlock_testkit::Reply;

use super::{FOREVER, MS, SETTLE, exists_on, members_on, warm_kind, warm_up};
use crate::scenarios::{cluster, eventually, value_on};
use crate::{Driver, Guard, LockKind, LockOptions, ReleaseOutcome};

/// Each kind in turn, on five nodes behind proxies: nodes 0 and 1 answer 300 ms late, node
/// 2 keeps the kind out (something of another holder's set by hand), so the acquisition
/// needs a slow node and is still pending when it is given up after 100 ms. Then nothing of
/// it is left anywhere: no multi-lock key, no reader's slot, no writer's key nor its
/// waiting mark (WRITE_ABANDON: node 2 refused the writer, which marked it there), no
/// permit; node 2's own keys are untouched.
pub fn a_cancelled_acquisition_of_each_kind_leaves_nothing_on_any_node<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.proxy_urls(), |b| b.ttl(Duration::from_secs(10))).unwrap();
    d.lock("warm").unwrap().release().unwrap();
    c.proxy(0).set_latency(300 * MS);
    c.proxy(1).set_latency(300 * MS);
    let node2 = |args: &[&str]| drop(c.node(2).command(args).unwrap());
    let give_up = 100 * MS;

    node2(&["SET", "mb", "blocker"]);
    d.abandon_after(&["mb", "ma"], LockOptions::default(), give_up);
    node2(&["ZADD", "wr:readers", FOREVER, "blocker"]);
    d.abandon_after(
        &["wr"],
        LockOptions::default().kind(LockKind::Write),
        give_up,
    );
    node2(&["SET", "rd", "blocker"]);
    d.abandon_after(
        &["rd"],
        LockOptions::default().kind(LockKind::Read),
        give_up,
    );
    node2(&["ZADD", "sem:permits", FOREVER, "one", FOREVER, "two"]);
    node2(&["SET", "sem:permits:limit", "2"]);
    let two = LockOptions::default().kind(LockKind::semaphore(2));
    d.abandon_after(&["sem"], two, give_up);

    let clean = |i: usize| {
        !exists_on(&c, i, "ma")
            && !exists_on(&c, i, "wr")
            && !exists_on(&c, i, "wr:writer-waiting")
            && members_on(&c, i, "rd:readers") == 0
            && members_on(&c, i, "sem:permits") == if i == 2 { 2 } else { 0 }
    };
    for i in 0..5 {
        assert!(eventually(SETTLE, || clean(i)), "node {i} kept something");
    }
    assert_eq!(value_on(&c, 2, "mb"), Reply::bulk("blocker"));
    assert_eq!(value_on(&c, 2, "rd"), Reply::bulk("blocker"));
    assert_eq!(members_on(&c, 2, "wr:readers"), 1);
    for i in [0, 1, 3, 4] {
        assert!(
            !exists_on(&c, i, "mb") && !exists_on(&c, i, "rd"),
            "node {i}"
        );
    }
}

/// A writer granted by four of five nodes while node 2 refused it (a reader of its own there,
/// set by hand) left its waiting mark on node 2; the writer's release deletes R everywhere
/// and that mark too (WRITE_RELEASE), so new readers are not kept out of node 2 until the
/// mark's ttl (docs/kinds.md, "Reader-writer lock").
pub fn a_writer_granted_beside_a_refusing_node_leaves_no_mark_after_its_release<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.urls(), |b| b.ttl(Duration::from_secs(10))).unwrap();
    warm_up(&d);
    // The writer's scripts on every node first: node 2's first use answering `-NOSCRIPT`
    // after the decision would never mark the writer (a loaded machine makes it likely).
    warm_kind(&d, &c, LockKind::Write, &redlock_core::WRITE_ACQUIRE_SCRIPT);
    drop(
        c.node(2)
            .command(&["ZADD", "wg:readers", FOREVER, "blocker"])
            .unwrap(),
    );
    let writer = d
        .lock_with("wg", LockOptions::default().kind(LockKind::Write))
        .expect("a quorum grants the writer");
    // Node 2's answer may come after the quorum's: wait until its mark is there.
    let marked = || exists_on(&c, 2, "wg:writer-waiting");
    assert!(eventually(SETTLE, marked), "node 2 never marked the writer");
    writer.release().expect("released");
    let clean = |i: usize| !exists_on(&c, i, "wg") && !exists_on(&c, i, "wg:writer-waiting");
    for i in 0..5 {
        assert!(
            eventually(SETTLE, || clean(i)),
            "node {i} kept the writer's key or mark"
        );
    }
    assert_eq!(members_on(&c, 2, "wg:readers"), 1, "the reader set by hand");
}

/// A multi-lock, a reader, a writer and a permit of a semaphore of 2 are held together on
/// five nodes; a node holding them all is killed; each is still released: the report says
/// so, and nothing of any of them is left on the others.
pub fn a_node_killed_mid_hold_and_every_kind_is_still_released_on_the_others<D: Driver>() {
    let c = cluster(5);
    let timeout = Duration::from_millis(200);
    let d = D::build(&c.urls(), |b| b.attempt_timeout(timeout)).expect("driver");
    warm_up(&d);
    let kind = |k| LockOptions::default().kind(k);
    // Each kind's scripts once on every node first: a node whose first use of a script
    // answers `-NOSCRIPT` after the decision would lack that lock (a loaded machine makes it
    // likely), and the node killed below must be one that holds them all.
    let warm = [LockKind::Read, LockKind::Write, LockKind::semaphore(2)];
    for k in warm {
        d.lock_with("warm-kind", kind(k))
            .unwrap()
            .release()
            .unwrap();
    }
    let both = d.lock_all_with(&["warm-a", "warm-b"], LockOptions::default());
    both.unwrap().release().unwrap();
    let multi = d
        .lock_all_with(&["ka", "kb"], LockOptions::default())
        .unwrap();
    let reader = d.lock_with("kr", kind(LockKind::Read)).unwrap();
    let writer = d.lock_with("kw", kind(LockKind::Write)).unwrap();
    let permit = d.lock_with("ks", kind(LockKind::semaphore(2))).unwrap();
    let held = |i| {
        exists_on(&c, i, "ka")
            && exists_on(&c, i, "kb")
            && exists_on(&c, i, "kw")
            && members_on(&c, i, "kr:readers") == 1
            && members_on(&c, i, "ks:permits") == 1
    };
    // Each is held on a quorum; a node whose answer came after the decision may lack
    // one (a script not yet loaded there is not resent once decided). The node killed is
    // one that holds them all.
    let mut holders = Vec::new();
    let all_held = || {
        holders = (0..5).filter(|&i| held(i)).collect();
        holders.len() >= 3
    };
    assert!(eventually(SETTLE, all_held), "not held on a quorum");
    let dead = holders[0];
    c.node(dead).kill().expect("kill a holding node");
    for guard in [multi, reader, writer, permit] {
        let report = guard.release().expect("released on the others");
        // Released where it was held and answered in time; a node that lacked it says so
        // (`AlreadyExpired`); none found another holder's.
        assert!(report.contains(&ReleaseOutcome::Released), "{report:?}");
        assert!(!report.contains(&ReleaseOutcome::NotHeld), "{report:?}");
        assert!(report[dead] != ReleaseOutcome::Released, "{report:?}");
    }
    let clean = |i: usize| {
        // `ks:permits:limit` is no holder: it expires with the last permit's deadline.
        let keys = ["ka", "kb", "kw", "kr:readers", "ks:permits"];
        keys.iter().all(|k| !exists_on(&c, i, k))
    };
    for i in (0..5).filter(|&i| i != dead) {
        assert!(eventually(SETTLE, || clean(i)), "node {i} kept something");
    }
}
