//! Reader-writer locks on real servers (docs/kinds.md, "Reader-writer lock"): readers hold
//! together, a writer holds alone, a writer waiting behind a stream of readers gets in (the
//! `R:writer-waiting` mark keeps new readers out), and a reader's slot is gone after its
//! release and after its ttl.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;
use std::time::Duration;

use super::{MS, SETTLE, assert_released, exists_on, members_on, patient, warm_up};
use crate::scenarios::{cluster, eventually};
use crate::{AcquireFailure, Driver, Guard, LockError, LockKind, LockOptions, RetryPolicy};

/// Reads per reader thread and writes of the writer thread in
/// [`readers_overlap_and_a_writer_holds_alone`].
const READS: u32 = 15;
/// See [`READS`].
const WRITES: u32 = 5;

/// The options of a reader or a writer with `retry`.
fn as_kind(kind: LockKind, retry: RetryPolicy) -> LockOptions {
    LockOptions::default().kind(kind).retry(retry)
}

/// Two readers hold at once, and the guard says it is a reader; a writer's single attempt is
/// refused while they hold, and a reader's while a writer holds. Then two clients run two
/// reader threads and a writer thread together: a writer never holds with anyone, readers
/// do. Every call is bounded by its retry policy's wait; a release leaves no slot.
pub fn readers_overlap_and_a_writer_holds_alone<D: Driver>() {
    let c = cluster(3);
    let wait = Duration::from_secs(20);
    let build = || D::build(&c.urls(), |b| b.retry(patient(wait))).expect("driver");
    let (one, two) = (build(), build());
    let read = as_kind(LockKind::Read, patient(wait));
    let r1 = one.lock_with("doc", read.clone()).expect("a reader");
    let r2 = two
        .lock_with("doc", read.clone())
        .expect("a second reader, together");
    assert_eq!(r1.kind(), LockKind::Read);
    let refused = one.lock_with("doc", as_kind(LockKind::Write, RetryPolicy::once()));
    assert!(
        matches!(
            refused.as_ref().err().and_then(LockError::acquire_failure),
            Some(AcquireFailure::Contended { .. })
        ),
        "a writer among readers: {:?}",
        refused.err()
    );
    assert_released(&r1.release());
    assert_released(&r2.release());
    let w = two
        .lock_with("doc", as_kind(LockKind::Write, patient(wait)))
        .expect("a writer once the readers left");
    let refused = one.lock_with("doc", as_kind(LockKind::Read, RetryPolicy::once()));
    let _ = refused
        .err()
        .expect("a reader is refused while a writer holds");
    assert_released(&w.release());

    let readers = AtomicU32::new(0);
    let writers = AtomicU32::new(0);
    let (shared, alone) = (AtomicBool::new(false), AtomicU32::new(0));
    thread::scope(|s| {
        for d in [&one, &two] {
            let read = read.clone();
            let (readers, writers, shared) = (&readers, &writers, &shared);
            s.spawn(move || {
                for _ in 0..READS {
                    let g = d.lock_with("doc", read.clone()).expect("a reader in time");
                    let others = readers.fetch_add(1, Ordering::SeqCst);
                    assert_eq!(writers.load(Ordering::SeqCst), 0, "a reader with a writer");
                    if others > 0 {
                        shared.store(true, Ordering::Relaxed);
                    }
                    thread::sleep(5 * MS);
                    readers.fetch_sub(1, Ordering::SeqCst);
                    g.release().expect("release");
                }
            });
        }
        s.spawn(|| {
            for _ in 0..WRITES {
                let g = one
                    .lock_with("doc", as_kind(LockKind::Write, patient(wait)))
                    .expect("a writer in time");
                let before = writers.fetch_add(1, Ordering::SeqCst);
                if before > 0 || readers.load(Ordering::SeqCst) > 0 {
                    alone.fetch_add(1, Ordering::Relaxed);
                }
                thread::sleep(5 * MS);
                writers.fetch_sub(1, Ordering::SeqCst);
                g.release().expect("release");
            }
        });
    });
    assert_eq!(
        alone.load(Ordering::Relaxed),
        0,
        "a writer held with others"
    );
    let clean =
        || (0..3).all(|i| members_on(&c, i, "doc:readers") == 0 && !exists_on(&c, i, "doc"));
    assert!(eventually(SETTLE, clean), "a slot outlived its release");
    // Whether two readers happened to overlap in the threads is luck; the first part showed
    // that they may.
    let _ = shared.load(Ordering::Relaxed);
}

