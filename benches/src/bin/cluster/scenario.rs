//! The scenarios (`serial`, `concurrent32`; the contended ones in [`mod@contended`], `sweep`
//! in [`mod@sweep`]) and the
//! subjects they measure: the raw baseline,
//! our three drivers (redlock-tokio, redlock-async-std, redlock-blocking) and rslock. Subjects
//! take turns in blocks within one run, so load from elsewhere on the shared machine hits
//! them alike. Timing is `std::time::Instant`.

mod contended;
mod fan_out;
mod peer;
mod record;
mod sweep;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlock_core::{NodeFault, ReleaseOutcome};
use tokio::task::JoinSet;

use crate::lock_kind::Kind;
use crate::raw::RawClient;
use crate::raw_grant::RawGrant;
use crate::stats::{Samples, Stopwatch};

pub(crate) use contended::{Contended, child, contended, key};
pub(crate) use peer::{Peer, PeerSpec};
pub(crate) use record::fairness;
pub(crate) use sweep::{SweepEntry, SweepPlan, SweepPoint, markdown as sweep_markdown, sweep};

/// How much each scenario runs; [`Plan::FULL`] by default, [`Plan::QUICK`] with `--quick`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Unmeasured cycles per subject before the first scenario.
    pub(crate) warmup: usize,
    /// Measured serial cycles per subject.
    pub(crate) serial_cycles: usize,
    /// Blocks the serial cycles are split into, subjects taking turns.
    pub(crate) serial_blocks: usize,
    /// Workers (tasks, or OS threads for `blocking`) running cycles at once in `concurrent32`.
    pub(crate) workers: usize,
    /// Measured concurrent time per subject.
    pub(crate) concurrent_time: Duration,
    /// Rounds that time is split into, subjects taking turns.
    pub(crate) concurrent_rounds: u32,
    /// Workers on the one key in `contended8`.
    pub(crate) contended_workers: usize,
    /// Measured time per subject in `contended8` (split into `concurrent_rounds` rounds).
    pub(crate) contended_time: Duration,
    /// Serial cycles per subject and cluster size in `nodes`.
    pub(crate) nodes_cycles: usize,
    /// `held`: the lock counts, one run each.
    pub(crate) held_locks: [usize; 2],
    /// `held`: the locks' ttl.
    pub(crate) held_ttl: Duration,
    /// `held`: how long all locks are held, from the last acquisition.
    pub(crate) held_window: Duration,
}

impl Plan {
    pub(crate) const FULL: Self = Self {
        warmup: 200,
        serial_cycles: 2_000,
        serial_blocks: 20,
        workers: 32,
        concurrent_time: Duration::from_secs(5),
        concurrent_rounds: 10,
        contended_workers: 8,
        contended_time: Duration::from_secs(5),
        nodes_cycles: 300,
        held_locks: [10_000, 100_000],
        held_ttl: Duration::from_secs(30),
        held_window: Duration::from_secs(20),
    };

    pub(crate) const QUICK: Self = Self {
        warmup: 20,
        serial_cycles: 200,
        serial_blocks: 4,
        workers: 32,
        concurrent_time: Duration::from_millis(500),
        concurrent_rounds: 2,
        contended_workers: 8,
        contended_time: Duration::from_secs(2),
        nodes_cycles: 100,
        held_locks: [1_000, 10_000],
        // The full run's shape (window = 2/3 of the ttl, so about 2 renewals per lock) in
        // a 3 s window.
        held_ttl: Duration::from_millis(4_500),
        held_window: Duration::from_secs(3),
    };
}

/// One implementation under test, with its own key space.
pub(crate) struct Subject {
    driver: Driver,
    name: &'static str,
    /// The runtime label of its rows: the pass's tokio flavour, or [`crate::OWN_THREAD`].
    runtime: &'static str,
    prefix: String,
    next_key: AtomicU64,
    /// Fenced subjects: acquisitions, and those whose token needed a write-back.
    fenced: Option<(AtomicU64, AtomicU64)>,
    /// What a redlock-tokio cycle locks: the mutex, or another kind (`kinds`).
    kind: Kind,
    /// Every cycle on one resource (the prefix) instead of a fresh one (`kinds`' readers).
    one_key: bool,
    /// `kinds` subjects: releases that were not sent to some node for its backlog, counted
    /// instead of failing the cycle (see [`Self::check_release`]).
    backlogged: Option<AtomicU64>,
}

