//! The contended scenarios: workers on **one** key per subject, running critical sections
//! back to back. `contended8` runs 8 workers in this process; `contended2x4` runs 4 here and
//! 4 in a second process ([`super::peer`]), and `contended4x2` 2 here and 2 in each of three
//! more, on the same key, in the same time slice. Each section is recorded
//! ([`SectionRecord`]); once a round is over the records of every process give the hand-off
//! latencies, overlapping sections, sections per worker and attempts per section.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlock_core::{AcquireFailure, ReleaseOutcome};
use tokio::task::JoinSet;

use super::fan_out::FanOutProbe;
use super::peer::{self, Peer, PeerSpec};
use super::record::RoundPart;
use super::record::{self, SectionRecord, now_ns};
use super::{CYCLE_TIMEOUT, Driver, Plan, Subject, order};
use crate::raw_grant::Ring;
use crate::stats::{Samples, Stopwatch};

/// What a contended scenario measured for one subject, over every round and process.
#[derive(Debug, Default, Clone)]
pub(crate) struct Contended {
    /// Acquire waits of the sections entered, with the rounds' wall time (so ops/s is
    /// sections per second, both processes together).
    pub(crate) waits: Samples,
    /// Hand-off latencies (see [`record::analyse`]).
    pub(crate) handoffs: Samples,
    /// Hand-offs where the next holder had the lock before the releaser's call returned.
    pub(crate) handoffs_early: u64,
    /// Per round the larger of the holder-flag violations (one process) and the overlapping
    /// sections (all processes, from the records), summed.
    pub(crate) violations: u64,
    /// Lock calls that failed for want of the lock (contended on the nodes, or
    /// [`AcquireFailure::HeldLocally`]); the worker then tries again.
    pub(crate) gave_up: u64,
    /// Of those, the `HeldLocally` ones (only our drivers queue locally).
    pub(crate) held_locally: u64,
    /// Sections per worker, workers numbered across processes.
    pub(crate) per_worker: Vec<u64>,
    /// Attempts per section, where the client says (see [`SectionRecord::attempts`]): 0 for
    /// a section whose lock call sent none (a local hand-over, a hold by grants).
    pub(crate) attempts: Vec<u32>,
    /// How long each critical section took (entered to left): its 1 ms sleep as the
    /// subject's runtime keeps it. No lock can hand over more sections per second than one
    /// over this.
    pub(crate) sections: Samples,
    /// The lock's dead time at each hand-off (see [`record::analyse`]).
    pub(crate) gaps: Samples,
    /// The round trip of a fan-out to a quorum of the nodes while the rounds ran
    /// ([`FanOutProbe`]): what one fan-out of a hand-off costs under the rounds' load.
    pub(crate) loaded_fan_out: Samples,
}

/// Shared state of one process's workers on one subject's key in one round.
#[derive(Default)]
struct Shared {
    holder: AtomicBool,
    violations: AtomicU64,
    gave_up: AtomicU64,
    held_locally: AtomicU64,
}

