//! `kinds`: the lock kinds beyond the mutex (docs/kinds.md) against the mutex, with
//! redlock-tokio on the main 5 nodes, on the `current_thread` pass: serial latency of one
//! acquire + release of each kind, 32 readers of one resource against 32 mutex workers on
//! distinct resources, and a semaphore's permits in use while contenders queue
//! ([`semaphore`]). Every ratio is to the mutex measured in the same run; the report is
//! [`report`]'s.

mod report;
mod semaphore;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_core::ReleaseOutcome;
use redlock_tokio::Redlock;

use crate::lock_kind::Kind;
use crate::scenario::{self, Plan, Subject};
use crate::{NODES, TTL};

use self::report::FirstCycle;

pub(crate) use report::{KindsEntry, KindsReport};

/// The `kinds` scenario on the nodes at `urls` (the same nodes' `addrs`, for the bench's own
/// script count), on the calling task's runtime (labelled `runtime`). An error ends the run:
/// a failed cycle, a cycle over the scenario's bounds.
pub(crate) async fn run(
    urls: &[String],
    addrs: &[SocketAddr],
    runtime: &'static str,
    plan: &Plan,
) -> Result<KindsReport, String> {
    let redlock = build(urls, NODES / 2 + 1)?;
    // A mutex that needs all 5 nodes, as a semaphore of 8 permits does (docs/kinds.md, "The
    // semaphore's quorum"): how much of the semaphore's cost is its quorum.
    let all_nodes = build(urls, NODES)?;
    let mut serial = Vec::new();
    let mut first_cycles = Vec::new();
    // The mutex first connects both handles (its scripts are preloaded on connect); each
    // other kind's first cycle, before its warm-up, is its scripts' first use on the nodes.
    for (name, kind, quorum_all) in SERIAL {
        let handle = if quorum_all { &all_nodes } else { &redlock };
        let first = if kind == Kind::Mutex {
            None
        } else {
            Some(first_cycle(handle, name, kind).await?)
        };
        let subject = Arc::new(Subject::tokio_kind(
            handle.clone(),
            name,
            kind,
            false,
            runtime,
        ));
        subject
            .warm_up(plan.warmup)
            .await
            .map_err(|e| format!("kinds: {name}: {e}"))?;
        serial.push(subject);
        first_cycles.push(first);
    }
    eprintln!("cluster bench: kinds: serial");
    let samples = scenario::serial(&serial, plan).await?;
    let serial_rows = report::serial_rows(&serial, samples, first_cycles);

    // Mutexes on distinct resources, readers of one resource, and (to tell the one
    // resource's cost from the scripts') readers on distinct resources. Each on a handle of
    // its own, as in `concurrent32`: the requests a round leaves in flight on its slowest
    // nodes (a cycle returns at a quorum) must not count against the next subject's.
    let mut concurrent = Vec::new();
    for (name, kind, one_key) in [
        (MUTEX, Kind::Mutex, false),
        (READERS, Kind::Read, true),
        (READERS_DISTINCT, Kind::Read, false),
    ] {
        let redlock = build(urls, NODES / 2 + 1)?;
        let subject = Subject::tokio_kind(redlock, name, kind, one_key, runtime);
        let subject = Arc::new(subject);
        subject
            .warm_up(plan.warmup.min(20))
            .await
            .map_err(|e| format!("kinds: {name}: {e}"))?;
        concurrent.push(subject);
    }
    eprintln!(
        "cluster bench: kinds: {} readers of one resource",
        plan.workers
    );
    let samples = scenario::concurrent(&concurrent, plan).await?;
    let backlogged = [0, 1, 2].map(|i| concurrent[i].backlogged().unwrap_or(0));

    eprintln!("cluster bench: kinds: semaphore");
    let semaphore = semaphore::run(&redlock, addrs, plan).await?;
    Ok(KindsReport::new(
        runtime,
        plan.workers,
        serial_rows,
        samples,
        backlogged,
        semaphore,
    ))
}

/// A redlock-tokio handle on `urls` with the bench's ttl and `quorum`.
fn build(urls: &[String], quorum: usize) -> Result<Redlock, String> {
    Redlock::builder(urls)
        .and_then(|b| b.config(|c| c.ttl(TTL).quorum(quorum)).build())
        .map_err(|e| format!("kinds: build (quorum {quorum}): {e}"))
}

/// A kind's first cycle on fresh connections: its time, and the nodes whose release found
/// nothing to release. A node that answers an acquire's `EVALSHA` with `-NOSCRIPT` gets it
/// again as `EVAL`; if a quorum has said yes meanwhile, the release goes out before that
/// `EVAL` and runs first, and the `EVAL` then sets keys that stay until they expire.
async fn first_cycle(redlock: &Redlock, name: &str, kind: Kind) -> Result<FirstCycle, String> {
    let key = format!("bench:{}:kinds-first:{name}", std::process::id());
    let t0 = Instant::now();
    let cycle = async {
        let guard = kind.lock(redlock, key).await?;
        guard.release().await
    };
    let nodes = (tokio::time::timeout(FIRST_CYCLE_BOUND, cycle).await)
        .map_err(|_| format!("kinds: {name}: a first cycle over {FIRST_CYCLE_BOUND:?}"))?
        .map_err(|e| format!("kinds: {name}: first cycle: {e}"))?;
    let time = t0.elapsed();
    // Not a quorum of `Released`: the nodes the release overtook may be most of those that
    // answered before the call returned. Only a failed node is an error.
    if nodes.iter().any(|n| matches!(n, ReleaseOutcome::Failed(_))) {
        return Err(format!("kinds: {name}: first cycle's release: {nodes:?}"));
    }
    let found_nothing = |n: &&ReleaseOutcome| {
        matches!(
            n,
            ReleaseOutcome::AlreadyExpired | ReleaseOutcome::NotHeldOrExpired
        )
    };
    Ok(FirstCycle {
        time,
        overtaken: nodes.iter().filter(found_nothing).count(),
    })
}

/// The serial subjects, the mutex first (every ratio's baseline): name, kind, and whether
/// its handle needs all 5 nodes. The four kinds of the targets, then two that explain the
/// semaphore's cost (docs/kinds.md, "The semaphore's quorum"): a mutex on all 5 nodes, a
/// semaphore of 1 permit (majority quorum).
const SERIAL: [(&str, Kind, bool); 7] = [
    (MUTEX, Kind::Mutex, false),
    ("mutex-q5", Kind::Mutex, true),
    ("multi3", Kind::All(MULTI_RESOURCES), false),
    ("reader", Kind::Read, false),
    ("writer", Kind::Write, false),
    ("semaphore8", Kind::Semaphore(PERMITS), false),
    ("semaphore1", Kind::Semaphore(1), false),
];

/// A first cycle may take this long at most (it may connect and load scripts).
const FIRST_CYCLE_BOUND: Duration = Duration::from_secs(5);

/// The baseline subject's name.
const MUTEX: &str = "mutex";
/// The readers of one resource in the concurrent part.
const READERS: &str = "readers";
/// The readers on distinct resources (fresh per cycle) in the concurrent part.
const READERS_DISTINCT: &str = "readers-distinct";
/// Resources of the multi-lock.
const MULTI_RESOURCES: usize = 3;
/// The semaphore's permits (k), serial and in use.
const PERMITS: u32 = 8;