enum Driver {
    Raw(RawClient),
    Tokio(redlock_tokio::Redlock),
    Rslock(rslock::LockManager),
    AsyncStd(redlock_async_std::Redlock),
    /// Its calls block: every cycle runs on an OS thread of the runtime's blocking pool.
    Blocking(redlock_blocking::Redlock),
    /// The floor of a hand-off between processes (contended scenarios only): its cycles
    /// (the warm-up) are the raw client's.
    RawGrant(RawGrant),
}

/// When a run of back-to-back cycles stops.
#[derive(Debug, Clone, Copy)]
enum Stop {
    After(usize),
    At(Instant),
}

impl Stop {
    fn more(self, done: usize) -> bool {
        match self {
            Self::After(n) => done < n,
            Self::At(until) => Instant::now() < until,
        }
    }

    fn capacity(self) -> usize {
        match self {
            Self::After(n) => n,
            Self::At(_) => 1024,
        }
    }
}

impl Subject {
    /// `raw`, `raw-del` or `raw-delifeq`, by how the client releases.
    pub(crate) fn raw(raw: RawClient, flavour: &'static str) -> Self {
        let name = raw.release().subject();
        Self::new(Driver::Raw(raw), name, flavour, flavour)
    }

    pub(crate) fn tokio(redlock: redlock_tokio::Redlock, flavour: &'static str) -> Self {
        Self::new(Driver::Tokio(redlock), "tokio", flavour, flavour)
    }

    /// redlock-tokio under another name: over another transport (`tokio-tls`, `tokio-unix`),
    /// or configured otherwise (`tokio-j1`, `tokio-quiet`).
    pub(crate) fn tokio_over(
        redlock: redlock_tokio::Redlock,
        name: &'static str,
        flavour: &'static str,
    ) -> Self {
        Self::new(Driver::Tokio(redlock), name, flavour, flavour)
    }

    /// redlock-blocking under a name: `blocking`, over another transport (`blocking-tls`,
    /// `blocking-unix`), or configured otherwise (`blocking-j1`).
    pub(crate) fn blocking_over(
        redlock: redlock_blocking::Redlock,
        name: &'static str,
        flavour: &'static str,
    ) -> Self {
        Self::new(Driver::Blocking(redlock), name, crate::OWN_THREAD, flavour)
    }

    /// redlock-tokio built with `native_commands(false)`: releases by script on every server.
    pub(crate) fn tokio_scripts(redlock: redlock_tokio::Redlock, flavour: &'static str) -> Self {
        Self::new(Driver::Tokio(redlock), "tokio-scripts", flavour, flavour)
    }

    /// redlock-tokio with every lock fenced (benches/README.md): the pipeline (`SET NX`, `ZADD GT`,
    /// `ZINCRBY`) where the server has `ZADD … GT`, else the script.
    pub(crate) fn tokio_fenced(redlock: redlock_tokio::Redlock, flavour: &'static str) -> Self {
        Self {
            fenced: Some((AtomicU64::new(0), AtomicU64::new(0))),
            ..Self::new(Driver::Tokio(redlock), "tokio-fenced", flavour, flavour)
        }
    }

    /// redlock-tokio with every lock fenced and scripts forced (`native_commands(false)`):
    /// the fenced acquisition by script on every server, the baseline of the pipeline.
    pub(crate) fn tokio_fenced_scripts(
        redlock: redlock_tokio::Redlock,
        flavour: &'static str,
    ) -> Self {
        Self {
            fenced: Some((AtomicU64::new(0), AtomicU64::new(0))),
            ..Self::new(
                Driver::Tokio(redlock),
                "tokio-fenced-scripts",
                flavour,
                flavour,
            )
        }
    }

    /// For a `kinds` subject: the releases some node was not sent for its backlog.
    pub(crate) fn backlogged(&self) -> Option<u64> {
        (self.backlogged.as_ref()).map(|n| n.load(Ordering::Relaxed))
    }