impl Shared {
    /// Enters the critical section: sets the holder flag (a violation if it was set) and
    /// returns the time.
    fn enter(&self) -> u64 {
        if self.holder.swap(true, Ordering::SeqCst) {
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
        now_ns()
    }

    /// Leaves it: returns the time, then clears the flag.
    fn leave(&self) -> u64 {
        let left = now_ns();
        self.holder.store(false, Ordering::SeqCst);
        left
    }
}

/// How a lock call ended.
enum Outcome {
    Held(SectionRecord),
    GaveUp,
    HeldLocally,
    /// `raw-grant` only: the round ended before the worker's turn came.
    Ended,
}

/// A failed lock call: "gave up" if it failed for want of the lock, an error otherwise.
fn refused(e: redlock_tokio::LockError) -> Result<Outcome, String> {
    match e {
        redlock_tokio::LockError::Acquire {
            reason: AcquireFailure::HeldLocally,
            ..
        } => Ok(Outcome::HeldLocally),
        redlock_tokio::LockError::Acquire { .. } => Ok(Outcome::GaveUp),
        e => Err(format!("lock: {e}")),
    }
}

/// Under contention a node may have refused this lock's `SET` (another worker's attempt
/// held it), so only a quorum must report `Released`. A release returns once a quorum has
/// answered, and those first answers may be from the nodes that never had the key: a node
/// still `Pending` counts, since the lock's quorum holds the key on nodes not yet heard.
fn quorum_released(name: &str, nodes: &[ReleaseOutcome]) -> Result<(), String> {
    // Handed over to the next call of the client's line, nothing sent (docs/design.md,
    // "Hand-over").
    if nodes.iter().all(|n| *n == ReleaseOutcome::HandedOver) {
        return Ok(());
    }
    let released = nodes
        .iter()
        .filter(|n| matches!(n, ReleaseOutcome::Released | ReleaseOutcome::Pending))
        .count();
    if released > nodes.len() / 2 {
        Ok(())
    } else {
        Err(format!("{name}: release under contention: {nodes:?}"))
    }
}

/// The critical section's 1 ms.
const CRITICAL: Duration = Duration::from_millis(1);

/// The critical section of the async subjects: 1 ms of wall time, slept on a thread of the
/// blocking pool, as the blocking subject's own thread sleeps it. Not `tokio::time::sleep`:
/// tokio's timer counts whole milliseconds and rounds a deadline up, so a 1 ms sleep takes
/// 1 to 2 ms, and one that starts just after a tick takes nearly 2. A lock handed over at
/// once starts its section just after the tick that ended the previous one, so every section
/// would take nearly 2 ms, while a polling client's sections start at random phases and take
/// 1.5 on average: the harness, not the lock, would set the sections per second
/// (benches/README.md, "Scenarios" and "Hand-off").
async fn critical_section() -> Result<(), String> {
    tokio::task::spawn_blocking(|| std::thread::sleep(CRITICAL))
        .await
        .map_err(|e| format!("critical section: {e}"))
}

impl Subject {
    /// Before workers `first..first + count` of `total` run on `key`: `raw-grant` subscribes
    /// to their channels (the first time) and, if `round`, starts a round (see
    /// [`RawGrant::prepare`](crate::raw_grant::RawGrant::prepare)); nothing for the other
    /// subjects.
    async fn prepare(
        &self,
        key: &str,
        (first, count, total): (u32, u32, u32),
        round: bool,
    ) -> Result<(), String> {
        match &self.driver {
            Driver::RawGrant(grant) => {
                let ring = Ring {
                    first,
                    count,
                    total,
                };
                grant.prepare(key, ring, round).await
            }
            _ => Ok(()),
        }
    }

    /// One critical section on `key`: acquire (with the subject's own retry), enter (holder
    /// flag), sleep 1 ms, leave, release; recorded with its times.
    async fn section(
        &self,
        key: &str,
        worker: u32,
        shared: &Shared,
        until: Instant,
    ) -> Result<Outcome, String> {
        let t0 = Instant::now();
        let run = async {
            let (wait, acquired, entered, left, attempts) = match &self.driver {
                Driver::RawGrant(grant) => {
                    let Some(hold) = grant.hold(key, worker, until).await? else {
                        return Ok(Outcome::Ended);
                    };
                    let (wait, acquired, entered) = (t0.elapsed(), now_ns(), shared.enter());
                    critical_section().await?;
                    let left = shared.leave();
                    grant.grant(key, worker, &hold).await?;
                    (wait, acquired, entered, left, Some(hold.attempts))
                }
                Driver::Tokio(redlock) => {
                    let guard = match redlock.lock(key.to_owned()).await {
                        Ok(guard) => guard,
                        Err(e) => return refused(e),
                    };
                    let (wait, acquired, entered) = (t0.elapsed(), now_ns(), shared.enter());
                    let attempts = Some(guard.stats().attempts);
                    critical_section().await?;
                    let left = shared.leave();
                    let nodes = guard.release().await.map_err(|e| format!("release: {e}"))?;
                    quorum_released(self.name, &nodes)?;
                    (wait, acquired, entered, left, attempts)
                }
                Driver::Rslock(manager) => {
                    let Ok(lock) = manager.lock(key.as_bytes(), crate::TTL).await else {
                        return Ok(Outcome::GaveUp);
                    };
                    let (wait, acquired, entered) = (t0.elapsed(), now_ns(), shared.enter());
                    critical_section().await?;
                    let left = shared.leave();
                    manager.unlock(&lock).await;
                    (wait, acquired, entered, left, None)
                }
                _ => return Err("not an async subject of the contended scenarios".to_owned()),
            };
            let released = now_ns();
            Ok(Outcome::Held(SectionRecord {
                worker,
                wait_ns: u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX),
                acquired,
                entered,
                left,
                released,
                attempts,
            }))
        };
        tokio::time::timeout(CYCLE_TIMEOUT, run)
            .await
            .map_err(|_| format!("a section took over {CYCLE_TIMEOUT:?}"))?
            .map_err(|e| format!("{}: {e}", self.name))
    }