/// Three reader threads keep the resource read without a gap (each holds 60 ms and comes
/// back at once, staggered), for at most 200 reads each. A writer asks once readers hold:
/// its failed attempt marks the resource, new readers are refused, the readers in place
/// leave, and the writer gets in. Its wait is bounded by its retry policy (10 s), and the
/// readers stop once it is in, so the writer's success — with reads still going on when it
/// asked — is the bound by construction; without the mark, overlapping readers would keep
/// it out until the readers' 200 rounds ran out.
pub fn a_writer_behind_a_stream_of_readers_gets_in<D: Driver>() {
    let c = cluster(3);
    let long = Duration::from_secs(30);
    let d = D::build(&c.urls(), |b| b.retry(patient(long))).expect("driver");
    let read = as_kind(LockKind::Read, patient(long));
    let writer_in = AtomicBool::new(false);
    let reads = AtomicU32::new(0);
    let reads_after = AtomicU32::new(0);
    thread::scope(|s| {
        for stagger in 0..3u32 {
            let (d, read, writer_in, reads) = (&d, read.clone(), &writer_in, &reads);
            s.spawn(move || {
                thread::sleep(20 * stagger * MS);
                for _ in 0..200 {
                    if writer_in.load(Ordering::SeqCst) {
                        return;
                    }
                    let g = d
                        .lock_with("stream", read.clone())
                        .expect("a reader in time");
                    reads.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(60 * MS);
                    g.release().expect("release");
                }
            });
        }
        // The stream is flowing: a few reads done, readers holding.
        let flowing = || reads.load(Ordering::SeqCst) >= 3;
        assert!(eventually(Duration::from_secs(10), flowing), "no readers");
        let w = d
            .lock_with(
                "stream",
                as_kind(LockKind::Write, patient(Duration::from_secs(10))),
            )
            .expect("the writer gets in behind the readers");
        writer_in.store(true, Ordering::SeqCst);
        reads_after.store(reads.load(Ordering::SeqCst), Ordering::SeqCst);
        assert_eq!(w.kind(), LockKind::Write);
        // Its first attempt found readers: it did wait behind them.
        assert!(w.stats().attempts > 1, "{}", w.stats());
        w.release().expect("release");
    });
    assert!(reads_after.load(Ordering::SeqCst) >= 3);
    let clean = || (0..3).all(|i| !exists_on(&c, i, "stream:writer-waiting"));
    assert!(eventually(SETTLE, clean), "a writer's mark outlived it");
}

/// A reader's slot is on a quorum of nodes while it holds, and gone after its release. A
/// reader that is never released (its guard forgotten) keeps its slot only for its ttl:
/// then the sorted set expires on every node and a writer's single attempt gets in.
pub fn a_reader_s_slot_is_gone_after_its_release_and_after_its_ttl<D: Driver>() {
    let c = cluster(3);
    let d = D::build(&c.urls(), |b| b).expect("driver");
    warm_up(&d);
    let r = d
        .lock_with("slot", LockOptions::default().kind(LockKind::Read))
        .unwrap();
    let token = r.token();
    let held = |i| {
        matches!(
            c.node(i).command(&["ZSCORE", "slot:readers", &token]),
            Ok(redlock_testkit::Reply::Bulk(_))
        )
    };
    // On a quorum: a node that answered after the decision may lack it (a script that
    // node had not loaded yet is not resent once the attempt is decided).
    let quorum = || (0..3).filter(|&i| held(i)).count() >= 2;
    assert!(eventually(SETTLE, quorum), "a reader's slot missing");
    assert_released(&r.release());
    let gone = || (0..3).all(|i| members_on(&c, i, "slot:readers") == 0);
    assert!(eventually(SETTLE, gone), "a slot outlived its release");

    // Long enough that the writer's try below comes well within it, however loaded the machine.
    let ttl = Duration::from_secs(2);
    let forgotten = d
        .lock_with("slot", LockOptions::default().kind(LockKind::Read).ttl(ttl))
        .unwrap();
    std::mem::forget(forgotten);
    let refused = d.lock_with("slot", as_kind(LockKind::Write, RetryPolicy::once()));
    let _ = refused
        .err()
        .expect("a writer is refused while a reader lives");
    thread::sleep(ttl);
    let expired = || (0..3).all(|i| !exists_on(&c, i, "slot:readers"));
    assert!(eventually(SETTLE, expired), "a slot outlived its ttl");
    let w = d
        .lock_with("slot", as_kind(LockKind::Write, RetryPolicy::once()))
        .expect("no reader after the ttl");
    w.release().expect("release");
}

/// Five nodes behind proxies, node 4 slowed by 60 ms each way, so that it answers last: the
/// first reader is granted by the other four before node 4's `-NOSCRIPT` (the kinds' scripts
/// are not loaded on connect) comes back, and that late answer cannot be resent (it would add
/// a slot nobody holds). The node then loads the scripts, so the next readers hold a slot on
/// it too: a node that is always the last to answer still takes part (docs/kinds.md,
/// "Scripts"). Each reader is released; no slot is left on any node.
pub fn a_node_that_answers_last_takes_part_in_readers_after_its_first_use<D: Driver>() {
    let c = cluster(5);
    let d = D::build(&c.proxy_urls(), |b| b.ttl(Duration::from_secs(10))).unwrap();
    warm_up(&d);
    c.proxy(4).set_latency(60 * MS);
    let reader = || LockOptions::default().kind(LockKind::Read);
    let first = d.lock_with("late", reader()).expect("the first reader");
    assert_eq!(
        members_on(&c, 4, "late:readers"),
        0,
        "node 4 answered in time"
    );
    // An inspection is answered on each connection after everything sent before it: once it
    // returns, node 4's late answer has been read (and the scripts' loads sent behind it).
    d.inspect("late").expect("an inspection");
    assert_released(&first.release());
    for round in 0..3 {
        let g = d.lock_with("late", reader()).expect("a reader");
        let slot = || members_on(&c, 4, "late:readers") == 1;
        assert!(
            eventually(SETTLE, slot),
            "round {round}: node 4 holds no slot"
        );
        assert_released(&g.release());
    }
    for i in 0..5 {
        let empty = || members_on(&c, i, "late:readers") == 0;
        assert!(eventually(SETTLE, empty), "a slot left on node {i}");
    }
}