    /// [`all_released`] of the other nodes, for a `kinds` subject that counts a node not sent
    /// the release for its backlog (`NodeFault::Backlogged`): a cycle returns at a quorum,
    /// so under 32 workers the slowest nodes can fall behind by `max_in_flight` requests.
    fn check_release(&self, nodes: &[ReleaseOutcome]) -> Result<(), String> {
        let backlogged =
            |n: &ReleaseOutcome| matches!(n, ReleaseOutcome::Failed(NodeFault::Backlogged { .. }));
        let Some(count) = (self.backlogged.as_ref()).filter(|_| nodes.iter().any(backlogged))
        else {
            return all_released(self.name, nodes);
        };
        count.fetch_add(1, Ordering::Relaxed);
        let rest: Vec<ReleaseOutcome> = nodes.iter().filter(|n| !backlogged(n)).cloned().collect();
        let released = (rest.iter()).filter(|n| **n == ReleaseOutcome::Released);
        if released.count() > nodes.len() / 2 {
            all_released(self.name, &rest)
        } else {
            Err(format!("{}: release: {nodes:?}", self.name))
        }
    }

    /// For a fenced subject: acquisitions whose token was written back, and acquisitions.
    pub(crate) fn write_backs(&self) -> Option<(u64, u64)> {
        let (cycles, written_back) = self.fenced.as_ref()?;
        Some((
            written_back.load(Ordering::Relaxed),
            cycles.load(Ordering::Relaxed),
        ))
    }

    /// redlock-tokio locking `kind` each cycle (the `kinds` scenario), on a fresh resource
    /// per cycle, or on one resource for all cycles and workers if `one_key`.
    pub(crate) fn tokio_kind(
        redlock: redlock_tokio::Redlock,
        name: &'static str,
        kind: Kind,
        one_key: bool,
        flavour: &'static str,
    ) -> Self {
        Self {
            kind,
            one_key,
            backlogged: Some(AtomicU64::new(0)),
            ..Self::new(Driver::Tokio(redlock), name, flavour, flavour)
        }
    }

    /// `raw-grant`, `raw-grant-all` or `raw-grant-q` (`name`): the floor of a hand-off
    /// between processes and its variants ([`crate::raw_grant`]).
    pub(crate) fn raw_grant(grant: RawGrant, name: &'static str, flavour: &'static str) -> Self {
        Self::new(Driver::RawGrant(grant), name, flavour, flavour)
    }

    pub(crate) fn rslock(manager: rslock::LockManager, flavour: &'static str) -> Self {
        Self::new(Driver::Rslock(manager), "rslock", flavour, flavour)
    }

    pub(crate) fn async_std(redlock: redlock_async_std::Redlock, flavour: &'static str) -> Self {
        Self::new(
            Driver::AsyncStd(redlock),
            "async-std",
            crate::OWN_THREAD,
            flavour,
        )
    }

    pub(crate) fn blocking(redlock: redlock_blocking::Redlock, flavour: &'static str) -> Self {
        Self::new(
            Driver::Blocking(redlock),
            "blocking",
            crate::OWN_THREAD,
            flavour,
        )
    }

    fn new(driver: Driver, name: &'static str, runtime: &'static str, flavour: &str) -> Self {
        Self {
            driver,
            name,
            runtime,
            prefix: format!("bench:{}:{name}:{flavour}:", std::process::id()),
            next_key: AtomicU64::new(0),
            fenced: None,
            kind: Kind::Mutex,
            one_key: false,
            backlogged: None,
        }
    }