    /// [`Self::section`] for the blocking driver, on the calling OS thread; its calls cannot
    /// be cancelled, so [`CYCLE_TIMEOUT`] is checked after the fact.
    fn section_blocking(&self, key: &str, worker: u32, shared: &Shared) -> Result<Outcome, String> {
        let Driver::Blocking(redlock) = &self.driver else {
            return Err(format!(
                "{}: blocking section on an async driver",
                self.name
            ));
        };
        let t0 = Instant::now();
        let guard = match redlock.lock(key.to_owned()) {
            Ok(guard) => guard,
            Err(e) => return refused(e).map_err(|e| format!("blocking: {e}")),
        };
        let (wait, acquired, entered) = (t0.elapsed(), now_ns(), shared.enter());
        let attempts = Some(guard.stats().attempts);
        std::thread::sleep(CRITICAL);
        let left = shared.leave();
        let nodes = guard
            .release()
            .map_err(|e| format!("blocking: release: {e}"))?;
        let released = now_ns();
        if t0.elapsed() > CYCLE_TIMEOUT {
            return Err(format!("blocking: a section took over {CYCLE_TIMEOUT:?}"));
        }
        quorum_released("blocking", &nodes)?;
        Ok(Outcome::Held(SectionRecord {
            worker,
            wait_ns: u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX),
            acquired,
            entered,
            left,
            released,
            attempts,
        }))
    }

    /// One worker: sections back to back until `until`; its records.
    async fn contend(
        self: Arc<Self>,
        key: Arc<String>,
        worker: u32,
        shared: Arc<Shared>,
        until: Instant,
    ) -> Result<Vec<SectionRecord>, String> {
        if self.is_blocking() {
            let run = move || {
                let mut records = Vec::with_capacity(1024);
                while Instant::now() < until {
                    let outcome = self.section_blocking(&key, worker, &shared)?;
                    tally(outcome, &shared, &mut records);
                }
                Ok(records)
            };
            return tokio::task::spawn_blocking(run)
                .await
                .map_err(|e| format!("worker thread panicked: {e}"))?;
        }
        let mut records = Vec::with_capacity(1024);
        while Instant::now() < until {
            let outcome = self.section(&key, worker, &shared, until).await?;
            tally(outcome, &shared, &mut records);
        }
        Ok(records)
    }
}

fn tally(outcome: Outcome, shared: &Shared, records: &mut Vec<SectionRecord>) {
    match outcome {
        Outcome::Held(record) => records.push(record),
        Outcome::GaveUp => {
            shared.gave_up.fetch_add(1, Ordering::Relaxed);
        }
        Outcome::HeldLocally => {
            shared.gave_up.fetch_add(1, Ordering::Relaxed);
            shared.held_locally.fetch_add(1, Ordering::Relaxed);
        }
        Outcome::Ended => {}
    }
}

/// This process's part of one round: workers `first..first + count` of `total` (tasks, or OS
/// threads for `blocking`) on `key` until `until`.
pub(crate) async fn run_part(
    subject: &Arc<Subject>,
    key: &Arc<String>,
    (first, count, total): (u32, u32, u32),
    until: Instant,
) -> Result<RoundPart, String> {
    subject.prepare(key, (first, count, total), true).await?;
    let shared = Arc::new(Shared::default());
    let mut workers = JoinSet::new();
    for worker in first..first + count {
        let task = Arc::clone(subject).contend(Arc::clone(key), worker, Arc::clone(&shared), until);
        workers.spawn(task);
    }
    let mut part = RoundPart::default();
    while let Some(joined) = workers.join_next().await {
        part.records
            .extend(joined.map_err(|e| format!("worker panicked: {e}"))??);
    }
    record::append_to_env_file(subject.name, &part.records);
    part.flag_violations = shared.violations.load(Ordering::Relaxed);
    part.gave_up = shared.gave_up.load(Ordering::Relaxed);
    part.held_locally = shared.held_locally.load(Ordering::Relaxed);
    Ok(part)
}

/// The key the workers of `subject` contend on (in both processes).
pub(crate) fn key(subject: &Subject) -> String {
    format!("{}contended", subject.prefix)
}

/// A contended scenario: per subject, `workers` workers in this process, plus those of the
/// other processes `peers` has for it; subjects take turns in rounds.
pub(crate) async fn contended(
    subjects: &[Arc<Subject>],
    peers: &mut [Vec<Peer>],
    (workers, nodes): (u32, &[SocketAddr]),
    plan: &Plan,
) -> Result<Vec<Contended>, String> {
    let slice = plan.contended_time / plan.concurrent_rounds;
    let mut out = vec![Contended::default(); subjects.len()];
    for round in 0..plan.concurrent_rounds as usize {
        for i in order(round, subjects.len()) {
            let key = Arc::new(key(&subjects[i]));
            let start = Stopwatch::start();
            let others = peers.get_mut(i).map_or(&mut [][..], Vec::as_mut_slice);
            for peer in others.iter_mut() {
                peer.go(slice)?;
            }
            let until = start.started() + slice;
            let probe = FanOutProbe::start(nodes);
            let total = workers * (others.len() as u32 + 1);
            let mut part = run_part(&subjects[i], &key, (0, workers, total), until).await?;
            let mut all = workers as usize;
            for peer in others.iter_mut() {
                part.merge(peer.part(slice + CYCLE_TIMEOUT).await?);
                all += peer.workers() as usize;
            }
            let mut waits = record::waits(&part.records);
            waits.add_block(&start);
            out[i].loaded_fan_out.merge(probe.finish()?);
            add_round(&mut out[i], part, waits, all);
        }
    }
    Ok(out)
}

/// Adds one round (both processes' parts merged, `workers` in all) to a subject's totals.
fn add_round(total: &mut Contended, part: RoundPart, waits: Samples, workers: usize) {
    let analysis = record::analyse(&part.records);
    let mut handoffs = Samples::with_capacity(analysis.handoffs.len());
    for h in analysis.handoffs {
        handoffs.push(h);
    }
    for g in analysis.gaps {
        total.gaps.push(g);
    }
    total.waits.merge(waits);
    total.handoffs.merge(handoffs);
    total.handoffs_early += analysis.handoffs_early;
    total.violations += analysis.overlaps.max(part.flag_violations);
    total.gave_up += part.gave_up;
    total.held_locally += part.held_locally;
    if total.per_worker.len() < workers {
        total.per_worker.resize(workers, 0);
    }
    record::count_workers(&mut total.per_worker, &part.records);
    total
        .attempts
        .extend(part.records.iter().filter_map(|r| r.attempts));
    for r in &part.records {
        total
            .sections
            .push(Duration::from_nanos(r.left.saturating_sub(r.entered)));
    }
}

/// The child side: builds the subject on a fresh `current_thread` runtime, warms it up,
/// prints `ready`, then runs one round per `go` line until its stdin ends.
pub(crate) fn child(spec: &PeerSpec, plan: Plan) -> Result<(), String> {
    let runtime = crate::Flavour::CurrentThread.runtime()?;
    let result = runtime
        .block_on(runtime.spawn(serve(spec.clone(), plan)))
        .map_err(|e| format!("contended child panicked: {e}"))
        .and_then(|r| r);
    runtime.shutdown_timeout(Duration::from_secs(2));
    result
}

async fn serve(spec: PeerSpec, plan: Plan) -> Result<(), String> {
    let urls: Vec<String> = spec.nodes.iter().map(|a| format!("redis://{a}")).collect();
    let subject = crate::contended_subject(&spec.subject, &urls, &spec.nodes).await?;
    let subject = Arc::new(subject);
    subject.warm_up(plan.warmup.min(20)).await?;
    let workers = (spec.first, spec.workers, spec.total);
    subject.prepare(&spec.key, workers, false).await?;
    println!("ready");
    let key = Arc::new(spec.key);
    for _ in 0..peer::MAX_ROUNDS {
        let read = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .map(|n| (n > 0).then_some(line))
        });
        let line = read
            .await
            .map_err(|e| format!("reading stdin: {e}"))?
            .map_err(|e| format!("reading stdin: {e}"))?;
        let Some(line) = line else {
            return Ok(());
        };
        let micros: u64 = line
            .trim()
            .strip_prefix("go ")
            .and_then(|m| m.parse().ok())
            .ok_or_else(|| format!("expected go MICROS, got {line:?}"))?;
        let until = Instant::now() + Duration::from_micros(micros);
        let part = run_part(&subject, &key, workers, until).await?;
        let json = serde_json::to_string(&part).map_err(|e| format!("part: {e}"))?;
        println!("part {json}");
    }
    Err(format!("more than {} rounds", peer::MAX_ROUNDS))
}