    /// `raw`, `tokio`, `rslock`, `async-std`, `blocking`, or one of [`crate::OPT_IN_SUBJECTS`].
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The runtime label its rows carry.
    pub(crate) fn runtime(&self) -> &'static str {
        self.runtime
    }

    fn is_blocking(&self) -> bool {
        matches!(self.driver, Driver::Blocking(_))
    }

    /// A key no earlier cycle of this run used; the same key every time for a `one_key`
    /// subject.
    fn fresh_key(&self) -> String {
        if self.one_key {
            return self.prefix.clone();
        }
        let n = self.next_key.fetch_add(1, Ordering::Relaxed);
        format!("{}{n}", self.prefix)
    }

    /// Acquires `key` and releases it; an error if either fails or takes over
    /// [`CYCLE_TIMEOUT`]. Not for the blocking driver (see [`Self::cycle_blocking`]).
    async fn cycle(&self, key: String) -> Result<(), String> {
        let cycle = async {
            match &self.driver {
                Driver::Raw(raw) => raw.cycle(key.as_bytes()).await,
                Driver::RawGrant(grant) => grant.raw().cycle(key.as_bytes()).await,
                Driver::Tokio(redlock) => {
                    let name = self.name;
                    let guard = (self.kind.lock(redlock, key).await)
                        .map_err(|e| format!("{name}: lock: {e}"))?;
                    if let Some((cycles, written_back)) = &self.fenced {
                        cycles.fetch_add(1, Ordering::Relaxed);
                        if !guard.stats().written_back.is_empty() {
                            written_back.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    let nodes = guard
                        .release()
                        .await
                        .map_err(|e| format!("{name}: release: {e}"))?;
                    self.check_release(&nodes)
                }
                Driver::AsyncStd(redlock) => {
                    let guard = redlock
                        .lock(key)
                        .await
                        .map_err(|e| format!("async-std: lock: {e}"))?;
                    let nodes = guard
                        .release()
                        .await
                        .map_err(|e| format!("async-std: release: {e}"))?;
                    all_released("async-std", &nodes)
                }
                Driver::Rslock(manager) => {
                    let lock = manager
                        .lock(key.as_bytes(), crate::TTL)
                        .await
                        .map_err(|e| format!("rslock: lock: {e}"))?;
                    // Best effort by design: `unlock` reports nothing (see `warm_up`).
                    manager.unlock(&lock).await;
                    Ok(())
                }
                Driver::Blocking(_) => Err("blocking: cycle on an async task".to_owned()),
            }
        };
        tokio::time::timeout(CYCLE_TIMEOUT, cycle)
            .await
            .map_err(|_| format!("{}: a cycle took over {CYCLE_TIMEOUT:?}", self.name))?
    }

    /// [`Self::cycle`] for the blocking driver, on the calling OS thread. Its calls cannot be
    /// cancelled, so [`CYCLE_TIMEOUT`] is checked after the fact; the driver's own retry
    /// policy bounds each call.
    fn cycle_blocking(&self, key: String) -> Result<(), String> {
        let Driver::Blocking(redlock) = &self.driver else {
            return Err(format!("{}: blocking cycle on an async driver", self.name));
        };
        let t0 = Instant::now();
        let guard = redlock
            .lock(key)
            .map_err(|e| format!("blocking: lock: {e}"))?;
        let nodes = guard
            .release()
            .map_err(|e| format!("blocking: release: {e}"))?;
        if t0.elapsed() > CYCLE_TIMEOUT {
            return Err(format!("blocking: a cycle took over {CYCLE_TIMEOUT:?}"));
        }
        all_released("blocking", &nodes)
    }

    /// Fresh-key cycles back to back until `stop`, each timed. On the calling task, except for
    /// the blocking driver, whose loop runs on one OS thread of the blocking pool.
    async fn cycles(self: &Arc<Self>, stop: Stop) -> Result<Samples, String> {
        if self.is_blocking() {
            let subject = Arc::clone(self);
            return tokio::task::spawn_blocking(move || subject.cycles_blocking(stop))
                .await
                .map_err(|e| format!("{}: thread panicked: {e}", self.name))?;
        }
        let mut samples = Samples::with_capacity(stop.capacity());
        while stop.more(samples.len()) {
            let key = self.fresh_key();
            let t0 = Instant::now();
            self.cycle(key).await?;
            samples.push(t0.elapsed());
        }
        Ok(samples)
    }

    fn cycles_blocking(&self, stop: Stop) -> Result<Samples, String> {
        let mut samples = Samples::with_capacity(stop.capacity());
        while stop.more(samples.len()) {
            let key = self.fresh_key();
            let t0 = Instant::now();
            self.cycle_blocking(key)?;
            samples.push(t0.elapsed());
        }
        Ok(samples)
    }

    /// Runs `n` unmeasured cycles. Until the first succeeds, failures are retried for up to
    /// [`WARMUP_GRACE`]: the drivers connect to the nodes in the background (rslock on first
    /// use). For rslock, whose `unlock` reports nothing, it then checks that a released key
    /// is gone.
    pub(crate) async fn warm_up(self: &Arc<Self>, n: usize) -> Result<(), String> {
        if self.is_blocking() {
            let subject = Arc::clone(self);
            return tokio::task::spawn_blocking(move || subject.warm_up_blocking(n))
                .await
                .map_err(|e| format!("{}: thread panicked: {e}", self.name))?;
        }
        let grace = Instant::now() + WARMUP_GRACE;
        let mut done = 0;
        while done < n {
            match self.cycle(self.fresh_key()).await {
                Ok(()) => done += 1,
                Err(_) if done == 0 && Instant::now() < grace => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(format!("warm-up: {e}")),
            }
        }
        if let Driver::Rslock(manager) = &self.driver {
            let key = self.fresh_key();
            self.cycle(key.clone()).await?;
            let left = manager
                .query_redis_for_key_value(key.as_bytes())
                .await
                .map_err(|e| format!("rslock: query after unlock: {e}"))?;
            if left.is_some() {
                return Err(format!("rslock: {key} still held after unlock"));
            }
        }
        Ok(())
    }

    fn warm_up_blocking(&self, n: usize) -> Result<(), String> {
        let grace = Instant::now() + WARMUP_GRACE;
        let mut done = 0;
        while done < n {
            match self.cycle_blocking(self.fresh_key()) {
                Ok(()) => done += 1,
                Err(_) if done == 0 && Instant::now() < grace => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(format!("warm-up: {e}")),
            }
        }
        Ok(())
    }
}

/// Every node released, or was still being released when the call returned (a release
/// returns once a quorum has answered), and a quorum released.
pub(crate) fn all_released(name: &str, nodes: &[ReleaseOutcome]) -> Result<(), String> {
    let released = (nodes.iter()).filter(|n| **n == ReleaseOutcome::Released);
    let rest_pending =
        (nodes.iter()).all(|n| matches!(n, ReleaseOutcome::Released | ReleaseOutcome::Pending));
    if rest_pending && released.count() > nodes.len() / 2 {
        Ok(())
    } else {
        Err(format!("{name}: release: {nodes:?}"))
    }
}

/// `serial`: one worker (the calling task, or one OS thread for `blocking`), fresh key per
/// cycle, cycles back to back. Returns one set of samples per subject, in order.
pub(crate) async fn serial(subjects: &[Arc<Subject>], plan: &Plan) -> Result<Vec<Samples>, String> {
    let per_block = plan.serial_cycles.div_ceil(plan.serial_blocks);
    let mut out = vec![Samples::default(); subjects.len()];
    for block in 0..plan.serial_blocks {
        for i in order(block, subjects.len()) {
            let start = Stopwatch::start();
            let mut samples = subjects[i].cycles(Stop::After(per_block)).await?;
            samples.add_block(&start);
            out[i].merge(samples);
        }
    }
    Ok(out)
}

/// `concurrent32`: `plan.workers` workers (tasks; OS threads for `blocking`), each running
/// fresh-key cycles back to back until the round's time is up. Cycles per second count every
/// finished cycle over the wall time from the first spawn to the last worker's end.
pub(crate) async fn concurrent(
    subjects: &[Arc<Subject>],
    plan: &Plan,
) -> Result<Vec<Samples>, String> {
    let slice = plan.concurrent_time / plan.concurrent_rounds;
    let mut out = vec![Samples::default(); subjects.len()];
    for round in 0..plan.concurrent_rounds as usize {
        for i in order(round, subjects.len()) {
            let start = Stopwatch::start();
            let stop = Stop::At(start.started() + slice);
            let mut workers = JoinSet::new();
            for _ in 0..plan.workers {
                let subject = Arc::clone(&subjects[i]);
                if subject.is_blocking() {
                    workers.spawn_blocking(move || subject.cycles_blocking(stop));
                } else {
                    workers.spawn(async move { subject.cycles(stop).await });
                }
            }
            let mut round_samples = Samples::default();
            while let Some(joined) = workers.join_next().await {
                let samples = joined.map_err(|e| format!("worker panicked: {e}"))??;
                round_samples.merge(samples);
            }
            round_samples.add_block(&start);
            out[i].merge(round_samples);
        }
    }
    Ok(out)
}

/// The order of the subjects in block `k`: rotated by one each block, so each takes every
/// place in turn.
fn order(k: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |j| (k + j) % n)
}

/// One cycle taking longer means a node or the driver is stuck: stop the run.
const CYCLE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long warm-up waits for the first successful cycle.
const WARMUP_GRACE: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subject_takes_every_place() {
        let orders: Vec<Vec<usize>> = (0..3).map(|k| order(k, 3).collect()).collect();
        assert_eq!(orders, [[0, 1, 2], [1, 2, 0], [2, 0, 1]]);
        assert_eq!(order(1, 2).collect::<Vec<_>>(), [1, 0]);
    }
}
